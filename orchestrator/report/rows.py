"""The report's rows from MLflow runs: one per distinct configuration (KEY plus the params a sweep varies), its
newest successful run, speed-ups over the single-device and expert placements, ranked within its group (see
the orchestrator.report docstring)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .store import _all_runs, _client, _result_json

KEY = ("model", "cluster", "optimizer", "placer", "scheduler", "pipeline")

#: Logged params that never make rows distinct: where a run wrote or cached things, not what it computed.
#: A param is ignored when its dotted name starts with one of IGNORED_PREFIXES, equals one of IGNORED_NAMES, or
#: its last component is one of IGNORED_LEAVES or ends with one of IGNORED_SUFFIXES (`output_dir`, `tracking_uri`).
IGNORED_PREFIXES = ("tracking.", "cache.", "hydra.")
IGNORED_NAMES = frozenset({"experiment_name", "experiment"})
IGNORED_LEAVES = frozenset(
    {"dir", "outdir", "logdir", "run_name", "run_id", "timestamp", "time_stamp", "date", "now", "cwd"}
)
IGNORED_SUFFIXES = ("_dir", "_uri")

#: Column names of the report that a varying param's short name must not take.
_RESERVED = frozenset(KEY) | {
    "rank",
    "status",
    "step_s",
    "measured_step_s",
    "measured_step_iqr_s",
    "host_interference",
    "predicted_step_s",
    "speedup_vs_single",
    "speedup_vs_expert",
    "measured_speedup_vs_single",
    "measured_speedup_vs_expert",
    "placement_time_s",
    "traffic_bytes",
    "bubble_rate",
    "search_time_s",
    "run_id",
    "predicted step",
    "measured step",
    "vs single",
    "vs expert",
    "memory limit",
    "placement time",
    "traffic",
    "bubble rate",
    "search time",
}

#: Statuses that are results (an out-of-memory placement is one); anything else is a failed run.
RESULT_STATUSES = ("ok", "oom")


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def ignored_param(name: str) -> bool:
    """Whether a logged param is volatile (output/cache folders, tracking URI, run names, timestamps)."""
    leaf = name.rsplit(".", 1)[-1].lower()
    return (
        name.startswith(IGNORED_PREFIXES)
        or name in IGNORED_NAMES
        or leaf in IGNORED_LEAVES
        or leaf.endswith(IGNORED_SUFFIXES)
    )


def _sort_value(v: str | None) -> tuple:
    if v is None:
        return (2, "")
    n = _num(v)
    return (0, n, "") if n is not None else (1, 0.0, v)


def varying_params(keys: list[tuple], params: list[dict[str, str]]) -> list[str]:
    """The params that make runs distinct beyond their fixed KEY, in column order.

    keys[i] and params[i] are run i's KEY values and logged params (ignored ones already dropped). A param is a
    candidate when two runs with the same KEY log different values of it; params that only follow a KEY choice
    (placer.threshold when placer varies) are not, nor is a param that some runs lack and the others log with a
    single value (config keys added or removed between code versions). Candidates are then taken shallowest
    first (fewest dots, then by name) and kept only when they split runs that the KEY and the params kept so far
    do not: `thesis_graph` is kept and the `model.generator.*` values it implies are not.
    """
    groups: dict[tuple, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    names = sorted({n for p in params for n in p})
    cands = [n for n in names if any(len({params[i][n] for i in g if n in params[i]}) > 1 for g in groups.values())]
    cands.sort(key=lambda n: (n.count("."), n))
    kept: list[str] = []
    blocks = list(groups.values())
    for n in cands:
        split: list[list[int]] = []
        for b in blocks:
            sub: dict[str | None, list[int]] = {}
            for i in b:
                sub.setdefault(params[i].get(n), []).append(i)
            split.extend(sub.values())
        if len(split) > len(blocks):
            kept.append(n)
            blocks = split
    return kept


def short_names(names: Iterable[str]) -> dict[str, str]:
    """Column name of each varying param: the shortest tail of its dotted name that no other varying param (nor
    a column of the report) shares: `optimizer.passes.4.bound` -> `bound`."""
    names = list(names)
    parts = {n: n.split(".") for n in names}
    out: dict[str, str] = {}
    for n in names:
        for k in range(1, len(parts[n]) + 1):
            tail = ".".join(parts[n][-k:])
            if tail not in _RESERVED and not any(m != n and ".".join(parts[m][-k:]) == tail for m in names):
                out[n] = tail
                break
        else:
            out[n] = n if n not in _RESERVED else f"params.{n}"
    return out


def _per_device(metrics: dict[str, float], prefix: str) -> dict[str, float]:
    return {k[len(prefix) :]: v for k, v in metrics.items() if k.startswith(prefix) and k != prefix + "max"}


def _memory_limits(run: Any) -> dict[str, float | None]:
    """Per-device memory limits: `memory_limit_bytes.<dev>` metrics where a run logs them, else result.json's
    `memory_limit_bytes` (None: unlimited)."""
    lim = _per_device(run.data.metrics, "memory_limit_bytes.")
    if lim:
        return dict(lim)
    res = _result_json(run) or {}
    raw = res.get("memory_limit_bytes") or {}
    return {d: _num(v) for d, v in raw.items()} if isinstance(raw, dict) else {}


def _param(params: dict[str, str], *names: str) -> float | None:
    """The first of `names` logged (short params first, then the dotted config key of older runs)."""
    for name in names:
        v = params.get(name)
        if v not in (None, "None", "null", ""):
            return _num(v)
    return None


#: Speed-up bases, most exact first: the same model, cluster, pipeline and varying params (placer.* excepted)
#: always; then the same optimizer and scheduler, else the same optimizer (any scheduler), else any.
_BASE_LEVELS = (("optimizer", "scheduler"), ("optimizer",), ())


def _base(row: dict[str, Any], rows: list[dict[str, Any]], ref: str) -> dict[str, Any] | None:
    """The `ref` placer's run (single or expert) to compare `row` with: a successful run of the same model,
    cluster and pipeline at the same values of every varying param outside placer.*; among them the one with
    the same optimizer and scheduler (and optimizer.* / scheduler.* params), falling back to the same optimizer,
    then to any, where that leaves exactly one run."""

    def same(o: dict[str, Any], groups: tuple[str, ...]) -> bool:
        if any(o[k] != row[k] for k in ("model", "cluster", "pipeline") + groups):
            return False
        for p, v in row["params"].items():
            group = p.split(".", 1)[0]
            if group == "placer" or (group in ("optimizer", "scheduler") and group not in groups):
                continue
            if o["params"].get(p) != v:
                return False
        return True

    cands = [o for o in rows if o["placer"] == ref and o["status"] == "ok" and o["step_s"]]
    for level, groups in enumerate(_BASE_LEVELS):
        match = [o for o in cands if same(o, groups)]
        if level == 0 and match:
            return match[0]
        if len(match) == 1:
            return match[0]
    return None


def _status(run: Any) -> str:
    t = run.data.tags.get("status")
    if t:
        return t
    return "error" if run.info.status == "FAILED" else ("running" if run.info.status == "RUNNING" else "?")


def _row(run: Any, key: tuple, vary: list[str], values: tuple, prm: dict[str, str]) -> dict[str, Any]:
    t, m = run.data.tags, run.data.metrics
    measured = _num(m.get("measured_step_s"))
    predicted = _num(m.get("predicted_step_s"))
    return {
        **dict(zip(KEY, key)),
        "params": dict(zip(vary, values)),
        "status": _status(run),
        "measured_step_s": measured,
        "measured_step_iqr_s": _num(m.get("measured_step_iqr_s")),
        # the share of the workers' cores other processes used while it measured (backends/interference.py)
        "host_interference": _num(m.get("run.host_interference")),
        "predicted_step_s": predicted,
        "step_s": predicted if predicted is not None else measured,
        "placement_time_s": _num(m.get("placement_time_s")),
        "traffic_bytes": _num(m.get("traffic_bytes")),
        "bubble_rate": _num(m.get("bubble_rate")),
        "search_time_s": _num(m.get("search_time_s")),
        "need_fraction": _param(prm, "need_fraction", "cluster.need_fraction"),
        "memory_fraction": _param(prm, "memory_fraction", "cluster.memory_fraction"),
        "memory_limit_bytes": _memory_limits(run),
        "peak_memory_bytes": _per_device(m, "peak_memory_bytes."),
        "measured_peak_memory_bytes": _per_device(m, "measured_peak_memory_bytes."),
        "framework_reserve_bytes": _per_device(m, "framework_reserve_bytes."),
        "run_id": run.info.run_id,
        "start_time": run.info.start_time,
        "error": t.get("error", ""),
        "failures": [],
    }


def _group(row: dict[str, Any]) -> tuple:
    """What a row's placement is compared under: model, cluster and the varying params outside the placer
    group (a swept setting such as the memory fraction or the perturbation bound is a condition; the
    placer, optimizer and scheduler choices, the KEY tags, are what competes)."""
    extra = tuple(_sort_value(v) for p, v in row["params"].items() if p.split(".", 1)[0] != "placer")
    return (row["model"], row["cluster"]) + extra


def _rank_value(row: dict[str, Any]) -> tuple:
    cls = 0 if row["status"] == "ok" and row["step_s"] is not None else (1 if row["status"] == "oom" else 2)
    return (cls, row["step_s"] if cls == 0 else 0.0)


def collect(experiment: str, tracking_uri: str, latest_sweep: bool = False) -> list[dict[str, Any]]:
    """Rows of the report from the experiment's runs (sweep parent runs excluded), grouped and ranked (see the
    module docstring). Each row holds the KEY columns, `params` (the varying params' values, same names in every
    row; None where a run lacks one), `rank` (1 = fastest predicted in its group), `failures` (failed runs newer
    than the row's run, or every run of the row when none succeeded) and the figures."""
    client = _client(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        names = [e.name for e in client.search_experiments()]
        raise SystemExit(f"no MLflow experiment named {experiment!r} at {tracking_uri}; experiments: {names}")
    return rows_from_runs(_all_runs(client, [exp.experiment_id]), latest_sweep)


def rows_from_runs(runs: list[Any], latest_sweep: bool = False) -> list[dict[str, Any]]:
    """`collect` on a list of runs, newest first."""
    parents = [r for r in runs if r.data.tags.get("kind") == "sweep"]
    if latest_sweep and parents:
        keep = parents[0].info.run_id
        runs = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == keep]
    runs = [r for r in runs if r.data.tags.get("kind") != "sweep"]
    keys = [tuple(r.data.tags.get(k, "") for k in KEY) for r in runs]
    params = [{k: v for k, v in r.data.params.items() if not ignored_param(k)} for r in runs]
    vary = varying_params(keys, params)
    rows: dict[tuple, dict[str, Any]] = {}
    failed: dict[tuple, list[dict[str, Any]]] = {}
    for r, key, prm in zip(runs, keys, params):  # newest first
        values = tuple(prm.get(p) for p in vary)
        k = key + values
        if k in rows:
            continue
        row = _row(r, key, vary, values, prm)
        if row["status"] in RESULT_STATUSES:
            row["failures"] = failed.pop(k, [])
            rows[k] = row
        else:  # a failed (or unfinished) run never hides a result; it is listed
            failed.setdefault(k, []).append(row)
    for k, fails in failed.items():  # no successful run at all: the newest failure is the row
        rows[k] = {**fails[0], "failures": fails}
    out = list(rows.values())
    for row in out:
        ok = row["status"] == "ok" and row["step_s"]
        for ref in ("single", "expert"):
            base = _base(row, out, ref) if ok else None
            row[f"speedup_vs_{ref}"] = base["step_s"] / row["step_s"] if base else None
            row[f"{ref}_run_id"] = base["run_id"] if base else None
            both = base is not None and base["measured_step_s"] and row["measured_step_s"]
            row[f"measured_speedup_vs_{ref}"] = (
                base["measured_step_s"] / row["measured_step_s"] if base is not None and both else None
            )
    out.sort(key=lambda r: (_group(r), _rank_value(r), r["optimizer"], r["scheduler"], r["placer"], r["pipeline"]))
    rank, prev = 0, None
    for r in out:
        g = _group(r)
        rank = 1 if g != prev else rank + 1
        prev = g
        r["rank"] = rank
    return out
