"""The papers' regime (orchestrator/stages/regime.py): the compute scale gives the target CCR on the paper's
machine, result.json and MLflow report `ccr`, `regime=here` keeps the measured setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from algorithms.errors import ConfigError
from orchestrator.stages.regime import regime_cfg, runs_model, target_for


def test_target_by_model_choice_then_name():
    r = {"name": "baechi", "target_ccr": {"gnmt": 18.63, "synthetic": 5.0}}
    assert target_for(r, "gnmt", "whatever") == 18.63
    assert target_for(r, "other", "synthetic") == 5.0
    assert target_for({"name": "x", "target_ccr": 7}, None, None) == 7.0
    with pytest.raises(ConfigError, match="no target_ccr for model 'mlp'"):
        target_for(r, "mlp", "mlp")


def test_here_is_no_regime_and_runs_the_model():
    assert regime_cfg({"regime": {"name": "here"}}) is None
    assert regime_cfg({}) is None
    assert runs_model({"regime": {"name": "here"}})
    assert not runs_model({"regime": {"name": "baechi", "run_model": False}})


@pytest.mark.slow
def test_regime_hits_the_target_ccr_end_to_end(lab):
    lab.run("+regime=baechi", "model.generator.levels=12", "placer=m_etf")
    (out,) = lab.outputs()
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "ok"
    assert res["devices"] == ["gpu0", "gpu1", "gpu2", "gpu3"]
    reg = res["regime"]
    assert reg["target_ccr"] == 18.63
    assert res["ccr"] == pytest.approx(18.63, rel=1e-9) and reg["ccr"] == pytest.approx(18.63, rel=1e-9)
    assert reg["compute_scale"] > 0 and reg["ccr_here"] > 0
    (run,) = lab.runs()
    assert run.data.metrics["ccr"] == pytest.approx(18.63, rel=1e-9)
    assert run.data.metrics["regime.compute_scale"] == pytest.approx(reg["compute_scale"])

    lab.run("+regime=here", "model.generator.levels=12", "placer=m_etf")
    second = [o for o in lab.outputs() if o != out][0]
    here = json.loads((second / "result.json").read_text())
    assert "regime" not in here and here["devices"] == ["cpu0", "cpu1", "cpu2", "cpu3"]
    # the synthetic graph is not profiled: its CCR here is the one the regime started from
    assert here["ccr"] == pytest.approx(reg["ccr_here"])


@pytest.mark.slow
def test_a_fixed_compute_scale_needs_no_target_and_reads_a_gzipped_graph(lab):
    """`regime.compute_scale=1` keeps the profile's compute (a GPU's, say) on the paper's machine: no target CCR
    is looked up (a graph file has none), and the graph may be gzipped JSON."""
    import gzip

    from algorithms.ccr import graph_ccr
    from algorithms.graph import OpGraph
    from algorithms.workloads.synthetic import linreg_graph
    from orchestrator.context import build_cluster

    plain = lab.cwd / "lr.graph.json"
    linreg_graph().save(plain)
    packed = lab.cwd / "lr.graph.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert OpGraph.load(packed).to_dict() == OpGraph.load(plain).to_dict()

    lab.run("+regime=celeritas", "regime.compute_scale=1", "model=graph_file", f"model.path={packed}", "placer=m_etf")
    (out,) = lab.outputs()
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "ok" and res["regime"]["target_ccr"] is None and res["regime"]["compute_scale"] == 1.0
    import yaml

    conf = Path(__file__).resolve().parents[1] / "conf" / "regime" / "celeritas.yaml"
    spec = yaml.safe_load(conf.read_text())["cluster"]
    assert res["ccr"] == pytest.approx(graph_ccr(linreg_graph(), build_cluster(spec, "paper")), rel=1e-9)

    p = lab.run("+regime=celeritas", "model=graph_file", f"model.path={packed}", "placer=m_etf", check=False)
    assert p.returncode != 0 and "no target_ccr for model 'graph_file'" in p.stdout + p.stderr
