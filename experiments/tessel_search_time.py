"""Reproduce Tessel's Figure 3 / Figure 9: search time of the time-optimal search (TO, Z3 on all blocks of N
micro-batches) against Tessel's repetend search as the number of micro-batches N grows.

Figure 3 uses the V shape with forward 1 and backward 2 on 4 devices; Figure 9 the other placements. For each
shape and N: TO's time (or "timeout" at --to-timeout seconds; larger N are then "skipped", not run) and the
makespan of its best schedule (proven optimal unless timeout),
Tessel's time (the repetend search, done once per shape, plus extending it to N) and the makespan of its
schedule extended to N, and the ratio TO / Tessel. Prints the table and plots it (log scale).

    python experiments/tessel_search_time.py [--shapes v] [--max-n 8] [--to-timeout 300] [--recompute]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

from algorithms.pipeline.blocks import make_shape
from algorithms.pipeline.tessel import TesselScheduler
from algorithms.pipeline.time_optimal import TimeOptimalScheduler
from orchestrator.pipeline_plots import plot_search_times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="v")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--max-n", type=int, default=8)
    ap.add_argument("--to-timeout", type=float, default=300.0)
    ap.add_argument("--tessel-limit", type=float, default=120.0)
    ap.add_argument("--memory", type=int, default=None)
    ap.add_argument("--recompute", action="store_true")
    ap.add_argument("--out", default="outputs/tessel_search_time")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    print(
        f"search time, D={args.devices}, recompute={args.recompute}, memory={args.memory}, "
        f"TO limit {args.to_timeout:.0f}s (times on a shared, loaded machine: pessimistic)"
    )
    print(
        f"{'shape':5} {'N':>3} | {'TO s':>9} {'TO makespan':>11} | {'Tessel s':>9} {'Tessel makespan':>15} | "
        f"{'TO/Tessel':>9}"
    )
    for shape in args.shapes.split(","):
        spec = make_shape(shape, args.devices, args.recompute)
        ts = TesselScheduler(time_limit_s=args.tessel_limit)
        t0 = time.perf_counter()
        ts.search(spec, args.memory)
        t_search = time.perf_counter() - t0
        to_dead = False
        for n in range(1, args.max_n + 1):
            t1 = time.perf_counter()
            tsched = ts.schedule(spec, None, args.memory, n)
            t_tessel = t_search + (time.perf_counter() - t1)
            to_t, to_ms, timeout, skipped = None, None, False, False
            if not to_dead:
                t2 = time.perf_counter()
                try:
                    s = TimeOptimalScheduler(time_limit_s=args.to_timeout).schedule(spec, None, args.memory, n)
                    to_t, to_ms = time.perf_counter() - t2, s.makespan
                    timeout = not s.info["optimal"]
                except Exception as exc:  # no schedule proven within the limit
                    to_t, timeout = time.perf_counter() - t2, True
                    logging.warning("TO N=%d: %s", n, exc)
                to_dead = timeout
            else:
                skipped = True
            if not skipped:
                rows.append(
                    {
                        "shape": shape,
                        "method": "to",
                        "n_micro": n,
                        "time_s": to_t,
                        "timeout": timeout,
                        "makespan": to_ms,
                    }
                )
            rows.append(
                {
                    "shape": shape,
                    "method": "tessel",
                    "n_micro": n,
                    "time_s": t_tessel,
                    "timeout": False,
                    "makespan": tsched.makespan,
                }
            )
            to_txt = "skipped" if skipped else "timeout" if timeout else f"{to_t:9.2f}"
            ratio = "" if timeout or skipped or not t_tessel else f"{to_t / t_tessel:9.2f}"
            print(
                f"{shape:5} {n:>3} | {to_txt:>9} {str(to_ms if to_ms is not None else '-'):>11} | "
                f"{t_tessel:9.2f} {tsched.makespan:>15} | {ratio:>9}"
            )
    with open(os.path.join(args.out, "search_time.json"), "w") as f:
        json.dump(rows, f, indent=1)
    plot_search_times(rows, os.path.join(args.out, "search_time.png"))
    print(f"plot and data under {os.path.abspath(args.out)}")


if __name__ == "__main__":
    main()
