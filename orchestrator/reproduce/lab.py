"""The lab's side of a scoreboard entry: its presets' job runs in the MLflow store, reduced to one value per item.

`job_runs` reads every job run (sweep parents left out) of the named experiments as a pandas DataFrame, newest
first, keeping status ok and oom. The reducers turn such a frame into {item: value or None (out of memory)}:

* `newest`: the newest run of each item (one config-group choice or param, or several joined by "/");
* `normalized_mean`: for the thesis' bar charts, each run's value divided by the best value of its group (same
  graph and scheduler, say), then the geometric mean per item over the groups: the item's typical factor over the
  best, so that graphs of different sizes weigh the same; only groups in which every item ran count;
* `group_mean`: the mean per item over the runs (e.g. traffic per graph over every strategy); with `pair` given,
  only over the pairs (e.g. partitioner and scheduler) that ran without OOM for every item, so that an OOM on one
  graph does not take the strategy out of that graph's mean only.

Every reducer works on the columns MLflow gives (``params.<name>``, ``metrics.<name>``, ``tags.<name>``). A
metric named ``"a|b"`` is a's value where the run has one, else b's (`PLACEMENT_TIME`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

Values = dict[str, float | None]

#: A placement time: the CPU time of the placing process (result.json ``placement_cpu_s``), else the wall clock
#: of runs made before it was recorded. On the lab's shared machine other jobs stretch the wall clock, not the
#: CPU time (24 Nov: the same Celeritas placement took 0.95 s and 16.4 s of wall clock at loads 2 and 10); the
#: papers timed dedicated machines, where the two agree for a single-threaded placer.
PLACEMENT_TIME = "placement_cpu_s|placement_time_s"


def metric_value(row: Any, name: str) -> float | None:
    """The run's value of metric `name` (``"a|b"``: a's, else b's); None when missing or NaN."""
    for part in name.split("|"):
        v = row.get(f"metrics.{part}")
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            return float(v)
    return None


def job_runs(experiments: Sequence[str], tracking_uri: str | None = None, fallback_uri: str | None = None) -> Any:
    """The job runs (status ok or oom) of the experiments, newest first; an empty frame when there are none.

    With `fallback_uri`, an experiment that has no runs in the main store is read from that store instead, and
    its rows get ``store = "fallback"`` (``"main"`` otherwise), so that a page regenerated from a partial re-run
    says which entries still read older runs."""
    import mlflow
    import pandas as pd

    def search(uri: str | None, name: str) -> Any:
        if uri:
            mlflow.set_tracking_uri(uri)
        try:
            return mlflow.search_runs(experiment_names=[name], order_by=["attributes.start_time DESC"])
        except Exception as exc:  # a missing experiment is "not run", not a failure
            log.debug("no runs of %s in %s: %s", name, uri, exc)
            return None

    frames = []
    for name in experiments:
        df, store = search(tracking_uri, name), "main"
        if (df is None or not len(df)) and fallback_uri:
            df, store = search(fallback_uri, name), "fallback"
        if df is not None and len(df):
            df = df.assign(experiment_name=name, store=store)
            frames.append(df)
    if tracking_uri:
        mlflow.set_tracking_uri(tracking_uri)
    if not frames:
        return pd.DataFrame()
    df = pd.concat(frames, ignore_index=True)
    if "tags.kind" in df:
        df = df[df["tags.kind"].fillna("") != "sweep"]
    if "tags.status" in df:
        df = df[df["tags.status"].isin(["ok", "oom"])]
    return df.sort_values("start_time", ascending=False)


def where(df: Any, conditions: Mapping[str, str]) -> Any:
    """Rows whose params (or tags, where no such param column exists) equal the given values."""
    for k, v in conditions.items():
        col = f"params.{k}" if f"params.{k}" in df else f"tags.{k}"
        if col not in df:
            return df.iloc[0:0]
        df = df[df[col].astype(str) == str(v)]
    return df


def memory_limited(df: Any) -> Any:
    """Rows of runs under insufficient memory: ``cluster.need_fraction`` (param ``need_fraction``) below 1, or no
    such param (a preset that does not sweep it). The memory-limited presets sweep a fraction below 1 (the
    paper's limit) together with 2.0 (their sufficient-memory baseline): a table of the limited case must not
    read the baseline's runs."""
    col = "params.need_fraction"
    if col not in df:
        return df
    frac = df[col].astype(float)
    return df[frac.isna() | (frac < 1.0)]


def item_of(row: Any, item: Sequence[str]) -> str:
    parts = []
    for k in item:
        v = row.get(f"params.{k}")
        if v is None or (isinstance(v, float) and math.isnan(v)):
            v = row.get(f"tags.{k}")
        parts.append(str(v))
    return "/".join(parts)


def _value(row: Any, name: str) -> float | None:
    if row.get("tags.status") == "oom":
        return None
    return metric_value(row, name)


def newest(df: Any, item: Sequence[str], metric: str, any_status: bool = False) -> Values:
    """The newest run's value of each item (None when it ran out of memory or lacks the metric). With
    `any_status`, the newest run that has the metric, whatever its status (a property of the graph, such as its
    CCR, does not depend on whether the placement fitted)."""
    out: Values = {}
    for _, row in df.iterrows():
        k = item_of(row, item)
        if any_status:
            v = metric_value(row, metric)
            if k not in out and v is not None:
                out[k] = v
        elif k not in out:
            out[k] = _value(row, metric)
    return out


def normalized_mean(df: Any, item: Sequence[str], metric: str, group: Sequence[str]) -> Values:
    """Geometric mean over groups of value / best value in the group (newest run per item and group)."""
    per_group: dict[str, Values] = {}
    for _, row in df.iterrows():
        g = item_of(row, group)
        k = item_of(row, item)
        per_group.setdefault(g, {})
        if k not in per_group[g]:
            per_group[g][k] = _value(row, metric)
    # only groups where every item ran (a group still being swept would favour the items it has)
    every = {k for vals in per_group.values() for k in vals}
    logs: dict[str, list[float]] = {}
    for vals in per_group.values():
        if set(vals) != every:
            continue
        finite = [v for v in vals.values() if v is not None and v > 0]
        if not finite:
            continue
        best = min(finite)
        for k, v in vals.items():
            if v is not None and v > 0:
                logs.setdefault(k, []).append(math.log(v / best))
    return {k: math.exp(sum(v) / len(v)) for k, v in logs.items()}


def group_mean(df: Any, item: Sequence[str], metric: str, pair: Sequence[str] = ()) -> Values:
    """Mean of the metric per item (newest run per item and pair; see the module docstring)."""
    cells: dict[str, dict[str, float | None]] = {}
    for idx, row in df.iterrows():
        k, p = item_of(row, item), item_of(row, pair) if pair else str(row.get("tags.mlflow.runName", idx))
        cells.setdefault(k, {})
        if p not in cells[k]:
            cells[k][p] = _value(row, metric)
    if pair and cells:
        common = set.intersection(*(set(p for p, v in c.items() if v is not None) for c in cells.values()))
        cells = {k: {p: v for p, v in c.items() if p in common} for k, c in cells.items()}
    out: Values = {}
    for k, c in cells.items():
        xs = [v for v in c.values() if v is not None]
        if xs:
            out[k] = sum(xs) / len(xs)
    return out
