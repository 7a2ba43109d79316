"""Does each worker's own step-to-step noise explain why two-device steps are under-predicted (issue 16)?

A step on two workers waits for the slower one here and there, and the median of a maximum is not the maximum
of the medians. This replays a fidelity sweep's saved cases with that noise put in: for each case, `samples`
simulations in which every device's speed is divided by an independent factor exp(N(0, sigma)), one per
device and step (a slow spell lasts about a second, longer than a step, so one factor per step; the two vCPUs'
spells are uncorrelated, session 17). sigma is fitted per model so that the factor's inter-quartile range
over its median equals the model's measured single-device run's (``iqr_s / measured_s``), or given with
`--sigma`. The prediction with noise is the median of the simulated steps, as the measured step is the median
of the run's steps.

    python experiments/per_step_noise.py CASES_DIR SWEEP.json [--samples 21] [--sigma S]

`CASES_DIR` and `SWEEP.json` are what ``experiments/fidelity.py --save-cases DIR --json FILE`` wrote. Prints,
per run, the measured step, the plain prediction and the noisy one with their errors, then the median
|error| and mean signed error of both. Cost: cases x (samples + 1) simulations (a minute for four tiny
models).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import random
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: experiments.fidelity from the repository root
    sys.path.insert(0, str(ROOT))


def sigma_for(iqr_over_median: float) -> float:
    """The log-normal sigma whose IQR over its median is `iqr_over_median`: 2 sinh(0.6745 sigma) = that."""
    return math.asinh(iqr_over_median / 2) / 0.6745


def noisy_step(case: dict[str, Any], graph: Any, sigma: float, samples: int, seed: int = 0) -> float:
    """Median over `samples` simulations of the case with every device's speed divided by exp(N(0, sigma))."""
    from experiments.fidelity import simulate_case

    rng = random.Random(seed)
    steps = []
    for _ in range(samples):
        c = copy.deepcopy(case)
        for d in c["cluster"]["devices"]:
            d["speed"] = float(d.get("speed", 1.0)) / math.exp(rng.gauss(0.0, sigma))
        steps.append(simulate_case(c, graph, record_memory=False).makespan)
    return statistics.median(steps)


def main(argv: list[str] | None = None) -> int:
    from algorithms.graph import OpGraph
    from experiments.fidelity import simulate_case

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", type=Path)
    ap.add_argument("sweep", type=Path)
    ap.add_argument("--samples", type=int, default=21)
    ap.add_argument("--sigma", type=float, default=None, help="one sigma for every model (default: fitted)")
    args = ap.parse_args(argv)
    rows = json.loads(args.sweep.read_text())["rows"]
    spread = {r["model"]: r["iqr_s"] / r["measured_s"] for r in rows if r["placer"] == "single"}
    graphs: dict[str, Any] = {}
    plain_err, noisy_err = [], []
    for r in rows:
        path = args.cases / f"{r['model']}_{r['cluster']}_{r['placer']}.case.json"
        if not path.exists():
            continue
        case = json.loads(path.read_text())
        g = graphs.setdefault(case["graph"], OpGraph.load(args.cases / case["graph"]))
        sigma = args.sigma if args.sigma is not None else sigma_for(spread.get(r["model"], 0.0))
        plain = simulate_case(case, g, record_memory=False).makespan
        noisy = noisy_step(case, g, sigma, args.samples)
        m = r["measured_s"]
        plain_err.append((plain - m) / m)
        noisy_err.append((noisy - m) / m)
        print(
            f"{r['model']:18s} {r['placer']:10s} devices {r['devices_used']}  sigma {sigma:.2f}  measured "
            f"{m * 1e3:8.3f} ms  plain {plain * 1e3:8.3f} ms ({100 * plain_err[-1]:+6.1f} %)  with noise "
            f"{noisy * 1e3:8.3f} ms ({100 * noisy_err[-1]:+6.1f} %)"
        )
    if not plain_err:
        print("no case of the sweep's rows in", args.cases)
        return 1
    for name, errs in (("plain", plain_err), ("with noise", noisy_err)):
        print(
            f"{name:10s}: median |error| {100 * statistics.median(abs(e) for e in errs):.1f} %, mean signed "
            f"{100 * statistics.mean(errs):+.1f} % over {len(errs)} runs"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
