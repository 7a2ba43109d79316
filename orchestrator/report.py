"""Paper-style tables from the MLflow runs of an experiment: which placement is best, by how much, and why.

    python -m orchestrator.report                       # list the experiments in the store, with run counts
    python -m orchestrator.report EXPERIMENT [--tracking-uri URI] [--out DIR] [--latest-sweep]

Rows. One row per distinct configuration: the fixed KEY (model, cluster, optimizer, placer, scheduler, pipeline:
the jobs' config-group choices, logged as tags) plus every logged param that a sweep varies (`varying_params`:
e.g. `optimizer.passes.4.bound` in baechi_sensitivity, `pipeline.n_micro` in tessel_search_time, `need_fraction`
in the memory sweeps). A row shows the newest *successful* run of its configuration (status ok or oom: an
out-of-memory placement is a result); runs that failed (status error) never replace it and are listed under the
table, with the row marked when its newest run failed.

Ranking. Rows are grouped by what the placements are compared under (model, cluster and the varying params
outside the placer group: the memory fraction, the perturbation bound, ...) and
ranked within a group by the *predicted* step (the simulator's figure for the placement, deterministic), OOM
and failed rows last. The measured step (the median of the measured steps) sits beside it with its spread (the
inter-quartile range, where the run logged `measured_step_iqr_s`); where measured medians differ by less than
their spread the report says so instead of ordering them by noise. Speed-ups over the single-device and the
expert placement of the same model, cluster and varying params (Baechi Tables 3 and 4; see `_base`) are given
for the predicted step and, where both ran, the measured one.

Columns whose cell is the same on every row are stated once above the table. Also shown: the device memory
limit (Table 4's "insufficient memory"), placement time, traffic, bubble rate and search time (pipeline runs),
and the simulated and the measured peak memory per device. Written as Markdown and CSV (every column), plus a
PNG chart (predicted and measured step side by side, speed-ups, peak memory per device against its limit) into
`reports/<experiment>/` (or --out).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

log = logging.getLogger(__name__)

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


def noise_notes(rows: list[dict[str, Any]]) -> list[str]:
    """Per group: the measured medians that differ from the fastest measured one by no more than the larger of
    their two spreads (IQR). Those placements are not told apart by the measurement, whatever their order."""
    notes = []
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        if r["status"] == "ok" and r["measured_step_s"] is not None:
            groups.setdefault(_group(r), []).append(r)
    for members in groups.values():
        if len(members) < 2:
            continue
        best = min(members, key=lambda r: r["measured_step_s"])
        close = []
        for r in members:
            if r is best or best["measured_step_iqr_s"] is None or r["measured_step_iqr_s"] is None:
                continue
            if r["measured_step_s"] - best["measured_step_s"] <= max(
                r["measured_step_iqr_s"], best["measured_step_iqr_s"]
            ):
                close.append(r)
        if close:
            where = _where(best)
            names = ", ".join(_label(r) for r in close)
            notes.append(
                f"Measured{where}: {names} {'is' if len(close) == 1 else 'are'} within the spread (IQR) of the "
                f"fastest measured, {_label(best)} ({_fmt(best['measured_step_s'], 's')}): the measurement does "
                "not tell them apart."
            )
        spread_missing = [r for r in members if r["measured_step_iqr_s"] is None]
        if spread_missing and len(spread_missing) == len(members):
            notes.append(
                f"Measured{_where(best)}: no spread logged (measured_step_iqr_s), so differences between measured "
                "steps may be noise."
            )
    return notes


def _label(r: dict[str, Any]) -> str:
    return r["placer"] or f"pipeline {r['pipeline']}"


def _where(r: dict[str, Any]) -> str:
    extra = ", ".join(f"{p}={v}" for p, v in r["params"].items() if p.split(".", 1)[0] != "placer")
    return f" ({extra})" if extra else ""


def _fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if unit == "x":
            return f"{v:.2f}x"
        if unit == "s":
            return f"{v * 1e3:.2f} ms" if v < 1 else f"{v:.3f} s"
        if unit == "B":
            for u, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
                if abs(v) >= f:
                    return f"{v / f:.2f} {u}"
            return f"{v:.0f} B"
        if unit == "r":
            return f"{v:.3f}"
    return str(v)


def _limit_cell(r: dict[str, Any]) -> str:
    """Device memory limit: one value when every device has the same, else min..max; `(0.3x need)` when the
    limit is a fraction of the model's need (need_fraction)."""
    lims = list(r["memory_limit_bytes"].values())
    finite = [v for v in lims if v is not None and not math.isinf(v)]
    if not lims:
        cell = "-"
    elif not finite:
        cell = "unlimited"
    elif min(finite) == max(finite) and len(finite) == len(lims):
        cell = _fmt(float(finite[0]), "B")
    else:
        top = _fmt(float(max(finite)), "B") if len(finite) == len(lims) else "inf"
        cell = f"{_fmt(float(min(finite)), 'B')}..{top}"
    if r["need_fraction"] is not None:
        need = f"{r['need_fraction']:g}x need"
        cell = need if cell == "-" else f"{cell} ({need})"
    return cell


def _columns(rows: list[dict[str, Any]]) -> tuple[list[str], dict[str, str]]:
    vary = list(rows[0]["params"]) if rows else []
    return vary, short_names(vary)


def _devices(rows: list[dict[str, Any]], field: str) -> list[str]:
    return sorted({d for r in rows for d in r[field]})


def _measured_cell(r: dict[str, Any]) -> str:
    m = _fmt(r["measured_step_s"], "s")
    if r["measured_step_s"] is not None and r["measured_step_iqr_s"] is not None:
        m += f" (IQR {_fmt(r['measured_step_iqr_s'], 's')})"
    return m


def _predicted_cell(r: dict[str, Any]) -> str:
    if r["status"] == "oom":
        return "OOM"
    if r["status"] not in RESULT_STATUSES:
        return "ERROR" if r["status"] == "error" else r["status"].upper()
    return _fmt(r["predicted_step_s"], "s")


def table(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The full table as strings: header and one list of cells per row (every column)."""
    vary, short = _columns(rows)
    devices = _devices(rows, "peak_memory_bytes")
    mdevices = _devices(rows, "measured_peak_memory_bytes")
    any_measured = any(r["measured_step_s"] is not None for r in rows)
    cols: list[tuple[str, Any]] = [
        ("rank", lambda r: str(r["rank"])),
        ("model", lambda r: r["model"] or "-"),
        ("cluster", lambda r: r["cluster"] or "-"),
        ("optimizer", lambda r: r["optimizer"] or "-"),
        ("placer", lambda r: r["placer"] or "-"),
        ("scheduler", lambda r: r["scheduler"] or "-"),
        ("pipeline", lambda r: r["pipeline"] or "-"),
    ]
    cols += [(short[p], lambda r, p=p: _fmt(r["params"][p])) for p in vary]
    cols += [
        ("memory limit", _limit_cell),
        ("predicted step", _predicted_cell),
        ("measured step", _measured_cell),
        ("vs single", lambda r: _fmt(r["speedup_vs_single"], "x")),
        ("vs expert", lambda r: _fmt(r["speedup_vs_expert"], "x")),
    ]
    if any_measured:
        cols += [
            ("measured vs single", lambda r: _fmt(r["measured_speedup_vs_single"], "x")),
            ("measured vs expert", lambda r: _fmt(r["measured_speedup_vs_expert"], "x")),
        ]
    cols += [
        ("placement time", lambda r: _fmt(r["placement_time_s"], "s")),
        ("traffic", lambda r: _fmt(r["traffic_bytes"], "B")),
        ("bubble rate", lambda r: _fmt(r["bubble_rate"], "r")),
        ("search time", lambda r: _fmt(r["search_time_s"], "s")),
    ]
    cols += [(f"peak {d}", lambda r, d=d: _fmt(r["peak_memory_bytes"].get(d), "B")) for d in devices]
    cols += [(f"measured peak {d}", lambda r, d=d: _fmt(r["measured_peak_memory_bytes"].get(d), "B")) for d in mdevices]
    head = [c for c, _ in cols]
    body = [[str(fn(r)) for _, fn in cols] for r in rows]
    for cells, r in zip(body, rows):
        if r["failures"] and r["status"] in RESULT_STATUSES:
            cells[head.index("predicted step")] += " †"  # its newest run failed: see the list below the table
    return head, body


#: Columns kept in the Markdown table even when every row has the same cell.
_ALWAYS = ("rank", "placer", "predicted step")


def split_constant(head: list[str], body: list[list[str]]) -> tuple[list[int], list[tuple[str, str]]]:
    """Indices of the columns to show, and (column, cell) of the columns whose cell is the same on every row
    (stated once above the table). With one row, only empty columns count as constant."""
    keep, same = [], []
    for j, name in enumerate(head):
        cells = {row[j] for row in body}
        empty = cells == {"-"}
        constant = len(cells) == 1 and (len(body) > 1 or empty)
        if not body or (constant and (name not in _ALWAYS or empty)):
            same.append((name, body[0][j] if body else "-"))
        else:
            keep.append(j)
    return keep, same


def markdown(rows: list[dict[str, Any]], experiment: str) -> str:
    vary, short = _columns(rows)
    head, body = table(rows)
    keep, same = split_constant(head, body)
    lines = [f"# {experiment}", ""]
    lines.append(
        "Ranked by predicted step (the simulator's, per group of model, cluster and swept settings; 1 = fastest). "
        "Measured step: median of the measured steps, with their inter-quartile range (IQR) where logged. Speed-ups "
        "(vs single, vs expert) are of the predicted step unless marked measured."
    )
    stated = [(n, c) for n, c in same if c != "-"]
    absent = [n for n, c in same if c == "-"]
    if stated:
        lines += ["", "Same on every row: " + ", ".join(f"{n} **{c}**" for n, c in stated) + "."]
    if absent:
        lines += ["", "Not recorded by any run: " + ", ".join(absent) + "."]
    lines += ["", "| " + " | ".join(head[j] for j in keep) + " |", "|" + "---|" * len(keep)]
    for cells in body:
        lines.append("| " + " | ".join(cells[j] for j in keep) + " |")
    if any(short[p] != p for p in vary):
        lines += ["", "Swept params: " + ", ".join(f"`{short[p]}` = `{p}`" for p in vary if short[p] != p) + "."]
    notes = noise_notes(rows)
    if notes:
        lines += [""] + notes
    fails = [(r, f) for r in rows for f in r["failures"]]
    if fails:

        def where(r: dict[str, Any]) -> str:
            extra = ", ".join(f"{short[p]}={r['params'][p]}" for p in vary)
            return f" ({extra})" if extra else ""

        def what(r: dict[str, Any]) -> str:
            return f"{r['placer']}/{r['scheduler']}" if r["placer"] else f"pipeline {r['pipeline']}"

        lines += ["", "Failed runs (never shown in place of a result; † marks a row whose newest run failed):"]
        for r, f in fails:
            shown = " (the row shows the run before it)" if r["status"] in RESULT_STATUSES else ""
            lines.append(
                f"- {what(r)} on {r['model']}{where(r)}, run {f['run_id'][:8]}{shown}: {f['error'] or f['status']}"
            )
    return "\n".join(lines) + "\n"


_CSV_FIELDS = [
    "rank",
    "status",
    "step_s",
    "predicted_step_s",
    "measured_step_s",
    "measured_step_iqr_s",
    "speedup_vs_single",
    "speedup_vs_expert",
    "measured_speedup_vs_single",
    "measured_speedup_vs_expert",
    "placement_time_s",
    "traffic_bytes",
    "bubble_rate",
    "search_time_s",
    "need_fraction",
    "memory_fraction",
    "run_id",
    "failed_runs",
]


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """Every column, in ranking order (a varying param named like a fixed column replaces it)."""
    vary, short = _columns(rows)
    dev_fields = [
        (f, _devices(rows, f)) for f in ("peak_memory_bytes", "measured_peak_memory_bytes", "memory_limit_bytes")
    ]
    cols = [c for c in _CSV_FIELDS if c not in short.values()]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            list(KEY) + [short[p] for p in vary] + cols + [f"{field}.{d}" for field, devs in dev_fields for d in devs]
        )
        for r in rows:
            extra = {"failed_runs": " ".join(x["run_id"] for x in r["failures"])}
            w.writerow(
                [r[k] for k in KEY]
                + [r["params"][p] for p in vary]
                + [extra[c] if c in extra else r.get(c) for c in cols]
                + [r[field].get(d) for field, devs in dev_fields for d in devs]
            )


def _chart_labels(rows: list[dict[str, Any]]) -> list[str]:
    vary, short = _columns(rows)
    head, body = table(rows)
    _, same = split_constant(head, body)
    constant = {n for n, _ in same}
    labels = []
    for r in rows:
        parts = [_label(r)]
        for col in ("scheduler", "optimizer", "model"):
            if col not in constant and r[col]:
                parts.append(r[col])
        parts += [f"{short[p]}={r['params'][p]}" for p in vary if short[p] not in constant]
        labels.append("\n".join(parts))
    return labels


def chart(rows: list[dict[str, Any]], path: Path, experiment: str) -> Path:
    """The report as a picture, rows in ranking order: (1) predicted and measured step side by side (measured
    with its IQR as an error bar; OOM/ERROR written where a bar is missing), (2) speed-up of the predicted step
    over the single-device and the expert placement (dashed line at 1x), (3) peak memory per device (simulated)
    with each row's device limit drawn as a black tick. Written with bbox_inches="tight", so nothing is clipped."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = _chart_labels(rows)
    n = len(rows)
    x = list(range(n))
    devices = _devices(rows, "peak_memory_bytes")
    show_speed = any(r["speedup_vs_single"] or r["speedup_vs_expert"] for r in rows)
    show_mem = bool(devices)
    panels = 1 + show_speed + show_mem
    width = max(7.0, 0.75 * n + 2.5)
    fig, axes = plt.subplots(panels, 1, figsize=(width, 3.2 * panels + 0.3 * max(lb.count("\n") for lb in labels)))
    axes = list(axes) if panels > 1 else [axes]
    ax = axes[0]
    w = 0.38
    pred = [r["predicted_step_s"] if r["status"] == "ok" and r["predicted_step_s"] else 0.0 for r in rows]
    meas = [r["measured_step_s"] if r["status"] == "ok" and r["measured_step_s"] else 0.0 for r in rows]
    iqr = [r["measured_step_iqr_s"] or 0.0 for r in rows]
    top = max(pred + [m + e for m, e in zip(meas, iqr)] + [1e-12])
    scale, unit = (1e3, "ms") if top < 1 else (1.0, "s")
    off = w / 2 if any(meas) else 0.0  # side by side with the measured bars, centred when nothing was measured
    ax.bar([i - off for i in x], [p * scale for p in pred], w, color="#8DA0CB", label="predicted (simulator)")
    if any(meas):
        ax.bar(
            [i + w / 2 for i in x],
            [m * scale for m in meas],
            w,
            yerr=[e * scale / 2 if m else 0.0 for e, m in zip(iqr, meas)],
            capsize=3,
            color="#4C72B0",
            label="measured (median; bar: IQR wide)",
        )
    for i, r in enumerate(rows):
        if r["status"] != "ok":
            ax.text(i, top * scale * 0.02, _predicted_cell(r), ha="center", va="bottom", color="#C44E52", rotation=90)
    ax.set_ylabel(f"step time ({unit})")
    ax.set_title("step time per placement, ranked by predicted step (lower is better)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", linewidth=0.3, alpha=0.6)
    k = 1
    if show_speed:
        ax = axes[k]
        k += 1
        for off, ref, color in ((-w / 2, "single", "#55A868"), (w / 2, "expert", "#DD8452")):
            vals = [r[f"speedup_vs_{ref}"] or 0.0 for r in rows]
            ax.bar(
                [i + off for i in x], vals, w, color=color, label=f"vs {ref} device" if ref == "single" else "vs expert"
            )
        ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8)
        ax.set_ylabel("speed-up (x)")
        ax.set_title("speed-up of the predicted step (higher is better; dashed: no gain)", fontsize=10)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.grid(axis="y", linewidth=0.3, alpha=0.6)
    if show_mem:
        ax = axes[k]
        peak = max([v for r in rows for v in r["peak_memory_bytes"].values()] + [1.0])
        mscale, munit = next(((f, u) for f, u in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")) if peak >= f), (1.0, "B"))
        bw = 0.8 / max(1, len(devices))
        palette = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]
        for j, d in enumerate(devices):
            xs = [i - 0.4 + bw * (j + 0.5) for i in x]
            ax.bar(
                xs, [(r["peak_memory_bytes"].get(d) or 0.0) / mscale for r in rows], bw, color=palette[j % 8], label=d
            )
            for xi, r in zip(xs, rows):
                lim = r["memory_limit_bytes"].get(d)
                if lim is not None and math.isfinite(lim) and lim <= 4 * peak:
                    ax.plot([xi - bw / 2, xi + bw / 2], [lim / mscale] * 2, color="black", linewidth=1.5)
        ax.plot([], [], color="black", linewidth=1.5, label="device limit")
        ax.set_ylabel(f"peak memory ({munit})")
        ax.set_title("simulated peak memory per device against its limit", fontsize=10)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), ncol=1 + len(devices) // 12)
        ax.grid(axis="y", linewidth=0.3, alpha=0.6)
    for a in axes:
        a.set_xticks(x)
        a.set_xticklabels(labels if a is axes[-1] else [""] * n, fontsize=8)
        a.set_xlim(-0.6, n - 0.4)
    fig.suptitle(f"{experiment}: which placement is best", fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def bar_chart(rows: list[dict[str, Any]], path: Path, experiment: str) -> None:
    """Older name of `chart`."""
    chart(rows, path, experiment)


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


def write_report(rows: list[dict[str, Any]], experiment: str, out: Path) -> list[Path]:
    """report.md, report.csv and (with rows) step_time.png into `out`; returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "report.md", out / "report.csv"]
    paths[0].write_text(markdown(rows, experiment))
    write_csv(rows, paths[1])
    if rows:
        paths.append(chart(rows, out / "step_time.png", experiment))
    return paths


def best(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The rank-1 row of the first group (the fastest predicted successful placement), if any is ok."""
    ok = [r for r in rows if r["rank"] == 1 and r["status"] == "ok"]
    return ok[0] if ok else None


def summarize_sweep(tracking_uri: str, parent_run_id: str, out: Path | None = None) -> dict[str, Any] | None:
    """Give a sweep's parent run the comparison of its child runs: the report (report.md, report.csv and the
    chart) as artifacts under `report/`, and the best placement (rank 1, the first group) as tags `best_placer`,
    `best_label` and metrics `best_predicted_step_s`, `best_speedup_vs_single`, `best_speedup_vs_expert`; the
    experiment's runs-table view (tracking.set_runs_view) with this sweep unfolded; logs the runs page URL.
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
    from .tracking import VIEW_KEY, runs_page_url, set_runs_view

    set_runs_view(client, parent.info.experiment_id, expanded=[parent_run_id])
    log.info(
        "sweep %s: best %s; runs: %s",
        parent.info.run_name,
        _label(top) + _where(top) if top else "none (no job succeeded)",
        runs_page_url(parent.info.experiment_id, share_key=VIEW_KEY),
    )
    return top


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m orchestrator.report", description=__doc__.splitlines()[0])
    ap.add_argument(
        "experiment", nargs="?", help="MLflow experiment name (an experiment preset's experiment_name); none: list them"
    )
    ap.add_argument(
        "--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", f"sqlite:///{Path.cwd() / 'mlflow.db'}")
    )
    ap.add_argument("--out", default=None, help="output folder (default reports/<experiment>)")
    ap.add_argument("--latest-sweep", action="store_true", help="only the runs of the newest sweep")
    args = ap.parse_args(argv)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    if args.experiment is None:
        exps = list_experiments(args.tracking_uri)
        if not exps:
            print(f"no runs in the MLflow store {args.tracking_uri}")
            return
        print(f"experiments in {args.tracking_uri}:")
        width = max(len(e[0]) for e in exps)
        for name, eid, n, sweeps in exps:
            print(f"  {name:<{width}}  {n:4d} runs  {sweeps:3d} sweeps  (id {eid})")
        print("\nreport one:  python -m orchestrator.report NAME")
        return
    rows = collect(args.experiment, args.tracking_uri, args.latest_sweep)
    out = Path(args.out or Path("reports") / args.experiment)
    paths = write_report(rows, args.experiment, out)
    print(paths[0].read_text())
    print(f"written to {out}/ ({', '.join(p.name for p in paths)})")


if __name__ == "__main__":
    main()
