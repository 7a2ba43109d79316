"""The thesis' synthetic graphs (Table 7.1) are independent draws: graphs 4 and 5, which share levels, widths
and edge level limit, must not come out with the same nodes (issue 21)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from algorithms.workloads.synthetic import level_dag

CONF = Path(__file__).resolve().parent.parent / "conf"


def _generator(graph: str, size: str = "small") -> dict:
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose(
                "config", overrides=["+experiment=thesis_synthetic", f"thesis_graph={graph}", f"thesis_size={size}"]
            )
        return dict(OmegaConf.to_container(cfg.model.generator, resolve=True))  # a mapping of str keys
    finally:
        GlobalHydra.instance().clear()


def test_graphs_4_and_5_differ():
    g4, g5 = (level_dag(**_generator(g)) for g in ("g4", "g5"))
    costs4 = sorted((a["compute_s"], a["persistent_bytes"]) for _, a in g4.nx.nodes(data=True))
    costs5 = sorted((a["compute_s"], a["persistent_bytes"]) for _, a in g5.nx.nodes(data=True))
    assert len(g4) != len(g5) or costs4 != costs5
    # each thesis graph has its own stream, the same for every size
    streams = {g: _generator(g)["stream"] for g in ("g1", "g2", "g3", "g4", "g5", "g6")}
    assert len(set(streams.values())) == 6
    assert _generator("g5", "paper")["stream"] == streams["g5"]


def test_graphs_4_and_5_differ_at_the_thesis_size():
    """Issue 21 saw graphs 4 and 5 with 10,139 ops each at the thesis' size; Table 7.1 has 9,899 and 10,440 (two
    draws of 200 levels of 20 to 80 nodes: about 10,000 each, but not the same)."""
    g4, g5 = (level_dag(**_generator(g, "paper")) for g in ("g4", "g5"))
    assert len(g4) != len(g5)
    assert 10139 not in (len(g4), len(g5))
    for g in (g4, g5):
        assert abs(len(g) - 10_000) < 500
        assert max(a["level"] for _, a in g.nx.nodes(data=True)) == 199
    costs4 = sorted(a["compute_s"] for _, a in g4.nx.nodes(data=True))
    costs5 = sorted(a["compute_s"] for _, a in g5.nx.nodes(data=True))
    assert costs4[: len(costs5)] != costs5[: len(costs4)]


def test_stream_zero_is_the_plain_seed_and_streams_differ():
    kw = dict(levels=8, min_nodes_per_level=3, max_nodes_per_level=9, seed=7)
    a, b, c = level_dag(**kw), level_dag(**kw, stream=0), level_dag(**kw, stream=1)
    assert a.to_dict() == b.to_dict()
    assert a.to_dict() != c.to_dict()
    with pytest.raises(ValueError, match="stream"):
        level_dag(**kw, stream=-1)


def test_thesis_costs_keep_the_structure_and_draw_the_thesis_ranges():
    """profiler=thesis_costs (the thesis' TensorFlow graphs, 6.1-6.2): a captured graph keeps its ops, edges and
    colocation groups, every op gets #ops / memory / tensor size in 1..100 units, every tensor edge its source's
    size, a colocation group one device constraint; the same graph draws the same costs; bad ranges are errors."""
    from algorithms.errors import ConfigError
    from algorithms.graph import OpGraph
    from algorithms.workloads.synthetic import thesis_costs

    g = OpGraph("captured")
    for i in range(60):
        g.add_op(f"op{i}", compute_s=1e-6 * (i + 1), output_bytes=4096, colocation="v" if i % 10 == 0 else None)
    for i in range(59):
        g.add_edge(f"op{i}", f"op{i + 1}", bytes=4096)
    g.add_edge("op0", "op30", control=True)
    out = thesis_costs(g, p_cpu_only=0.3, p_gpu_only=0.3, seed=1)
    assert list(out.ops) == list(g.ops) and {(u, v) for u, v, _ in out.edges()} == {(u, v) for u, v, _ in g.edges()}
    for op in out.ops:
        a = out.op(op)
        assert 1e-4 <= a["compute_s"] <= 1e-2 and 1e4 <= a["persistent_bytes"] <= 1e6
        assert 1e4 <= a["output_bytes"] <= 1e6 and a["temporary_bytes"] == 0
    for u, _, e in out.edges():
        assert e["bytes"] == (0 if e["control"] else out.op(u)["output_bytes"])
    assert len({out.op(f"op{i}")["device_type"] for i in range(0, 60, 10)}) == 1  # one group, one constraint
    assert {out.op(op)["device_type"] for op in out.ops} >= {"CPU", "GPU", None}
    again = thesis_costs(g, p_cpu_only=0.3, p_gpu_only=0.3, seed=1)
    assert [again.op(op)["compute_s"] for op in g.ops] == [out.op(op)["compute_s"] for op in g.ops]
    assert [thesis_costs(g, seed=2).op(op)["compute_s"] for op in g.ops] != [out.op(op)["compute_s"] for op in g.ops]
    with pytest.raises(ConfigError, match="ops_range"):
        thesis_costs(g, ops_range=(5, 1))
