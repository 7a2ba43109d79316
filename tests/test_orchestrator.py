"""The Hydra application end to end: files of docs/formats.md, MLflow runs, caching, outcomes, sweeps."""

from __future__ import annotations

import json

import pytest

from algorithms.workloads.synthetic import linreg_graph

RESULT_KEYS = {
    "model",
    "placer",
    "scheduler",
    "n_ops",
    "n_ops_placed",
    "devices",
    "placement_time_s",
    "predicted_step_s",
    "measured_step_s",
    "peak_memory_bytes",
    "memory_limit_bytes",
    "traffic_bytes",
    "status",
    "error",
    "mlflow_run_id",
}


def _read(folder, name):
    return json.loads((folder / name).read_text())


def test_default_run_writes_the_four_files_and_an_mlflow_run(lab):
    lab.run("placer=single")
    (out,) = lab.outputs()
    res = _read(out, "result.json")
    assert RESULT_KEYS <= set(res)
    assert res["status"] == "ok" and res["error"] is None and res["measured_step_s"] is None
    assert res["devices"] == ["cpu0", "cpu1", "cpu2", "cpu3"] and res["placer"] == "single"
    placement = _read(out, "placement.json")
    schedule = _read(out, "schedule.json")
    timeline = _read(out, "timeline.json")
    assert len(placement) == res["n_ops"] and set(placement.values()) == {"cpu0"}
    assert sorted(o for ops in schedule.values() for o in ops) == sorted(placement)
    assert {"op", "device", "start_s", "end_s"} == set(timeline[0])
    assert max(r["end_s"] for r in timeline) == pytest.approx(res["predicted_step_s"])
    assert res["peak_memory_bytes"]["cpu0"] > 0 and res["peak_memory_bytes"]["cpu1"] == 0
    (run,) = lab.runs()
    assert run.info.status == "FINISHED" and run.info.run_id == res["mlflow_run_id"]
    assert run.data.params["placer"] == "single" and "placer._target_" not in run.data.params
    assert run.info.run_name == "single · synthetic · cpu4"
    assert "model.generator.levels" not in run.data.params  # the full config is the config.yaml artifact
    assert run.data.metrics["predicted_step_s"] == pytest.approx(res["predicted_step_s"])
    # the placing process's CPU time beside the wall clock (the steadier figure on a shared machine)
    assert res["placement_cpu_s"] >= 0 and run.data.metrics["placement_cpu_s"] == pytest.approx(res["placement_cpu_s"])
    assert res["optimize_time_s"] == res["optimize_cpu_s"] == 0.0  # optimizer none: no graph pass ran
    assert run.data.tags["placer"] == "single" and run.data.tags["status"] == "ok"
    import mlflow

    names = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id)}
    assert {"result.json", "placement.json", "schedule.json", "timeline.json", "trace.json", "config.yaml"} <= names

    lab.run("placer=single")
    second = [o for o in lab.outputs() if o != out][0]
    assert _read(second, "result.json")["predicted_step_s"] == res["predicted_step_s"]
    assert _read(second, "result.json")["cache_hits"] == {
        "graph": True,
        "place": True,
        "schedule": True,
        "simulate": True,
    }


def test_the_graph_optimizers_time_is_recorded_and_kept_with_its_cache_entry(lab):
    """result.json and MLflow have the optimizer passes' wall-clock and CPU time; a run that reads the coarse
    graph from the cache reports the time of the run that computed it, as the placement time does."""
    lab.run("placer=m_sct", "optimizer=baechi")
    (out,) = lab.outputs()
    res = _read(out, "result.json")
    assert res["status"] == "ok" and res["n_ops_placed"] < res["n_ops"]
    assert res["optimize_time_s"] > 0 and res["optimize_cpu_s"] > 0
    (run,) = lab.runs()
    assert run.data.metrics["optimize_cpu_s"] == pytest.approx(res["optimize_cpu_s"])
    lab.run("placer=m_sct", "optimizer=baechi")
    again = _read([o for o in lab.outputs() if o != out][0], "result.json")
    assert again["cache_hits"]["optimize"] is True and again["optimize_cpu_s"] == res["optimize_cpu_s"]


def test_user_graph_file_and_expert_placer(lab):
    path = lab.cwd / "lr.graph.json"
    linreg_graph().save(path)
    lab.run(
        "model=graph_file",
        f"model.path={path}",
        "cluster=cpu2",
        "placer=expert",
        "placer.rules=[[Weight,1],[Grad,cpu1]]",
    )
    (out,) = lab.outputs()
    pl = _read(out, "placement.json")
    assert pl["Weight"] == pl["ApplyGrad"] == "cpu1" and pl["Grad"] == "cpu1" and pl["X"] == "cpu0"
    assert _read(out, "result.json")["traffic_bytes"] > 0


def test_bad_graph_fails_clearly_and_leaves_no_ok_behind(lab):
    bad = {
        "format": "opgraph/1",
        "name": "bad",
        "ops": [
            {"name": "a", "compute_s": 1, "persistent_bytes": 0, "temporary_bytes": 0, "output_bytes": 4},
            {"name": "b", "compute_s": 1, "persistent_bytes": 0, "temporary_bytes": 0, "output_bytes": 4},
        ],
        "edges": [{"src": "a", "dst": "b", "bytes": 4}, {"src": "b", "dst": "a", "bytes": 4}],
    }
    path = lab.cwd / "bad.graph.json"
    path.write_text(json.dumps(bad))
    p = lab.run("model=graph_file", f"model.path={path}", check=False)
    assert p.returncode != 0
    (out,) = lab.outputs()
    res = _read(out, "result.json")
    assert res["status"] == "error" and "cycle" in res["error"] and "'a'" in res["error"]
    assert not (out / "placement.json").exists()
    (run,) = lab.runs()
    assert run.info.status == "FAILED" and run.data.tags["status"] == "error"
    cached = [p for p in (lab.cwd / "cache").rglob(".complete")] if (lab.cwd / "cache").exists() else []
    assert cached == []


def test_unknown_config_name_lists_what_exists(lab):
    p = lab.run("placer=no_such_placer", check=False)
    assert p.returncode != 0
    assert "no_such_placer" in p.stderr and "single" in p.stderr
    assert lab.outputs() == []


def test_out_of_memory_is_a_result_not_a_failure(lab):
    p = lab.run("placer=single", "cluster.memory_fraction=0.01")
    assert p.returncode == 0
    (out,) = lab.outputs()
    res = _read(out, "result.json")
    assert res["status"] == "oom" and "cpu0" in res["error"] and res["oom"]["device"] == "cpu0"
    assert res["memory_limit_bytes"]["cpu0"] == pytest.approx(4.0e7)
    (run,) = lab.runs()
    assert run.info.status == "FINISHED" and run.data.metrics["oom"] == 1.0


@pytest.mark.slow
def test_multirun_over_two_placers_has_parent_and_children(lab):
    lab.run("-m", "placer=single,expert")
    sweeps = list((lab.cwd / "multirun").rglob("sweep_summary.json"))
    assert len(sweeps) == 1
    summary = json.loads(sweeps[0].read_text())
    assert [j["status"] for j in summary["jobs"]] == ["ok", "ok"] and summary["failed"] == []
    runs = lab.runs()
    parent = [r for r in runs if r.data.tags.get("kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent[0].info.run_id]
    assert len(parent) == 1 and parent[0].info.status == "FINISHED"
    assert sorted(r.data.tags["placer"] for r in children) == ["expert", "single"]
    # the graph was generated once for both jobs: the second read it from the cache
    hits = [json.loads(p.read_text())["cache_hits"] for p in sorted((lab.cwd / "multirun").rglob("result.json"))]
    assert sorted(h["graph"] for h in hits) == [False, True]


@pytest.mark.slow
def test_a_failing_job_does_not_lose_the_others(lab):
    good = lab.cwd / "good.graph.json"
    linreg_graph().save(good)
    bad = lab.cwd / "bad.graph.json"
    bad.write_text('{"format": "opgraph/1", "ops": [], "edges": 3}')
    p = lab.run("-m", "model=graph_file", f"model.path={bad},{good}", check=False)
    assert p.returncode != 0
    (sweep,) = list((lab.cwd / "multirun").rglob("sweep_summary.json"))
    summary = json.loads(sweep.read_text())
    assert summary["failed"] == ["0"] and [j["status"] for j in summary["jobs"]] == ["error", "ok"]
    statuses = sorted(r.info.status for r in lab.runs() if r.data.tags.get("kind") != "sweep")
    assert statuses == ["FAILED", "FINISHED"]


@pytest.mark.slow
def test_pipeline_only_run_writes_the_schedule(lab):
    lab.run("model=none", "pipeline=1f1b")
    (out,) = lab.outputs()
    res = _read(out, "result.json")
    assert res["status"] == "ok" and res["pipeline"] == "1f1b" and res["placer"] is None
    # 1F1B on four devices with 12 micro-batches idles (D - 1) / (N + D - 1) of the time
    assert res["bubble_rate"] == pytest.approx(3 / 15) and res["devices"] == ["d0", "d1", "d2", "d3"]
    schedule = _read(out, "pipeline_schedule.json")
    assert schedule and (out / "pipeline_trace.json").exists()
