"""The pipeline config group: every YAML builds its scheduler and runs its case; artifacts are written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from algorithms.errors import ConfigError
from algorithms.pipeline.api import build_scheduler, run_pipeline, steady_bubble_rate
from algorithms.pipeline.baselines import OneFOneBScheduler
from algorithms.pipeline.blocks import make_shape

CONF = Path(__file__).resolve().parents[1] / "conf" / "pipeline"


@pytest.mark.parametrize("name", ["gpipe", "1f1b", "chimera", "1f1b_plus", "tessel", "to"])
def test_each_pipeline_yaml_runs(name):
    cfg = yaml.safe_load((CONF / f"{name}.yaml").read_text())
    assert cfg["_target_"] and cfg["name"] == name
    for key in ("shape", "n_devices", "n_micro", "memory", "recompute"):
        assert key in cfg
    if name == "tessel":
        cfg["shape"] = "k"  # a shape whose search takes a second (M takes tens of seconds)
    if name == "to":
        cfg["n_micro"] = 2
    sched, fig = run_pipeline(cfg)
    sched.validate()
    assert fig["scheduler"] == name
    assert 0.0 <= fig["bubble_rate"] < 1.0 and fig["makespan"] == sched.makespan
    assert fig["n_micro"] == cfg["n_micro"] and fig["search_time_s"] >= 0


def test_unknown_target_and_keys_are_config_errors():
    with pytest.raises(ConfigError):
        build_scheduler({"name": "x"})
    with pytest.raises(ConfigError):
        build_scheduler({"_target_": "algorithms.pipeline.nothere.Foo"})
    with pytest.raises(ConfigError):
        build_scheduler({"_target_": "algorithms.pipeline.baselines.GPipeScheduler", "bogus": 1})
    with pytest.raises(ConfigError):
        run_pipeline({"_target_": "algorithms.pipeline.baselines.GPipeScheduler", "shape": "w"})
    with pytest.raises(ConfigError, match="from_placement"):
        run_pipeline({"_target_": "algorithms.pipeline.baselines.GPipeScheduler", "shape": "from_placement"})


def test_steady_bubble_rate_of_1f1b_is_zero():
    assert steady_bubble_rate(OneFOneBScheduler(), make_shape("v", 4, True)) == pytest.approx(0.0)


def test_steady_bubble_is_a_run_key_reported_beside_the_whole_schedules():
    """``steady_bubble: true`` (Tessel Table II's "numerous micro-batches"): the run reports the steady state
    beside the whole schedule's rate, which counts warm-up and cool-down."""
    base = {"_target_": "algorithms.pipeline.tessel.TesselScheduler", "shape": "k", "n_micro": 48, "recompute": True}
    _, plain = run_pipeline(base)
    assert "steady_bubble_rate" not in plain
    _, fig = run_pipeline({**base, "steady_bubble": True})
    assert fig["steady_bubble_rate"] == pytest.approx(0.0, abs=1e-12) and fig["bubble_rate"] > 0.01
    plus = {"_target_": "algorithms.pipeline.baselines.OneFOneBPlusScheduler", "shape": "m", "recompute": True}
    _, fig = run_pipeline({**plus, "n_micro": 48, "steady_bubble": True})
    assert fig["steady_bubble_rate"] == pytest.approx(0.25)  # the paper's 25 % for GPT's M shape
    assert fig["bubble_rate"] > fig["steady_bubble_rate"]


def test_artifacts_written(tmp_path):
    pytest.importorskip("matplotlib")
    from orchestrator.pipeline_plots import write_pipeline_artifacts

    sched, _ = run_pipeline(
        {"_target_": "algorithms.pipeline.tessel.TesselScheduler", "shape": "v", "n_micro": 8, "memory": 4}
    )
    paths = write_pipeline_artifacts(sched, tmp_path)
    data = json.loads(Path(paths["json"]).read_text())
    assert data["n_micro"] == 8 and data["memory_limit"] == 4 and data["repetend"] is not None
    assert Path(paths["png"]).stat().st_size > 1000
    trace = json.loads(Path(paths["trace"]).read_text())
    assert any(e["ph"] == "X" for e in trace["traceEvents"])


def test_from_placement_case_runs_tessel():
    from algorithms.graph import OpGraph

    g = OpGraph("chain")
    for i in range(6):
        g.add_op(f"l{i}", compute_s=0.001 * (1 + i % 2), output_bytes=1000)
        g.add_op(f"g{i}", compute_s=0.002 * (1 + i % 2), phase="backward", forward_of=f"l{i}")
        g.add_edge(f"l{i}", f"g{i}")
    for i in range(5):
        g.add_edge(f"l{i}", f"l{i + 1}")
        g.add_edge(f"g{i + 1}", f"g{i}")
    g.add_edge("l5", "g5")
    place = {f"{p}{i}": f"dev{i // 2}" for i in range(6) for p in "lg"}
    sched, fig = run_pipeline(
        {
            "_target_": "algorithms.pipeline.tessel.TesselScheduler",
            "shape": "from_placement",
            "n_micro": 6,
            "memory": None,
        },
        g,
        place,
    )
    assert sched.spec.devices == ["dev0", "dev1", "dev2"]
    assert fig["predicted_step_s"] > 0 and fig["t_r"] == fig["lower_bound"]


def test_window_bubble_rate_is_figure_11s_repetend_laid_end_to_end():
    """Tessel Figure 11: V needs N_R = 4 for a zero bubble rate. A one-micro-batch repetend of V has a window of
    16 units that equation 4's compaction overlaps down to t_R = 4, so only the window's rate shows the paper's
    curve."""
    cfg = {"_target_": "algorithms.pipeline.tessel.TesselScheduler", "shape": "v", "recompute": True}
    cfg.update({"n_micro": 16, "memory": None})
    _, one = run_pipeline({**cfg, "max_repetend_micro": 1})
    assert one["t_r"] == 4 and one["repetend_bubble_rate"] == pytest.approx(0.0)
    assert one["window"] == 16 and one["window_bubble_rate"] == pytest.approx(0.75)
    _, four = run_pipeline({**cfg, "max_repetend_micro": 4})
    assert four["window"] == four["t_r"] == 4 and four["window_bubble_rate"] == pytest.approx(0.0)
