"""Fit the simulator's charge for time-sharing a core (`simulate(shared_core_slowdown=...)`) to a fidelity sweep's
saved cases, and check it on models left out (issue 16, docs/fidelity.md, session 15).

    python experiments/fit_shared_core.py CASES_DIR SWEEP.json [--grid 0,0.05,...,1]

`CASES_DIR` is what ``experiments/fidelity.py --save-cases`` wrote (each run's profile, placement, order, fitted
cluster, message costs and host cores) and `SWEEP.json` its ``--json`` (the measured steps). Every case is
simulated again at every value of the grid; the value minimising the sum of squared relative errors is the fit.
Leave-one-model-out: for each model the value is fitted on the other models' runs and its errors on the model's
own runs are reported, which is what a value fitted on one set of programs is worth on another. The message costs
stay those the sweep calibrated (with the slowdown it ran with; `shared_core_slowdown` in each case). Cost:
cases x grid simulations of the tiny models (seconds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: experiments.fidelity from the repository root
    sys.path.insert(0, str(ROOT))

DEFAULT_GRID = tuple(round(0.05 * k, 2) for k in range(21))  # 0, 0.05, ..., 1


def case_errors(folder: Path, rows: list[dict[str, Any]], grid: tuple[float, ...]) -> dict[tuple[str, str], dict]:
    """{(model, placer): {slowdown: (predicted - measured) / measured}} over the saved cases that have a measured
    row in `rows`."""
    from algorithms.graph import OpGraph
    from experiments.fidelity import simulate_case

    measured = {(r["model"], r["placer"]): r["measured_s"] for r in rows if r.get("measured_s")}
    graphs: dict[str, Any] = {}
    out: dict[tuple[str, str], dict[float, float]] = {}
    for path in sorted(folder.glob("*.case.json")):
        case = json.loads(path.read_text())
        key = (case["model"], case["placer"])
        if key not in measured:
            continue
        if case["graph"] not in graphs:
            graphs[case["graph"]] = OpGraph.load(folder / case["graph"])
        m = measured[key]
        out[key] = {}
        for s in grid:
            step = simulate_case(case, graphs[case["graph"]], shared_core_slowdown=s, record_memory=False).makespan
            out[key][s] = (step - m) / m
    return out


def best(errors: dict[tuple[str, str], dict[float, float]], keys: list[tuple[str, str]], grid: tuple[float, ...]):
    """The grid value with the least sum of squared relative errors over `keys` (ties: the smaller value)."""
    return min(grid, key=lambda s: (sum(errors[k][s] ** 2 for k in keys), s))


def fit(folder: Path, rows: list[dict[str, Any]], grid: tuple[float, ...] = DEFAULT_GRID) -> dict[str, Any]:
    """The fit over every case, and per model the value fitted on the others with its errors on that model."""
    errors = case_errors(folder, rows, grid)
    if not errors:
        raise ValueError(f"no saved case in {folder} has a measured row")
    keys = sorted(errors)
    models = sorted({m for m, _ in keys})
    held_out = {}
    for model in models:
        others = [k for k in keys if k[0] != model]
        own = [k for k in keys if k[0] == model]
        s = best(errors, others, grid) if others else 0.0
        held_out[model] = {
            "fitted_on_others": s,
            "median_abs_error": statistics.median(abs(errors[k][s]) for k in own),
            "median_abs_error_without": statistics.median(abs(errors[k][0.0]) for k in own) if 0.0 in grid else None,
            "errors": [abs(errors[k][s]) for k in own],
        }
    s_all = best(errors, keys, grid)
    return {
        "fitted": s_all,
        "median_abs_error": statistics.median(abs(errors[k][s_all]) for k in keys),
        "held_out": held_out,
        "median_abs_error_held_out": statistics.median(e for h in held_out.values() for e in h["errors"]),
        "runs": len(keys),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", type=Path)
    ap.add_argument("sweep", type=Path)
    ap.add_argument("--grid", default=",".join(str(s) for s in DEFAULT_GRID))
    args = ap.parse_args(argv)
    grid = tuple(sorted({float(x) for x in args.grid.split(",")} | {0.0}))
    res = fit(args.cases, json.loads(args.sweep.read_text())["rows"], grid)
    for model, h in res["held_out"].items():
        without = h["median_abs_error_without"]
        print(
            f"held out {model:18s}: fitted on the others {h['fitted_on_others']:.2f}; median |error| "
            f"{100 * h['median_abs_error']:.1f}% (without: {100 * without:.1f}%)"
        )
    print(
        f"all {res['runs']} runs: fitted {res['fitted']:.2f}, median |error| {100 * res['median_abs_error']:.1f}%; "
        f"held out, median |error| {100 * res['median_abs_error_held_out']:.1f}%"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
