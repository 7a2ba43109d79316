"""TensorFlow backend: model zoo and capture (colocation groups, phases, forward/backward pairing, sizes),
and every configured placer respecting the captured colocation groups."""

from __future__ import annotations

import pytest

from algorithms.cluster import uniform_cluster
from algorithms.placement import check_placement
from algorithms.placers.baseline import ExpertPlacer
from backends.tensorflow import TFBackend
from backends.tensorflow.config import load_model_cfg
from orchestrator.registry import instantiate, load_choice
from tests.stage_configs import PLACERS, build_placer

pytestmark = pytest.mark.tf

GNMT_PREFIXES = (
    "data",
    "embed",
    "enc/l0",
    "enc/l1",
    "enc/l2",
    "enc/l3",
    "dec/l0",
    "dec/l1",
    "dec/l2",
    "dec/l3",
    "attention",
    "proj",
    "loss",
)


@pytest.fixture(scope="module")
def backend() -> TFBackend:
    return TFBackend(inter_op_threads=2, intra_op_threads=1)


def _model(backend, name, **overrides):
    return backend.build(load_model_cfg(name, overrides))


def test_linreg_capture_structure(backend):
    m = _model(backend, "linreg_tiny", optimizer="rmsprop")
    g = backend.capture(m)
    # only what a training step runs: no initialisers
    assert not [n for n in g.ops if "Initializer" in n or n == "init"]
    assert {a["phase"] for _, a in g.nx.nodes(data=True)} == {"forward", "backward", "update"}
    # sizes from static shapes: x is [8, 16] float32, the kernel [16, 1]
    assert g.nx.edges["data/x", "linreg/MatMul"]["bytes"] == 8 * 16 * 4
    assert g.op("linreg/kernel")["persistent_bytes"] == 16 * 4
    assert g.op("linreg/kernel/RMSProp")["persistent_bytes"] == 16 * 4
    assert g.op("linreg/kernel/RMSProp")["phase"] == "update"
    assert g.op("linreg/MatMul")["output_bytes"] == 8 * 1 * 4
    # colocation: the variable, its read, its slots and its update share the group named by the variable
    grp = g.op("RMSProp/update_linreg/kernel/ResourceApplyRMSProp")["colocation"]
    assert grp == "linreg/kernel"
    members = set(g.colocation_groups()[grp])
    assert {
        "linreg/kernel",
        "linreg/MatMul/ReadVariableOp",
        "linreg/kernel/RMSProp",
        "linreg/kernel/RMSProp_1",
    } <= members
    # forward/backward pairing from the gradient scopes
    assert g.op("gradients/linreg/MatMul_grad/MatMul")["forward_of"] == "linreg/MatMul"
    assert g.op("gradients/linreg/MatMul_grad/MatMul")["phase"] == "backward"
    # control edges from the gradient tuples
    assert any(d["control"] for _, _, d in g.edges())
    # a CPU-only TensorFlow build cannot see missing GPU kernels; these ops have them anyway
    assert g.op("linreg/MatMul")["device_type"] is None


def test_batch_dimension_resolved_at_other_batch(backend):
    g8 = backend.capture(_model(backend, "mlp_tiny"))
    m16 = backend.build(load_model_cfg("mlp_tiny", {"batch_size": 16}))
    g16 = backend.capture(m16)
    assert set(g8.ops) == set(g16.ops)
    assert g16.nx.edges["data/x", "l0/MatMul"]["bytes"] == 4 * g8.nx.edges["data/x", "l0/MatMul"]["bytes"]


def test_unknown_family_and_optimizer_fail_clearly(backend):
    from algorithms.errors import ConfigError

    with pytest.raises(ConfigError, match="family"):
        backend.build({"name": "x", "family": "resnet", "batch_size": 2})
    with pytest.raises(ConfigError, match="optimizer"):
        backend.build(load_model_cfg("linreg_tiny", {"optimizer": "lbfgs"}))


@pytest.mark.slow
def test_gnmt_names_colocation_and_pairing(backend):
    m = _model(backend, "gnmt_tiny", optimizer="rmsprop")
    g = backend.capture(m)
    for name, a in g.nx.nodes(data=True):
        base = name[len("gradients/") :] if name.startswith("gradients/") else name
        if a["phase"] == "update":
            continue
        if base.startswith(("AddN", "Shape", "grad_ys", "Fill")):  # gradient plumbing outside any layer
            continue
        assert base.startswith(GNMT_PREFIXES), name
    # every expert rule matches ops; every LSTM layer has its own variables and ops
    for prefix, _ in m.cfg["expert_rules"]:
        assert any(n.startswith(prefix) for n in g.ops), prefix
    groups = g.colocation_groups()
    assert "enc/l3/kernel" in groups and "dec/l0/kernel" in groups
    assert g.op("enc/l3/kernel")["type"] == "VarHandleOp"
    # most backward ops know their forward op, and it is a forward op
    bw = [a for _, a in g.nx.nodes(data=True) if a["phase"] == "backward"]
    paired = [a for a in bw if a["forward_of"] is not None]
    assert len(paired) > 0.9 * len(bw)
    assert all(g.op(a["forward_of"])["phase"] == "forward" for a in paired)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["inception_v3_tiny", "transformer_tiny", "gpt_tiny"])
def test_other_families_capture(backend, name):
    m = _model(backend, name)
    g = backend.capture(m)
    assert len(g) > 100 and g.colocation_groups()
    top = {n.split("/")[0] for n in g.ops if not n.startswith("gradients")}
    expected = {
        "inception_v3_tiny": {"stem", "mixed0", "mixed10", "logits", "loss"},
        "transformer_tiny": {"embed", "enc", "dec", "proj", "loss"},
        "gpt_tiny": {"embed", "dec", "proj", "loss"},
    }[name]
    assert expected <= top


# --------------------------------------------------------------------------- every placer keeps colocation
_PLACERS = [pytest.param(name, id=name) for name in PLACERS]


_PROFILED: dict[str, tuple] = {}


def _place_all(backend, model_name, cluster, name, rules):
    if model_name not in _PROFILED:  # one profile per model for all placers
        m = _model(backend, model_name, optimizer="rmsprop")
        _PROFILED[model_name] = (m, backend.profile(m, backend.capture(m), warmup=1, steps=1))
    m, g = _PROFILED[model_name]
    if name == "expert":
        placer = ExpertPlacer(rules, strip_prefixes=m.cfg.get("expert_strip_prefixes") or ["gradients/"])
    else:
        placer = build_placer(name, m.cfg)
    placement = placer.place(g, cluster)
    assignment = placement.assignment if hasattr(placement, "assignment") else placement
    check_placement(g, cluster, assignment)
    groups = g.colocation_groups()
    assert groups
    for root, members in groups.items():
        assert len({assignment[o] for o in members}) == 1, (name, root)
    return g, assignment


@pytest.mark.parametrize("name", _PLACERS)
def test_placers_respect_colocation_mlp(backend, name):
    cluster = uniform_cluster(4, 4e9)
    _place_all(backend, "mlp_tiny", cluster, name, [["l0", 0], ["l1", 1], ["out", 2], ["loss", 3]])


@pytest.mark.slow
@pytest.mark.parametrize("name", _PLACERS)
def test_placers_respect_colocation_gnmt(backend, name):
    cluster = uniform_cluster(4, 4e9)
    rules = load_model_cfg("gnmt_tiny")["expert_rules"]
    _, assignment = _place_all(backend, "gnmt_tiny", cluster, name, rules)
    if name == "expert":
        # Baechi 5.3: each LSTM layer on its own device, attention and projection with the last decoder layer
        assert assignment["enc/l2/t0/MatMul"] == "cpu2"
        assert assignment["dec/l3/t1/MatMul"] == "cpu3"
        assert assignment["gradients/enc/l1/t0/MatMul_grad/MatMul"] == "cpu1"
        assert assignment["attention/t0/MatMul"] == "cpu3"


def test_backend_config_instantiates():
    backend = instantiate(load_choice("backend", "tensorflow"), "backend")
    assert isinstance(backend, TFBackend) and backend.name == "tensorflow"
    from algorithms.errors import ConfigError

    with pytest.raises(ConfigError, match="profile_inter_op_threads"):
        TFBackend(profile_inter_op_threads=2)
    assert TFBackend(profile_inter_op_threads=2, profile_calibration="none").profile_inter_op_threads == 2
