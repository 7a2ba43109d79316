"""Issue 22: the fixed costs of a whole run (graph, outputs) were cut without changing a byte of what a run
writes.  A `python -m orchestrator` run on the benchmark's random graph (3,236 ops, colocation groups; m-ETF
compiled, m-TOPO) must write placement.json, schedule.json, timeline.json and trace.json with the SHA-256 the
code before those changes (ee8676e) wrote, and result.json equal but for its timings
(tests/data/whole_run_reference.json, recorded with that code and the overrides below)."""

from __future__ import annotations

import gc
import hashlib
import json
from pathlib import Path

import pytest

REFERENCE = Path(__file__).parent / "data" / "whole_run_reference.json"
#: benchmarks/bench_scale.py's random graph (levels = ops / 31) on cluster cpu4 with ample memory
RANDOM_3K = [
    "cache.enabled=false",
    "tracking.enabled=false",
    "model.generator.levels=97",
    "model.generator.min_nodes_per_level=4",
    "model.generator.max_nodes_per_level=12",
    "model.generator.edge_probability=0.10",
    "model.generator.edge_level_limit=5",
    "model.generator.random_edges=200",
    "model.generator.memory_unit_bytes=100",
    "model.generator.colocated_fraction=0.15",
    "model.generator.max_group_size=6",
    "cluster.memory_fraction=100",
]
TIMINGS = ("placement_time_s", "placement_cpu_s", "optimize_time_s", "optimize_cpu_s", "mlflow_run_id")


@pytest.mark.parametrize("placer", ["m_etf", "m_topo"])
def test_whole_run_writes_the_bytes_of_the_code_before(lab, placer):
    ref = json.loads(REFERENCE.read_text())[placer]
    lab.run(f"placer={placer}", *RANDOM_3K)
    (out,) = lab.outputs()
    for name, digest in ref["sha256"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name
    res = json.loads((out / "result.json").read_text())
    for k in TIMINGS:
        res.pop(k, None)
    res["placer_info"].pop("algorithm_time_s", None)
    assert res == ref["result"]


def test_freeze_graph_freezes_once_and_leaves_a_frozen_process_alone():
    from orchestrator.context import JobContext

    assert gc.get_freeze_count() == 0
    ctx = JobContext(cfg=None, out=Path("."), choices={}, cache=None)  # type: ignore[arg-type]
    try:
        ctx.freeze_graph()
        assert ctx.froze_gc and gc.get_freeze_count() > 0
        ctx.freeze_graph()  # once per job
    finally:
        gc.unfreeze()
    other = JobContext(cfg=None, out=Path("."), choices={}, cache=None)  # type: ignore[arg-type]
    gc.freeze()
    try:
        other.freeze_graph()
        assert not other.froze_gc  # the process froze objects itself: not this job's to give back
    finally:
        gc.unfreeze()


def test_a_job_freezes_its_graph_and_gives_it_back_at_the_end(tmp_path, monkeypatch):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from orchestrator import app
    from orchestrator.context import JobContext

    frozen = []
    freeze = JobContext.freeze_graph

    def spy(self):
        freeze(self)
        frozen.append(gc.get_freeze_count())

    monkeypatch.setattr(JobContext, "freeze_graph", spy)
    conf = Path(__file__).resolve().parent.parent / "conf"
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
            cfg = compose(
                "config",
                overrides=[f"cache.dir={tmp_path / 'cache'}", "cache.enabled=false", "tracking.enabled=false"],
                return_hydra_config=True,
            )
    finally:
        GlobalHydra.instance().clear()
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    HydraConfig.instance().set_config(cfg)
    cfg = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])  # the job's config, as @hydra.main gives it
    assert gc.get_freeze_count() == 0
    res = app.run_job(cfg, tmp_path / "out", {"placer": "m_etf", "scheduler": "placer_order", "cluster": "cpu4"})
    assert res["status"] == "ok"
    assert frozen and frozen[0] > 0  # the graph was frozen during the job
    assert gc.get_freeze_count() == 0  # and given back to the collector at its end
