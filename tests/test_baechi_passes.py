"""Baechi's graph optimizer passes (seed 001, sections 3.1-3.3) and the profile perturbation (Figure 8)."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.cluster import uniform_cluster
from algorithms.errors import ConfigError, InfeasiblePlacement
from algorithms.graph import OpGraph
from algorithms.memory import single_device_need
from algorithms.passes.baechi import (
    ColocationGrouping,
    CoPlacement,
    ForwardOnlyPlacement,
    OperatorFusion,
    ProfilePerturbation,
)
from algorithms.placement import CoarseMap, check_placement, topological_schedule
from algorithms.placers.baechi import METFPlacer, MSCTPlacer, MTOPOPlacer
from algorithms.simulator import simulate
from algorithms.workloads.synthetic import level_dag, linreg_graph

from .strategies import random_clusters, random_dags


def members_in_topological_order(graph: OpGraph, cmap: CoarseMap) -> bool:
    pos = graph.index().pos
    return all(all(pos[a] < pos[b] for a, b in zip(m, m[1:])) for m in cmap.values())


def apply_chain(graph: OpGraph, passes) -> tuple[OpGraph, CoarseMap]:
    cmap = CoarseMap.identity(graph)
    for p in passes:
        graph, m = p.apply(graph)
        cmap = cmap.then(m)
    return graph, cmap


# ------------------------------------------------------------------------------------------ fusion
def test_fusion_cycle_safe_rule_skips_a_pair_with_another_path():
    # Figure 5a: a -> b directly and a -> x -> b; a and b are in one group, x is not.  Fusing a and b would
    # close the cycle {a,b} -> x -> {a,b}: out-degree(a) = 2 and in-degree(b) = 2, so they stay apart.
    g = OpGraph("fig5a")
    g.add_op("a", compute_s=1.0, colocation="G")
    g.add_op("x", compute_s=1.0)
    g.add_op("b", compute_s=1.0, colocation="G")
    g.add_edge("a", "b", bytes=1)
    g.add_edge("a", "x", bytes=1)
    g.add_edge("x", "b", bytes=1)
    out, cmap = OperatorFusion().apply(g)
    assert len(out) == 3 and nx.is_directed_acyclic_graph(out.nx)
    assert out.op("a")["colocation"] == out.op("b")["colocation"] == "G"  # still placed together


def test_a_successor_that_only_waits_does_not_block_fusion():
    # TensorFlow's shape: a variable `a` read by its layer `b` (which also reads x), and a's update ending in the
    # train op `t` by a control edge. No path a -> t -> ... -> b exists (t has no successors), so a fuses into b;
    # the same op with a successor of its own counts, and the pair stays apart as in Figure 5a.
    for t_has_successor in (False, True):
        g = OpGraph("waits")
        g.add_op("x", compute_s=1.0, output_bytes=4)
        g.add_op("a", compute_s=0.0, persistent_bytes=4, colocation="G")
        g.add_op("b", compute_s=1.0, output_bytes=4, colocation="G")
        g.add_op("t", type="NoOp", phase="update")
        g.add_edge("x", "b", bytes=4)
        g.add_edge("a", "b", bytes=4)
        g.add_edge("a", "t", control=True)
        if t_has_successor:
            g.add_edge("t", "b", control=True)
        out, cmap = OperatorFusion().apply(g)
        assert nx.is_directed_acyclic_graph(out.nx)
        together = any({"a", "b"} <= set(m) for m in cmap.values())
        assert together is not t_has_successor


def test_fusion_chain_and_fan_in_cases():
    # Figure 5d/5e: a -> b -> c in one group (out-degree 1) fuse; d -> c with d outside stays.
    g = OpGraph("chain")
    for o in "abc":
        g.add_op(o, compute_s=1.0, persistent_bytes=10, temporary_bytes=5, output_bytes=3, colocation="G")
    g.add_op("d", compute_s=2.0, output_bytes=7)
    g.add_edge("a", "b", bytes=3)
    g.add_edge("b", "c", bytes=3)
    g.add_edge("d", "c", bytes=7)
    out, cmap = OperatorFusion().apply(g)
    assert len(out) == 2
    fused = next(c for c, m in cmap.items() if len(m) == 3)
    assert cmap[fused] == ["a", "b", "c"]
    a = out.op(fused)
    assert a["compute_s"] == pytest.approx(3.0)
    assert a["persistent_bytes"] == 30
    assert a["output_bytes"] == 3  # only c's output leaves (c is a sink)
    assert a["temporary_bytes"] == 5 + 3 + 3  # largest temporary + the outputs used inside
    assert out.nx.edges["d", fused]["bytes"] == 7
    cmap.check_covers(g)


def test_linreg_fusion_gives_a_dag():
    # Figure 4: fusing the colocation groups {Weight, ApplyGrad} and {Step, UpdateStep} naively creates a
    # cycle; the cycle-safe rule keeps the result a DAG.
    g = linreg_graph()
    out, cmap = apply_chain(g, [ColocationGrouping(), CoPlacement(), OperatorFusion()])
    assert nx.is_directed_acyclic_graph(out.nx)
    cmap.check_covers(g)
    assert members_in_topological_order(g, cmap)
    assert len(out) < len(g)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_dags(max_ops=30, colocation=True, device_types=True), st.data())
def test_fusion_with_ops_that_only_wait_stays_a_dag(graph, data):
    # TensorFlow's shape at random: sinks that read some ops by control edges only (a train op), in a random
    # group or none; leaving them out of the out-degree must never close a cycle
    names = list(graph.ops)
    groups = sorted({a["colocation"] for _, a in graph.nx.nodes(data=True) if a.get("colocation")}) + [None]
    for k in range(data.draw(st.integers(1, 3))):
        waits = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True))
        graph.add_op(f"train{k}", type="NoOp", colocation=data.draw(st.sampled_from(groups)))
        for u in waits:
            graph.add_edge(u, f"train{k}", control=True)
    grouped, m1 = ColocationGrouping().apply(graph)
    co, m2 = CoPlacement().apply(grouped)
    out, m3 = OperatorFusion().apply(co)
    assert nx.is_directed_acyclic_graph(out.nx)
    m1.then(m2).then(m3).check_covers(graph)
    assert members_in_topological_order(graph, m3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_dags(max_ops=30, colocation=True, device_types=True))
def test_fusion_output_is_a_dag_covering_every_op_once(graph):
    grouped, m1 = ColocationGrouping().apply(graph)
    co, m2 = CoPlacement().apply(grouped)
    out, m3 = OperatorFusion().apply(co)
    cmap = m1.then(m2).then(m3)
    assert nx.is_directed_acyclic_graph(out.nx)
    cmap.check_covers(graph)
    assert sorted(o for m in cmap.values() for o in m) == sorted(graph.ops)
    assert members_in_topological_order(graph, m3)
    total = sum(a["compute_s"] for _, a in graph.nx.nodes(data=True))
    assert sum(a["compute_s"] for _, a in out.nx.nodes(data=True)) == pytest.approx(total)
    assert sum(a["persistent_bytes"] for _, a in out.nx.nodes(data=True)) == pytest.approx(
        sum(a["persistent_bytes"] for _, a in graph.nx.nodes(data=True))
    )
    out.validate()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_dags(max_ops=20, colocation=True, training=True), random_clusters(max_devices=4))
def test_placements_of_the_optimized_graph_expand_to_valid_ones(graph, cluster):
    for mode in ("forward", "full"):
        out, cmap = apply_chain(
            graph, [ColocationGrouping(), CoPlacement(), ForwardOnlyPlacement(mode), OperatorFusion()]
        )
        cmap.check_covers(graph)
        assert nx.is_directed_acyclic_graph(out.nx)
        for placer in (MTOPOPlacer(), METFPlacer(), MSCTPlacer()):
            try:
                pl = placer.place(out, cluster)
            except InfeasiblePlacement:
                continue
            assign = cmap.expand_assignment(pl.assignment)
            check_placement(graph, cluster, assign)
            simulate(graph, cluster, assign)


# ------------------------------------------------------------------------------------------ grouping
def test_colocation_grouping_spreads_the_device_type_and_drops_singletons():
    g = OpGraph("grp")
    g.add_op("v", colocation="var", device_type="GPU")
    g.add_op("r", colocation="var")
    g.add_op("alone", colocation="solo")
    g.add_edge("v", "r", bytes=1)
    out, cmap = ColocationGrouping().apply(g)
    assert out.op("r")["device_type"] == "GPU"
    assert out.op("r")["colocation"] == out.op("v")["colocation"] == "var"
    assert out.op("alone")["colocation"] is None
    assert cmap == CoarseMap.identity(g)
    assert g.op("r")["device_type"] is None  # the input is left alone


def test_co_placement_next_op_and_forward_backward():
    # f1 -> f2 -> f3 forward, f1 -> f3 as well; g3 -> g2 -> g1 backward.  f2's output is used only by f3
    # (rule i); f1 has two users (no rule i); each gK goes with fK (rule ii).
    g = OpGraph("cp")
    for k in (1, 2, 3):
        g.add_op(f"f{k}", compute_s=1.0)
    g.add_edge("f1", "f2", bytes=1)
    g.add_edge("f2", "f3", bytes=1)
    g.add_edge("f1", "f3", bytes=1)
    for k in (3, 2, 1):
        g.add_op(f"g{k}", compute_s=1.0, phase="backward", forward_of=f"f{k}")
    g.add_edge("f3", "g3", bytes=1)
    g.add_edge("g3", "g2", bytes=1)
    g.add_edge("g2", "g1", bytes=1)
    g.add_edge("f1", "g1", bytes=1)
    only_next, _ = CoPlacement(next_op=True, forward_backward=False).apply(g)
    grp = {o: only_next.op(o)["colocation"] for o in only_next.ops}
    assert grp["f2"] == grp["f3"] is not None
    assert grp["f1"] != grp["f2"]
    assert grp["g3"] == grp["g2"] == grp["g1"]  # chain of single users
    both, _ = CoPlacement().apply(g)
    grp = {o: both.op(o)["colocation"] for o in both.ops}
    assert len(set(grp.values())) == 1  # everything is linked now


def test_an_output_its_next_ops_backward_also_reads_goes_with_that_op():
    # x -> conv -> bn -> relu -> {a, b}: bn's backward reads conv's output, relu's backward reads relu's; rule (ii)
    # puts each backward op with its forward op, so conv's output is in effect used by bn alone
    g = OpGraph("followers")
    for op in ("x", "conv", "bn", "relu", "a", "b"):
        g.add_op(op, compute_s=1.0, output_bytes=8)
    for op in ("bn", "relu", "a", "b"):
        g.add_op(f"{op}_bwd", compute_s=1.0, phase="backward", forward_of=op, output_bytes=8)
    for u, v in [("x", "conv"), ("conv", "bn"), ("bn", "relu"), ("relu", "a"), ("relu", "b"), ("conv", "bn_bwd")]:
        g.add_edge(u, v, bytes=8)
    for u, v in [("relu", "relu_bwd"), ("a", "a_bwd"), ("b", "b_bwd")]:
        g.add_edge(u, v, bytes=8)
    g.add_edge("relu_bwd", "bn_bwd", bytes=8)
    grp = {o: a["colocation"] for o, a in CoPlacement().apply(g)[0].nx.nodes(data=True)}
    assert grp["conv"] == grp["bn"] == grp["relu"] == grp["bn_bwd"] is not None
    assert grp["a"] != grp["relu"] and grp["b"] != grp["relu"]  # two forward readers: the chain ends
    strict = {o: a["colocation"] for o, a in CoPlacement(followers=False).apply(g)[0].nx.nodes(data=True)}
    assert strict["conv"] != strict["bn"]  # the paper's rule read on the training graph: two consumers


def test_co_placement_never_mixes_device_types():
    g = OpGraph("types")
    g.add_op("a", device_type="CPU")
    g.add_op("b", device_type="GPU")
    g.add_edge("a", "b", bytes=1)
    out, _ = CoPlacement().apply(g)
    assert out.op("a")["colocation"] is None and out.op("b")["colocation"] is None


def layer_with_weight() -> OpGraph:
    """x -> conv <- w; conv's backward reads w and sends one gradient to w's update (w's colocation group) and
    one further back; a second weight v is read by two forward ops."""
    g = OpGraph("layer")
    g.add_op("x", compute_s=1.0, output_bytes=8)
    g.add_op("w", type="Variable", param="w", compute_s=0.1, persistent_bytes=4, colocation="var:w")
    g.add_op("conv", compute_s=1.0, output_bytes=8)
    g.add_op("conv_bwd", compute_s=1.0, phase="backward", forward_of="conv", output_bytes=4)
    g.add_op("w_update", type="sub", phase="update", param="w", compute_s=0.1, colocation="var:w")
    g.add_op("v", type="Variable", param="v", compute_s=0.1, persistent_bytes=4)
    g.add_op("f1", compute_s=1.0, output_bytes=8)
    g.add_op("f2", compute_s=1.0, output_bytes=8)
    g.add_op("x_grad", compute_s=1.0, phase="backward", output_bytes=8)
    g.add_edge("conv_bwd", "x_grad", bytes=8)
    for a, b in [("x", "conv"), ("w", "conv"), ("w", "conv_bwd"), ("conv", "conv_bwd"), ("conv_bwd", "w_update")]:
        g.add_edge(a, b, bytes=4)
    g.add_edge("w", "w_update", bytes=4)
    for a, b in [("v", "f1"), ("v", "f2"), ("conv", "f1"), ("f1", "f2")]:
        g.add_edge(a, b, bytes=4)
    return g


def test_a_weight_goes_with_the_one_forward_op_that_reads_it():
    # its other readers are the forward op's backward op (rule ii) and its own update (3.1): all on one device
    g, _ = ColocationGrouping().apply(layer_with_weight())
    grp = {o: a["colocation"] for o, a in CoPlacement().apply(g)[0].nx.nodes(data=True)}
    assert grp["w"] == grp["conv"] == grp["conv_bwd"] == grp["w_update"] is not None
    assert grp["v"] is None or grp["v"] not in (grp["f1"], grp["f2"])  # two forward readers: left alone
    off = {o: a["colocation"] for o, a in CoPlacement(sources=False, followers=False).apply(g)[0].nx.nodes(data=True)}
    assert off["w"] != off["conv"]  # the paper's rule alone: w has three consumers
    # without rule (ii) the backward op is not bound to the forward op, so it counts as a second reader
    no_ii = {o: a["colocation"] for o, a in CoPlacement(forward_backward=False).apply(g)[0].nx.nodes(data=True)}
    assert no_ii["w"] != no_ii["conv"]


def test_forward_only_placement_folds_each_update_into_its_variable():
    g = layer_with_weight()
    out, cmap = ForwardOnlyPlacement("forward").apply(g)
    home = {m: c for c, mem in cmap.items() for m in mem}
    assert home["w_update"] == home["w"] and home["conv_bwd"] == home["conv"]
    assert list(out.successors(home["w"])) == [home["conv"]]  # the weight's only edge left: to its layer
    kept, kcmap = ForwardOnlyPlacement("forward", updates=False).apply(g)
    assert {m: c for c, mem in kcmap.items() for m in mem}["w_update"] != home["w"]
    full, _ = ForwardOnlyPlacement("full").apply(g)
    assert set(full.ops) == set(g.ops)  # placing forward and backward ops: nothing folded


@pytest.mark.slow
def test_the_optimizer_fuses_each_weight_into_its_layer_on_a_captured_model():
    # a captured training step: after Baechi's optimizer the only coarse ops without inputs are data inputs
    # and ops without consumers, so that no list scheduler can spread weights over idle devices at time 0
    pytest.importorskip("torch")
    from backends.torch import TorchBackend

    backend = TorchBackend(threads=1)
    cfg = {"family": "inception_v3", "name": "inception_v3_tiny", "batch_size": 2, "image_size": 75, "width": 0.0625}
    graph = backend.capture(backend.build({**cfg, "classes": 10}))
    out, cmap = apply_chain(
        graph, [ColocationGrouping(), CoPlacement(), ForwardOnlyPlacement("forward"), OperatorFusion()]
    )
    sources = [c for c in out.ops if not list(out.predecessors(c)) and list(out.successors(c))]
    assert sources, "the data inputs are sources"
    for c in sources:
        weights = [m for m in cmap[c] if graph.op(m).get("type") == "Variable"]
        assert not weights or any(m.startswith("data/") for m in cmap[c]), f"{c} holds {weights[:3]}, reads nothing"
    # co-placement's `followers` reading: as in the paper (Inception-V3 fused to 17 ops, Table 5), each
    # Inception block is one coarse op; with rule (i) read strictly each layer of a block stayed apart from its
    # batch norm (the batch norm's backward reads the layer's output too)
    home = {m: c for c, mem in cmap.items() for m in mem}
    blocks: dict[str, set[str]] = {}
    for op in graph.ops:
        a = graph.op(op)
        if op.startswith("mixed_") and a.get("forward_of") is None and a.get("type") != "Variable":
            if a.get("phase") != "update" and not op.endswith("/empty"):
                blocks.setdefault(op.split("/")[0], set()).add(home[op])
    assert len(blocks) == 11 and all(len(cs) == 1 for cs in blocks.values()), {b: len(cs) for b, cs in blocks.items()}
    assert len(set.union(*blocks.values())) == len(blocks)  # and each block its own
    assert sum(1 for c in out.ops if out.nx.degree(c)) <= 17


@pytest.mark.slow
@pytest.mark.tf
def test_the_optimizer_fuses_each_tensorflow_variable_into_its_layer():
    # the same on a TensorFlow capture, whose variables are VarHandleOp groups read through ReadVariableOps and
    # whose updates all end in the train op (control edges): the capture's `param` folds each update into its
    # variable, and the train op, which only waits, does not keep the variable from fusing into its layer
    pytest.importorskip("tensorflow")
    from backends.tensorflow import TFBackend

    backend = TFBackend()
    cfg = {"family": "inception_v3", "name": "inception_v3_tiny", "kind": "framework", "batch_size": 2}
    cfg.update(image_size=75, width=0.0625, classes=10, optimizer="sgd", lr=0.01, seed=0)
    graph = backend.capture(backend.build(cfg))
    out, cmap = apply_chain(
        graph, [ColocationGrouping(), CoPlacement(), ForwardOnlyPlacement("forward"), OperatorFusion()]
    )
    variables = {op for op in graph.ops if graph.op(op).get("type") == "VarHandleOp"}
    assert len(variables) > 100
    sources = [c for c in out.ops if not list(out.predecessors(c)) and list(out.successors(c))]
    for c in sources:
        held = variables & set(cmap[c])
        assert not held or any(m.startswith("data/") for m in cmap[c]), f"{c} holds {sorted(held)[:3]}, reads nothing"


# ------------------------------------------------------------------------------------------ forward-only
def training_graph() -> OpGraph:
    return level_dag(
        levels=8, min_nodes_per_level=2, max_nodes_per_level=4, training=True, colocated_fraction=0.2, seed=5
    )


def test_forward_only_places_forward_ops_and_backward_follow():
    g = training_graph()
    out, cmap = ForwardOnlyPlacement("forward").apply(g)
    n_backward = sum(1 for _, a in g.nx.nodes(data=True) if a.get("forward_of"))
    assert len(out) == len(g) - n_backward
    assert nx.is_directed_acyclic_graph(out.nx)
    cmap.check_covers(g)
    assert members_in_topological_order(g, cmap)
    for mem in cmap.values():
        for o in mem:
            fw = g.op(o).get("forward_of")
            if fw is not None:
                assert fw in mem  # the backward op rides with its forward op
    assert sum(a["compute_s"] for _, a in out.nx.nodes(data=True)) == pytest.approx(
        sum(a["compute_s"] for _, a in g.nx.nodes(data=True))
    )
    pl = METFPlacer().place(out, uniform_cluster(3, latency_s=1e-4, bytes_per_s=1e9))
    assign = cmap.expand_assignment(pl.assignment)
    for o, a in g.nx.nodes(data=True):
        if a.get("forward_of"):
            assert assign[o] == assign[a["forward_of"]]


def test_forward_only_full_mode_forces_pairs_together():
    g = training_graph()
    out, cmap = ForwardOnlyPlacement("full").apply(g)
    assert len(out) == len(g)
    for _, a in out.nx.nodes(data=True):
        if a.get("forward_of"):
            assert a["colocation"] is not None
            assert a["colocation"] == out.op(a["forward_of"])["colocation"]


def test_forward_only_auto_follows_the_memory():
    g = training_graph()
    need = single_device_need(g)
    assert 0 < need <= g.total_memory()
    big, _ = ForwardOnlyPlacement("auto", memory_bytes=need).apply(g)
    small, _ = ForwardOnlyPlacement("auto", memory_bytes=[{"memory_bytes": need}], memory_fraction=0.5).apply(g)
    assert len(big) < len(g)
    assert len(small) == len(g)
    bound = ForwardOnlyPlacement("auto")
    bound.bind(uniform_cluster(2, need / 2))
    assert len(bound.apply(g)[0]) == len(g)
    with pytest.raises(ConfigError):
        ForwardOnlyPlacement("sideways")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_dags(max_ops=25, training=True))
def test_single_device_need_is_the_simulated_one_device_peak(graph):
    """The one memory need (`algorithms.memory`) equals the simulator's peak for the whole graph on one device
    replayed in topological order, and is at least the persistent bytes plus the largest op."""
    one = {op: "cpu0" for op in graph.ops}
    cl = uniform_cluster(1)
    res = simulate(graph, cl, one, topological_schedule(graph, one, ["cpu0"]), record_memory=False)
    need = single_device_need(graph)
    assert need == pytest.approx(res.peak_memory["cpu0"], rel=1e-12, abs=1e-9)
    idx = graph.index()
    big = max((idx.temporary[i] + idx.output[i] for i in range(idx.n)), default=0.0)
    assert need >= sum(idx.persistent) + big - 1e-9


# ------------------------------------------------------------------------------------------ perturbation
def test_profile_perturbation_is_seeded_and_bounded():
    g = training_graph()
    a1, m = ProfilePerturbation(0.3, seed=7).apply(g)
    a2, _ = ProfilePerturbation(0.3, seed=7).apply(g)
    b, _ = ProfilePerturbation(0.3, seed=8).apply(g)
    assert m == CoarseMap.identity(g)

    def comp(x):
        return [x.op(o)["compute_s"] for o in g.ops]

    assert comp(a1) == comp(a2) != comp(b)
    for o in g.ops:
        c0 = g.op(o)["compute_s"]
        assert 0.7 * c0 - 1e-12 <= a1.op(o)["compute_s"] <= 1.3 * c0 + 1e-12
    for u, v, d in g.edges():
        assert 0.7 * d["bytes"] - 1e-9 <= a1.nx.edges[u, v]["bytes"] <= 1.3 * d["bytes"] + 1e-9
    same, _ = ProfilePerturbation(0.0).apply(g)
    assert comp(same) == comp(g)
    with pytest.raises(ConfigError):
        ProfilePerturbation(1.5)


def test_full_chain_on_a_synthetic_training_graph_shrinks_it():
    g = level_dag(levels=20, training=True, colocated_fraction=0.15, seed=2)
    out, cmap = apply_chain(g, [ColocationGrouping(), CoPlacement(), ForwardOnlyPlacement("auto"), OperatorFusion()])
    assert len(out) < len(g) / 2
    cmap.check_covers(g)
    cl = uniform_cluster(4, latency_s=1e-4, bytes_per_s=5e9)
    pl = MSCTPlacer().place(out, cl)
    assign = cmap.expand_assignment(pl.assignment)
    check_placement(g, cl, assign)
    assert simulate(g, cl, assign).ok


def test_a_coarse_edge_pays_one_latency_per_tensor_it_carries():
    """Contraction merges the tensors of a coarse op's members into one edge; the original graph sends them one
    by one, so the coarse op's transfers pay one latency per tensor (`send_tensors`), in the simulator, in the
    placers' execution model and in `comm_queue.replay`."""
    from algorithms.cluster import Cluster, Device
    from algorithms.comm_queue import replay
    from algorithms.passes.contract import contract
    from algorithms.placers.baechi.exec_model import ExecModel

    g = OpGraph("fan_in")
    for op in ("a", "b", "c"):
        g.add_op(op, compute_s=1e-3, output_bytes=8)
    g.add_edge("a", "c", 8)
    g.add_edge("b", "c", 8)
    idx = g.index()

    def attrs(mem, _internal):
        return {"compute_s": 2e-3, "output_bytes": 16.0, "persistent_bytes": 0.0, "temporary_bytes": 0.0}

    coarse, _ = contract(g, [("ab", [idx.pos["a"], idx.pos["b"]]), ("c", [idx.pos["c"]])], attrs)
    assert coarse.op("ab")["send_tensors"] == 2.0 and "send_tensors" not in coarse.op("c")
    assert coarse.index().copy_tensors == [2.0, 1.0]
    lat = 0.01  # latency dominates: 16 bytes at 1 GB/s are 16 ns
    cl = Cluster([Device("d0"), Device("d1")], latency_s=lat, bytes_per_s=1e9, mode="sequential")
    assign = {"ab": "d0", "c": "d1"}
    sim = simulate(coarse, cl, assign, {"d0": ["ab"], "d1": ["c"]})
    assert sim.makespan == pytest.approx(2e-3 + 2 * lat + 2e-3, rel=1e-6)  # before: one latency
    ci = coarse.index()
    start, _ = replay([[0], [1]], [0, 1], ci.compute_s, ci.succ, ci.pred, cl.transfer_time, ci.copy_tensors)
    assert start[1] == pytest.approx(2e-3 + 2 * lat, rel=1e-6)
    m = ExecModel(coarse, cl)
    m.commit(ci.pos["ab"], 0, m.estimate(ci.pos["ab"], 0))
    assert m.estimate(ci.pos["c"], 1).data_ready == pytest.approx(2e-3 + 2 * lat, rel=1e-6)
    pm = ExecModel(coarse, Cluster([Device("d0"), Device("d1")], latency_s=lat, bytes_per_s=1e9))
    pm.commit(ci.pos["ab"], 0, pm.estimate(ci.pos["ab"], 0))
    assert pm.data_ready_all(ci.pos["c"], [0, 1]) == pytest.approx([2e-3, 2e-3 + 2 * lat], rel=1e-6)
    # a second contraction counts the tensors its members already carried
    coarse2, _ = contract(coarse, [("abc", [0]), ("cc", [1])], attrs)
    assert coarse2.op("abc")["send_tensors"] == 2.0


def test_forward_only_charges_the_gradient_to_the_cut_forward_edge():
    # f1 -> f2 (activation, 100 bytes), g2 -> g1 (its gradient, 30 bytes); gK is co-placed with fK.  A cut
    # between the coarse ops of f1 and f2 pays both tensors in the simulated step, so the placer's edge
    # must carry 130 bytes, not the forward 100 alone (issue 21).  f2 -> g2 stays inside one coarse op.
    g = OpGraph("fb")
    g.add_op("f1", compute_s=1.0)
    g.add_op("f2", compute_s=1.0)
    g.add_op("g2", compute_s=2.0, phase="backward", forward_of="f2")
    g.add_op("g1", compute_s=2.0, phase="backward", forward_of="f1")
    g.add_edge("f1", "f2", bytes=100)
    g.add_edge("f2", "g2", bytes=7)
    g.add_edge("g2", "g1", bytes=30)
    g.add_edge("f1", "g1", bytes=5)
    out, cmap = ForwardOnlyPlacement("forward").apply(g)
    coarse = {m: c for c, mem in cmap.items() for m in mem}
    a, b = coarse["f1"], coarse["f2"]
    assert a != b and coarse["g1"] == a and coarse["g2"] == b
    assert list(out.nx.edges) == [(a, b)]
    assert out.nx.edges[a, b]["bytes"] == pytest.approx(130.0)
