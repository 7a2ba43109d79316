"""Issue 22: m-TOPO's per-step memory history with block maxima (`m_topo._StepHistory`) must give exactly the
values and range maxima of the plain array it replaced, for any sequence of steps and copy ranges."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.placers.baechi.m_topo import _B, _StepHistory


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=4 * _B + 37),
    seed=st.integers(min_value=0, max_value=2**31 - 1),
)
def test_step_history_matches_plain_array(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    D = 3
    hist = _StepHistory(D, n + 1)
    ref = np.zeros((D, n + 1))
    for i in range(n):
        for _ in range(int(rng.integers(0, 3))):
            if i < 2:
                break
            q = int(rng.integers(D))
            # long ranges (a forward op read by its backward op) and short ones
            a = int(rng.integers(1, i)) if rng.random() < 0.5 else max(1, i - int(rng.integers(1, 50)))
            b = float(rng.random() * 10.0 ** int(rng.integers(0, 10)))
            ref[q, a:i] += b
            assert hist.add_max(q, a, i, b) == float(ref[q, a:i].max())
            p, a2 = int(rng.integers(D)), int(rng.integers(0, i))
            assert hist.range_max(p, a2, i) == float(ref[p, a2:i].max())
        vals = [float(v) for v in rng.random(D) * 1e6]
        ref[:, i] = vals
        hist.set_step(i, vals)
    assert np.array_equal(hist.val, ref)
