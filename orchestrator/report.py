"""Paper-style tables from the MLflow runs of an experiment.

    python -m orchestrator.report EXPERIMENT [--tracking-uri URI] [--out DIR] [--latest-sweep]

One row per run (the newest run of each (model, cluster, optimizer, placer, scheduler) combination): step time
(measured when the run executed the model, else predicted), its speed-up over the single-device and the expert
placement of the same model and cluster (as Baechi Tables 3 and 4 report), placement time, OOM marks, traffic and
peak memory per device. Written as Markdown and CSV, plus a PNG bar chart of step time per placer, into
`reports/<experiment>/` (or --out).
"""
from __future__ import annotations

import argparse
import csv
import logging
import math
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

KEY = ("model", "cluster", "optimizer", "placer", "scheduler", "pipeline")


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def collect(experiment: str, tracking_uri: str, latest_sweep: bool = False) -> list[dict[str, Any]]:
    """Rows of the report from the experiment's runs (sweep parent runs excluded)."""
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
    rows: dict[tuple, dict[str, Any]] = {}
    for r in runs:
        t, m = r.data.tags, r.data.metrics
        if t.get("kind") == "sweep":
            continue
        key = tuple(t.get(k, "") for k in KEY)
        if key in rows:  # newest first: keep the newest run of each combination
            continue
        status = t.get("status") or ("error" if r.info.status == "FAILED" else "?")
        measured = _num(m.get("measured_step_s"))
        predicted = _num(m.get("predicted_step_s"))
        peaks = {k.split(".", 1)[1]: v for k, v in m.items() if k.startswith("peak_memory_bytes.") and k != "peak_memory_bytes.max"}
        rows[key] = {**dict(zip(KEY, key)), "status": status, "measured_step_s": measured,
                     "predicted_step_s": predicted,
                     "step_s": measured if measured is not None else predicted,
                     "placement_time_s": _num(m.get("placement_time_s")),
                     "traffic_bytes": _num(m.get("traffic_bytes")), "bubble_rate": _num(m.get("bubble_rate")),
                     "peak_memory_bytes": peaks, "run_id": r.info.run_id, "error": t.get("error", "")}
    out = list(rows.values())
    for row in out:
        same = [o for o in out if (o["model"], o["cluster"]) == (row["model"], row["cluster"])
                and o["status"] == "ok" and o["step_s"]]
        for ref in ("single", "expert"):
            base = next((o for o in same if o["placer"] == ref), None)
            ok = row["status"] == "ok" and row["step_s"]
            row[f"speedup_vs_{ref}"] = base["step_s"] / row["step_s"] if base and ok else None
    out.sort(key=lambda r: (r["model"], r["cluster"], r["optimizer"], r["scheduler"], r["placer"]))
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
    return str(v)


def markdown(rows: list[dict[str, Any]], experiment: str) -> str:
    devices = sorted({d for r in rows for d in r["peak_memory_bytes"]})
    head = (["model", "cluster", "optimizer", "placer", "scheduler", "step time", "measured?", "vs single",
             "vs expert", "placement time", "traffic"] + [f"peak {d}" for d in devices])
    lines = [f"# {experiment}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        step = "OOM" if r["status"] == "oom" else ("ERROR" if r["status"] == "error" else _fmt(r["step_s"], "s"))
        cells = [r["model"], r["cluster"], r["optimizer"], r["placer"], r["scheduler"], step,
                 "yes" if r["measured_step_s"] is not None else "predicted",
                 _fmt(r["speedup_vs_single"], "x"), _fmt(r["speedup_vs_expert"], "x"),
                 _fmt(r["placement_time_s"], "s"), _fmt(r["traffic_bytes"], "B")]
        cells += [_fmt(r["peak_memory_bytes"].get(d), "B") for d in devices]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    errs = [r for r in rows if r["status"] == "error"]
    if errs:
        lines += ["", "Failed runs:"] + [f"- {r['placer']}/{r['scheduler']} on {r['model']}: {r['error']}" for r in errs]
    return "\n".join(lines) + "\n"


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    devices = sorted({d for r in rows for d in r["peak_memory_bytes"]})
    cols = list(KEY) + ["status", "step_s", "measured_step_s", "predicted_step_s", "speedup_vs_single",
                        "speedup_vs_expert", "placement_time_s", "traffic_bytes", "bubble_rate", "run_id"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols + [f"peak_memory_bytes.{d}" for d in devices])
        for r in rows:
            w.writerow([r.get(c) for c in cols] + [r["peak_memory_bytes"].get(d) for d in devices])


def bar_chart(rows: list[dict[str, Any]], path: Path, experiment: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['placer']}\n{r['scheduler']}" + (f"\n{r['model']}" if len({x['model'] for x in rows}) > 1 else "")
              for r in rows]
    vals = [r["step_s"] if r["status"] == "ok" and r["step_s"] else 0.0 for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(rows)), 4))
    bars = ax.bar(range(len(rows)), vals, color=["#4C72B0" if r["measured_step_s"] is not None else "#8DA0CB"
                                                 for r in rows])
    for b, r in zip(bars, rows):
        if r["status"] != "ok":
            ax.text(b.get_x() + b.get_width() / 2, 0, r["status"].upper(), ha="center", va="bottom", color="red",
                    rotation=90)
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylabel("step time (s)")
    ax.set_title(f"{experiment}: step time per placement (dark: measured, light: predicted)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m orchestrator.report", description=__doc__.splitlines()[0])
    ap.add_argument("experiment", help="MLflow experiment name (an experiment preset's experiment_name)")
    ap.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI",
                                                             f"sqlite:///{Path.cwd() / 'mlflow.db'}"))
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
