"""`algorithms.ccr.graph_ccr` (numpy over the graph index, issue 22) equals the placers' CCR
(`algorithms.placers.celeritas.ccr.ccr`, the straightforward per-edge lists it replaced in result.json) to the
last bit, on random graphs: fan-outs of 0 to 6 edges, control edges, per-type compute times, device-type
constraints spread by colocation groups, heterogeneous speeds, types and links."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.ccr import graph_ccr
from algorithms.cluster import Cluster, Device, Link
from algorithms.graph import OpGraph
from algorithms.placers.celeritas.ccr import ccr as reference_ccr

_num = st.floats(0.0, 1e3, allow_nan=False, allow_infinity=False)


@st.composite
def graphs(draw: st.DrawFn) -> OpGraph:
    n = draw(st.integers(0, 30))
    g = OpGraph("random")
    for i in range(n):
        attrs: dict = {"compute_s": draw(st.one_of(_num, st.integers(0, 5)))}
        if draw(st.integers(0, 4)) == 0:
            attrs["compute_s_by_type"] = {"GPU": draw(_num)}
        r = draw(st.integers(0, 9))
        if r == 0:
            attrs["device_type"] = draw(st.sampled_from(["CPU", "GPU"]))
        elif r == 1:  # a group takes the type of its typed member, if any (one type per group)
            attrs["colocation"] = "grp"
        g.add_op(f"op{i}", **attrs)
    typed_groups = {g.op(o).get("device_type") for o in g.ops if g.op(o).get("colocation") == "grp"} - {None}
    assert len(typed_groups) <= 1
    for i in range(n):
        for j in draw(st.lists(st.integers(i + 1, n - 1), max_size=6, unique=True)) if i + 1 < n else []:
            if draw(st.booleans()):
                g.add_edge(f"op{i}", f"op{j}", bytes=draw(st.one_of(_num, st.integers(0, 10**9))))
            else:
                g.add_edge(f"op{i}", f"op{j}", control=True)
    return g


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    k = draw(st.integers(1, 4))
    devs = [
        Device(f"d{i}", type=draw(st.sampled_from(["CPU", "GPU"])), speed=draw(st.floats(0.1, 8.0))) for i in range(k)
    ]
    links = {}
    if k > 1 and draw(st.booleans()):
        links[("d0", "d1")] = Link(draw(st.floats(0.0, 1e-3)), draw(st.floats(1e3, 1e10)))
    return Cluster(
        devs,
        latency_s=draw(st.floats(0.0, 1e-2)),
        bytes_per_s=draw(st.one_of(st.just(math.inf), st.floats(1e3, 1e11))),
        links=links,
    )


@settings(max_examples=300, deadline=None)
@given(g=graphs(), cl=clusters())
def test_graph_ccr_equals_the_placers_ccr_bit_for_bit(g: OpGraph, cl: Cluster) -> None:
    got, want = graph_ccr(g, cl), reference_ccr(g, cl)
    assert got == want or (math.isnan(got) and math.isnan(want)), (got, want)


@settings(max_examples=150, deadline=None)
@given(g=graphs(), cl=clusters())
def test_graph_ccr_over_the_kernels_cached_arrays_is_the_same(g: OpGraph, cl: Cluster) -> None:
    """After a compiled placer or simulation, `graph_ccr` reads the edges' bytes from `sim_kernel.index_arrays`'
    cached arrays (issue 22) and gives the same bits."""
    from algorithms import ccr
    from algorithms.sim_kernel import index_arrays

    index_arrays(g.index())
    assert ccr._cached_index_arrays(g.index()) is not None
    got, want = graph_ccr(g, cl), reference_ccr(g, cl)
    assert got == want or (math.isnan(got) and math.isnan(want)), (got, want)


def test_a_long_fan_out_sums_left_to_right() -> None:
    # 0.1 + 0.2 + 0.3 ... in order: a pairwise or reordered sum would differ in the last bits
    g = OpGraph("fan")
    g.add_op("src", compute_s=1.0)
    for j in range(50):
        g.add_op(f"t{j}", compute_s=0.1 * (j + 1))
        g.add_edge("src", f"t{j}", bytes=0.1 * (j + 1) * 1e3)
    cl = Cluster([Device("a"), Device("b", speed=3.0)], latency_s=1e-5, bytes_per_s=7e3)
    assert graph_ccr(g, cl) == reference_ccr(g, cl)
