"""Bar charts of the thesis' evaluation (seed 004, Figures 7.1 - 7.8) from the MLflow runs of a sweep.

Reads every finished job run of one MLflow experiment (e.g. the sweep of `conf/experiment/thesis_synthetic.yaml`)
and draws, per graph (the run's model name), one group of bars per partitioner:

* ``makespan``: the simulated makespan (metric `predicted_step_s`, eq. 2.1), one bar per scheduler: Figure 7.1
  (synthetic graphs, 100 devices), 7.4 (TensorFlow graphs, PCT only: ``--schedulers pct``) and 7.7 (7 devices);
* ``traffic``: the traffic (metric `traffic_bytes`, eq. 2.2 after send/receive aggregation), one bar per
  partitioner, averaged over the schedulers (the thesis notes it does not depend on them): Figures 7.2, 7.5, 7.8;
* ``time``: the partitioning time (metric `placement_time_s`): Figures 7.3, 7.6.

Bars show the mean over the runs of a (graph, partitioner, scheduler) cell (e.g. several seeds) and a grey line
for the standard deviation when there is more than one run, as in the thesis. Runs whose status is not "ok" (for
instance an infeasible placement) are left out and listed.

    python experiments/thesis_bars.py --tracking-uri sqlite:///$PWD/mlflow.db --experiment thesis_synthetic
    python experiments/thesis_bars.py --experiment thesis_synthetic_7dev --out figures/7dev
    python experiments/thesis_bars.py --experiment tf_graphs --schedulers pct --figures makespan,traffic

The runs must carry the tags (or params) `placer`, `scheduler`, `model` / `model_name` and `cluster`, and the
metrics named above, as the orchestrator logs them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

matplotlib.use("Agg")  # files only; pyplot creates no figure before this line

PLACER_ORDER = ["hashing", "heft", "batch_split", "icp", "critical_path", "mite", "dfs"]
PLACER_LABEL = {
    "hashing": "Hashing",
    "heft": "HEFT",
    "batch_split": "Batch Split",
    "icp": "ICP",
    "critical_path": "Critical Path",
    "mite": "MITE",
    "dfs": "DFS",
}
SCHEDULER_ORDER = ["fifo", "pct", "msr"]
SCHED_COLOR = {"fifo": "#4C72B0", "pct": "#DD8452", "msr": "#55A868"}
METRICS = {
    "makespan": ("predicted_step_s", "simulated makespan (s)"),
    "traffic": ("traffic_bytes", "traffic (MB)"),
    "time": ("placement_time_s", "partitioning time (s)"),
}


def _first(df: pd.DataFrame, cols: Sequence[str]) -> pd.Series:
    out = pd.Series([None] * len(df), index=df.index, dtype=object)
    for c in cols:
        if c in df.columns:
            out = out.where(out.notna(), df[c])
    return out


def load_runs(tracking_uri: str, experiment: str) -> pd.DataFrame:
    """One row per job run: model, placer, scheduler, cluster, status and the three metrics."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    raw = mlflow.search_runs(experiment_names=[experiment], max_results=100000, output_format="pandas")
    if raw.empty:
        return pd.DataFrame(
            columns=["model", "placer", "scheduler", "cluster", "status", *[m for m, _ in METRICS.values()]]
        )
    df = pd.DataFrame(index=raw.index)
    df["model"] = _first(raw, ["tags.model_name", "params.model.name", "tags.model", "params.model"])
    df["placer"] = _first(raw, ["tags.placer", "params.placer"])
    df["scheduler"] = _first(raw, ["tags.scheduler", "params.scheduler"])
    df["cluster"] = _first(raw, ["tags.cluster", "params.cluster"])
    df["status"] = _first(raw, ["tags.status"]).fillna("ok")
    for metric, _ in METRICS.values():
        col = f"metrics.{metric}"
        df[metric] = raw[col] if col in raw.columns else np.nan
    df = df[df["placer"].notna() & df["scheduler"].notna()]  # drop sweep parent runs
    return df.reset_index(drop=True)


def _ordered(values, preferred: Sequence[str]) -> list[str]:
    vals = [v for v in pd.unique(values) if v is not None]
    return [p for p in preferred if p in vals] + sorted(v for v in vals if v not in preferred)


def bar_chart(df: pd.DataFrame, figure: str, path: str, *, title: str | None = None) -> str:
    """Draw one figure (makespan, traffic or time) from `load_runs` rows; returns the path written."""
    metric, ylabel = METRICS[figure]
    data = df[df["status"] == "ok"].dropna(subset=[metric])
    if data.empty:
        raise SystemExit(f"no finished runs with metric {metric!r} to plot")
    models = _ordered(data["model"], [])
    placers = _ordered(data["placer"], PLACER_ORDER)
    scheds = _ordered(data["scheduler"], SCHEDULER_ORDER) if figure == "makespan" else ["all"]
    scale = 1e-6 if figure == "traffic" else 1.0
    ncols = min(3, len(models))
    nrows = (len(models) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.4 * nrows), squeeze=False)
    width = 0.8 / len(scheds)
    for k, model in enumerate(models):
        ax = axes[k // ncols][k % ncols]
        sub = data[data["model"] == model]
        for s_i, sched in enumerate(scheds):
            cell = sub if sched == "all" else sub[sub["scheduler"] == sched]
            means, stds = [], []
            for p in placers:
                v = cell[cell["placer"] == p][metric].astype(float) * scale
                means.append(v.mean() if len(v) else np.nan)
                stds.append(v.std(ddof=0) if len(v) > 1 else 0.0)
            x = np.arange(len(placers)) + (s_i - (len(scheds) - 1) / 2) * width
            ax.bar(
                x,
                means,
                width,
                color=SCHED_COLOR.get(sched, "#8C8C8C"),
                label=sched.upper() if sched != "all" else None,
            )
            ax.errorbar(x, means, yerr=stds, fmt="none", ecolor="grey", elinewidth=1, capsize=0)
        ax.set_title(str(model), fontsize=9)
        ax.set_xticks(np.arange(len(placers)))
        ax.set_xticklabels([PLACER_LABEL.get(p, p) for p in placers], rotation=40, ha="right", fontsize=7)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", linewidth=0.3, alpha=0.5)
    for k in range(len(models), nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    if figure == "makespan":
        axes[0][0].legend(fontsize=7, title="scheduler", title_fontsize=7)
    fig.suptitle(
        title
        or {
            "makespan": "Execution time (makespan) per partitioner and scheduler",
            "traffic": "Traffic per partitioner",
            "time": "Partitioning time per partitioner",
        }[figure],
        fontsize=10,
    )
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def summary(df: pd.DataFrame) -> str:
    """Mean of every metric per (model, placer, scheduler), as text."""
    ok = df[df["status"] == "ok"]
    if ok.empty:
        return "(no finished runs)"
    tab = ok.groupby(["model", "placer", "scheduler"])[[m for m, _ in METRICS.values()]].mean()
    return tab.to_string(float_format=lambda v: f"{v:.5g}")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tracking-uri", default=f"sqlite:///{os.path.abspath('mlflow.db')}")
    ap.add_argument("--experiment", required=True, help="MLflow experiment name of the sweep")
    ap.add_argument("--out", default=None, help="output folder (default: figures/<experiment>)")
    ap.add_argument("--figures", default="makespan,traffic,time")
    ap.add_argument("--schedulers", default=None, help="keep only these schedulers, e.g. pct")
    ap.add_argument("--placers", default=None, help="keep only these placers")
    ap.add_argument("--cluster", default=None, help="keep only runs of this cluster choice")
    args = ap.parse_args(argv)
    df = load_runs(args.tracking_uri, args.experiment)
    if args.schedulers:
        df = df[df["scheduler"].isin(args.schedulers.split(","))]
    if args.placers:
        df = df[df["placer"].isin(args.placers.split(","))]
    if args.cluster:
        df = df[df["cluster"] == args.cluster]
    if df.empty:
        sys.exit(f"no runs in experiment {args.experiment!r} at {args.tracking_uri} match the filters")
    bad = df[df["status"] != "ok"]
    print(f"{len(df)} runs, {len(bad)} not ok")
    for _, r in bad.iterrows():
        print(f"  left out: {r['model']} / {r['placer']} / {r['scheduler']}: status {r['status']}")
    print(summary(df))
    out = args.out or os.path.join("figures", args.experiment)
    for fig in [f for f in args.figures.split(",") if f]:
        if fig not in METRICS:
            sys.exit(f"unknown figure {fig!r}; choose from {sorted(METRICS)}")
        print("wrote", bar_chart(df, fig, os.path.join(out, f"{fig}.png")))


if __name__ == "__main__":
    main()
