"""Issue 22: `DeviceMemory`'s block maxima give exactly the range maxima of its slot values."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.placers.baechi import device_memory
from algorithms.placers.baechi.device_memory import DeviceMemory

_OPS = st.lists(
    st.tuples(
        st.sampled_from(["open", "alloc", "free", "release"]),
        st.floats(0.0, 1.0),
        st.floats(0.0, 1e6, allow_nan=False),
    ),
    min_size=1,
    max_size=400,
)


@settings(max_examples=60, deadline=None)
@given(ops=_OPS, queries=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), max_size=20))
def test_block_maxima_match_plain_maxima(ops, queries):
    old = device_memory._B
    device_memory._B = 4  # small blocks, so that a few hundred slots cross many of them
    try:
        _check(ops, queries)
    finally:
        device_memory._B = old


def _check(ops, queries):
    m = DeviceMemory(1e9, 1000)
    t = 0.0
    for kind, frac, b in ops:
        if kind == "open":
            t += frac
            m.open_slot(t)
        elif kind == "alloc":
            m.alloc(t * frac, b)
        elif kind == "free":
            m.free(t * frac, b, since=0.0)
        else:
            m.release(int(frac * (m.n - 1)), b)
        n = m.n
        for k in range(n // device_memory._B):  # the full blocks
            lo, hi = k * device_memory._B, (k + 1) * device_memory._B
            assert m.bmax[k] == m.val[lo:hi].max()
        assert m.range_max(0, n) == m.val[:n].max()  # the cached maximum of the full blocks
    for a, c in queries:
        lo, hi = sorted((int(a * m.n), int(c * m.n)))
        if hi > lo:
            assert m.range_max(lo, hi) == m.val[lo:hi].max()
