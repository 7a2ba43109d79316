"""Issue 22: an op's name is one string object, the graph's key and the key of every adjacency dict of its
edges, in graphs that `level_dag` generates and that `OpGraph.load` reads (before, each edge end could hold
its own copy: about 120 bytes per edge).  The graphs are those of the code before (ee8676e): `level_dag`'s
graph JSON has the SHA-256 recorded from that code for generator settings that cover training graphs with
float and integer byte counts, edge decay, device types, streams and forward-only graphs, and a loaded graph
saves to the bytes it was read from."""

from __future__ import annotations

import hashlib

import pytest

from algorithms.graph import OpGraph
from algorithms.workloads.synthetic import level_dag

CASES = {
    "random_training": (
        dict(
            levels=60, min_nodes_per_level=4, max_nodes_per_level=12, edge_probability=0.10, edge_level_limit=5,
            random_edges=50, memory_unit_bytes=100.0, colocated_fraction=0.15, max_group_size=6, training=True, seed=0,
        ),
        "33af463c4d13e344a60fce4fce9780bef41428ae0beaccbe24648d63789d428c",
    ),
    "chain_training_int_bytes": (
        dict(
            levels=200, min_nodes_per_level=1, max_nodes_per_level=1, edge_probability=1.0, edge_level_limit=1,
            memory_unit_bytes=100, tensor_unit_bytes=100, training=True, seed=1,
        ),
        "1eaf8f5d4d371429f0d661d445edfebfe786c0b0ae283946ab7a59de3193e76d",
    ),
    "decay_types_stream": (
        dict(
            levels=30, min_nodes_per_level=2, max_nodes_per_level=6, edge_probability=0.3, edge_decay=0.7,
            edge_level_limit=0, random_edges=20, p_cpu_only=0.2, p_gpu_only=0.3, colocated_fraction=0.3,
            training=True, backward_factor=1.0, seed=5, stream=2,
        ),
        "e464fd591724fdd3f8279e9d8bd27e6a2c64cc49589104ac7a0ad3f3e7ff77fc",
    ),
    "forward_only": (
        dict(levels=40, min_nodes_per_level=3, max_nodes_per_level=8, edge_probability=0.2, random_edges=10, seed=2),
        "1168412d381ce180f0b7ae776c98468e0d87dd1f05d4a20f30bd09d935320e82",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_level_dag_generates_the_graph_of_the_code_before(tmp_path, case):
    kwargs, digest = CASES[case]
    g = level_dag(**kwargs)
    g.save(tmp_path / "g.json")
    assert hashlib.sha256((tmp_path / "g.json").read_bytes()).hexdigest() == digest


def _assert_one_object_per_name(g: OpGraph) -> None:
    key = {name: name for name in g.nx._node}  # the graph's own key objects
    for u, nbrs in g.nx._succ.items():
        assert u is key[u]
        for v in nbrs:
            assert v is key[v]
    for v, nbrs in g.nx._pred.items():
        assert v is key[v] and all(u is key[u] for u in nbrs)


def test_an_op_name_is_one_object_in_a_generated_graph():
    _assert_one_object_per_name(
        level_dag(levels=20, min_nodes_per_level=2, max_nodes_per_level=4, edge_probability=0.5, training=True)
    )


@pytest.mark.parametrize("case", list(CASES))
def test_an_op_name_is_one_object_in_a_loaded_graph_which_saves_to_its_bytes(tmp_path, case):
    level_dag(**CASES[case][0]).save(tmp_path / "g.json")
    g = OpGraph.load(tmp_path / "g.json")
    _assert_one_object_per_name(g)
    g.save(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "g.json").read_bytes()
