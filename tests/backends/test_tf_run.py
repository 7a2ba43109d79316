"""TensorFlow backend: placed execution on 2 to 4 virtual CPU devices, measured against a single device and
against the simulator's accounting."""

from __future__ import annotations

import pytest

from algorithms.cluster import uniform_cluster
from algorithms.errors import InvalidPlacement
from algorithms.placement import topological_schedule
from algorithms.placers.baseline import ExpertPlacer, SinglePlacer
from algorithms.simulator import simulate
from backends.tensorflow import TFBackend
from backends.tensorflow.config import load_model_cfg

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def backend() -> TFBackend:
    return TFBackend(inter_op_threads=2, intra_op_threads=1)


def _prepared(backend, name, **overrides):
    m = backend.build(load_model_cfg(name, overrides))
    g = backend.profile(m, backend.capture(m), warmup=1, steps=1)
    return m, g


def _check_against_single(backend, m, g, cluster, placement, warmup=1, steps=3):
    single = SinglePlacer().place(g, cluster).assignment
    ref = backend.run(m, g, single, topological_schedule(g, single), cluster, warmup=warmup, steps=steps)
    res = backend.run(m, g, placement, topological_schedule(g, placement), cluster, warmup=warmup, steps=steps)
    assert len(set(placement.values())) > 1
    # same seeded weights and data: the loss after one placed step equals the single-device one
    assert res.loss == pytest.approx(ref.loss, rel=1e-4)
    assert res.extra["loss_match"] and ref.extra["loss_match"] and res.extra["correct"]
    assert res.extra["losses"][0] == pytest.approx(ref.extra["losses"][0], rel=1e-5)
    assert res.extra["misplaced_ops"] == 0
    assert len(res.step_times_s) == steps and res.measured_step_s > 0
    # traffic counted as the simulator counts it; none on one device
    assert ref.traffic_bytes == 0
    assert res.traffic_bytes == pytest.approx(simulate(g, cluster, placement).traffic_bytes) and res.traffic_bytes > 0
    used = set(placement.values())
    assert all(res.peak_memory_bytes[d] > 0 for d in used)
    assert all(res.extra["device_busy_s"][d] > 0 for d in used)
    return ref, res


def test_mlp_split_over_two_cpus_matches_single_device(backend):
    m, g = _prepared(backend, "mlp_tiny", optimizer="rmsprop")
    cluster = uniform_cluster(2, 4e9)
    placement = (
        ExpertPlacer([["l0", 0], ["l1", 1], ["out", 1], ["loss", 1]], strip_prefixes=["gradients/"])
        .place(g, cluster)
        .assignment
    )
    _check_against_single(backend, m, g, cluster, placement)


def test_split_colocation_group_is_refused(backend):
    m, g = _prepared(backend, "linreg_tiny")
    cluster = uniform_cluster(2, 4e9)
    placement = {op: "cpu0" for op in g.ops}
    placement["linreg/MatMul/ReadVariableOp"] = "cpu1"  # its variable stays on cpu0
    with pytest.raises(InvalidPlacement, match="colocation"):
        backend.run(m, g, placement, {}, cluster, warmup=0, steps=1)


@pytest.mark.slow
def test_gnmt_expert_on_four_cpus(backend):
    cfg = load_model_cfg("gnmt_tiny", {"optimizer": "rmsprop"})
    m, g = _prepared(backend, "gnmt_tiny", optimizer="rmsprop")
    cluster = uniform_cluster(4, 4e9)
    placement = ExpertPlacer(cfg["expert_rules"], strip_prefixes=cfg["expert_strip_prefixes"]).place(g, cluster)
    _, res = _check_against_single(backend, m, g, cluster, placement.assignment)
    assert len(res.peak_memory_bytes) == 4


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,rules",
    [
        (
            "inception_v3_tiny",
            [
                ["stem", 0],
                ["mixed0", 0],
                ["mixed1", 0],
                ["mixed2", 0],
                ["mixed3", 1],
                ["mixed", 1],
                ["logits", 1],
                ["loss", 1],
            ],
        ),
        ("transformer_tiny", [["embed", 0], ["enc", 0], ["dec", 1], ["proj", 1], ["loss", 1]]),
        ("gpt_tiny", [["embed", 0], ["dec/l0", 0], ["dec/l1", 1], ["proj", 1], ["loss", 1]]),
    ],
)
def test_other_families_on_two_cpus(backend, name, rules):
    m, g = _prepared(backend, name)
    cluster = uniform_cluster(2, 4e9)
    placement = ExpertPlacer(rules, strip_prefixes=["gradients/"]).place(g, cluster).assignment
    _check_against_single(backend, m, g, cluster, placement, warmup=1, steps=2)


def test_session_devices_for_cluster():
    from algorithms.cluster import Cluster, Device
    from algorithms.errors import ConfigError
    from backends.tensorflow.session import cluster_session_config, device_map, physical_gpus

    mixed = Cluster([Device("host", "CPU"), Device("g0", "GPU", 2e9), Device("c1", "CPU"), Device("g1", "GPU", 2e9)])
    assert device_map(mixed) == {
        "host": "/job:localhost/replica:0/task:0/device:CPU:0",
        "g0": "/job:localhost/replica:0/task:0/device:GPU:0",
        "c1": "/job:localhost/replica:0/task:0/device:CPU:1",
        "g1": "/job:localhost/replica:0/task:0/device:GPU:1",
    }
    cpu = cluster_session_config(uniform_cluster(3), inter_op_threads=2, intra_op_threads=1)
    assert cpu.device_count["CPU"] == 3 and cpu.inter_op_parallelism_threads == 2
    assert cpu.graph_options.rewrite_options.disable_meta_optimizer
    if physical_gpus() == 0:
        with pytest.raises(ConfigError, match="no GPU"):
            cluster_session_config(mixed)
