"""The thesis' generators and Baechi's linear-regression graph."""

from __future__ import annotations

import pytest

from algorithms.workloads.synthetic import level_dag, linreg_graph, thesis_devices


def test_level_dag_is_deterministic_and_valid():
    a = level_dag(levels=15, seed=7, colocated_fraction=0.3, random_edges=20, p_cpu_only=0.2, p_gpu_only=0.2)
    b = level_dag(levels=15, seed=7, colocated_fraction=0.3, random_edges=20, p_cpu_only=0.2, p_gpu_only=0.2)
    assert a.to_dict() == b.to_dict()
    a.validate()
    assert a.to_dict() != level_dag(levels=15, seed=8).to_dict()


def test_level_structure_and_edge_level_limit():
    g = level_dag(
        levels=30,
        min_nodes_per_level=3,
        max_nodes_per_level=5,
        edge_probability=0.5,
        edge_level_limit=2,
        random_edges=0,
        seed=1,
    )
    level = {n: g.op(n)["level"] for n in g.ops}
    widths = [sum(1 for v in level.values() if v == lv) for lv in range(30)]
    assert all(3 <= w <= 5 for w in widths)
    assert all(1 <= level[v] - level[u] <= 2 for u, v in g.nx.edges)
    g2 = level_dag(
        levels=30,
        min_nodes_per_level=3,
        max_nodes_per_level=5,
        edge_probability=0.5,
        edge_level_limit=2,
        random_edges=25,
        seed=1,
    )
    long_edges = [(u, v) for u, v in g2.nx.edges if g2.op(v)["level"] - g2.op(u)["level"] > 2]
    assert long_edges and all(g2.op(v)["level"] > g2.op(u)["level"] for u, v in g2.nx.edges)


def test_ranges_and_units():
    g = level_dag(
        levels=10,
        ops_range=(5, 5),
        memory_range=(2, 2),
        tensor_range=(3, 3),
        compute_unit_s=0.1,
        memory_unit_bytes=10,
        tensor_unit_bytes=100,
        seed=2,
    )
    for n in g.ops:
        a = g.op(n)
        assert a["compute_s"] == pytest.approx(0.5)
        assert a["persistent_bytes"] == 20 and a["output_bytes"] == 300
    assert all(d["bytes"] == 300 for _, _, d in g.edges())


def test_colocation_groups_share_one_device_type_and_reach_the_fraction():
    g = level_dag(levels=40, seed=3, colocated_fraction=0.4, max_group_size=6, p_cpu_only=0.3, p_gpu_only=0.3)
    groups = g.colocation_groups()
    assert groups and all(len(m) >= 2 for m in groups.values())
    n_grouped = sum(len(m) for m in groups.values())
    assert n_grouped >= 0.35 * len(g)
    for members in groups.values():
        assert len({g.op(m)["device_type"] for m in members}) == 1
    g.validate()


def test_training_mirror_has_backward_and_update_ops():
    g = level_dag(levels=6, seed=4, training=True)
    g.validate()
    fw = [n for n in g.ops if g.op(n)["phase"] == "forward"]
    bw = [n for n in g.ops if g.op(n)["phase"] == "backward"]
    up = [n for n in g.ops if g.op(n)["phase"] == "update"]
    grads = [b for b in bw if b.endswith("/grad")]
    wgrads = [b for b in bw if b.endswith("/wgrad")]
    assert len(grads) == len(fw) and len(wgrads) == len(up) and up
    assert all(g.op(b)["forward_of"] in fw for b in bw)
    assert all(g.op(u)["colocation"] == g.op(u.rsplit("/", 1)[0])["colocation"] for u in up)
    for n in g.ops:  # every op produces one tensor: its out-edges (control edges aside) carry one size
        sizes = {d["bytes"] for _, _, d in g.nx.out_edges(n, data=True) if not d["control"]}
        assert len(sizes) <= 1, n


def test_thesis_devices_memory_falls_with_speed():
    c = thesis_devices(40, seed=5, memory_noise=0.0)
    devs = sorted(c.devices, key=lambda d: d.speed)
    assert all(a.memory_bytes >= b.memory_bytes for a, b in zip(devs, devs[1:]))
    assert all(10 <= d.speed <= 100 for d in c.devices)
    types = [d.type for d in c.devices]
    assert types.count("CPU") > 10 and types.count("GPU") > 5
    rates = [link.bytes_per_s for link in c.links.values()]
    assert len(rates) == 40 * 39 // 2 and all(10e8 <= r <= 60e8 for r in rates)


def test_linreg_matches_baechi_figure_2():
    g = linreg_graph()
    g.validate()
    assert g.colocation_groups() == {"Weight": ["Weight", "ApplyGrad"], "Step": ["Step", "UpdateStep"]}
    assert g.nx.has_edge("Grad", "UpdateStep") and g.nx.has_edge("Step", "UpdateStep")
