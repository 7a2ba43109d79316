"""The lowest memory per device, as a fraction of the model's single-device need, at which each memory-aware
placer fits a graph, and the figures that set it (issue 17, item 6).

Input: an optimized graph as a job writes it (the `optimize` stage's ``graph.json`` in the job cache, e.g. GNMT
after ``optimizer=baechi_pairs``, whose colocation groups hold Baechi's forced forward/backward pairs). The
cluster: four identical devices with cpu4's nominal links (20 us, 5 GB/s, parallel transfers; the jobs use
the fitted links, which changes timings, not what fits). For every fraction of the grid and every placer: fits
(the placement replays in the simulator without running out of memory) or the `InfeasiblePlacement` message.
Also printed: the need (`algorithms.memory.single_device_need`), the number of colocation groups, and the
largest group and largest op by static memory (persistent + temporary + output bytes, the most they can hold
at once) as fractions of the need: a device must hold its largest group whole, so no fraction below that fits.

    PYTHONPATH=. python experiments/baechi_min_fraction.py GRAPH.json [--fractions 0.4 0.5 0.6 0.7 0.8 0.9]
        [--placers m_topo,m_etf,m_sct,celeritas] [--same-as 2.0]

Feasibility need not be monotone in the fraction (a list placer's decisions change with the limit); the grid
shows each point.
"""

from __future__ import annotations

import argparse
import collections
import logging
import time

from algorithms.cluster import uniform_cluster
from algorithms.errors import InfeasiblePlacement
from algorithms.graph import OpGraph
from algorithms.memory import single_device_need
from algorithms.simulator import simulate

try:  # run as a script from the repository root: experiments/ is on sys.path
    from baechi_table4 import same_devices
except ImportError:  # imported as experiments.baechi_min_fraction
    from experiments.baechi_table4 import same_devices


def make(name: str):
    from algorithms.placers.baechi import METFPlacer, MSCTPlacer, MTOPOPlacer
    from algorithms.placers.celeritas import CeleritasPlacer, OrderPlacePlacer

    return {
        "m_topo": MTOPOPlacer,
        "m_etf": METFPlacer,
        "m_sct": MSCTPlacer,
        "celeritas": lambda: CeleritasPlacer(R="auto"),
        "order_place": lambda: OrderPlacePlacer(R="auto"),
    }[name]()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graph")
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    ap.add_argument("--placers", default="m_topo,m_etf,m_sct,celeritas")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument(
        "--same-as",
        type=float,
        default=None,
        help="also place at this fraction and print the share of ops on the same device (devices renamed)",
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    g = OpGraph.load(args.graph)
    idx = g.index()
    need = single_device_need(g)
    static = [p + t + o for p, t, o in zip(idx.persistent, idx.temporary, idx.output)]
    groups: dict[str, float] = collections.defaultdict(float)
    sizes: collections.Counter[str] = collections.Counter()
    for i, grp in enumerate(idx.colocation):
        if grp is not None:
            groups[grp] += static[i]
            sizes[grp] += 1
    big = max(groups, key=groups.__getitem__) if groups else None
    op = max(range(idx.n), key=static.__getitem__)
    print(f"{g.name}: {idx.n} ops, need {need / 1e6:.2f} MB, {len(groups)} colocation groups")
    if big is not None:
        print(
            f"largest group {big!r}: {sizes[big]} ops, {groups[big] / 1e6:.2f} MB static = "
            f"{groups[big] / need:.3f} of need"
        )
    print(f"largest op {idx.names[op]!r}: {static[op] / 1e6:.2f} MB static = {static[op] / need:.3f} of need")
    ref: dict[str, dict[str, str]] = {}
    if args.same_as is not None:
        cl = uniform_cluster(args.devices, args.same_as * need, latency_s=2e-5, bytes_per_s=5e9)
        for name in args.placers.split(","):
            try:
                ref[name] = make(name).place(g, cl).assignment
            except InfeasiblePlacement:
                pass
    print(f"{'fraction':>8} {'placer':10} {'result':8} {'step (s)':>9} {'peak/limit':>22} {'time':>6}  error")
    for frac in args.fractions:
        cl = uniform_cluster(args.devices, frac * need, latency_s=2e-5, bytes_per_s=5e9)
        for name in args.placers.split(","):
            t0 = time.perf_counter()
            try:
                pl = make(name).place(g, cl)
            except InfeasiblePlacement as exc:
                print(
                    f"{frac:8.2f} {name:10} {'refuses':8} {'':>9} {'':>22} {time.perf_counter() - t0:6.1f}  "
                    f"{str(exc)[:160]}"
                )
                continue
            res = simulate(g, cl, pl, pl.order or None)
            peaks = " ".join(f"{res.peak_memory[d.name] / d.memory_bytes:.2f}" for d in cl.devices)
            status = "fits" if res.ok else "OOM"
            same = f"  same devices as at {args.same_as:g}: {same_devices(pl.assignment, ref.get(name))}" if ref else ""
            print(
                f"{frac:8.2f} {name:10} {status:8} {res.makespan:9.4f} {peaks:>22} "
                f"{time.perf_counter() - t0:6.1f}{same}"
            )


if __name__ == "__main__":
    main()
