"""Writing a report (Markdown, CSV, chart) and summarizing a sweep on its parent run (`summarize_sweep`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from .chart import chart
from .fidelity import fidelity_markdown, scatter, write_fidelity_csv
from .rows import rows_from_runs
from .store import _all_runs, _client
from .table import _label, _where, markdown, write_csv

log = logging.getLogger(__name__)


def write_report(rows: list[dict[str, Any]], experiment: str, out: Path) -> list[Path]:
    """report.md, report.csv and (with rows) step_time.png into `out`; where runs were both predicted and
    measured, also the predicted-against-measured section of report.md, fidelity.csv and
    predicted_vs_measured.png (orchestrator.report.fidelity). Returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "report.md", out / "report.csv"]
    fid = fidelity_markdown(rows)
    paths[0].write_text(markdown(rows, experiment) + fid)
    write_csv(rows, paths[1])
    if rows:
        paths.append(chart(rows, out / "step_time.png", experiment))
    if fid:
        paths.append(write_fidelity_csv(rows, out / "fidelity.csv"))
        drawn = scatter(rows, out / "predicted_vs_measured.png", experiment)
        if drawn is not None:
            paths.append(drawn)
    return paths


def best(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The rank-1 row of the first group (the fastest predicted successful placement), if any is ok."""
    ok = [r for r in rows if r["rank"] == 1 and r["status"] == "ok"]
    return ok[0] if ok else None


def summarize_sweep(tracking_uri: str, parent_run_id: str, out: Path | None = None) -> dict[str, Any] | None:
    """Give a sweep's parent run the comparison of its child runs: the report (report.md, report.csv and the
    chart) as artifacts under `report/`, and the best placement (rank 1, the first group) as tags `best_placer`,
    `best_label` and metrics `best_predicted_step_s`, `best_speedup_vs_single`, `best_speedup_vs_expert`; the
    experiment's runs-table view (runs_view.set_runs_view) with this sweep unfolded; logs the runs page URL.
    Returns the best row (None when no child succeeded). Call it from the sweep callback's on_multirun_end,
    before the parent run is terminated."""
    import tempfile

    from mlflow.entities import Metric, RunTag

    client = _client(tracking_uri)
    parent = client.get_run(parent_run_id)
    runs = _all_runs(client, [parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent_run_id}'")
    rows = rows_from_runs(runs)
    name = client.get_experiment(parent.info.experiment_id).name
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(out) if out is not None else Path(tmp)
        paths = write_report(rows, f"{name} (sweep {parent.info.run_name})", folder)
        for p in paths:
            client.log_artifact(parent_run_id, str(p), "report")
    top = best(rows)
    ts = int(1000 * __import__("time").time())
    tags = [RunTag("n_rows", str(len(rows)))]
    metrics = []
    if top is not None:
        tags += [
            RunTag("best_placer", top["placer"] or top["pipeline"]),
            RunTag("best_label", _label(top) + _where(top)),
        ]
        for k in ("predicted_step_s", "measured_step_s", "speedup_vs_single", "speedup_vs_expert"):
            if top.get(k) is not None:
                metrics.append(Metric(f"best_{k}", float(top[k]), ts, 0))
    client.log_batch(parent_run_id, metrics=metrics, tags=tags)
    from ..runs_view import VIEW_KEY, runs_page_url, set_runs_view

    set_runs_view(client, parent.info.experiment_id, expanded=[parent_run_id])
    log.info(
        "sweep %s: best %s; runs: %s",
        parent.info.run_name,
        _label(top) + _where(top) if top else "none (no job succeeded)",
        runs_page_url(parent.info.experiment_id, share_key=VIEW_KEY),
    )
    return top
