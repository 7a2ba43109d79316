"""Benchmark: Tessel's schedule search time per placement shape on 4 devices (target here: < 60 s each; the
paper's average is 147 s), with the time-optimal search (TO) beside it for N = 1 .. 8 micro-batches.

TO gets a per-call limit (--to-timeout) and prints "timeout" when it cannot prove an optimum within it; larger N
are then printed as "skipped" (not run: TO's time only grows with N). Timings are wall-clock on whatever machine
runs this; on a shared machine they are pessimistic.

    python benchmarks/bench_tessel.py [--shapes v,x,m,nn,k] [--to-timeout 60] [--tessel-limit 120]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from algorithms.pipeline.blocks import make_shape  # noqa: E402
from algorithms.pipeline.tessel import TesselScheduler, TimeOptimalScheduler  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="v,x,m,nn,k")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--no-recompute", action="store_true", help="backward 2x forward instead of 3x")
    ap.add_argument("--memory", type=int, default=None)
    ap.add_argument("--tessel-limit", type=float, default=120.0)
    ap.add_argument("--to-timeout", type=float, default=60.0)
    ap.add_argument("--max-n", type=int, default=8)
    ap.add_argument(
        "--compare-lazy",
        action="store_true",
        help="also time the search without section V's lazy completion (Figure 10b)",
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rec = not args.no_recompute
    print(
        f"bench_tessel: D={args.devices} recompute={rec} memory={args.memory} "
        f"(cpu count {os.cpu_count()}, load average {os.getloadavg()[0]:.1f})"
    )
    print(
        f"{'shape':5} {'K':>3} | {'Tessel s':>9} {'cpu s':>7} {'N_R':>4} {'t_R':>4} {'LB':>4} {'<60s':>5} | "
        + " ".join(f"{'TO N=' + str(n):>9}" for n in range(1, args.max_n + 1))
    )
    for shape in args.shapes.split(","):
        spec = make_shape(shape, args.devices, rec)
        c0, t0 = time.process_time(), time.perf_counter()
        res = TesselScheduler(time_limit_s=args.tessel_limit).search(spec, args.memory)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        to_cells, dead = [], False
        for n in range(1, args.max_n + 1):
            if dead:
                to_cells.append("skipped")
                continue
            t1 = time.perf_counter()
            try:
                s = TimeOptimalScheduler(time_limit_s=args.to_timeout, check_timeout_s=args.to_timeout).schedule(
                    spec, None, args.memory, n
                )
                ok = s.info["optimal"]
            except Exception:
                ok = False
            if ok:
                to_cells.append(f"{time.perf_counter() - t1:.2f}")
            else:
                to_cells.append("timeout")
                dead = True
        note = " (limit hit)" if res.stats.get("timed_out") else ""
        print(
            f"{shape:5} {spec.K:>3} | {dt:9.2f} {dc:7.2f} {res.n_r:>4} {res.period:>4} {res.lower_bound:>4} "
            f"{'yes' if dt < 60 else 'no':>5} | " + " ".join(f"{c:>9}" for c in to_cells) + note
        )
        if args.compare_lazy:
            t3 = time.perf_counter()
            eager = TesselScheduler(time_limit_s=args.tessel_limit, lazy=False).search(spec, args.memory)
            st = res.stats
            print(
                f"      lazy: repetend {st['time_repetend_s']:.2f}s warm-up {st['time_warmup_s']:.2f}s "
                f"cool-down {st['time_cooldown_s']:.2f}s | not lazy: total {time.perf_counter() - t3:.2f}s "
                f"(warm-up {eager.stats['time_warmup_s']:.2f}s, cool-down {eager.stats['time_cooldown_s']:.2f}s, "
                f"t_R {eager.period})"
            )


if __name__ == "__main__":
    main()
