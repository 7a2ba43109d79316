"""MLflow tracking: one run per job, a parent run per multirun, schema created before jobs start.

Params are the flattened leaves of the resolved config (dotted keys, values cut at 500 characters); the whole
config is also logged as `config.yaml`. Metrics are the numbers of result.json. A job that fails ends its run
with status FAILED and an `error` tag, so no failed run looks successful.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PARENT_FILE = "mlflow_parent_run.txt"
MAX_PARAM_LEN = 500


def flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d, Mapping):
        for k, v in d.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif isinstance(d, (list, tuple)) and d and any(isinstance(x, (Mapping, list, tuple)) for x in d):
        for i, v in enumerate(d):
            out.update(flatten(v, f"{prefix}{i}."))
    else:
        out[prefix[:-1]] = d
    return out


def ensure_schema(uri: str, experiment: str) -> str:
    """Create the tracking store's schema and the experiment once (in the launching process); return the
    experiment id. Concurrent first use of a fresh SQLite store races, so call this before parallel jobs."""
    import mlflow
    from mlflow.tracking import MlflowClient

    if uri.startswith("sqlite:///"):
        Path(uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is not None:
        return exp.experiment_id
    try:
        return client.create_experiment(experiment)
    except Exception:  # another process created it first
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            raise
        return exp.experiment_id
    finally:
        mlflow.set_tracking_uri(uri)


class RunTracker:
    """Wraps one MLflow run for a job; every method is a no-op when tracking is disabled."""

    def __init__(
        self,
        uri: str,
        experiment: str,
        enabled: bool = True,
        run_name: str | None = None,
        parent_run_id: str | None = None,
        tags: Mapping[str, str] | None = None,
    ):
        self.enabled = enabled
        self.run_id: str | None = None
        if not enabled:
            return
        from .mlflow_store import owner_tags, prepare_store
        from .mlflow_store import retrying_mlflow as mlflow

        self._mlflow = mlflow
        prepare_store(uri, experiment)
        mlflow.set_tracking_uri(uri)
        mlflow.set_experiment(experiment)
        kwargs: dict[str, Any] = {"run_name": run_name, "tags": {**dict(tags or {}), **owner_tags()}}
        if parent_run_id:
            kwargs["parent_run_id"] = parent_run_id
        run = mlflow.start_run(**kwargs)
        self.run_id = run.info.run_id

    def log_params(self, params: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        items = [(k, "None" if v is None else str(v)[:MAX_PARAM_LEN]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self._mlflow.log_params(dict(items[i : i + 100]))

    def log_metrics(self, metrics: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        clean = {}
        for k, v in metrics.items():
            if isinstance(v, bool):
                v = float(v)
            if isinstance(v, (int, float)) and not math.isnan(v) and not math.isinf(v):
                clean[_metric_name(k)] = float(v)
        if clean:
            self._mlflow.log_metrics(clean)

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        if self.enabled:
            self._mlflow.set_tags({k: str(v)[:5000] for k, v in tags.items()})

    def log_artifacts(self, paths: Iterable[str | os.PathLike], artifact_path: str | None = None) -> None:
        if not self.enabled:
            return
        for p in paths:
            if os.path.exists(p):
                self._mlflow.log_artifact(os.fspath(p), artifact_path)

    def log_dict(self, obj: Any, name: str) -> None:
        if self.enabled:
            self._mlflow.log_dict(obj, name)

    def end(self, ok: bool) -> None:
        if self.enabled and self.run_id:
            self._mlflow.end_run(status="FINISHED" if ok else "FAILED")


def _metric_name(k: str) -> str:
    # MLflow metric names allow alphanumerics, _ - . / and spaces
    return "".join(ch if ch.isalnum() or ch in "_-./ " else "_" for ch in k)


def read_parent_run_id(sweep_dir: str | os.PathLike | None) -> str | None:
    if sweep_dir is None:
        return None
    p = Path(sweep_dir) / PARENT_FILE
    return p.read_text().strip() if p.exists() else None
