"""experiments/wake_ramp.py: the loop times after a wait, relative to the trial's settled loop."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def test_the_ramp_gives_one_ratio_per_loop_and_the_settled_loop_time():
    from experiments.wake_ramp import AFTER, ramp

    for how in ("sleep", "spin"):
        ratios, settled = ramp(0.0002, how, trials=2)
        assert len(ratios) == AFTER[-1] + 1 and all(r > 0 for r in ratios)
        assert 0 < settled < 0.1
        # the last 33 loops are the reference: their median ratio is 1 up to the median of medians
        assert sorted(ratios[-33:])[16] == pytest.approx(1.0, rel=0.5)


def test_the_script_prints_a_row_per_wait_and_kind(capsys):
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("Linux only")
    from experiments.wake_ramp import main

    before = os.sched_getaffinity(0)
    try:
        assert main(["--core", str(min(before)), "--trials", "1", "--waits-ms", "0.1"]) == 0
    finally:
        os.sched_setaffinity(0, before)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[1].startswith("sleep") and out[2].startswith("spin") and "settled loop" in out[2]
