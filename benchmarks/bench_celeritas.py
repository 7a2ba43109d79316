"""Celeritas on a large synthetic training graph (seed 002, Tables 2, 3 and 4).

Prints, for a level_dag training graph of >= 36,000 ops (the paper's Transformer has 36,352) on Baechi's 4 x 8 GB
GPU machine: the full Celeritas placement time (target < 5 s; the paper: 95 s), the node count and CCR before
and after fusion (Table 2), and the simulated step time of Celeritas, Order-Place, METIS and, when their modules
exist, Baechi's m-ETF, m-SCT and m-TOPO (algorithms.placers.baechi) on the same graph (Table 3).

    python benchmarks/bench_celeritas.py [--levels 1140] [--seed 0] [--bytes-per-s 5.7e9] [--tensor-unit 1e4]
                                         [--extra-R 20]
                                         [--no-baselines] [--skip m_sct ...]

The default graph (1140 levels, seed 0) has 36,444 ops. `--bytes-per-s` sets the link bandwidth: the default
(Baechi's PCIe fit, 5.7e9) gives CCR ~2.4; about 1e8 gives a CCR in the paper's range (Table 2: 18 to 112)
without changing memory. `--tensor-unit` scales every tensor (and so the output memory). `--extra-R` adds
Celeritas runs with other exploration ranges (the paper's R = 200 always runs).
"""

from __future__ import annotations

import argparse
import importlib
import os
import time

from algorithms.cluster import Cluster, Device
from algorithms.placement import check_placement
from algorithms.placers.celeritas import (
    CeleritasPlacer,
    MetisPlacer,
    OrderPlacePlacer,
    SequentialDfsTopoPlacer,
)
from algorithms.simulator import simulate
from algorithms.workloads.synthetic import level_dag


def baechi(name: str):
    """Baechi's placers when their module exists (written by another engineer), else None."""
    try:
        mod = importlib.import_module("algorithms.placers.baechi")
    except ImportError:
        return None
    for attr in dir(mod):
        obj = getattr(mod, attr)
        if isinstance(obj, type) and getattr(obj, "name", None) == name:
            return obj
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--levels", type=int, default=1140)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tensor-unit", type=float, default=1e4)
    ap.add_argument("--bytes-per-s", type=float, default=5.7e9)
    ap.add_argument("--extra-R", type=int, nargs="*", default=[])
    ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument("--skip", nargs="*", default=[], help="placer names to leave out (e.g. m_sct)")
    args = ap.parse_args()
    t = time.perf_counter()
    g = level_dag(
        levels=args.levels,
        min_nodes_per_level=4,
        max_nodes_per_level=12,
        edge_probability=0.15,
        edge_level_limit=5,
        random_edges=200,
        colocated_fraction=0.15,
        training=True,
        memory_unit_bytes=1e4,
        tensor_unit_bytes=args.tensor_unit,
        seed=args.seed,
    )
    g.index()  # the integer view every placer uses, built once outside the timings
    gen_s = time.perf_counter() - t
    cl = Cluster(
        [Device(f"gpu{i}", "GPU", 8e9, 1.0) for i in range(4)], 1.34e-4, args.bytes_per_s, "sequential", name="gpu4_8gb"
    )
    print(
        f"graph: {len(g)} ops, {g.number_of_edges()} edges, static memory {g.total_memory() / 1e9:.2f} GB "
        f"(generated in {gen_s:.1f} s); cluster: 4 x 8 GB GPUs, sequential transfers, latency 1.34e-4 s, "
        f"{args.bytes_per_s:.3g} B/s"
    )
    serial = sum(a["compute_s"] for _, a in g.nx.nodes(data=True))
    print(f"sum of compute (one device, no transfers): {serial:.4f} s; tensor unit {args.tensor_unit:g} bytes")
    print(f"machine load: {os.getloadavg()[0]:.1f} (1-min load average on {os.cpu_count()} cores)")
    placers = [
        ("celeritas", CeleritasPlacer(check_memory=False)),
        ("order_place", OrderPlacePlacer(check_memory=False)),
    ]
    placers += [(f"celeritas R={r}", CeleritasPlacer(R=r, check_memory=False)) for r in args.extra_R]
    placers += [("metis", MetisPlacer()), ("dfs_topo_seq", SequentialDfsTopoPlacer())]
    if not args.no_baselines:
        for name in ("m_etf", "m_sct", "m_topo"):
            cls = baechi(name)
            placers.append((name, cls() if cls is not None else None))
    print(f"{'placer':<16}{'place_s':>10}{'step_s':>12}{'status':>8}  notes")
    for name, p in placers:
        if name in args.skip:
            print(f"{name:<16}{'skipped':>30}")
            continue
        if p is None:
            print(f"{name:<16}{'not available':>30}")
            continue
        t = time.perf_counter()
        try:
            pl = p.place(g, cl)
        except Exception as exc:  # a baseline that fails is reported, not fatal
            print(f"{name:<16}{'error':>10}  {type(exc).__name__}: {exc}")
            continue
        place_s = time.perf_counter() - t
        check_placement(g, cl, pl)
        res = simulate(g, cl, pl, schedule=pl.order, record_memory=False)
        status = "ok" if res.ok else "oom"
        notes = ""
        if name.startswith(("celeritas", "order_place")):
            i = pl.info
            notes = (
                f"nodes {i['n_ops']} -> {i['n_coarse_ops']}, CCR {i['ccr_before']:.3f} -> "
                f"{i['ccr_after']:.3f}, fusion {i['fusion_time_s']:.2f} s, best_effort {i['best_effort']}"
            )
            if name.startswith("celeritas"):
                notes += f", adjust {i['adjust_time_s']:.3f} s, moves {i['moves']}"
        elif "best_effort" in pl.info:
            notes = f"best_effort {pl.info['best_effort']}"
        print(f"{name:<16}{place_s:>10.2f}{res.makespan:>12.4f}{status:>8}  {notes}", flush=True)


if __name__ == "__main__":
    main()
