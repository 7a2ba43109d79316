"""experiments/fidelity.py --save-cases: what a run's prediction used, written so that it can be simulated again
later with the same result (another model of the runtime tried on the same measurements)."""

from __future__ import annotations

import json

import pytest

from algorithms import uniform_cluster
from algorithms.graph import OpGraph
from algorithms.placement import topological_schedule


def test_a_saved_case_simulates_to_the_same_step(tmp_path):
    from experiments.fidelity import predict, save_case, simulate_case

    g = OpGraph("g")
    for k in range(6):
        g.add_op(f"o{k}", compute_s=1e-3 * (k + 1), output_bytes=1e4)
    for k in range(5):
        g.add_edge(f"o{k}", f"o{k + 1}", bytes=1e4)
    g.add_edge("o0", "o3", bytes=2e4)
    cl = uniform_cluster(4, 8e9, latency_s=5e-5, bytes_per_s=3e9)
    assign = {f"o{k}": f"cpu{k % 4}" for k in range(6)}
    sched = topological_schedule(g, assign, cl.names)
    at = (g, assign, sched, 2, "step_start")
    want = predict(*at, cl, (1e-5, 2e-5), "at_arrival").makespan
    save_case(tmp_path, "m", "cpu4", "p", at, cl, (1e-5, 2e-5))
    case = json.loads((tmp_path / "m_cpu4_p.case.json").read_text())
    assert case["host_cores"] == 2 and case["recv_buffers"] == "step_start"
    assert (case["send_overhead_s"], case["recv_overhead_s"]) == (1e-5, 2e-5)
    got = simulate_case(case, OpGraph.load(tmp_path / case["graph"])).makespan
    assert got == pytest.approx(want, rel=1e-12)
    assert (case["send_byte_s"], case["recv_byte_s"]) == (0.0, 0.0)
    # with per-byte costs (the in-step calibration's wide program): saved, and simulated the same
    costs = (1e-5, 2e-5, 3e-9, 4e-9)
    want_b = predict(*at, cl, costs, "at_arrival").makespan
    assert want_b > want
    save_case(tmp_path, "m", "cpu4", "q", at, cl, costs)
    case = json.loads((tmp_path / "m_cpu4_q.case.json").read_text())
    assert (case["send_byte_s"], case["recv_byte_s"]) == (3e-9, 4e-9)
    assert simulate_case(case, OpGraph.load(tmp_path / case["graph"])).makespan == pytest.approx(want_b, rel=1e-12)


def _saved_sweep(folder, cluster_name, cluster, stride, placers, host_cores, costs, saved_costs, compute_s, **truth):
    """Two small models saved as a sweep's cases (`fidelity.save_case`, with `saved_costs`) whose rows' measured
    steps are the simulator's with `costs` and `truth`: ops in `stride` interleaved chains, placed by each of
    `placers` ((name, device index of op k in n ops))."""
    from experiments.fidelity import predict, save_case

    rows = []
    for model, n in (("m1", 12), ("m2", 16)):
        g = OpGraph(model)
        for k in range(n):
            g.add_op(f"o{k}", compute_s=compute_s * (1 + k % 3), output_bytes=1e3)
        for k in range(stride, n):
            g.add_edge(f"o{k - stride}", f"o{k}", bytes=1e3)
        for placer, dev in placers:
            assign = {f"o{k}": f"cpu{dev(k, n)}" for k in range(n)}
            sched = topological_schedule(g, assign, cluster.names)
            at = (g, assign, sched, host_cores, "step_start")
            step = predict(*at, cluster, costs, "at_arrival", **truth).makespan
            save_case(folder, model, cluster_name, placer, at, cluster, saved_costs)
            rows.append({"model": model, "placer": placer, "measured_s": step})
    return rows


def test_the_shared_core_charge_is_recovered_from_saved_cases(tmp_path):
    """Steps simulated with a charge of 0.3 as the 'measured' ones: the fit over the saved cases finds 0.3, and
    each model left out is predicted exactly by the value fitted on the other."""
    from experiments.fit_shared_core import fit

    cl = uniform_cluster(4, 8e9, latency_s=1e-5, bytes_per_s=3e9)
    placers = (("split", lambda k, n: k % 4), ("pairs", lambda k, n: (k // 2) % 4))  # devices run at once
    costs = (1e-5, 1e-5)
    rows = _saved_sweep(tmp_path, "cpu4", cl, 4, placers, 2, costs, costs, 1e-3, shared_core_slowdown=0.3)
    res = fit(tmp_path, rows, grid=(0.0, 0.1, 0.2, 0.3, 0.4))
    assert res["fitted"] == 0.3 and res["median_abs_error"] == pytest.approx(0.0, abs=1e-12)
    for h in res["held_out"].values():
        assert h["fitted_on_others"] == 0.3 and h["median_abs_error_without"] > 0.01


def test_host_speed_probe_times_a_fixed_loop_and_restores_the_affinity():
    import os

    from experiments.fidelity import host_speed_probe, summarise

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    before = os.sched_getaffinity(0)
    t = host_speed_probe(sorted(before)[:1], reps=2)
    assert t is not None and 0 < t < 5.0  # forty 192 x 192 products: milliseconds, not seconds
    assert os.sched_getaffinity(0) == before
    assert host_speed_probe([]) is None
    row = {
        "model": "m",
        "cluster": "cpu2",
        "error": 0.2,
        "predicted_s": 1.2,
        "measured_s": 1.0,
        "iqr_s": 0.0,
        "predicted_peak": 1.0,
        "measured_peak": 1.0,
        "predicted_benchmark_s": 1.2,
        "predicted_fixed_latency_s": 1.2,
        "placer": "single",
    }
    # the host ran 10 % faster during the run than during the profile: the prediction at the run's speed is 1.08
    (s,) = summarise([{**row, "predicted_at_run_speed_s": 1.08}])
    assert s["median_abs_error"] == pytest.approx(0.2) and s["median_abs_error_at_run_speed"] == pytest.approx(0.08)
    (s,) = summarise([{**row, "predicted_at_run_speed_s": None}])
    assert s["median_abs_error_at_run_speed"] is None  # no probe: no figure


def test_a_factor_on_the_message_costs_is_recovered_from_saved_cases(tmp_path):
    """Steps simulated with the per-message costs 1.3 times the saved ones: the message_scale fit finds 1.3,
    held out or not, and the errors at 1.0 (no change) are reported beside it."""
    from experiments.fit_shared_core import fit

    cl = uniform_cluster(2, 8e9, latency_s=1e-5, bytes_per_s=3e9)
    placers = (("alternate", lambda k, n: k % 2), ("halves", lambda k, n: 2 * k // n))  # a chain that crosses
    rows = _saved_sweep(tmp_path, "cpu2", cl, 1, placers, None, (1.3e-5, 2.6e-5), (1e-5, 2e-5), 1e-4)
    res = fit(tmp_path, rows, grid=(1.0, 1.1, 1.2, 1.3, 1.4), parameter="message_scale")
    assert res["fitted"] == 1.3 and res["median_abs_error"] == pytest.approx(0.0, abs=1e-12)
    assert all(h["fitted_on_others"] == 1.3 for h in res["held_out"].values())
    assert res["median_abs_error_without"] > 0.01
    with pytest.raises(ValueError, match="message_scale"):
        fit(tmp_path, rows, parameter="bytes")


def test_tensorflow_summary_counts_resolved_and_reversed_pairs(monkeypatch):
    """`fidelity_tf.summary_lines`: a pair counts as resolved when the measured medians are further apart than
    the larger IQR, and as reversed when the prediction orders it the other way."""
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "experiments"))
    from experiments.fidelity_tf import summary_lines

    def row(pred: float, meas: float, iqr: float) -> dict:
        err = (pred - meas) / meas
        keys = ("", "_calibrated", "_no_byte_costs", "_sequential")
        out = {"measured_step_s": meas, "measured_step_iqr_s": iqr}
        for k in keys:
            out[f"predicted_step{k}_s" if k else "predicted_step_s"] = pred
            out[f"rel_error{k}"] = err
        return out

    # a and b resolved and ordered alike; b and c resolved and reversed; a and c resolved; c and d within the IQR
    rows = [row(1.0, 1.0, 0.1), row(2.0, 2.0, 0.1), row(2.5, 3.0, 0.1), row(2.4, 3.05, 0.2)]
    rows[2]["predicted_step_s"] = 1.5  # the headline prediction puts c before b
    lines = summary_lines("m", rows, "in_step", False)
    assert lines[0].startswith("m: median |error|")
    assert "pairs resolved 5/6 (1 reversed)" in lines[0]
    assert "pairs resolved 5/6 (0 reversed), tau over them 1.0" in lines[1]  # in-step: every pair right
    assert len(lines) == 4 and not any("Kendall" in x for x in summary_lines("all", rows, "in_step", False, tau=False))
