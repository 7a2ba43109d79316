"""HEFT and ETF of this project against the public `anrg-saga` library on the same instances.

Instances: level-based random DAGs (thesis 6.2 generator, forward only) on heterogeneous devices from the thesis'
device generator (speeds 10..100, symmetric per-pair rates), without memory limits, device-type constraints or
colocation, since saga models none of them. Both sides see the same numbers: a task's cost is the op's
`compute_s` and its time on a node is cost / speed; a dependency's size is the edge's bytes and its transfer time
size / link speed (latency 0). A zero-cost super source and super sink are added on both sides (saga needs a
single source and sink).

For every instance the script prints the makespan and run time of

* HEFT: `algorithms.placers.thesis.HEFTPlacer` (its own timeline, and the simulator replaying its order) against
  `saga.schedulers.heft.HeftScheduler`, plus this project's HEFT driven by saga's rank definition (column
  "w/ saga rk"), which isolates the effect of the thesis' rank adaptation (eq. 4.2);
* ETF: `algorithms.placers.baechi.METFPlacer(memory_aware=False)` (classical ETF) against
  `saga.schedulers.etf.ETFScheduler`;

and replays saga's schedules (assignment plus per-node order) in this project's simulator: when the replay gives
saga's makespan, both libraries model time the same way, and any remaining difference comes from the algorithms'
definitions (see `explain()` at the end of the output).

    pip install --no-deps anrg-saga          # saga's heavy optional dependencies are not needed here
    python benchmarks/compare_saga.py [--sizes 4,8,16] [--devices 4,8] [--seeds 3]

saga's package `__init__` imports every scheduler, one of which needs `pysmt`; this script loads only the HEFT,
CPOP (for HEFT's ranks) and ETF modules, so pysmt, pygraphviz and wfcommons are not required.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import time
import types

from algorithms.cluster import Cluster
from algorithms.graph import OpGraph
from algorithms.placement import Placement
from algorithms.placers.thesis import HEFTPlacer
from algorithms.simulator import simulate
from algorithms.workloads.synthetic import level_dag, thesis_devices


def load_saga():
    """Import saga's Network/TaskGraph and its HEFT and ETF schedulers without saga.schedulers' __init__."""
    import saga

    if "saga.schedulers" not in sys.modules:
        pkg = types.ModuleType("saga.schedulers")
        pkg.__path__ = [os.path.join(os.path.dirname(saga.__file__), "schedulers")]
        sys.modules["saga.schedulers"] = pkg
    from saga.schedulers.etf import ETFScheduler
    from saga.schedulers.heft import HeftScheduler

    return saga, HeftScheduler, ETFScheduler


def instance(levels: int, n_dev: int, seed: int) -> tuple[OpGraph, Cluster]:
    g = level_dag(
        levels=levels,
        min_nodes_per_level=2,
        max_nodes_per_level=8,
        edge_probability=0.3,
        edge_level_limit=3,
        random_edges=levels // 2,
        compute_unit_s=1.0,
        tensor_unit_bytes=1.0,
        memory_unit_bytes=0.0,
        seed=seed,
        name=f"l{levels}-s{seed}",
    )
    sources = [n for n in g.ops if g.nx.in_degree(n) == 0]
    sinks = [n for n in g.ops if g.nx.out_degree(n) == 0]
    g.add_op("__super_source__", compute_s=0.0)
    g.add_op("__super_sink__", compute_s=0.0)
    for s in sources:
        g.add_edge("__super_source__", s, bytes=0.0)
    for s in sinks:
        g.add_edge(s, "__super_sink__", bytes=0.0)
    cl = thesis_devices(n_dev, seed=seed, transfer_unit_bytes_per_s=1.0).with_memory(math.inf)
    return g, cl


def to_saga(saga, g: OpGraph, cl: Cluster):
    nodes = [(d.name, float(d.speed)) for d in cl.devices]
    edges = []
    for i, a in enumerate(cl.devices):
        for j, b in enumerate(cl.devices):
            if i < j:
                edges.append((a.name, b.name, float(cl.bandwidth_table[i][j])))
    net = saga.Network.create(nodes, edges)
    tasks = [(n, float(g.op(n)["compute_s"])) for n in g.ops]
    deps = [(u, v, float(d["bytes"])) for u, v, d in g.edges()]
    return net, saga.TaskGraph.create(tasks, deps)


def replay(g: OpGraph, cl: Cluster, sched) -> float:
    """Replay a saga schedule (node -> tasks ordered by start) in this project's simulator."""
    assign, order = {}, {}
    for node, tasks in sched.mapping.items():
        ts = sorted(tasks, key=lambda t: (t.start, t.end))
        order[node] = [t.name for t in ts]
        for t in ts:
            assign[t.name] = node
    for d in cl.names:
        order.setdefault(d, [])
    return simulate(g, cl, Placement(assign), schedule=order, record_memory=False).makespan


def saga_style_rank(graph: OpGraph, cluster: Cluster):
    """HEFT's upward rank computed the way saga does (original paper's averages, see `explain`): mean of the
    execution times over the nodes, and mean of size / speed over the network's undirected edges including the
    self-loops (speed infinite, so they add zero). Same return shape as `common.upward_rank`."""
    idx = graph.index()
    n = len(cluster.devices)
    pairs = n * (n - 1) // 2 + n
    mean_inv = sum(1.0 / cluster.bandwidth_table[i][j] for i in range(n) for j in range(i + 1, n)) / pairs
    rank = [0.0] * idx.n
    for i in range(idx.n - 1, -1, -1):
        w = sum(idx.compute_s[i] / d.speed for d in cluster.devices) / n
        best = max((rank[j] + b * mean_inv for j, b in idx.succ[i]), default=0.0)
        rank[i] = w + best
    return rank, None, 0.0, math.inf


def heft_with_saga_rank(graph: OpGraph, cluster: Cluster):
    """This project's HEFT processor selection driven by saga's rank definition (patched in for the call)."""
    import algorithms.placers.thesis.heft as heft_mod

    original = heft_mod.upward_rank
    heft_mod.upward_rank = saga_style_rank
    try:
        return HEFTPlacer().place(graph, cluster)
    finally:
        heft_mod.upward_rank = original


def timed(fn, *args):
    """fn(*args) and its wall time in seconds."""
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def explain() -> str:
    return """
Why the makespans can differ (both sides use the same time model: the replay column shows that saga's schedules
give saga's own makespan in this project's simulator):

HEFT. This project implements the thesis' adaptation of the upward rank (4.3.1): the computation cost is
#ops / mean speed (eq. 4.2), the communication cost bytes / mean transfer rate over ordered pairs of distinct
devices. saga follows the original paper: the mean of the execution times cost / speed over the nodes (an
arithmetic mean of times, which weighs slow devices more than #ops / mean speed) and the mean of size / speed
over the network's edges, self-loops included (they count as zero, which shrinks communication costs by
(n - 1) / (n + 1)). Different ranks give a different priority list and hence a different schedule; the
processor-selection phase (insertion-based earliest finish time) is the same. Ties (equal ranks, equal finish
times) are broken by topological index and lowest device index here, by name order and set iteration in saga.
Neither is better in general; on a given instance either may win.

ETF. This project's classical ETF is Baechi's m-ETF with memory checks off: at each step it schedules the
(ready op, device) pair with the earliest start time, where a device's time is when it becomes free (no idle
waiting for a later moment). saga's ETF (Hwang et al. 1989) advances a global clock and only considers devices
idle at the current moment, and at each moment takes the ready task that can start earliest among those
devices; it postpones a task rather than queue it on a busy device. The two greedy rules choose differently
when a busy device would be the earliest option. saga's ETF also iterates Python sets of task and node names,
so with Python's hash randomization its schedule (and makespan) can change from one run of this script to the
next; run with PYTHONHASHSEED=0 to pin it. This project's placers are deterministic.
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="5,10,20,40", help="graph sizes in levels (2..8 ops per level)")
    ap.add_argument("--devices", default="3,6")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    logging.getLogger().setLevel(logging.ERROR)
    try:
        saga, SagaHeft, SagaEtf = load_saga()
    except ImportError as exc:
        sys.exit(f"anrg-saga is not importable ({exc}); install it with `pip install --no-deps anrg-saga`")
    try:
        from algorithms.placers.baechi import METFPlacer
    except ImportError:
        METFPlacer = None

    hdr = (
        f"{'instance':<16}{'ops':>5}{'dev':>4} | {'HEFT ours':>10}{'replay':>10}{'w/ saga rk':>11}{'saga':>10}"
        f"{'saga rpl':>10}"
        f"{'t ours':>8}{'t saga':>8} | {'ETF ours':>10}{'saga':>10}{'saga rpl':>10}{'t ours':>8}{'t saga':>8}"
    )
    print(hdr)
    print("-" * len(hdr))
    wins = {"heft": [0, 0, 0], "etf": [0, 0, 0]}
    same_rank = [0, 0]
    for levels in [int(x) for x in args.levels.split(",")]:
        for nd in [int(x) for x in args.devices.split(",")]:
            for seed in range(args.seeds):
                g, cl = instance(levels, nd, seed)
                net, tg = to_saga(saga, g, cl)
                p, t_ours = timed(HEFTPlacer().place, g, cl)
                ours = p.info["heft_makespan_s"]
                ours_rpl = simulate(g, cl, p, schedule=p.order, record_memory=False).makespan
                s, t_saga = timed(SagaHeft().schedule, net, tg)
                saga_ms = s.makespan
                saga_rpl = replay(g, cl, s)
                with_rank = heft_with_saga_rank(g, cl).info["heft_makespan_s"]
                same_rank[abs(with_rank - saga_ms) <= 1e-9 * max(1.0, saga_ms)] += 1
                k = 0 if ours < saga_ms - 1e-9 else (1 if abs(ours - saga_ms) <= 1e-9 else 2)
                wins["heft"][k] += 1
                line = (
                    f"{g.name + '/d' + str(nd):<16}{len(g):>5}{nd:>4} | {ours:>10.4g}{ours_rpl:>10.4g}"
                    f"{with_rank:>11.4g}{saga_ms:>10.4g}{saga_rpl:>10.4g}{t_ours:>8.3f}{t_saga:>8.3f} |"
                )
                if METFPlacer is not None:
                    pe, te_ours = timed(METFPlacer(memory_aware=False).place, g, cl)
                    e_ours = simulate(g, cl, pe, schedule=pe.order, record_memory=False).makespan
                    se, te_saga = timed(SagaEtf().schedule, net, tg)
                    e_rpl = replay(g, cl, se)
                    k = 0 if e_ours < se.makespan - 1e-9 else (1 if abs(e_ours - se.makespan) <= 1e-9 else 2)
                    wins["etf"][k] += 1
                    line += f"{e_ours:>10.4g}{se.makespan:>10.4g}{e_rpl:>10.4g}{te_ours:>8.3f}{te_saga:>8.3f}"
                else:
                    line += "  (algorithms.placers.baechi.METFPlacer not available)"
                print(line)
                sys.stdout.flush()
    for alg, (better, equal, worse) in wins.items():
        print(f"{alg.upper()}: ours shorter on {better}, equal on {equal}, saga shorter on {worse} instances")
    print(
        f"HEFT with saga's rank definition reproduces saga's makespan on {same_rank[1]} of "
        f"{sum(same_rank)} instances (the rest: tie-breaking between equal ranks or finish times)"
    )
    print("Makespans in the instance's time unit (1 op at speed 1 = 1); times in seconds (wall clock).")
    print(explain())


if __name__ == "__main__":
    main()
