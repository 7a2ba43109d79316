"""experiments/tf_message_kinds.py: a placement's messages counted by the kind of value they carry, and a run's
processor time read from its rounds."""

from __future__ import annotations

from algorithms.graph import OpGraph
from experiments.tf_message_kinds import message_kinds, non_constant_messages, worker_cpu


def graph() -> OpGraph:
    g = OpGraph("g")
    for name, kind in [
        ("c", "Const"),
        ("v", "ReadVariableOp"),
        ("a", "MatMul"),
        ("b", "Relu"),
        ("u", "NoOp"),
        ("x", "AddV2"),
    ]:
        g.add_op(name, type=kind, compute_s=1e-6, output_bytes=64)
    g.add_edge("c", "a", bytes=4)
    g.add_edge("v", "a", bytes=64)
    g.add_edge("a", "b", bytes=64)
    g.add_edge("a", "x", bytes=64)  # a's value to the second device once, whatever the consumers there
    g.add_edge("b", "u", control=True)
    g.add_edge("c", "x", bytes=4)
    return g


def test_messages_are_counted_once_per_value_and_device_by_kind():
    g = graph()
    # c, v on d0; a on d1; b, x on d0; u on d1
    p = {"c": "d0", "v": "d0", "a": "d1", "b": "d0", "x": "d0", "u": "d1"}
    k = message_kinds(g, p)
    # c -> d1 (const), v -> d1 (variable), a -> d0 (data, once for b and x), b -> d1 (control)
    assert dict(k) == {"const": 1, "variable": 1, "data": 1, "control": 1}
    assert sum(message_kinds(g, {n: "d0" for n in p}).values()) == 0


def test_a_value_with_a_data_edge_and_a_control_edge_to_one_device_is_data():
    g = OpGraph("g")
    for name in ("s", "t", "w"):
        g.add_op(name, type="Mul", compute_s=1e-6, output_bytes=8)
    g.add_edge("s", "t", bytes=8)
    g.add_edge("s", "w", control=True)
    assert dict(message_kinds(g, {"s": "d0", "t": "d1", "w": "d1"})) == {"data": 1}
    assert dict(message_kinds(g, {"s": "d0", "t": "d0", "w": "d1"})) == {"control": 1}


def test_worker_cpu_is_the_median_over_rounds_of_the_workers_sum():
    row = {"worker_cpu_per_step_s": [{"cpu0": 0.002, "cpu1": 0.001}, {"cpu0": 0.004, "cpu1": 0.002}, {"cpu0": 0.001}]}
    assert worker_cpu(row) == 0.003
    assert worker_cpu({"worker_cpu_per_step_s": []}) is None
    assert worker_cpu({}) is None


def test_the_throughput_bound_takes_the_calibration_placement_with_most_non_constant_messages(monkeypatch):
    """`fidelity_tf.serial_message_cost`: the calibration's measured step less its single-device step, per
    non-constant message, on the block placement that has the most of them; None without measurements."""
    from pathlib import Path
    from types import SimpleNamespace

    from algorithms import uniform_cluster
    from backends.calibration import CalibrationRuns

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "experiments"))
    from experiments.fidelity_tf import serial_message_cost

    g = graph()
    pair = uniform_cluster(2, 8e9)
    split = {"c": "d0", "v": "d0", "a": "d1", "b": "d0", "x": "d0", "u": "d1"}  # 3 non-constant messages
    consts_only = {"c": "d0", "v": "d1", "a": "d1", "b": "d1", "x": "d1", "u": "d1"}  # c -> d1: 1 constant
    assert non_constant_messages(g, split) == 3 and non_constant_messages(g, consts_only) == 0
    runs = [(2, split, {}, 0.004), (8, consts_only, {}, 0.009)]
    cal = SimpleNamespace(measured=CalibrationRuns(pair, g, runs, [0.001, 0.003]))
    cost, n = serial_message_cost(cal)
    assert n == 3 and cost == (0.004 - 0.002) / 3
    assert serial_message_cost(SimpleNamespace(measured=None)) is None
    assert serial_message_cost(SimpleNamespace(measured=CalibrationRuns(pair, g, [runs[1]], [0.001]))) is None
