"""Partitioning time of the thesis' partitioners (seed 004, Figures 7.3 and 7.6) on the largest synthetic graph.

Builds graph 1 of Table 7.1 (300 levels of 50..200 nodes, edge level limit 20, 8,003 random edges, 14% colocated
nodes: about 36,000 nodes) with the level-based generator, generates 100 and 7 heterogeneous devices with the
thesis' device generator, and times every partitioner once per cluster (wall clock, `time.perf_counter`). For
each run it also prints the simulated makespan under the PCT scheduler and the traffic (eq. 2.2 after
send/receive aggregation), so that time can be weighed against quality.

    python benchmarks/bench_thesis.py                 # the paper's size (about 36,000 ops)
    python benchmarks/bench_thesis.py --levels 60     # a quicker, smaller graph
    python benchmarks/bench_thesis.py --placers heft,mite --devices 100
    python benchmarks/bench_thesis.py --graph-cache /tmp/g1.graph.json   # reuse the generated graph

Graph 1 needs about as much memory (sum of size_est) as 7 generated devices hold, so a cluster whose memory is
below `--memory-headroom` (default 2) times the graph's need gets its memory scaled up; the output says so.

The thesis found HEFT the slowest partitioner on the synthetic graphs (Figure 7.3) and ICP the slowest on the
TensorFlow graphs (Figure 7.6).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from algorithms.errors import InfeasiblePlacement
from algorithms.graph import OpGraph
from algorithms.placers.thesis import (
    BatchSplitPlacer,
    CriticalPathPlacer,
    DFSPlacer,
    HashingPlacer,
    HEFTPlacer,
    IteratedCriticalPathPlacer,
    MITEPlacer,
)
from algorithms.placers.thesis.common import size_est
from algorithms.schedulers.thesis import PCTScheduler
from algorithms.workloads.synthetic import level_dag, thesis_devices

PLACERS = {
    "hashing": HashingPlacer,
    "heft": HEFTPlacer,
    "batch_split": BatchSplitPlacer,
    "icp": IteratedCriticalPathPlacer,
    "critical_path": CriticalPathPlacer,
    "mite": MITEPlacer,
    "dfs": DFSPlacer,
}


def graph1(levels: int, seed: int):
    """Table 7.1, graph 1 (same calibration as conf/experiment/thesis_synthetic.yaml, `paper` size)."""
    return level_dag(
        levels=levels,
        min_nodes_per_level=50,
        max_nodes_per_level=200,
        edge_probability=8.92e-5,
        edge_level_limit=20,
        random_edges=round(8003 * levels / 300),
        colocated_fraction=0.143,
        max_group_size=8,
        compute_unit_s=1e-4,
        memory_unit_bytes=1e4,
        tensor_unit_bytes=1e4,
        p_cpu_only=0.05,
        p_gpu_only=0.05,
        training=False,
        seed=seed,
        name="thesis_g1",
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", type=int, default=300, help="levels of graph 1 (300: the paper's 36k nodes)")
    ap.add_argument("--devices", default="100,7", help="comma-separated device counts")
    ap.add_argument("--placers", default=",".join(PLACERS), help="comma-separated placer names")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-simulate", action="store_true", help="only time the partitioners")
    ap.add_argument(
        "--memory-headroom",
        type=float,
        default=2.0,
        help="scale a cluster's memory up, when needed, to this multiple of the graph's total size_est "
        "(graph 1 needs about as much as 7 generated devices hold; 0 keeps the generated memory)",
    )
    ap.add_argument(
        "--graph-cache",
        default=None,
        help="graph JSON to load if it exists, else to write after generating (saves minutes)",
    )
    args = ap.parse_args()

    t0 = time.perf_counter()
    if args.graph_cache and os.path.exists(args.graph_cache):
        g = OpGraph.load(args.graph_cache)
    else:
        g = graph1(args.levels, args.seed)
        if args.graph_cache:
            g.save(args.graph_cache)
    t_gen = time.perf_counter() - t0
    n_col = sum(1 for n in g.ops if g.op(n)["colocation"] is not None)
    print(
        f"graph 1: {len(g)} ops, {g.number_of_edges()} edges, {n_col} colocated ops "
        f"(built in {t_gen:.1f} s); host: {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f}"
    )
    g.index()
    need = sum(size_est(g.index(), i) for i in range(len(g)))
    print(f"total size_est of the graph: {need / 1e9:.1f} GB")
    for nd in [int(x) for x in args.devices.split(",") if x]:
        cl = thesis_devices(nd, seed=0)
        frac = 1.0
        if args.memory_headroom > 0 and cl.total_memory() < args.memory_headroom * need:
            frac = args.memory_headroom * need / cl.total_memory()
            cl = cl.scaled(frac)
        types = {t: sum(1 for d in cl.devices if d.type == t) for t in ("CPU", "GPU", "TPU")}
        print(
            f"\n{nd} devices {types}, total memory {cl.total_memory() / 1e9:.1f} GB"
            + (f" (generated memory x {frac:.2f})" if frac != 1.0 else "")
        )
        print(f"{'placer':<14} {'time (s)':>9} {'makespan (s)':>13} {'traffic (MB)':>13} {'devices used':>13}")
        for name in [x for x in args.placers.split(",") if x]:
            placer = PLACERS[name]()
            t0 = time.perf_counter()
            try:
                p = placer.place(g, cl)
            except InfeasiblePlacement as exc:
                print(f"{name:<14} {time.perf_counter() - t0:>9.2f}  infeasible: {exc}")
                continue
            dt = time.perf_counter() - t0
            if args.no_simulate:
                print(f"{name:<14} {dt:>9.2f}")
                continue
            res = PCTScheduler().run(g, cl, p, record_decisions=False)
            print(
                f"{name:<14} {dt:>9.2f} {res.makespan:>13.5g} {res.traffic_bytes / 1e6:>13.1f} "
                f"{len(p.devices_used()):>13}"
            )
            sys.stdout.flush()


if __name__ == "__main__":
    main()
