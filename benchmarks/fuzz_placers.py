"""Fuzz the memory-aware placers on random training-like graphs at tight memory (issue 17).

For each case: a level-based random training graph (forward ops, their backward and weight-gradient ops,
colocation groups, `algorithms.workloads.synthetic.level_dag`), 2 to 4 identical devices, each given a
fraction of the graph's single-device need (`algorithms.memory.single_device_need`) drawn from [0.35, 1.0]
(one case in five exactly 1.0), and a communication mode (parallel or sequential, alternating).  Every placer
places it; a returned placement is replayed by the simulator in the placer's own per-device order.

Prints, per placer and mode: cases, placements returned, simulated OOMs among them, InfeasiblePlacement
raised, *false infeasibles* (InfeasiblePlacement although the whole graph fits on one device), and, when
m-SCT is among the placers, the InfeasiblePlacement raised in cases where m-SCT's placement fits.

    PYTHONPATH=. python benchmarks/fuzz_placers.py [--cases 2000] [--seed 0] [--placers m_topo,m_etf,m_sct]
        [--mode both|parallel|sequential] [--no-replay-check] [-v]

``--mode`` keeps only the cases of one communication mode (the cases drawn are the same).
``--no-replay-check`` turns off m-ETF's and m-SCT's sequential-mode replay check
(`algorithms.placers.baechi.safeguards.REPLAY_CHECK`), to count what it catches.

(PYTHONPATH=. makes a worktree's code win over the installed package.)
"""

from __future__ import annotations

import argparse
import logging
import random
import time
from collections import defaultdict

from algorithms.cluster import uniform_cluster
from algorithms.errors import InfeasiblePlacement
from algorithms.graph import OpGraph
from algorithms.memory import single_device_need
from algorithms.simulator import simulate
from algorithms.workloads.synthetic import level_dag

PLACERS = ("m_topo", "m_etf", "m_sct", "celeritas", "order_place")


def make_placer(name: str):
    from algorithms.placers.baechi import METFPlacer, MSCTPlacer, MTOPOPlacer
    from algorithms.placers.celeritas import CeleritasPlacer, OrderPlacePlacer

    return {
        "m_topo": MTOPOPlacer,
        "m_etf": METFPlacer,
        "m_sct": MSCTPlacer,
        "celeritas": CeleritasPlacer,
        "order_place": OrderPlacePlacer,
    }[name]()


def random_graph(rng: random.Random, k: int) -> OpGraph:
    """`tests.strategies.random_dags` drawn with `random`: n ops, each edge i -> j (i < j) with probability p,
    random costs and sizes, ops in random small colocation groups; half the time with backward ops."""
    n = rng.randint(2, 25)
    p = rng.uniform(0.05, 0.5)
    ngroups = rng.randint(0, max(0, n // 4))
    g = OpGraph(f"fuzz{k}")
    for i in range(n):
        grp = f"g{rng.randrange(ngroups)}" if ngroups and rng.random() < 0.25 else None
        g.add_op(
            f"op{i}",
            compute_s=rng.uniform(0.0, 1.0),
            persistent_bytes=rng.randint(0, 1000),
            temporary_bytes=rng.randint(0, 1000),
            output_bytes=rng.randint(0, 1000),
            colocation=grp,
        )
    for i in range(n):
        for j in range(i + 1, n):
            if rng.random() < p:
                g.add_edge(f"op{i}", f"op{j}", bytes=g.op(f"op{i}")["output_bytes"])
    if rng.random() < 0.5:
        edges = list(g.nx.edges)
        for f in list(g.ops):
            a = g.op(f)
            g.add_op(f"{f}/grad", compute_s=2 * a["compute_s"], output_bytes=a["output_bytes"], forward_of=f)
            g.add_edge(f, f"{f}/grad", bytes=a["output_bytes"])
        for u, v in edges:
            g.add_edge(f"{v}/grad", f"{u}/grad", bytes=g.op(f"{v}/grad")["output_bytes"])
    g.invalidate()
    return g


def case(rng: random.Random, k: int):
    if k % 4 >= 2:
        graph = random_graph(rng, k)
        need = single_device_need(graph)
        frac = 1.0 if rng.random() < 0.2 else rng.uniform(0.35, 1.0)
        mode = "parallel" if k % 2 == 0 else "sequential"
        cluster = uniform_cluster(
            rng.randint(1, 5),
            frac * need,
            latency_s=rng.uniform(0, 0.1),
            bytes_per_s=rng.uniform(100, 10000),
            mode=mode,
        )
        return graph, cluster, frac
    graph = level_dag(
        levels=rng.randint(3, 8),
        min_nodes_per_level=1,
        max_nodes_per_level=rng.randint(2, 5),
        edge_probability=rng.uniform(0.2, 0.6),
        edge_level_limit=2,
        colocated_fraction=rng.choice([0.0, 0.2, 0.4]),
        max_group_size=4,
        memory_range=(0, 50),
        tensor_range=(1, 100),
        training=True,
        seed=rng.randrange(1 << 30),
        name=f"fuzz{k}",
    )
    need = single_device_need(graph)
    frac = 1.0 if rng.random() < 0.2 else rng.uniform(0.35, 1.0)
    mode = "parallel" if k % 2 == 0 else "sequential"
    cluster = uniform_cluster(rng.randint(2, 4), frac * need, latency_s=1e-5, bytes_per_s=1e9, mode=mode)
    return graph, cluster, frac


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--placers", default="m_topo,m_etf,m_sct")
    ap.add_argument("--mode", choices=("both", "parallel", "sequential"), default="both")
    ap.add_argument("--no-replay-check", action="store_true", help="m-ETF/m-SCT: no sequential replay check")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every failing case")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    names = [p for p in args.placers.split(",") if p]
    if args.no_replay_check:
        from algorithms.placers.baechi import safeguards

        safeguards.REPLAY_CHECK = False
    rng = random.Random(args.seed)
    stats: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    t0 = time.perf_counter()
    for k in range(args.cases):
        graph, cluster, frac = case(rng, k)
        if args.mode != "both" and cluster.mode != args.mode:
            continue
        outcome: dict[str, str] = {}
        for name in names:
            s = stats[(name, cluster.mode)]
            s["cases"] += 1
            try:
                pl = make_placer(name).place(graph, cluster)
            except InfeasiblePlacement as exc:
                outcome[name] = "infeasible"
                s["infeasible"] += 1
                if frac >= 1.0:
                    s["false_infeasible"] += 1
                    if args.verbose:
                        print(f"case {k} {name} {cluster.mode} frac {frac:.2f}: false infeasible: {exc}")
                elif args.verbose:
                    print(f"case {k} {name} {cluster.mode} frac {frac:.2f}: infeasible: {exc}")
                continue
            s["placed"] += 1
            res = simulate(graph, cluster, pl, pl.order or None)
            outcome[name] = "ok" if res.ok else "oom"
            if not res.ok:
                s["sim_oom"] += 1
                if args.verbose:
                    print(f"case {k} {name} {cluster.mode} frac {frac:.2f}: {res.oom.message()}")
        if outcome.get("m_sct") == "ok":
            for name, out in outcome.items():
                if out == "infeasible":
                    stats[(name, cluster.mode)]["refused_msct_fits"] += 1
    print(f"{args.cases} cases, seed {args.seed}, {time.perf_counter() - t0:.1f} s")
    print(
        f"{'placer':12} {'mode':11} {'cases':>6} {'placed':>7} {'sim OOM':>8} {'infeasible':>11} {'false inf.':>11} "
        f"{'inf. where m-SCT fits':>22}"
    )
    for (name, mode), s in sorted(stats.items()):
        print(
            f"{name:12} {mode:11} {s['cases']:6d} {s['placed']:7d} {s['sim_oom']:8d} {s['infeasible']:11d} "
            f"{s['false_infeasible']:11d} {s['refused_msct_fits'] if 'm_sct' in names else '-':>22}"
        )


if __name__ == "__main__":
    main()
