"""Issue 22: the graph index's numbers take less memory with the same values.  Byte counts given as ints become
one float object per distinct value (`graph._float_interner`), positions one int object each; every value and
type is what ``float`` gave before, signed zeros and non-int numbers included."""

from __future__ import annotations

import math

import numpy as np

from algorithms.graph import OpGraph, _float_interner


def test_interner_is_float():
    num = _float_interner()
    for x in (0, 1, 7, 10**18, True, False, 0.0, -0.0, 2.5, math.inf, np.float64(3.25), np.int64(9), np.float32(0.5)):
        got, want = num(x), float(x)
        assert type(got) is float and (got == want or (math.isnan(got) and math.isnan(want)))
        assert math.copysign(1.0, got) == math.copysign(1.0, want)
    assert math.isnan(num(math.nan))
    assert num(100) is num(100)  # one object per distinct int
    x = 2.5
    assert num(x) is x  # a float is returned as it is
    assert math.copysign(1.0, num(-0.0)) == -1.0 and num(0) == 0.0  # -0.0 is not keyed with the int 0


def test_index_values_as_before():
    g = OpGraph("g")
    g.add_op("a", compute_s=1.0, persistent_bytes=100, temporary_bytes=0, output_bytes=300)
    g.add_op("b", compute_s=2.0, persistent_bytes=100.0, temporary_bytes=-0.0, output_bytes=np.float64(300.5))
    g.add_op("c", compute_s=0.5, persistent_bytes=np.int64(7), temporary_bytes=0, output_bytes=300)
    g.add_edge("a", "b", bytes=300)
    g.add_edge("a", "c", bytes=250)
    g.add_edge("b", "c", bytes=300.5)
    idx = g.index()
    assert idx.persistent == [100.0, 100.0, 7.0] and all(type(v) is float for v in idx.persistent)
    assert math.copysign(1.0, idx.temporary[1]) == -1.0
    assert idx.output == [300.0, 300.5, 300.0] and all(type(v) is float for v in idx.output)
    assert idx.output[0] is idx.output[2]  # equal ints share one float
    assert idx.succ == [[(1, 300.0), (2, 250.0)], [(2, 300.5)], []]
    assert idx.pred == [[], [(0, 300.0)], [(0, 250.0), (1, 300.5)]]
    assert all(type(b) is float for s in idx.succ for _, b in s)
    assert idx.pos == {"a": 0, "b": 1, "c": 2}
    assert idx.copy_bytes == [300.0, 300.5, 300.0]
