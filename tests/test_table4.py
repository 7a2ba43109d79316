"""Baechi Table 4's shape, end to end: the `gnmt_mem_limited` preset swept over single device, expert, m-TOPO,
m-ETF and m-SCT at 0.7 of the need and at 2.0 (the paper's baseline: forward-operator-based placement with
sufficient memory), run for real, then the report. The measured-here setting (`regime=here`): the preset's default,
the paper's regime, predicts on Baechi's machine as a model and runs nothing (tests/test_regime.py). On the
one-process planned runtime (`runtime=threads runtime.order=planned`), whose prediction is of four virtual devices
that share no core: the preset's own runtime (one worker process per device, four on this machine's two cores)
predicts this host, where splitting the model does not pay, and Table 4's order is not expected there
(tests/backends/test_torch_distributed.py covers its memory limits; docs/fidelity.md has a sweep of the preset)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest


@pytest.mark.slow
@pytest.mark.torch
def test_gnmt_mem_limited_sweep_has_table_4s_shape(lab):
    pytest.importorskip("torch")
    lab.run(
        "+experiment=gnmt_mem_limited",
        "regime=here",
        "runtime=threads",
        "runtime.order=planned",
        "placer=single,expert,m_topo,m_etf,m_sct",
        "profiler.warmup=1",
        "profiler.steps=3",
        "runtime.warmup=0",
        "runtime.steps=2",
        "hydra/launcher=basic",
        "-m",
        timeout=1200,
    )
    results, baseline = {}, {}
    for path in (lab.cwd / "multirun").rglob("result.json"):
        r = json.loads(path.read_text())
        frac = json.loads((path.parent / "config.json").read_text())["cluster"]["need_fraction"]
        (results if frac == 0.7 else baseline)[r["placer"]] = r
        assert frac in (0.7, 2.0)
    assert set(results) == set(baseline) == {"single", "expert", "m_topo", "m_etf", "m_sct"}
    need = results["single"]["memory_need_bytes"]
    for r in results.values():
        assert r["memory_limit_bytes"]["cpu0"] == pytest.approx(0.7 * need)
    # single device: out of memory (the simulator stops it before the run)
    assert results["single"]["status"] == "oom" and results["single"].get("measured_step_s") is None
    # Table 4: the single device runs out of memory, the expert and all three Baechi placers fit
    fits = ["expert", "m_topo", "m_etf", "m_sct"]
    # the expert and the Baechi placers fit, run for real, and their live memory per device is the simulated one
    for name in fits:
        r = results[name]
        assert r["status"] == "ok", (name, r.get("error"))
        assert r["measured_step_s"] > 0
        for d, peak in r["peak_memory_bytes"].items():
            assert peak <= r["memory_limit_bytes"][d] * (1 + 1e-9)
            # the planned runtime runs an op atomically and frees its inputs then, not at its end: the simulated
            # peak or below (93% to 100% of it over ten fresh sweeps in session 31, never above; a device that
            # received a storage as a tensor and its view, copied twice, once measured 18% above it)
            assert 0.75 * peak - 1.0 <= r["measured_peak_memory_bytes"][d] <= peak * 1.005 + 1.0, (name, d)
    # m-ETF (and m-SCT) are predicted faster than the expert, m-TOPO slower than them (Table 4's order)
    for name in ("m_etf", "m_sct"):
        assert results[name]["predicted_step_s"] < results["expert"]["predicted_step_s"]
        assert results[name]["predicted_step_s"] < results["m_topo"]["predicted_step_s"]
    # Table 4's parentheses: against the same placer with sufficient memory and forward-operator-based placement
    # (only forward ops placed: fewer ops than the forced pairs), the slowdown is small (paper: 0 to 3.2% on
    # GNMT; 13.8% at most for these placers on Inception-V3). The bound is looser than the paper's figures: both
    # predictions come from this test's 3-step measured profile, whose op times move the ratio (m-ETF 18.4% in
    # one CI run on 26 Nov while other tests shared the cores, under 15% in the runs before and the rerun)
    for name in ("single", *fits):
        assert baseline[name]["status"] == "ok", (name, baseline[name].get("error"))
    for name in ("m_topo", "m_etf", "m_sct"):
        assert baseline[name]["n_ops_placed"] < results[name]["n_ops_placed"]
        slow = results[name]["predicted_step_s"] / baseline[name]["predicted_step_s"] - 1
        assert slow < 0.25, (name, slow)
    rep = subprocess.run(
        [sys.executable, "-m", "orchestrator.report", "gnmt_mem_limited", "--out", str(lab.cwd / "report")],
        cwd=lab.cwd,
        env=lab.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rep.returncode == 0, rep.stderr[-2000:]
    with open(lab.cwd / "report" / "report.csv") as f:
        recs = list(csv.DictReader(f))
    # one row per placer and need fraction; only the single device at 0.7 is out of memory
    assert len(recs) == 10
    assert sorted(r["placer"] for r in recs if r["status"] == "oom") == ["single"]


@pytest.mark.slow
@pytest.mark.torch
def test_the_preset_on_worker_processes_posts_receives_within_the_limit(lab):
    """The preset's own runtime (one gloo worker per device) under a limit that the runtime's receive buffers
    would overfill if all were posted before the step: m-ETF's placement of gnmt_tiny at 0.6 of the need on cpu2
    runs, posts some receives late, stays within each device's limit, computes the single-device step, and the
    prediction of each device's peak (the plan's fill) is the measured one within 10 %."""
    pytest.importorskip("torch")
    lab.run(
        "+experiment=gnmt_mem_limited",
        "regime=here",
        "model=gnmt_tiny",
        "cluster=cpu2",
        "placer=m_etf",
        "cluster.need_fraction=0.6",
        "profiler.warmup=1",
        "profiler.steps=3",
        "profiler.comm_calibration=benchmark",
        "runtime.warmup=1",
        "runtime.steps=2",
        timeout=600,
    )
    (path,) = list((lab.cwd / "outputs").rglob("result.json"))
    r = json.loads(path.read_text())
    assert r["status"] == "ok" and r["correct"], r.get("error")
    assert sum(r["late_receives"].values()) > 0, r["late_receives"]
    for d, measured in r["measured_peak_memory_bytes"].items():
        assert measured <= r["memory_limit_bytes"][d]
        assert abs(r["peak_memory_bytes"][d] - measured) <= 0.1 * measured, (d, r["peak_memory_bytes"][d], measured)
    (run,) = lab.runs("gnmt_mem_limited")
    assert run.data.metrics["late_receives.cpu1"] + run.data.metrics["late_receives.cpu0"] > 0
