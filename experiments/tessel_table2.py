"""Reproduce Tessel's Table II: bubble rate of 1F1B, Chimera-direct, 1F1B+ and Tessel "considering numerous
micro-batches", on the GPT (M shape), mT5 (NN shape) and Flava (K shape) placements with recompute (backward
three times forward), 4 devices.

1F1B runs on the V shape and Chimera-direct on the X shape (their own placements, as in the paper); 1F1B+ and
Tessel run on the model's advanced placement; 1F1B+ is marked x for the K shape, as in the paper. The steady
bubble rate is measured from two long schedules (algorithms.pipeline.api.steady_bubble_rate); for Tessel the
repetend's own bubble rate 1 - busy / (D x t_R) is printed beside it. Every schedule of N=12 is also saved as
JSON, picture (Figure 8 style) and Chrome trace under --out.

    python experiments/tessel_table2.py [--time-limit 120] [--memory M] [--out outputs/tessel_table2]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from algorithms.pipeline.api import steady_bubble_rate  # noqa: E402
from algorithms.pipeline.baselines import ChimeraScheduler, OneFOneBPlusScheduler, OneFOneBScheduler  # noqa: E402
from algorithms.pipeline.blocks import make_shape  # noqa: E402
from algorithms.pipeline.tessel import TesselScheduler  # noqa: E402
from orchestrator.pipeline_plots import write_pipeline_artifacts  # noqa: E402

PAPER = {"GPT": ("0%", "20%", "25%", "0%"), "mT5": ("0%", "20%", "20%", "0%"), "Flava": ("0%", "20%", "x", "0%")}
MODELS = [("GPT", "m"), ("mT5", "nn"), ("Flava", "k")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--memory", type=int, default=None, help="per-device cap in block units (default: none)")
    ap.add_argument("--time-limit", type=float, default=120.0, help="Tessel repetend scan limit per shape (s)")
    ap.add_argument("--models", default="GPT,mT5,Flava")
    ap.add_argument("--out", default="outputs/tessel_table2")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    D, M = args.devices, args.memory
    rows = []
    v, x = make_shape("v", D, True), make_shape("x", D, True)
    one = steady_bubble_rate(OneFOneBScheduler(), v, M)
    chim = steady_bubble_rate(ChimeraScheduler(), x, M)
    write_pipeline_artifacts(OneFOneBScheduler().schedule(v, None, M, 12), os.path.join(args.out, "1f1b_V"))
    write_pipeline_artifacts(ChimeraScheduler().schedule(x, None, M, 12), os.path.join(args.out, "chimera_X"))
    for model, shape in MODELS:
        if model not in args.models.split(","):
            continue
        spec = make_shape(shape, D, True)
        if shape == "k":
            plus = None
        else:
            plus = steady_bubble_rate(OneFOneBPlusScheduler(), spec, M)
            write_pipeline_artifacts(
                OneFOneBPlusScheduler().schedule(spec, None, M, 12),
                os.path.join(args.out, f"1f1b_plus_{shape.upper()}"),
            )
        ts = TesselScheduler(time_limit_s=args.time_limit)
        t0 = time.perf_counter()
        res = ts.search(spec, M)
        dt = time.perf_counter() - t0
        tess = steady_bubble_rate(ts, spec, M, max(24, res.n_r), max(48, 2 * res.n_r))
        write_pipeline_artifacts(
            ts.schedule(spec, None, M, max(12, res.n_r)), os.path.join(args.out, f"tessel_{shape.upper()}")
        )
        rows.append((model, shape.upper(), one, chim, plus, tess, res, dt))

    def pct(r):
        return "x" if r is None else f"{100 * r:.0f}%"

    print(f"Table II (D={D}, recompute, memory={'unbounded' if M is None else M}); paper's values in brackets")
    print(
        f"{'model':6} {'shape':5} | {'1F1B':>10} {'Chimera-direct':>16} {'1F1B+':>10} {'Tessel':>10} | "
        f"Tessel t_R/LB  N_R  repetend-bubble  search_s"
    )
    for model, shape, one, chim, plus, tess, res, dt in rows:
        p = PAPER[model]
        print(
            f"{model:6} {shape:5} | {pct(one):>4} [{p[0]:>3}] {pct(chim):>8} [{p[1]:>3}]   "
            f"{pct(plus):>4} [{p[2]:>3}] {pct(tess):>4} [{p[3]:>3}] | {res.period:>4}/{res.lower_bound:<4} "
            f"{res.n_r:>4}  {100 * res.repetend_bubble_rate:>14.1f}%  {dt:8.1f}"
            + ("  (time limit hit)" if res.stats.get("timed_out") else "")
        )
    print(f"schedules (json, png, chrome trace) under {os.path.abspath(args.out)}")


if __name__ == "__main__":
    main()
