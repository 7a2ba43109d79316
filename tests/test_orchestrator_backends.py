"""The orchestrator with real backends: capture, profile, place, run, and the Standard Evaluation profiler."""

from __future__ import annotations

import json

import pytest


def _result(lab):
    (out,) = lab.outputs()
    return out, json.loads((out / "result.json").read_text())


@pytest.mark.slow
@pytest.mark.torch
def test_torch_gnmt_tiny_expert_runs_for_real(lab):
    pytest.importorskip("torch")
    lab.run(
        "model=gnmt_tiny",
        "backend=torch",
        "profiler=measured",
        "runtime=real",
        "cluster=cpu2",
        "placer=expert",
        "profiler.steps=3",
        "profiler.warmup=1",
        "runtime.steps=3",
        "runtime.warmup=1",
    )
    out, res = _result(lab)
    assert res["status"] == "ok" and res["measured_step_s"] > 0 and res["predicted_step_s"] > 0
    placement = json.loads((out / "placement.json").read_text())
    assert len(set(placement.values())) == 2  # the four-layer expert spread over two devices
    assert res["traffic_bytes"] > 0 and res["loss"] > 0
    # one worker process per device, each pinned, and the measured steps counted
    assert [w["device"] for w in res["runtime_workers"]] == ["cpu0", "cpu1"]
    assert len({w["pid"] for w in res["runtime_workers"]}) == 2 and res["measured_steps"] == 3
    assert res["correct"] is True
    (run,) = lab.runs()
    assert "prediction_error" in run.data.metrics and "measured_step_s" in run.data.metrics


@pytest.mark.slow
@pytest.mark.tf
def test_tensorflow_linreg_tiny_m_etf_runs_for_real(lab):
    pytest.importorskip("tensorflow")
    lab.run(
        "model=linreg_tiny",
        "backend=tensorflow",
        "profiler=measured",
        "runtime=real",
        "cluster=cpu2",
        "placer=m_etf",
        "profiler.steps=2",
        "profiler.warmup=1",
        "profiler.comm_calibration=benchmark",  # the default's in-step fit takes minutes on TensorFlow
        "runtime.steps=3",
        "runtime.warmup=1",
    )
    _, res = _result(lab)
    assert res["status"] == "ok" and res["measured_step_s"] > 0 and res["n_ops"] > 10
    assert res["measured_steps"] == 3 and res["measured_step_iqr_s"] is not None
    assert {w["device"] for w in res["runtime_workers"]} <= {"cpu0", "cpu1"} and res["runtime_workers"]


@pytest.mark.slow
@pytest.mark.torch
def test_standard_evaluation_profiler_reports_deviation(lab):
    pytest.importorskip("torch")
    lab.run(
        "model=mlp_tiny",
        "backend=torch",
        "profiler=standard_evaluation",
        "model.batch_size=16",
        "cluster=cpu2",
        "placer=m_etf",
    )
    out, res = _result(lab)
    assert res["status"] == "ok"
    report = json.loads((out / "standard_evaluation.json").read_text())
    assert report["batch_sizes"] == [2, 4, 8] and report["target_batch_size"] == 16
    # output tensors grow linearly with the batch: their memory estimate is exact
    assert report["memory"]["mean"] == pytest.approx(0.0, abs=1e-6)
    assert 0 <= report["time"]["mean"] < 50
    (run,) = lab.runs()
    assert run.data.metrics["se.memory_mean_rel_dev"] == pytest.approx(0.0, abs=1e-6)


@pytest.mark.slow
@pytest.mark.tf
def test_planned_order_is_refused_by_a_backend_that_cannot_follow_a_plan(lab):
    pytest.importorskip("tensorflow")
    p = lab.run(
        "model=linreg_tiny",
        "backend=tensorflow",
        "profiler=measured",
        "cluster=cpu2",
        "placer=m_etf",
        "profiler.steps=2",
        "profiler.warmup=1",
        "runtime=threads",
        "runtime.order=planned",
        check=False,
    )
    assert p.returncode == 1
    _, res = _result(lab)
    assert res["status"] == "error" and "runtime.order" in res["error"]
