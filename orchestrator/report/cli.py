"""Paper-style tables from the MLflow runs of an experiment: which placement is best, by how much, and why.

The command line (see orchestrator.report for the rows, their ranking and the columns).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .rows import collect
from .store import list_experiments
from .sweep import write_report


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
