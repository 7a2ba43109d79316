"""Fit one parameter of the simulator's model of the workers to a fidelity sweep's saved cases, and check it on
models left out (issue 16, docs/fidelity.md): the charge for time-sharing a core (`simulate(shared_core_slowdown=
...)`, session 15; the default) or a factor on the calibrated per-message costs (``--parameter message_scale``,
session 22: both the send and the receive cost times the factor).

    python experiments/fit_shared_core.py CASES_DIR SWEEP.json [--parameter P] [--grid 0,0.05,...,1]

`CASES_DIR` is what ``experiments/fidelity.py --save-cases`` wrote (each run's profile, placement, order, fitted
cluster, message costs and host cores) and `SWEEP.json` its ``--json`` (the measured steps). Every case is
simulated again at every value of the grid; the value minimising the sum of squared relative errors is the fit.
Leave-one-model-out: for each model the value is fitted on the other models' runs and its errors on the model's
own runs are reported, which is what a value fitted on one set of programs is worth on another. The parameter not
fitted stays what the sweep used (each case's `shared_core_slowdown` and message costs). Cost: cases x grid
simulations of the tiny models (seconds to a minute).
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
# parameter -> (the value that changes nothing, its default grid)
PARAMETERS: dict[str, tuple[float, tuple[float, ...]]] = {
    "shared_core_slowdown": (0.0, DEFAULT_GRID),
    "message_scale": (1.0, tuple(round(1.0 + 0.1 * k, 2) for k in range(-3, 11))),  # 0.7, 0.8, ..., 2
}


def _options(case: dict[str, Any], parameter: str, value: float) -> dict[str, float]:
    """The `simulate_case` overrides that set `parameter` to `value` for `case`."""
    if parameter == "shared_core_slowdown":
        return {"shared_core_slowdown": value}
    if parameter == "message_scale":
        return {"send_overhead_s": case["send_overhead_s"] * value, "recv_overhead_s": case["recv_overhead_s"] * value}
    raise ValueError(f"parameter must be one of {sorted(PARAMETERS)}, got {parameter!r}")


def case_errors(
    folder: Path, rows: list[dict[str, Any]], grid: tuple[float, ...], parameter: str = "shared_core_slowdown"
) -> dict[tuple[str, str], dict]:
    """{(model, placer): {value: (predicted - measured) / measured}} over the saved cases that have a measured
    row in `rows`, `parameter` set to each value of the grid."""
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
            opts = _options(case, parameter, s)
            step = simulate_case(case, graphs[case["graph"]], record_memory=False, **opts).makespan
            out[key][s] = (step - m) / m
    return out


def best(errors: dict[tuple[str, str], dict[float, float]], keys: list[tuple[str, str]], grid: tuple[float, ...]):
    """The grid value with the least sum of squared relative errors over `keys` (ties: the smaller value)."""
    return min(grid, key=lambda s: (sum(errors[k][s] ** 2 for k in keys), s))


def fit(
    folder: Path,
    rows: list[dict[str, Any]],
    grid: tuple[float, ...] | None = None,
    parameter: str = "shared_core_slowdown",
) -> dict[str, Any]:
    """The fit over every case, and per model the value fitted on the others with its errors on that model
    (``median_abs_error_without``: at the value that changes nothing, which the grid always holds)."""
    if parameter not in PARAMETERS:
        raise ValueError(f"parameter must be one of {sorted(PARAMETERS)}, got {parameter!r}")
    neutral, default = PARAMETERS[parameter]
    grid = tuple(sorted({*(default if grid is None else grid), neutral}))
    errors = case_errors(folder, rows, grid, parameter)
    if not errors:
        raise ValueError(f"no saved case in {folder} has a measured row")
    keys = sorted(errors)
    models = sorted({m for m, _ in keys})
    held_out = {}
    for model in models:
        others = [k for k in keys if k[0] != model]
        own = [k for k in keys if k[0] == model]
        s = best(errors, others, grid) if others else neutral
        held_out[model] = {
            "fitted_on_others": s,
            "median_abs_error": statistics.median(abs(errors[k][s]) for k in own),
            "median_abs_error_without": statistics.median(abs(errors[k][neutral]) for k in own),
            "errors": [abs(errors[k][s]) for k in own],
        }
    s_all = best(errors, keys, grid)
    return {
        "fitted": s_all,
        "median_abs_error": statistics.median(abs(errors[k][s_all]) for k in keys),
        "held_out": held_out,
        "median_abs_error_held_out": statistics.median(e for h in held_out.values() for e in h["errors"]),
        "median_abs_error_without": statistics.median(abs(errors[k][neutral]) for k in keys),
        "runs": len(keys),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", type=Path)
    ap.add_argument("sweep", type=Path)
    ap.add_argument("--parameter", choices=sorted(PARAMETERS), default="shared_core_slowdown")
    ap.add_argument("--grid", default=None, help="comma-separated values (default: the parameter's own grid)")
    args = ap.parse_args(argv)
    grid = None if args.grid is None else tuple(float(x) for x in args.grid.split(","))
    res = fit(args.cases, json.loads(args.sweep.read_text())["rows"], grid, args.parameter)
    print(f"{args.parameter}:")
    for model, h in res["held_out"].items():
        without = h["median_abs_error_without"]
        print(
            f"held out {model:18s}: fitted on the others {h['fitted_on_others']:.2f}; median |error| "
            f"{100 * h['median_abs_error']:.1f}% (without: {100 * without:.1f}%)"
        )
    print(
        f"all {res['runs']} runs: fitted {res['fitted']:.2f}, median |error| {100 * res['median_abs_error']:.1f}%; "
        f"held out, median |error| {100 * res['median_abs_error_held_out']:.1f}% "
        f"(without: {100 * res['median_abs_error_without']:.1f}%)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
