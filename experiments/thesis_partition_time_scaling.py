"""Partitioning time of the thesis' partitioners at the preset's size and at the thesis' size (seed 004, 7.1,
Figure 7.3: "Executing HEFT took the longest by far").

The thesis_synthetic preset runs Table 7.1's graphs at a tenth of their levels (`thesis_size=small`); this script
times each partitioner's `place` alone on one graph at both sizes, on the preset's 100 generated devices (memory
as the preset scales it), so that the growth of each partitioner's cost with the graph is visible without the
full 42-job sweep at the thesis' sizes. Graph parameters are read from conf/experiment/thesis_synthetic.yaml.

    python experiments/thesis_partition_time_scaling.py                       # graph 3, HEFT / DFS / MITE / Hashing
    python experiments/thesis_partition_time_scaling.py --graph g4 --placers heft dfs mite icp

Prints one line per size and partitioner: nodes, seconds (fastest of --repeats), and the ratio to the fastest
partitioner of that size.
Wall-clock: run on an idle machine for figures worth comparing across sessions.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PLACERS = {
    "heft": "HEFTPlacer",
    "dfs": "DFSPlacer",
    "mite": "MITEPlacer",
    "hashing": "HashingPlacer",
    "icp": "IteratedCriticalPathPlacer",
    "critical_path": "CriticalPathPlacer",
    "batch_split": "BatchSplitPlacer",
}


def main(argv: list[str] | None = None) -> int:
    from omegaconf import OmegaConf

    import algorithms.placers.thesis as thesis
    from algorithms.workloads.synthetic import level_dag, thesis_devices

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", default="g3", help="g1 .. g6 of Table 7.1")
    ap.add_argument("--placers", nargs="+", default=["heft", "dfs", "mite", "hashing"], choices=sorted(PLACERS))
    ap.add_argument("--devices", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    cfg = OmegaConf.load(ROOT / "conf" / "experiment" / "thesis_synthetic.yaml")
    gen = OmegaConf.to_container(cfg.model.generator, resolve=False)
    assert isinstance(gen, dict)
    for size in ("small", "paper"):
        q = cfg.thesis_graphs[size][args.graph]
        kw = {k: v for k, v in gen.items() if not (isinstance(v, str) and "${" in v)}
        g = level_dag(
            **kw,
            levels=q.levels,
            min_nodes_per_level=q.min_w,
            max_nodes_per_level=q.max_w,
            edge_probability=q.p,
            edge_level_limit=q.limit,
            random_edges=q.random_edges,
            colocated_fraction=q.colocated,
            stream=q.stream,
            seed=0,
        )
        cl = thesis_devices(args.devices, seed=0)
        frac = float(cfg.thesis_memory_fraction[size])
        cl = cl.scaled(frac) if frac != 1.0 else cl
        g.index()  # built once and cached on the graph, so that the first partitioner timed does not pay for it
        times: dict[str, float] = {}
        for name in args.placers:
            for _ in range(args.repeats):  # the fastest of the repeats: less of other jobs' load
                placer = getattr(thesis, PLACERS[name])()
                t0 = time.perf_counter()
                placer.place(g, cl)
                times[name] = min(times.get(name, float("inf")), time.perf_counter() - t0)
        best = min(times.values())
        for name, t in times.items():
            print(f"{size:5s} {args.graph} {g.index().n:6d} nodes  {name:13s} {t:8.3f} s  x{t / best:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
