"""orchestrator.report: rows keyed by KEY plus the swept params, speed-ups against the matching run, Table 4's
memory columns. Fake runs are logged straight into a temporary SQLite MLflow store, with the tags, params
(flattened config) and metrics the orchestrator logs (orchestrator/app.py run_job)."""

from __future__ import annotations

import csv
import itertools
import os

import pytest

from orchestrator import report
from orchestrator.run_naming import flatten

DEVS = ("cpu0", "cpu1", "cpu2", "cpu3")
_clock = itertools.count(1_700_000_000_000, 1000)  # start times (ms): later runs are newer


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One SQLite store for the module (creating its schema is the slow part). report.collect sets MLflow's
    global tracking URI (and MLFLOW_TRACKING_URI); both are put back afterwards."""
    import mlflow.tracking._tracking_service.utils as tracking_utils
    from mlflow.tracking import MlflowClient

    prev_uri, prev_env = getattr(tracking_utils, "_tracking_uri", None), os.environ.get("MLFLOW_TRACKING_URI")
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    yield uri, MlflowClient(tracking_uri=uri)
    tracking_utils.set_tracking_uri(prev_uri)
    if prev_env is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = prev_env


def _config(
    placer: str,
    optimizer: str = "baechi_perturbed",
    bound: float = 0.2,
    pseed: int = 0,
    need_fraction: float | None = 2.0,
    run: int = 0,
) -> dict:
    """A resolved job config, shaped like conf/ (+experiment=baechi_sensitivity) with the volatile keys."""
    placers = {
        "single": {"_target_": "algorithms.placers.baseline.SingleDevicePlacer"},
        "expert": {"_target_": "algorithms.placers.baseline.ExpertPlacer"},
        "m_sct": {"_target_": "algorithms.placers.baechi.MSCTPlacer", "threshold": 0.1, "memory_aware": True},
        "m_etf": {"_target_": "algorithms.placers.baechi.METFPlacer", "memory_aware": True},
        "m_topo": {"_target_": "algorithms.placers.baechi.MTopoPlacer", "memory_aware": True},
    }
    passes = [{"_target_": "algorithms.passes.baechi.ColocationGrouping"}]
    if optimizer == "baechi_perturbed":
        passes += [
            {"_target_": "algorithms.passes.baechi.CoPlacement"},
            {"_target_": "x.ForwardOnlyPlacement"},
            {"_target_": "x.OperatorFusion"},
            {"_target_": "algorithms.passes.baechi.ProfilePerturbation", "bound": bound, "seed": pseed},
        ]
    return {
        "model": {"name": "gnmt", "hidden": 256, "seed": 0},
        "cluster": {
            "memory_fraction": 1.0,
            "need_fraction": need_fraction,
            "devices": [{"name": d, "memory_bytes": 4.0e9} for d in DEVS],
        },
        "optimizer": {"passes": passes},
        "placer": placers[placer],
        "scheduler": {"_target_": "algorithms.schedulers.baseline.PlacerOrderScheduler"},
        "pipeline": {"name": "none"},
        "runtime": {"kind": "real"},
        "tracking": {"enabled": True, "uri": f"sqlite:////tmp/run{run}/mlflow.db", "experiment": "x"},
        "seed": 0,
        "cache": {"dir": f"/tmp/run{run}/.cache/stages", "enabled": True},
        "experiment_name": "x",
        "runtime_output_dir": f"outputs/2026-11-21/18-{run:02d}-00",
    }


def log_run(
    client,
    exp_id: str,
    tags: dict,
    params: dict,
    metrics: dict,
    status: str = "ok",
    result: dict | None = None,
    parent: str | None = None,
    failed: bool = False,
) -> str:
    """One job's run as RunTracker logs it: choice tags, flattened config params, metrics, status tag, result.json."""
    from mlflow.entities import Metric, Param, RunTag

    t = next(_clock)
    tags = {k: str(v) for k, v in tags.items() if v is not None}
    tags["model_name"] = tags.get("model", "none")
    if parent:
        tags["mlflow.parentRunId"] = parent
    run = client.create_run(exp_id, start_time=t, tags=tags)
    rid = run.info.run_id
    client.log_batch(
        rid,
        metrics=[Metric(k, float(v), t, 0) for k, v in metrics.items()],
        params=[Param(k, "None" if v is None else str(v)) for k, v in params.items()],
        tags=[RunTag("status", status)] + ([RunTag("error", "boom")] if status == "error" else []),
    )
    if result is not None:
        client.log_dict(rid, result, "result.json")
    client.set_terminated(rid, "FAILED" if failed else "FINISHED", end_time=t + 500)
    return rid


def placement_run(
    client,
    exp_id,
    placer,
    step,
    *,
    optimizer="baechi_perturbed",
    bound=0.2,
    pseed=0,
    need_fraction=2.0,
    status="ok",
    measured=None,
    limits=None,
    limit_metrics=False,
    parent=None,
    iqr=None,
    failed=False,
):
    """A placement job (choices as tags, as app.run_job sets them) with its metrics."""
    tags = {
        "model": "gnmt",
        "cluster": "cpu4",
        "optimizer": optimizer,
        "placer": placer,
        "scheduler": "placer_order",
        "pipeline": "none",
        "backend": "torch",
        "profiler": "measured",
        "runtime": "real",
        "tracking": "mlflow",
    }
    params = flatten(_config(placer, optimizer, bound, pseed, need_fraction, run=next(_clock) % 97))
    m = {
        "placement_time_s": 0.01,
        "traffic_bytes": 1.0e6,
        "n_ops": 5258,
        "n_ops_placed": 712,
        "oom": 1.0 if status == "oom" else 0.0,
    }
    if step is not None:
        m["predicted_step_s"] = step
        m.update({f"peak_memory_bytes.{d}": 2.0e7 + i for i, d in enumerate(DEVS)})
        m["peak_memory_bytes.max"] = 2.0e7 + 3
    if measured is not None:
        m["measured_step_s"] = measured
        m.update({f"measured_peak_memory_bytes.{d}": 3.0e7 for d in DEVS})
    if iqr is not None:
        m["measured_step_iqr_s"] = iqr
    result = None
    if limits is not None:
        if limit_metrics:  # as a future RunTracker might log them
            m.update({f"memory_limit_bytes.{d}": limits for d in DEVS})
        else:
            result = {"status": status, "memory_limit_bytes": {d: limits for d in DEVS}, "memory_need_bytes": 9.0e7}
    return log_run(client, exp_id, tags, params, m, status=status, result=result, parent=parent, failed=failed)


def _rows(uri, name, **kw):
    return report.collect(name, uri, **kw)


def _table(md):
    """The Markdown table of a report as (header cells, list of {column: cell})."""
    lines = md.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("| rank |"))
    head = [c.strip() for c in lines[i].strip("|").split("|")]
    body = []
    for ln in lines[i + 2 :]:
        if not ln.startswith("|"):
            break
        body.append(dict(zip(head, [c.strip() for c in ln.strip("|").split("|")])))
    return head, body


def _find(rows, placer, **params):
    out = [r for r in rows if r["placer"] == placer and all(r["params"].get(k) == str(v) for k, v in params.items())]
    assert len(out) == 1, (placer, params, out)
    return out[0]


def test_sweep_over_a_non_key_param_keeps_a_row_per_value_and_pairs_speedups(store, tmp_path):
    uri, client = store
    exp = client.create_experiment("sensitivity")
    bound = "optimizer.passes.4.bound"
    # an older m_sct run at bound 0.4 that the newer one replaces
    placement_run(client, exp, "m_sct", 9.0, bound=0.4)
    ids = {}
    for b, single_step, sct_step in ((0.0, 1.0, 0.5), (0.4, 2.0, 0.5)):
        ids["single", b] = placement_run(client, exp, "single", single_step, bound=b)
        ids["m_sct", b] = placement_run(client, exp, "m_sct", sct_step, bound=b)
        ids["m_etf", b] = placement_run(client, exp, "m_etf", 0.25, bound=b)

    rows = _rows(uri, "sensitivity")
    assert len(rows) == 6  # not collapsed to one row per placer; the older duplicate dropped
    assert all(list(r["params"]) == [bound] for r in rows)  # placer.*, cache.dir, tracking.uri, dirs: no columns
    assert {r["run_id"] for r in rows} == set(ids.values())
    s0, s4 = _find(rows, "m_sct", **{bound: 0.0}), _find(rows, "m_sct", **{bound: 0.4})
    assert s4["step_s"] == 0.5 and s4["run_id"] == ids["m_sct", 0.4]
    # each speed-up is over the single run at the same bound
    assert s0["single_run_id"] == ids["single", 0.0] and s0["speedup_vs_single"] == pytest.approx(2.0)
    assert s4["single_run_id"] == ids["single", 0.4] and s4["speedup_vs_single"] == pytest.approx(4.0)
    assert _find(rows, "m_etf", **{bound: 0.4})["speedup_vs_single"] == pytest.approx(8.0)
    assert all(r["speedup_vs_expert"] is None for r in rows)  # no expert run
    # rows of one bound together, bound ascending; within a bound ranked by predicted step
    assert [r["params"][bound] for r in rows] == ["0.0"] * 3 + ["0.4"] * 3
    assert [(r["placer"], r["rank"]) for r in rows[3:]] == [("m_etf", 1), ("m_sct", 2), ("single", 3)]

    md = report.markdown(rows, "sensitivity")
    head, body = _table(md)
    assert head[:3] == ["rank", "placer", "bound"]
    assert not {"model", "cluster", "scheduler", "memory limit", "measured step", "threshold", "dir"} & set(head)
    # the columns that are the same on every row are said once; the ones no run recorded are named
    assert "Same on every row: model **gnmt**, cluster **cpu4**, optimizer **baechi_perturbed**" in md
    assert "memory limit **2x need**" in md  # no limit logged: the fraction
    assert "Not recorded by any run: " in md and "measured step" in md.split("Not recorded by any run: ")[1]
    assert "`bound` = `optimizer.passes.4.bound`" in md
    cells = next(c for c in body if c["placer"] == "m_sct" and c["bound"] == "0.4")
    assert (cells["rank"], cells["predicted step"], cells["vs single"]) == ("2", "500.00 ms", "4.00x")
    out = tmp_path / "r.csv"
    report.write_csv(rows, out)
    recs = list(csv.DictReader(open(out)))
    assert len(recs) == 6 and "bound" in recs[0]
    assert {(r["placer"], r["bound"], float(r["speedup_vs_single"])) for r in recs} >= {
        ("m_sct", "0.0", 2.0),
        ("m_sct", "0.4", 4.0),
    }


def test_two_swept_params_and_a_swept_optimizer(store):
    uri, client = store
    exp = client.create_experiment("two_params")
    for b, s, opt in itertools.product((0.0, 0.8), (0, 1), ("baechi_perturbed",)):
        placement_run(client, exp, "m_sct", 1.0 + b + s / 10, bound=b, pseed=s, optimizer=opt)
    # optimizer=none has no pass 4: its rows follow the optimizer choice, the bound/seed cells are empty
    placement_run(client, exp, "m_sct", 3.0, optimizer="none")
    placement_run(client, exp, "single", 6.0, optimizer="none")
    rows = _rows(uri, "two_params")
    assert len(rows) == 6
    assert list(rows[0]["params"]) == ["optimizer.passes.4.bound", "optimizer.passes.4.seed"]
    assert {
        (r["params"]["optimizer.passes.4.bound"], r["params"]["optimizer.passes.4.seed"])
        for r in rows
        if r["optimizer"] == "baechi_perturbed"
    } == {("0.0", "0"), ("0.0", "1"), ("0.8", "0"), ("0.8", "1")}
    none = _find([r for r in rows if r["optimizer"] == "none"], "m_sct")
    assert none["params"] == {"optimizer.passes.4.bound": None, "optimizer.passes.4.seed": None}
    assert none["speedup_vs_single"] == pytest.approx(2.0)
    # no single run under baechi_perturbed: the last fallback (any optimizer, optimizer.* params aside) finds
    # exactly one single run, the optimizer=none one
    perturbed = [r for r in rows if r["optimizer"] == "baechi_perturbed"]
    assert all(r["single_run_id"] == _find(rows, "single")["run_id"] for r in perturbed)
    md = report.markdown(rows, "two_params")
    head, body = _table(md)
    assert head[:5] == ["rank", "optimizer", "placer", "bound", "seed"]
    none = next(c for c in body if c["optimizer"] == "none" and c["placer"] == "m_sct")
    assert (none["bound"], none["seed"], none["rank"]) == ("-", "-", "1")


def test_memory_limited_table_shows_limits_both_steps_measured_peaks_and_oom(store, tmp_path):
    uri, client = store
    exp = client.create_experiment("mem_limited")
    ids = {}
    for nf, limit in ((0.3, 2.7e7), (0.5, 4.5e7)):
        ids["single", nf] = placement_run(
            client,
            exp,
            "single",
            0.4 if nf == 0.5 else 0.5,
            optimizer="none",
            need_fraction=nf,
            limits=limit,
            status="ok" if nf == 0.5 else "oom",
            measured=0.42 if nf == 0.5 else None,
        )
        ids["expert", nf] = placement_run(
            client,
            exp,
            "expert",
            0.2,
            optimizer="none",
            need_fraction=nf,
            limits=limit,
            measured=0.25,
            limit_metrics=True,
        )
        ids["m_sct", nf] = placement_run(
            client, exp, "m_sct", 0.1, optimizer="none", need_fraction=nf, limits=limit, measured=0.125
        )
    rows = _rows(uri, "mem_limited")
    assert len(rows) == 6
    assert list(rows[0]["params"]) == ["cluster.need_fraction"]
    nf = "cluster.need_fraction"
    s3, s5 = _find(rows, "m_sct", **{nf: 0.3}), _find(rows, "m_sct", **{nf: 0.5})
    # ranked (and compared) by the predicted step; the measured one beside it
    assert s3["step_s"] == 0.1 and s3["predicted_step_s"] == 0.1 and s3["measured_step_s"] == 0.125
    assert s3["speedup_vs_expert"] == pytest.approx(2.0) and s3["expert_run_id"] == ids["expert", 0.3]
    assert s3["measured_speedup_vs_expert"] == pytest.approx(2.0)
    assert s3["speedup_vs_single"] is None  # single is out of memory at 0.3
    assert s5["speedup_vs_single"] == pytest.approx(4.0) and s5["single_run_id"] == ids["single", 0.5]
    assert s5["measured_speedup_vs_single"] == pytest.approx(0.42 / 0.125)
    # per need fraction: m_sct, expert, then single (OOM last at 0.3)
    assert [(r["params"][nf], r["placer"], r["rank"]) for r in rows] == [
        ("0.3", "m_sct", 1),
        ("0.3", "expert", 2),
        ("0.3", "single", 3),
        ("0.5", "m_sct", 1),
        ("0.5", "expert", 2),
        ("0.5", "single", 3),
    ]
    assert s3["memory_limit_bytes"] == {d: 2.7e7 for d in DEVS}  # from result.json
    assert _find(rows, "expert", **{nf: 0.5})["memory_limit_bytes"]["cpu3"] == 4.5e7  # metric
    assert s3["measured_peak_memory_bytes"] == {d: 3.0e7 for d in DEVS}
    assert "max" not in s3["peak_memory_bytes"]

    md = report.markdown(rows, "mem_limited")
    head, body = _table(md)
    for col in (
        "need_fraction",
        "memory limit",
        "predicted step",
        "measured step",
        "vs single",
        "vs expert",
        "measured vs single",
        "measured peak cpu3",
    ):
        assert col in head, col
    assert "peak cpu0 **20.00 MB**" in md  # the same simulated peak on every row: said once, no column
    cells = next(c for c in body if c["placer"] == "m_sct" and c["need_fraction"] == "0.3")
    assert cells["memory limit"] == "27.00 MB (0.3x need)"
    assert (cells["predicted step"], cells["measured step"]) == ("100.00 ms", "125.00 ms")
    assert cells["vs expert"] == "2.00x" and cells["vs single"] == "-"
    assert cells["measured peak cpu0"] == "30.00 MB"
    assert next(c for c in body if c["placer"] == "single" and c["need_fraction"] == "0.3")["predicted step"] == "OOM"
    assert "Same on every row: model **gnmt**, cluster **cpu4**, optimizer **none**" in md
    # medians without a spread: the report does not claim an order from them
    assert "no spread logged (measured_step_iqr_s)" in md

    report.write_csv(rows, tmp_path / "r.csv")
    rec = next(
        r for r in csv.DictReader(open(tmp_path / "r.csv")) if r["placer"] == "m_sct" and r["need_fraction"] == "0.3"
    )
    assert float(rec["memory_limit_bytes.cpu0"]) == 2.7e7 and float(rec["measured_peak_memory_bytes.cpu1"]) == 3e7
    assert float(rec["predicted_step_s"]) == 0.1 and float(rec["measured_step_s"]) == 0.125
    assert rec["need_fraction"] == "0.3" and rec["status"] == "ok"


def test_cli_latest_sweep_pipeline_runs_and_error_marks(store, tmp_path):
    uri, client = store
    exp = client.create_experiment("search_time")

    def sweep(values, pipelines, times):
        parent = client.create_run(exp, start_time=next(_clock), tags={"kind": "sweep"}).info.run_id
        for (pipe, n), t in zip(itertools.product(pipelines, values), times):
            params = flatten(
                {
                    "model": {"name": "none"},
                    "pipeline": {"name": pipe, "shape": "v", "n_micro": n, "n_devices": 4},
                    "seed": 0,
                    "cache": {"dir": f"/tmp/{t}"},
                }
            )
            tags = {"model": "none", "cluster": "cpu4", "optimizer": "none", "pipeline": pipe}
            status = "error" if t is None else "ok"
            log_run(
                client,
                exp,
                tags,
                params,
                {} if t is None else {"predicted_step_s": 10.0 + n, "bubble_rate": 0.25, "search_time_s": t},
                status=status,
                parent=parent,
                failed=t is None,
            )

    sweep((1, 2, 3), ("to", "tessel"), (1.0, 2.0, 3.0, 0.5, 0.6, 0.7))
    sweep((1, 2), ("to", "tessel"), (1.5, None, 0.4, 0.45))  # the newest sweep: to at n_micro=2 failed

    out = tmp_path / "rep"
    report.main(["search_time", "--tracking-uri", uri, "--out", str(out), "--latest-sweep"])
    assert {p.name for p in out.iterdir()} == {"report.md", "report.csv", "step_time.png"}
    recs = list(csv.DictReader(open(out / "report.csv")))
    assert sorted((r["pipeline"], r["n_micro"], r["status"]) for r in recs) == [
        ("tessel", "1", "ok"),
        ("tessel", "2", "ok"),
        ("to", "1", "ok"),
        ("to", "2", "error"),
    ]
    md = (out / "report.md").read_text()
    head, body = _table(md)
    assert head[:4] == ["rank", "pipeline", "n_micro", "predicted step"]
    assert "bubble rate" in head and "search time" in head and "cache" not in " ".join(head)
    # n_micro=2: tessel ranked first, the failed to run last and marked
    two = [(c["rank"], c["pipeline"], c["predicted step"]) for c in body if c["n_micro"] == "2"]
    assert two == [("1", "tessel", "12.000 s"), ("2", "to", "ERROR")]
    assert "- pipeline to on none (n_micro=2), run " in md and ": boom" in md

    rows = _rows(uri, "search_time")  # every sweep: newest run of each (pipeline, n_micro)
    assert len(rows) == 6
    to = [r for r in rows if r["pipeline"] == "to"]
    assert _find(to, "", **{"pipeline.n_micro": 1})["search_time_s"] == 1.5
    assert _find(to, "", **{"pipeline.n_micro": 3})["search_time_s"] == 3.0


def test_a_failed_rerun_never_hides_a_result_and_noise_is_named(store, tmp_path, capsys):
    uri, client = store
    exp = client.create_experiment("reruns")
    parent = client.create_run(exp, start_time=next(_clock), tags={"kind": "sweep"}).info.run_id
    good = placement_run(client, exp, "m_etf", 0.30, optimizer="none", measured=0.50, iqr=0.04, parent=parent)
    placement_run(client, exp, "m_sct", 0.20, optimizer="none", measured=0.52, iqr=0.05, parent=parent)
    placement_run(client, exp, "expert", 0.40, optimizer="none", measured=0.70, iqr=0.01, parent=parent)
    placement_run(client, exp, "single", 0.80, optimizer="none", measured=0.90, iqr=0.01, parent=parent)
    bad = placement_run(client, exp, "m_etf", None, optimizer="none", status="error", failed=True)  # newest
    only_bad = placement_run(client, exp, "m_topo", None, optimizer="none", status="error", failed=True)

    rows = _rows(uri, "reruns")
    assert [(r["placer"], r["rank"], r["status"]) for r in rows] == [
        ("m_sct", 1, "ok"),
        ("m_etf", 2, "ok"),
        ("expert", 3, "ok"),
        ("single", 4, "ok"),
        ("m_topo", 5, "error"),
    ]
    etf = _find(rows, "m_etf")
    assert etf["run_id"] == good and [f["run_id"] for f in etf["failures"]] == [bad]
    assert [f["run_id"] for f in _find(rows, "m_topo")["failures"]] == [only_bad]
    assert etf["speedup_vs_single"] == pytest.approx(0.8 / 0.3)
    assert etf["measured_speedup_vs_expert"] == pytest.approx(0.7 / 0.5)

    md = report.markdown(rows, "reruns")
    head, body = _table(md)
    cells = {c["placer"]: c for c in body}
    assert cells["m_etf"]["predicted step"] == "300.00 ms †" and cells["m_topo"]["predicted step"] == "ERROR"
    assert cells["m_sct"]["measured step"] == "520.00 ms (IQR 50.00 ms)"
    assert f"run {bad[:8]} (the row shows the run before it): boom" in md
    assert f"run {only_bad[:8]}: boom" in md
    # m_sct's median (0.52) is within the IQR of the fastest measured (m_etf 0.50 ± 0.04): said, not ranked
    note = next(ln for ln in md.splitlines() if ln.startswith("Measured"))
    assert "m_sct is within the spread (IQR) of the fastest measured, m_etf (500.00 ms)" in note
    assert "expert" not in note

    paths = report.write_report(rows, "reruns", tmp_path / "rep")
    png = tmp_path / "rep" / "step_time.png"
    assert png in paths
    import matplotlib.image as mpimg

    img = mpimg.imread(png)
    assert img.shape[0] > 600 and img.shape[1] > 600  # three panels: steps, speed-ups, memory

    # the sweep's parent run gets the comparison of its children (the failed reruns are not children)
    top = report.summarize_sweep(uri, parent)
    assert top is not None and top["placer"] == "m_sct"
    run = client.get_run(parent)
    assert run.data.tags["best_placer"] == "m_sct"
    assert run.data.metrics["best_predicted_step_s"] == pytest.approx(0.2)
    assert run.data.metrics["best_speedup_vs_single"] == pytest.approx(4.0)
    names = {a.path for a in client.list_artifacts(parent, "report")}
    # the runs were predicted and measured: the fidelity summary and the scatter come too
    assert names == {
        "report/report.md",
        "report/report.csv",
        "report/step_time.png",
        "report/fidelity.csv",
        "report/predicted_vs_measured.png",
    }

    # no experiment named: the store's experiments with their run counts
    report.main(["--tracking-uri", uri])
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("reruns"))
    assert "6 runs" in line and "1 sweeps" in line


def test_varying_params_drop_implied_and_volatile_params():
    keys = [("synthetic", "thesis", "none", p, "pct", "none") for p in ("heft", "heft", "dfs", "dfs")]
    params = [
        {
            "thesis_graph": g,
            "model.name": f"thesis_{g}_small",
            "model.generator.levels": lv,
            "placer._target_": p,
            "seed": "0",
            "cluster.devices.0.memory_bytes": "1e9",
        }
        for (g, lv), p in zip([("g1", "30"), ("g2", "30"), ("g1", "30"), ("g2", "30")], ("heft", "heft", "dfs", "dfs"))
    ]
    params[0]["runtime.order"] = "threads"  # a key that only newer runs log: no column
    assert report.varying_params(keys, params) == ["thesis_graph"]
    assert report.varying_params(keys[:1], params[:1]) == []
    assert all(
        report.ignored_param(p)
        for p in (
            "cache.dir",
            "tracking.uri",
            "experiment_name",
            "hydra.run.dir",
            "runtime.output_dir",
            "x.run_name",
            "x.timestamp",
        )
    )
    assert not any(
        report.ignored_param(p) for p in ("model.path", "pipeline.time_limit_s", "seed", "optimizer.passes.4.seed")
    )
    names = report.short_names(["optimizer.passes.4.seed", "model.seed", "pipeline.n_micro", "model.status"])
    assert names == {
        "optimizer.passes.4.seed": "4.seed",
        "model.seed": "model.seed",
        "pipeline.n_micro": "n_micro",
        "model.status": "model.status",
    }


@pytest.mark.slow
def test_end_to_end_quickstart_sweep_over_seed(lab):
    lab.run("+experiment=quickstart", "seed=0,1", "-m", timeout=300)
    rows = report.collect("quickstart", f"sqlite:///{lab.db}")
    assert len(rows) == 4 and all(list(r["params"]) == ["seed"] for r in rows)
    for r in rows:
        base = next(o for o in rows if o["placer"] == "single" and o["params"] == r["params"])
        assert r["single_run_id"] == base["run_id"]
        assert r["speedup_vs_single"] == pytest.approx(base["step_s"] / r["step_s"])
        assert r["memory_limit_bytes"] == {d: 4.0e9 for d in DEVS}


_NO_TF = "import sys, {mods}; print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))"


@pytest.mark.parametrize(
    "mods",
    [
        "orchestrator.report.cli, orchestrator.app, orchestrator.tracking, orchestrator.callbacks",
        pytest.param("backends.torch, orchestrator.registry", marks=[pytest.mark.slow, pytest.mark.torch]),
    ],
)
def test_commands_that_do_not_touch_tensorflow_do_not_import_it(mods):
    """No TensorFlow banner from the report, the default job or a PyTorch job: they never import TensorFlow."""
    import subprocess
    import sys
    from pathlib import Path

    if "torch" in mods:
        pytest.importorskip("torch")
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root))
    code = _NO_TF.format(mods=mods)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.split() == ["[]"], out.stderr[-2000:]
