"""Benchmark: Tessel's search on the reference's shapes at 4, 6 and 8 devices, and the TO optima.

Per shape and device count, under the Tessel authors' memory budget (``memory: reference``, see docs/tessel.md):
search time (wall clock, and Z3 resource units, which are deterministic), the repetend found (N_R, t_R) against
its lower bound, and the idle share of the extended schedule at 128 micro-batches, beside the figures of the
reference implementation (zhiqi-0/Tessel, quoted in issue 18: idle at 128 micro-batches on 4 devices). Then the
time-optimal (TO) search on N = 1 .. --to-max-n micro-batches at 4 devices against the reference's optima
(4N+12 on V, 6N+12 on M, 6N+4 on K, 8N+12 on NN; X has no quoted formula).

Wall-clock times depend on the machine and its load; the schedules do not (Z3 resource budgets).

    PYTHONPATH=. python benchmarks/bench_tessel.py [--shapes v,x,m,nn,k] [--devices 4,6,8] [--to-max-n 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import time

from algorithms.pipeline.blocks import make_shape, reference_memory
from algorithms.pipeline.tessel import TesselScheduler
from algorithms.pipeline.time_optimal import TimeOptimalScheduler

# idle share at 128 micro-batches of the reference's schedules on 4 devices (issue 18)
REFERENCE_IDLE_4 = {"v": "2.5-3.2%", "x": "1.1-1.4%", "m": "1.66%", "nn": "1.63%", "k": "0.5-0.9%"}
# the reference's repetend lower bound on 4 devices (issue 18) and its TO optima (slope, offset) in N
REFERENCE_LB_4 = {"v": 4, "x": 8, "m": 6, "nn": 8, "k": 6}
REFERENCE_TO = {"v": (4, 12), "m": (6, 12), "k": (6, 4), "nn": (8, 12)}


def tessel_rows(shapes: list[str], devices: list[int], n_micro: int) -> list[str]:
    rows = [
        "| shape | D | memory | K | search s | Z3 units | N_R | t_R | LB | t_R = LB | idle @128 | reference idle |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(rows), flush=True)
    for shape in shapes:
        for D in devices:
            spec = make_shape(shape, D, recompute=True)
            mem = reference_memory(shape, D)
            ts = TesselScheduler()
            t0 = time.perf_counter()
            res = ts.search(spec, mem)
            dt = time.perf_counter() - t0
            sched = ts.schedule(spec, None, mem, n_micro)
            units = res.stats.get("z3_rlimit_used", 0) + res.stats.get("completion_rlimit_used", 0)
            ref = REFERENCE_IDLE_4.get(shape, "") if D == 4 else ""
            lb_ref = f" (ref {REFERENCE_LB_4[shape]})" if D == 4 and shape in REFERENCE_LB_4 else ""
            proven = "" if res.stats.get("optimal_repetend", True) else " (not proven)"
            rows.append(
                f"| {shape} | {D} | {mem} | {spec.K} | {dt:.1f} | {units / 1e6:.1f}M | {res.n_r} | {res.period} | "
                f"{res.lower_bound}{lb_ref} | {'yes' if res.period == res.lower_bound else 'no'}{proven} | "
                f"{100 * sched.bubble_rate:.2f}% | {ref} |"
            )
            print(rows[-1], flush=True)
    return rows


def to_rows(shapes: list[str], max_n: int) -> list[str]:
    rows = ["| shape | N | TO makespan | proven | reference optimum | search s |", "|---|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    for shape in shapes:
        spec = make_shape(shape, 4, recompute=True)
        for n in range(1, max_n + 1):
            t0 = time.perf_counter()
            s = TimeOptimalScheduler().schedule(spec, None, None, n)
            dt = time.perf_counter() - t0
            a_b = REFERENCE_TO.get(shape)
            ref = f"{a_b[0] * n + a_b[1]} ({a_b[0]}N+{a_b[1]})" if a_b else "-"
            rows.append(f"| {shape} | {n} | {s.makespan} | {'yes' if s.info['optimal'] else 'no'} | {ref} | {dt:.2f} |")
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="v,x,m,nn,k")
    ap.add_argument("--devices", default="4,6,8")
    ap.add_argument("--n-micro", type=int, default=128)
    ap.add_argument("--to-max-n", type=int, default=3, help="TO on N = 1 .. this at 4 devices (0: skip)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    shapes = args.shapes.split(",")
    print(f"bench_tessel: cpu count {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}", flush=True)
    tessel_rows(shapes, [int(d) for d in args.devices.split(",")], args.n_micro)
    if args.to_max_n > 0:
        print(flush=True)
        to_rows([s for s in shapes if s != "x"], args.to_max_n)


if __name__ == "__main__":
    main()
