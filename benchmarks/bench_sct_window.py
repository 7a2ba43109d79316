"""m-SCT with the whole SCT LP against the windowed one (issue 22): time and quality per window size.

    PYTHONPATH=. python benchmarks/bench_sct_window.py [--graph random|chain] [--sizes 10000,30000,100000]
                                          [--windows full,1000,2000,4000,8000] [--timeout 900]

For each size the benchmark's graph (`bench_scale.make_graph`, same cluster: four GPUs with ample memory,
parallel communication) is built once; each formulation then runs m-SCT (`MSCTPlacer`,
``lp_formulation="full"`` or ``"windowed"`` with ``lp_window``) in a forked child and simulates its placement.
Printed per run: CPU seconds of the placement, wall seconds of its LP (HiGHS, summed over the windows), the number of
windows, favourite children, m-SCT's predicted makespan, the simulator's makespan of the placement (in
m-SCT's order), and its ratio to the whole LP's simulated makespan at that size (when the whole LP ran).
A child that exceeds ``--timeout`` is reported as such; the whole LP is skipped above ``--full-max`` ops.
``--lp-only`` times the LP alone instead (`sct_lp` / `sct_lp_windowed` and the rounding, in this process):
its CPU seconds, HiGHS' share of them (the summed CPU time of the solver calls) and the favourite children.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

from benchmarks.bench_scale import make_graph, run_forked


def _child(conn, graph, cluster, window: int | None) -> None:
    import logging

    logging.disable(logging.WARNING)
    from algorithms.placers.baechi import MSCTPlacer
    from algorithms.simulator import simulate

    out: dict[str, Any] = {}
    try:
        placer = (
            MSCTPlacer(lp_formulation="full")
            if window is None
            else MSCTPlacer(lp_formulation="windowed", lp_window=window)
        )
        c = time.process_time()
        pl = placer.place(graph, cluster)
        out["place_cpu_s"] = time.process_time() - c
        out["info"] = {k: v for k, v in pl.info.items() if isinstance(v, (int, float, str))}
        sim = simulate(graph, cluster, pl.assignment, pl.order or None)
        out["sim_makespan_s"] = sim.makespan
    except Exception as exc:  # reported, the benchmark goes on
        out["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    conn.send(out)
    conn.close()


def run(graph, cluster, window: int | None, timeout: float) -> dict[str, Any]:
    return run_forked(_child, (graph, cluster, window), timeout)


def lp_only(graph, cluster, window: int | None) -> str:
    """CPU seconds of the LP and the rounding, of HiGHS alone within them, and the favourite children."""
    from algorithms.placers.baechi import favorite_children
    from algorithms.placers.baechi import sct_lp as lp_mod

    solver = [0.0]
    solve = lp_mod._solve

    def timed(*args: Any, **kwargs: Any):
        c = time.process_time()
        try:
            return solve(*args, **kwargs)
        finally:
            solver[0] += time.process_time() - c

    lp_mod._solve = timed
    try:
        c = time.process_time()
        if window is None:
            x, facts = lp_mod.sct_lp(graph, cluster)
        else:
            x, facts = lp_mod.sct_lp_windowed(graph, cluster, window=window)
        favs = sum(1 for f in favorite_children(graph, x) if f >= 0)
        cpu = time.process_time() - c
    finally:
        lp_mod._solve = solve
    return (
        f"lp+rounding {cpu:7.2f} s CPU, HiGHS {solver[0]:7.2f} s, windows {facts.get('lp_windows', 1)}, "
        f"vars {facts.get('lp_vars')}, rows {facts.get('lp_rows')}, favourites {favs}"
    )


def main() -> None:
    from algorithms.cluster import uniform_cluster

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", choices=("random", "chain"), default="random")
    ap.add_argument("--sizes", default="10000,30000,100000")
    ap.add_argument("--windows", default="full,1000,2000,4000,8000", help="'full' and/or ops per window")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--full-max", type=int, default=10**9, help="largest size the whole LP is run at")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lp-only", action="store_true", help="time the LP and its rounding alone")
    args = ap.parse_args()
    print(
        f"# bench_sct_window {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {platform.node()} "
        f"{platform.machine()}, {os.cpu_count()} cores; python {platform.python_version()}; graph {args.graph}",
        flush=True,
    )
    print(
        f"{'ops':>8s} {'lp':>6s}"
        if args.lp_only
        else f"{'ops':>8s} {'lp':>6s} {'place_cpu':>9s} {'lp_s':>8s} {'windows':>7s} {'favs':>6s} "
        f"{'predicted_s':>12s} {'simulated_s':>12s} {'vs_full':>8s} {'load':>5s}",
        flush=True,
    )
    for size in [int(s) for s in args.sizes.split(",") if s]:
        g = make_graph(args.graph, size, args.seed)
        g.index()
        cluster = uniform_cluster(4, 4 * g.total_memory(), type="GPU", latency_s=1.34e-4, bytes_per_s=5.7e9)
        full: float | None = None
        for w in [s for s in args.windows.split(",") if s]:
            window = None if w == "full" else int(w)
            if window is None and len(g) > args.full_max:
                print(f"{len(g):>8d} {w:>6s} skipped (--full-max)", flush=True)
                continue
            if args.lp_only:
                print(f"{len(g):>8d} {w:>6s} {lp_only(g, cluster, window)}  load {os.getloadavg()[0]:.1f}", flush=True)
                continue
            res = run(g, cluster, window, args.timeout)
            load = os.getloadavg()[0]
            if "error" in res:
                print(f"{len(g):>8d} {w:>6s} {res['error']}  load {load:.1f}", flush=True)
                continue
            info = res["info"]
            sim = res["sim_makespan_s"]
            if window is None:
                full = sim
            ratio = f"{sim / full:8.4f}" if full else f"{'-':>8s}"
            print(
                f"{len(g):>8d} {w:>6s} {res['place_cpu_s']:9.2f} {info.get('lp_time_s', 0.0):8.2f} "
                f"{info.get('lp_windows', 1):>7} {info.get('n_favorite_children', 0):>6} "
                f"{info.get('predicted_makespan_s', float('nan')):12.6f} {sim:12.6f} {ratio} {load:5.1f}",
                flush=True,
            )
        del g


if __name__ == "__main__":
    main()
