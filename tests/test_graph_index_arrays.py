"""Issue 22: `OpGraph._build_index_arrays` (graphs of `INDEX_ARRAYS_MIN_OPS` ops or more) builds the index that
`OpGraph._build_index_python` builds: the same topological order, positions, successor and predecessor lists
(order, numbers, byte counts with their signs), attributes, copy sizes; the same error on a cycle."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.errors import InvalidGraph
from algorithms.graph import GraphIndex, OpGraph
from tests.strategies import random_dags


def _view(idx: GraphIndex) -> str:
    """Every field, floats with their signs and types (``repr``)."""
    return repr([getattr(idx, f) for f in idx.__dataclass_fields__])


def _both(g: OpGraph) -> tuple[GraphIndex, GraphIndex]:
    return g._build_index_python(), g._build_index_arrays()


def _check(g: OpGraph) -> None:
    py, arr = _both(g)
    assert _view(arr) == _view(py)
    # the position objects are shared as in the Python build (memory: one int per op)
    for lst in arr.succ + arr.pred:
        for j, _ in lst:
            assert j is arr.pos[arr.names[j]]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=random_dags(max_ops=40, training=True, device_types=True), data=st.data())
def test_arrays_equal_python(g, data):
    names = list(g.nx)
    for _u, _v, d in list(g.edges()):  # control edges, float and negative-zero byte counts
        k = data.draw(st.integers(0, 5))
        if k == 0:
            d["control"], d["bytes"] = True, 0
        elif k == 1:
            d["bytes"] = float(d["bytes"]) + 0.5
        elif k == 2:
            d["bytes"] = -0.0
    if names and data.draw(st.booleans()):
        g.op(names[0])["send_tensors"] = 3
    g.invalidate()
    _check(g)


def test_benchmark_graphs():
    from benchmarks.bench_scale import make_graph

    for kind, n in (("random", 5000), ("chain", 4000)):
        _check(make_graph(kind, n))


def test_cycle_same_error():
    g = OpGraph("cyc")
    for k in range(5):
        g.add_op(f"o{k}")
    for a, b in [(0, 1), (1, 2), (2, 3), (3, 1), (3, 4)]:
        g.add_edge(f"o{a}", f"o{b}", bytes=1)
    msgs = []
    for build in (g._build_index_python, g._build_index_arrays):
        with pytest.raises(InvalidGraph) as exc:
            build()
        msgs.append(str(exc.value))
    assert msgs[0] == msgs[1]
