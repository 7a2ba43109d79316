"""Baechi Table 4's shape, end to end: the `gnmt_mem_limited` preset swept over single device, expert and m-ETF,
run for real (planned order), then the report."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
@pytest.mark.torch
def test_gnmt_mem_limited_sweep_has_table_4s_shape(lab):
    pytest.importorskip("torch")
    lab.run("+experiment=gnmt_mem_limited", "placer=single,expert,m_etf", "profiler.warmup=1", "profiler.steps=3",
            "runtime.warmup=0", "runtime.steps=2", "hydra/launcher=basic", "-m", timeout=1200)
    results = {}
    for path in (lab.cwd / "multirun").rglob("result.json"):
        r = json.loads(path.read_text())
        results[r["placer"]] = r
    assert set(results) == {"single", "expert", "m_etf"}
    need = results["single"]["memory_need_bytes"]
    for r in results.values():
        assert r["memory_limit_bytes"]["cpu0"] == pytest.approx(0.8 * need)
    # single device: out of memory (the simulator stops it before the run)
    assert results["single"]["status"] == "oom" and results["single"].get("measured_step_s") is None
    # the expert and m-ETF fit, run for real, and their live memory per device is the simulated one
    for name in ("expert", "m_etf"):
        r = results[name]
        assert r["status"] == "ok", (name, r.get("error"))
        assert r["measured_step_s"] > 0
        for d, peak in r["peak_memory_bytes"].items():
            assert peak <= r["memory_limit_bytes"][d] * (1 + 1e-9)
            assert r["measured_peak_memory_bytes"][d] == pytest.approx(peak, rel=0.03, abs=1.0), (name, d)
    # m-ETF's placement is predicted faster than the expert's (Table 4: Baechi's placers beat the expert)
    assert results["m_etf"]["predicted_step_s"] < results["expert"]["predicted_step_s"]
    rep = subprocess.run([sys.executable, "-m", "orchestrator.report", "gnmt_mem_limited", "--out",
                          str(lab.cwd / "report")], cwd=lab.cwd, env=lab.env, capture_output=True, text=True,
                         timeout=300)
    assert rep.returncode == 0, rep.stderr[-2000:]
    md = (lab.cwd / "report" / "report.md").read_text()
    rows = {line.split("|")[4].strip(): line for line in md.splitlines() if line.startswith("| gnmt")}
    assert "OOM" in rows["single"] and "OOM" not in rows["expert"] and "OOM" not in rows["m_etf"]
