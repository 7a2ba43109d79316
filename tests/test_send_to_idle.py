"""experiments/send_to_idle.py: rank 0's trial times with the receiver waiting, computing, and without messages."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@pytest.mark.slow
def test_every_mode_times_every_trial():
    if not hasattr(os, "sched_getaffinity") or not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs cores 0 and 1")
    from experiments.send_to_idle import MODES, measure

    times = measure(k=3, ops=12, trials=2)
    assert set(times) == {"none", *MODES}
    assert all(len(v) == 2 and all(0 < t < 10 for t in v) for v in times.values())
