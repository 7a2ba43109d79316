"""Simulator throughput: at least 20,000 ops and 60,000 edges on 4 devices (target: under 2 s).

    python benchmarks/bench_simulator.py [--levels 400] [--repeats 3]

Prints the graph size and the best wall time of several runs for a static order and for the FIFO policy,
in parallel and sequential communication mode.
"""

from __future__ import annotations

import argparse
import random
import time

from algorithms import Placement, simulate, uniform_cluster
from algorithms.placement import topological_schedule
from algorithms.workloads.synthetic import level_dag


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", type=int, default=410)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    t0 = time.perf_counter()
    g = level_dag(
        levels=args.levels,
        min_nodes_per_level=40,
        max_nodes_per_level=60,
        edge_probability=0.012,
        edge_level_limit=5,
        random_edges=5000,
        seed=1,
        colocated_fraction=0.1,
    )
    gen_s = time.perf_counter() - t0
    g.index()
    rng = random.Random(0)
    print(f"graph: {len(g)} ops, {g.number_of_edges()} edges (generated in {gen_s:.2f}s)")
    for mode in ("parallel", "sequential"):
        c = uniform_cluster(4, 1e12, latency_s=1e-5, bytes_per_s=1e9, mode=mode)
        pl = Placement({o: rng.choice(c.names) for o in g.ops})
        sched = topological_schedule(g, pl, c.names)
        for label, kw in (("static order", {"schedule": sched}), ("FIFO policy", {})):
            best = float("inf")
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                r = simulate(g, c, pl, **kw)
                best = min(best, time.perf_counter() - t0)
            status = "OK" if best < 2.0 else "SLOWER THAN TARGET"
            print(
                f"{mode:10s} {label:12s}: {best:.3f} s  (makespan {r.makespan:.4g} s, "
                f"{len(r.transfers)} transfers)  target < 2 s: {status}"
            )


if __name__ == "__main__":
    main()
