"""Reading the MLflow store for the report: a client, every run of experiments (paged), a run's result.json
artifact, the experiments with runs."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

log = logging.getLogger(__name__)


def _result_json(run: Any) -> dict[str, Any] | None:
    """The run's result.json artifact (best effort: None when it cannot be read)."""
    uri = run.info.artifact_uri or ""
    try:
        parsed = urlparse(uri)
        if parsed.scheme in ("", "file"):
            p = Path(unquote(parsed.path) if parsed.scheme == "file" else uri) / "result.json"
            return json.loads(p.read_text()) if p.is_file() else None
        import mlflow

        return mlflow.artifacts.load_dict(uri.rstrip("/") + "/result.json")
    except Exception as exc:  # a missing or unreadable artifact only costs the column
        log.debug("no result.json for run %s: %s", run.info.run_id, exc)
        return None


def _client(tracking_uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


def _all_runs(client: Any, exp_ids: list[str], filter_string: str = "") -> list[Any]:
    """Every run of the experiments, newest first (search_runs pages at 1000)."""
    out: list[Any] = []
    token = None
    while True:
        page = client.search_runs(
            exp_ids,
            filter_string,
            max_results=1000,
            order_by=["attributes.start_time DESC"],
            page_token=token,
        )
        out.extend(page)
        token = page.token
        if not token:
            return out


def list_experiments(tracking_uri: str) -> list[tuple[str, str, int, int]]:
    """(name, id, job runs, sweeps) for every experiment in the store with at least one run, most runs first."""
    client = _client(tracking_uri)
    out = []
    for e in client.search_experiments():
        runs = _all_runs(client, [e.experiment_id])
        sweeps = sum(1 for r in runs if r.data.tags.get("kind") == "sweep")
        if runs:
            out.append((e.name, e.experiment_id, len(runs) - sweeps, sweeps))
    out.sort(key=lambda t: (-t[2], t[0]))
    return out
