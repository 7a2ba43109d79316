"""Hypothesis strategies shared by every test module: random DAGs and random clusters."""

from __future__ import annotations

from hypothesis import strategies as st

from algorithms.cluster import Cluster, Device, Link
from algorithms.graph import OpGraph


@st.composite
def random_dags(
    draw,
    min_ops: int = 1,
    max_ops: int = 30,
    *,
    colocation: bool = True,
    device_types: bool = False,
    training: bool = False,
    edge_p: float | None = None,
):
    """A random DAG: ops 0..n-1, an edge i->j (i<j) with probability p, random costs and sizes.

    With `colocation`, some ops join small colocation groups; with `device_types`, some ops (and whole groups)
    ask for CPU or GPU; with `training`, backward ops with `forward_of` links mirror the forward ops.
    """
    n = draw(st.integers(min_ops, max_ops))
    p = edge_p if edge_p is not None else draw(st.floats(0.05, 0.5))
    g = OpGraph("hyp")
    groups = draw(st.integers(0, max(0, n // 4))) if colocation else 0
    for i in range(n):
        grp = None
        if groups and draw(st.booleans()) and draw(st.booleans()):
            grp = f"g{draw(st.integers(0, groups - 1))}"
        g.add_op(
            f"op{i}",
            compute_s=draw(st.floats(0.0, 1.0, allow_nan=False)),
            persistent_bytes=draw(st.integers(0, 1000)),
            temporary_bytes=draw(st.integers(0, 1000)),
            output_bytes=draw(st.integers(0, 1000)),
            colocation=grp,
        )
    for i in range(n):
        for j in range(i + 1, n):
            if draw(st.floats(0, 1)) < p:
                g.add_edge(f"op{i}", f"op{j}", bytes=g.op(f"op{i}")["output_bytes"])
    if device_types:
        gtype: dict[str, str | None] = {}
        for i in range(n):
            a = g.op(f"op{i}")
            t = draw(st.sampled_from([None, None, "CPU", "GPU"]))
            grp = a["colocation"]
            if grp is not None:
                t = gtype.setdefault(grp, t)
            a["device_type"] = t
    if training:
        fwd = list(g.ops)
        edges = list(g.nx.edges(data=True))
        for f in fwd:
            a = g.op(f)
            g.add_op(
                f"{f}/grad",
                compute_s=2 * a["compute_s"],
                output_bytes=a["output_bytes"],
                phase="backward",
                forward_of=f,
            )
            g.add_edge(f, f"{f}/grad", bytes=a["output_bytes"])
        for u, v, _ in edges:
            g.add_edge(f"{v}/grad", f"{u}/grad", bytes=g.op(f"{v}/grad")["output_bytes"])
    g.invalidate()
    return g


@st.composite
def random_clusters(
    draw,
    min_devices: int = 1,
    max_devices: int = 5,
    *,
    hetero: bool = False,
    memory: float | None = None,
    mode: str | None = None,
):
    """A random cluster; with `hetero`, CPU/GPU types, speeds and per-pair links vary."""
    n = draw(st.integers(min_devices, max_devices))
    devs = []
    for i in range(n):
        t = draw(st.sampled_from(["CPU", "GPU"])) if hetero else "CPU"
        speed = draw(st.floats(0.5, 4.0)) if hetero else 1.0
        mem = memory if memory is not None else float(draw(st.integers(1000, 100000)))
        devs.append(Device(f"d{i}", t, mem, speed))
    links = {}
    if hetero:
        for i in range(n):
            for j in range(i + 1, n):
                if draw(st.booleans()):
                    links[(f"d{i}", f"d{j}")] = Link(draw(st.floats(0, 0.1)), draw(st.floats(100, 10000)))
    m = mode or draw(st.sampled_from(["parallel", "sequential"]))
    return Cluster(devs, draw(st.floats(0, 0.1)), draw(st.floats(100, 10000)), m, links, "hyp")
