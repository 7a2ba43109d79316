"""Paper-style tables from the MLflow runs of an experiment.

    python -m orchestrator.report EXPERIMENT [--tracking-uri URI] [--out DIR] [--latest-sweep]

One row per distinct configuration: the fixed KEY (model, cluster, optimizer, placer, scheduler, pipeline: the
jobs' config-group choices, logged as tags) plus every logged config param that a sweep varies (see
`varying_params`: e.g. `optimizer.passes.4.bound` in baechi_sensitivity, `pipeline.n_micro` in
tessel_search_time, `thesis_graph` in the thesis presets); the newest run of each row is kept. The varying params
are extra columns, named by the shortest unambiguous tail of their dotted name (`bound`, `n_micro`). Each row
shows the step time (measured when the run executed the model, else predicted) and both the predicted and the
measured step, its speed-up over the single-device and the expert placement of the same model and cluster at the
same values of the varying params (as Baechi Tables 3 and 4 report; see `_base`), the device memory limit
(Table 4's "insufficient memory"), placement time, OOM/ERROR marks, traffic, bubble rate and search time
(pipeline runs), and the simulated and the measured peak memory per device. Written as Markdown and CSV, plus a
PNG bar chart of step time per placement, into `reports/<experiment>/` (or --out).
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
IGNORED_NAMES = frozenset({"experiment_name"})
IGNORED_LEAVES = frozenset(
    {"dir", "outdir", "logdir", "run_name", "run_id", "timestamp", "time_stamp", "date", "now", "cwd"}
)
IGNORED_SUFFIXES = ("_dir", "_uri")

#: Column names of the report that a varying param's short name must not take.
_RESERVED = frozenset(KEY) | {
    "status",
    "step_s",
    "measured_step_s",
    "predicted_step_s",
    "speedup_vs_single",
    "speedup_vs_expert",
    "placement_time_s",
    "traffic_bytes",
    "bubble_rate",
    "search_time_s",
    "need_fraction",
    "memory_fraction",
    "run_id",
    "step time",
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
        split = []
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
    except Exception as exc:  # noqa: BLE001 - a missing or unreadable artifact only costs the column
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


def _param(params: dict[str, str], name: str) -> float | None:
    v = params.get(name)
    return None if v in (None, "None", "null", "") else _num(v)


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


def collect(experiment: str, tracking_uri: str, latest_sweep: bool = False) -> list[dict[str, Any]]:
    """Rows of the report from the experiment's runs (sweep parent runs excluded). Each row holds the KEY
    columns, `params` (the varying params' values, same names in every row; None where a run lacks one) and the
    figures; see the module docstring."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    exp = mlflow.get_experiment_by_name(experiment)
    if exp is None:
        names = [e.name for e in mlflow.search_experiments()]
        raise SystemExit(f"no MLflow experiment named {experiment!r} at {tracking_uri}; experiments: {names}")
    runs = mlflow.search_runs([exp.experiment_id], output_format="list", order_by=["attributes.start_time DESC"])
    parents = [r for r in runs if r.data.tags.get("kind") == "sweep"]
    if latest_sweep and parents:
        keep = parents[0].info.run_id
        runs = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == keep]
    runs = [r for r in runs if r.data.tags.get("kind") != "sweep"]
    keys = [tuple(r.data.tags.get(k, "") for k in KEY) for r in runs]
    params = [{k: v for k, v in r.data.params.items() if not ignored_param(k)} for r in runs]
    vary = varying_params(keys, params)
    rows: dict[tuple, dict[str, Any]] = {}
    for r, key, prm in zip(runs, keys, params):
        values = tuple(prm.get(p) for p in vary)
        if key + values in rows:  # newest first: keep the newest run of each combination
            continue
        t, m = r.data.tags, r.data.metrics
        status = t.get("status") or ("error" if r.info.status == "FAILED" else "?")
        measured = _num(m.get("measured_step_s"))
        predicted = _num(m.get("predicted_step_s"))
        rows[key + values] = {
            **dict(zip(KEY, key)),
            "params": dict(zip(vary, values)),
            "status": status,
            "measured_step_s": measured,
            "predicted_step_s": predicted,
            "step_s": measured if measured is not None else predicted,
            "placement_time_s": _num(m.get("placement_time_s")),
            "traffic_bytes": _num(m.get("traffic_bytes")),
            "bubble_rate": _num(m.get("bubble_rate")),
            "search_time_s": _num(m.get("search_time_s")),
            "need_fraction": _param(prm, "cluster.need_fraction"),
            "memory_fraction": _param(prm, "cluster.memory_fraction"),
            "memory_limit_bytes": _memory_limits(r),
            "peak_memory_bytes": _per_device(m, "peak_memory_bytes."),
            "measured_peak_memory_bytes": _per_device(m, "measured_peak_memory_bytes."),
            "run_id": r.info.run_id,
            "error": t.get("error", ""),
        }
    out = list(rows.values())
    for row in out:
        ok = row["status"] == "ok" and row["step_s"]
        for ref in ("single", "expert"):
            base = _base(row, out, ref) if ok else None
            row[f"speedup_vs_{ref}"] = base["step_s"] / row["step_s"] if base else None
            row[f"{ref}_run_id"] = base["run_id"] if base else None
    out.sort(
        key=lambda r: (
            (r["model"], r["cluster"], r["optimizer"], r["scheduler"], r["pipeline"])
            + tuple(_sort_value(r["params"][p]) for p in vary)
            + (r["placer"],)
        )
    )
    return out


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
    limit is a fraction of the model's need (cluster.need_fraction)."""
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


def markdown(rows: list[dict[str, Any]], experiment: str) -> str:
    vary, short = _columns(rows)
    devices = _devices(rows, "peak_memory_bytes")
    mdevices = _devices(rows, "measured_peak_memory_bytes")
    show_pipe = any(r["pipeline"] not in ("", "none") for r in rows)
    show_mem = any(r["memory_limit_bytes"] or r["need_fraction"] is not None for r in rows)
    show_bubble = any(r["bubble_rate"] is not None for r in rows)
    show_search = any(r["search_time_s"] is not None for r in rows)
    head = (
        ["model", "cluster", "optimizer", "placer", "scheduler"]
        + (["pipeline"] if show_pipe else [])
        + [short[p] for p in vary]
        + (["memory limit"] if show_mem else [])
        + ["step time", "predicted step", "measured step", "vs single", "vs expert", "placement time", "traffic"]
        + (["bubble rate"] if show_bubble else [])
        + (["search time"] if show_search else [])
        + [f"peak {d}" for d in devices]
        + [f"measured peak {d}" for d in mdevices]
    )
    lines = [f"# {experiment}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        step = "OOM" if r["status"] == "oom" else ("ERROR" if r["status"] == "error" else _fmt(r["step_s"], "s"))
        cells = (
            [r["model"], r["cluster"], r["optimizer"], r["placer"], r["scheduler"]]
            + ([r["pipeline"]] if show_pipe else [])
            + [_fmt(r["params"][p]) for p in vary]
            + ([_limit_cell(r)] if show_mem else [])
            + [
                step,
                _fmt(r["predicted_step_s"], "s"),
                _fmt(r["measured_step_s"], "s"),
                _fmt(r["speedup_vs_single"], "x"),
                _fmt(r["speedup_vs_expert"], "x"),
                _fmt(r["placement_time_s"], "s"),
                _fmt(r["traffic_bytes"], "B"),
            ]
            + ([_fmt(r["bubble_rate"], "r")] if show_bubble else [])
            + ([_fmt(r["search_time_s"], "s")] if show_search else [])
        )
        cells += [_fmt(r["peak_memory_bytes"].get(d), "B") for d in devices]
        cells += [_fmt(r["measured_peak_memory_bytes"].get(d), "B") for d in mdevices]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    if any(short[p] != p for p in vary):
        lines += ["", "Swept params: " + ", ".join(f"`{short[p]}` = `{p}`" for p in vary if short[p] != p) + "."]
    errs = [r for r in rows if r["status"] == "error"]
    if errs:

        def where(r: dict[str, Any]) -> str:
            extra = ", ".join(f"{short[p]}={r['params'][p]}" for p in vary)
            return f" ({extra})" if extra else ""

        def what(r: dict[str, Any]) -> str:
            return f"{r['placer']}/{r['scheduler']}" if r["placer"] else f"pipeline {r['pipeline']}"

        lines += ["", "Failed runs:"] + [f"- {what(r)} on {r['model']}{where(r)}: {r['error']}" for r in errs]
    return "\n".join(lines) + "\n"


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    vary, short = _columns(rows)
    dev_fields = [
        (f, _devices(rows, f)) for f in ("peak_memory_bytes", "measured_peak_memory_bytes", "memory_limit_bytes")
    ]
    cols = [
        "status",
        "step_s",
        "measured_step_s",
        "predicted_step_s",
        "speedup_vs_single",
        "speedup_vs_expert",
        "placement_time_s",
        "traffic_bytes",
        "bubble_rate",
        "search_time_s",
        "need_fraction",
        "memory_fraction",
        "run_id",
    ]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            list(KEY) + [short[p] for p in vary] + cols + [f"{field}.{d}" for field, devs in dev_fields for d in devs]
        )
        for r in rows:
            w.writerow(
                [r[k] for k in KEY]
                + [r["params"][p] for p in vary]
                + [r.get(c) for c in cols]
                + [r[field].get(d) for field, devs in dev_fields for d in devs]
            )


def bar_chart(rows: list[dict[str, Any]], path: Path, experiment: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    vary, short = _columns(rows)
    labels = [
        f"{r['placer'] or r['pipeline']}\n{r['scheduler']}"
        + (f"\n{r['model']}" if len({x["model"] for x in rows}) > 1 else "")
        + "".join(f"\n{short[p]}={r['params'][p]}" for p in vary)
        for r in rows
    ]
    vals = [r["step_s"] if r["status"] == "ok" and r["step_s"] else 0.0 for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(rows)), 4 + 0.15 * len(vary)))
    bars = ax.bar(
        range(len(rows)), vals, color=["#4C72B0" if r["measured_step_s"] is not None else "#8DA0CB" for r in rows]
    )
    for b, r in zip(bars, rows):
        if r["status"] != "ok":
            ax.text(
                b.get_x() + b.get_width() / 2,
                0,
                r["status"].upper(),
                ha="center",
                va="bottom",
                color="red",
                rotation=90,
            )
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylabel("step time (s)")
    ax.set_title(f"{experiment}: step time per placement (dark: measured, light: predicted)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m orchestrator.report", description=__doc__.splitlines()[0])
    ap.add_argument("experiment", help="MLflow experiment name (an experiment preset's experiment_name)")
    ap.add_argument(
        "--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", f"sqlite:///{Path.cwd() / 'mlflow.db'}")
    )
    ap.add_argument("--out", default=None, help="output folder (default reports/<experiment>)")
    ap.add_argument("--latest-sweep", action="store_true", help="only the runs of the newest sweep")
    args = ap.parse_args(argv)
    rows = collect(args.experiment, args.tracking_uri, args.latest_sweep)
    out = Path(args.out or Path("reports") / args.experiment)
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(rows, args.experiment)
    (out / "report.md").write_text(md)
    write_csv(rows, out / "report.csv")
    if rows:
        bar_chart(rows, out / "step_time.png", args.experiment)
    print(md)
    print(f"written to {out}/ (report.md, report.csv{', step_time.png' if rows else ''})")


if __name__ == "__main__":
    main()
