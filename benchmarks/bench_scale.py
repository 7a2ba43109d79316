"""Scaling of placement and simulation to 10^4-10^6 ops (issue 22): a table of time and peak memory per stage
and placer, the fitted log-log exponent of each, and a log-log plot.

    PYTHONPATH=. python benchmarks/bench_scale.py [--sizes 10000,30000,100000,300000,1000000] [--graph random|chain]
                                     [--placers m_etf,m_sct,m_topo,hashing,heft,...] [--plot scale.png]
                                     [--timeout 600] [--sct-max 300000] [--whole-run]
                                     [--whole-run-placers m_etf,m_topo]
    PYTHONPATH=. python benchmarks/bench_scale.py --from-log run1.txt run2.txt [--graph random] [--plot scale.png]

Graphs: ``random`` is the thesis' level-based training graph (`algorithms.workloads.synthetic.level_dag`,
4-12 ops per level, edge probability 0.10, about 3.3 edges per op, 15% of the ops in colocation groups,
forward + backward + update ops); ``chain`` is one op per level (a forward chain with its backward chain).
Four GPUs, each with four times the graph's static memory (ample: memory never binds, also for the thesis
placers, whose estimate of a unit counts its inputs), parallel communication
(latency 134 us, 5.7 GB/s, Baechi's measured link).

Stages: ``graph`` generates the graph and builds its index (in this process); each placer then runs in a
forked child process: ``place:<placer>`` its placement, ``simulate:<placer>`` the simulator's replay of it
(in the placer's order; first-in first-out when the placer gives none or its order deadlocks), and, for
m-ETF, ``write`` the run's artifacts (timeline.json, trace.json, sim.json, the two plots) into a temporary
folder.  ``--whole-run`` also times ``python -m orchestrator`` on the same graph (`WHOLE_RUN_GRAPH`: the
generator's arguments as overrides; cluster cpu4, with 100 times its memory for the random graph's larger
tensors; tracking and cache off), once per placer of ``--whole-run-placers`` (m-ETF by default).
Peak memory is the peak resident set of the process that ran the stage (a forked child starts with the
graph already in memory, so its peak includes the graph).  A stage that exceeds ``--timeout`` seconds or
fails is reported as such, and larger sizes skip that placer.

Times are wall-clock and CPU time of the process (the CPU time is the steadier figure on a loaded machine);
the machine's load average is printed on each row (the figures in docs/scale.md were taken on a shared
machine).  The plot shows CPU time.  The exponent is the slope of a least-squares line through (log ops,
log time) over the sizes reached (1: linear; 2: quadratic).  ``--from-log`` measures nothing: it reads the
tables earlier runs printed (several files: sizes measured in separate runs) and prints their exponents and
plot.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

from algorithms import compiled
from algorithms.cluster import uniform_cluster
from algorithms.graph import OpGraph
from algorithms.workloads.synthetic import level_dag

BAECHI = ("m_etf", "m_sct", "m_topo")
THESIS = ("hashing", "heft", "batch_split", "icp", "critical_path", "mite", "dfs")


def _placer(name: str):
    from algorithms.placers.baechi import METFPlacer, MSCTPlacer, MTOPOPlacer
    from algorithms.placers.thesis import (
        BatchSplitPlacer,
        CriticalPathPlacer,
        DFSPlacer,
        HashingPlacer,
        HEFTPlacer,
        IteratedCriticalPathPlacer,
        MITEPlacer,
    )

    return {
        "m_etf": METFPlacer,
        "m_sct": MSCTPlacer,
        "m_topo": MTOPOPlacer,
        "hashing": HashingPlacer,
        "heft": HEFTPlacer,
        "batch_split": BatchSplitPlacer,
        "icp": IteratedCriticalPathPlacer,
        "critical_path": CriticalPathPlacer,
        "mite": MITEPlacer,
        "dfs": DFSPlacer,
    }[name]()


def make_graph(kind: str, n_ops: int, seed: int = 0) -> OpGraph:
    """A graph of about `n_ops` ops (module docstring)."""
    if kind == "chain":
        # each forward op gets a grad, a weight-gradient and an update op: 4 ops per level
        return level_dag(
            levels=max(1, n_ops // 4),
            min_nodes_per_level=1,
            max_nodes_per_level=1,
            edge_probability=1.0,
            edge_level_limit=1,
            memory_unit_bytes=100.0,
            training=True,
            seed=seed,
            name=f"chain-{n_ops}",
        )
    # 8 forward ops per level on average, about 3.9 ops each once backward and update ops are added
    return level_dag(
        levels=max(1, round(n_ops / 31)),
        min_nodes_per_level=4,
        max_nodes_per_level=12,
        edge_probability=0.10,
        edge_level_limit=5,
        random_edges=200,
        memory_unit_bytes=100.0,
        colocated_fraction=0.15,
        max_group_size=6,
        training=True,
        seed=seed,
        name=f"random-{n_ops}",
    )


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _child(conn, graph: OpGraph, cluster, placer: str, write: bool) -> None:
    """Place, simulate (and write the artifacts) in a forked child; send back {stage: (seconds, CPU seconds,
    MB)}."""
    import logging

    logging.disable(logging.WARNING)
    from algorithms.errors import LabError
    from algorithms.simulator import simulate

    out: dict[str, Any] = {}
    try:
        t, c = time.perf_counter(), time.process_time()
        pl = _placer(placer).place(graph, cluster)
        out[f"place:{placer}"] = (time.perf_counter() - t, time.process_time() - c, _rss_mb())
        t, c = time.perf_counter(), time.process_time()
        try:
            sim = simulate(graph, cluster, pl.assignment, pl.order or None)
        except LabError:
            sim = simulate(graph, cluster, pl.assignment)
        out[f"simulate:{placer}"] = (time.perf_counter() - t, time.process_time() - c, _rss_mb())
        if write:
            from algorithms.graph import atomic_write_json, atomic_write_json_list
            from algorithms.sim_result import sim_result_to_dict
            from orchestrator import plots, trace

            t, c = time.perf_counter(), time.process_time()
            with tempfile.TemporaryDirectory() as d:
                atomic_write_json(os.path.join(d, "sim.json"), sim_result_to_dict(sim))
                atomic_write_json(os.path.join(d, "placement.json"), pl.assignment, indent=0)
                atomic_write_json_list(os.path.join(d, "timeline.json"), sim.iter_timeline, indent=0)
                trace.write_trace(os.path.join(d, "trace.json"), sim, graph, cluster)
                plots.device_utilization_png(sim, os.path.join(d, "device_timeline.png"))
                plots.memory_png(sim, os.path.join(d, "memory.png"))
            out["write"] = (time.perf_counter() - t, time.process_time() - c, _rss_mb())
    except Exception as exc:  # reported in the table, the benchmark goes on
        out["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    conn.send(out)
    conn.close()


def run_placer(graph: OpGraph, cluster, placer: str, write: bool, timeout: float) -> dict[str, Any]:
    return run_forked(_child, (graph, cluster, placer, write), timeout)


def run_forked(target: Any, args: tuple[Any, ...], timeout: float) -> dict[str, Any]:
    """``target(conn, *args)`` in a forked child (it starts with the parent's memory: the graph is not copied
    or pickled); the dict it sends back, or {"error": ...} when it dies or exceeds `timeout` seconds."""
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(send, *args))
    proc.start()
    send.close()
    if recv.poll(timeout):
        try:
            res = recv.recv()
        except EOFError:
            res = {"error": "the child died (out of memory?)"}
    else:
        res = {"error": f"timeout after {timeout:g} s"}
    proc.kill()
    proc.join()
    return res


#: ``python -m orchestrator`` overrides that generate `make_graph`'s graphs of about N ops (`{levels}`: per kind)
WHOLE_RUN_GRAPH = {
    "chain": [
        "model.generator.levels={chain_levels}",
        "model.generator.min_nodes_per_level=1",
        "model.generator.max_nodes_per_level=1",
        "model.generator.edge_probability=1.0",
        "model.generator.edge_level_limit=1",
        "model.generator.random_edges=0",
        "model.generator.colocated_fraction=0",
        "model.generator.memory_unit_bytes=100",
        "model.generator.tensor_unit_bytes=100",  # cluster cpu4's 4 GB per device hold the chain
    ],
    # make_graph("random", n): the same generator arguments (its tensors of up to 1 MB: cpu4's memory x 100)
    "random": [
        "model.generator.levels={random_levels}",
        "model.generator.min_nodes_per_level=4",
        "model.generator.max_nodes_per_level=12",
        "model.generator.edge_probability=0.10",
        "model.generator.edge_level_limit=5",
        "model.generator.random_edges=200",
        "model.generator.memory_unit_bytes=100",
        "model.generator.colocated_fraction=0.15",
        "model.generator.max_group_size=6",
        "cluster.memory_fraction=100",
    ],
}


def whole_run(
    n_ops: int, timeout: float, kind: str = "chain", placer: str = "m_etf"
) -> tuple[float, float, float] | str:
    """Wall time, CPU time and peak RSS (MB) of ``python -m orchestrator`` on `make_graph(kind, n_ops)`'s graph
    (cluster cpu4, cache and tracking off) placed by `placer`."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    levels = {"chain_levels": max(1, n_ops // 4), "random_levels": max(1, round(n_ops / 31))}
    with tempfile.TemporaryDirectory() as d:
        cmd = [
            sys.executable,
            "-m",
            "orchestrator",
            "cache.enabled=false",
            "tracking.enabled=false",
            f"placer={placer}",
            *(o.format(**levels) for o in WHOLE_RUN_GRAPH[kind]),
            f"hydra.run.dir={d}/run",
        ]
        env = dict(os.environ, LAB_CACHE_DIR=f"{d}/cache", MLFLOW_TRACKING_URI=f"sqlite:///{d}/mlflow.db")
        t = time.perf_counter()
        with open(f"{d}/log", "wb") as log:
            proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
            while True:  # wait4: the resources of this child alone
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() - t > timeout:
                    proc.kill()
                    proc.wait()
                    return f"timeout after {timeout:g} s"
                time.sleep(0.05)
        dt = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            with open(f"{d}/log", "rb") as f:
                return f"exit {proc.returncode}: {f.read().decode(errors='replace')[-200:]}"
        return dt, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def fit_exponent(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(time) against log(ops); NaN with fewer than two sizes."""
    pts = [(math.log(n), math.log(t)) for n, t in points if t > 0]
    if len(pts) < 2:
        return math.nan
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx > 0 else math.nan


def plot(results: dict[str, list[tuple[int, float, float, float]]], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(12, 5))
    for stage, pts in sorted(results.items()):
        if len(pts) < 1:
            continue
        ns = [p[0] for p in pts]
        k = fit_exponent([(p[0], p[2]) for p in pts])
        # more stages than colours: placements solid, simulations dashed, the rest dotted
        ls = "-" if stage.startswith("place:") else ("--" if stage.startswith("simulate:") else ":")
        ax_t.loglog(ns, [max(p[2], 1e-4) for p in pts], marker="o", ls=ls, label=f"{stage} ({k:.2f})")
        ax_m.loglog(ns, [p[3] for p in pts], marker="o", ls=ls, label=stage)
    ax_t.set_xlabel("ops")
    ax_t.set_ylabel("CPU time (s)")
    ax_t.set_title("CPU time per stage (fitted exponent)")
    ax_m.set_xlabel("ops")
    ax_m.set_ylabel("peak RSS (MB)")
    ax_m.set_title("peak memory of the process")
    for ax in (ax_t, ax_m):
        ax.grid(True, which="both", linewidth=0.3)
    ax_t.legend(fontsize=6, ncol=2)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def read_log(paths: list[str]) -> dict[str, list[tuple[int, float, float, float]]]:
    """The measured rows of earlier runs' printed tables (``--from-log``): {stage: [(ops, wall s, CPU s, MB)]},
    sizes ascending; skipped and failed rows are left out; a stage measured twice at a size keeps the last."""
    rows: dict[str, dict[int, tuple[int, float, float, float]]] = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) < 7 or not p[0].isdigit() or not p[1].isdigit():
                    continue
                try:
                    wall, cpu, mb = float(p[3]), float(p[4]), float(p[5])
                except ValueError:  # "-": skipped or failed
                    continue
                rows.setdefault(p[2], {})[int(p[0])] = (int(p[0]), wall, cpu, mb)
    return {stage: [r[n] for n in sorted(r)] for stage, r in rows.items()}


def print_exponents(results: dict[str, list[tuple[int, float, float, float]]]) -> None:
    print("\nfitted exponent (log time / log ops) over the sizes reached, of wall and CPU time:")
    for stage, pts in sorted(results.items()):
        kw = fit_exponent([(p[0], p[1]) for p in pts])
        kc = fit_exponent([(p[0], p[2]) for p in pts])
        print(f"  {stage:<22s} wall {kw:5.2f}  cpu {kc:5.2f}  ({len(pts)} sizes)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,30000,100000,300000,1000000", help="op counts, ascending")
    ap.add_argument("--graph", choices=("random", "chain"), default="random")
    ap.add_argument("--placers", default=",".join(BAECHI + THESIS))
    ap.add_argument("--plot", default=None, help="where to write the log-log plot (PNG)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per placer and size")
    ap.add_argument("--sct-max", type=int, default=10**9, help="largest size m-SCT is run at")
    ap.add_argument("--whole-run", action="store_true", help="also time python -m orchestrator on the graph")
    ap.add_argument("--whole-run-placers", default="m_etf", help="the placers of --whole-run (one run each)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--from-log",
        nargs="+",
        default=None,
        metavar="LOG",
        help="measure nothing: the exponents (and --plot) of the tables printed by earlier runs (e.g. the sizes "
        "of one run and 10^6 ops of another)",
    )
    args = ap.parse_args()
    if args.from_log:
        results = read_log(args.from_log)
        print_exponents(results)
        if args.plot:
            plot(results, args.plot, f"bench_scale, {args.graph} graphs, {time.strftime('%Y-%m-%d')}")
            print(f"plot: {args.plot}")
        return
    sizes = [int(s) for s in args.sizes.split(",") if s]
    placers = [p for p in args.placers.split(",") if p]

    print(
        f"# bench_scale {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {platform.node()} "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; python {platform.python_version()}; "
        f"graph {args.graph}",
        flush=True,
    )
    print(
        f"{'ops':>9s} {'edges':>9s} {'stage':<22s} {'wall_s':>9s} {'cpu_s':>9s} {'peak_MB':>9s} {'load':>5s}",
        flush=True,
    )
    results: dict[str, list[tuple[int, float, float, float]]] = {}
    failed: set[str] = set()

    def row(n: int, e: int, stage: str, t: float | None, c: float | None, mb: float | None, note: str = "") -> None:
        load = os.getloadavg()[0]
        ts, cs, ms = (f"{x:9.3f}" if x is not None else f"{'-':>9s}" for x in (t, c, mb))
        print(f"{n:>9d} {e:>9d} {stage:<22s} {ts} {cs} {ms} {load:5.1f} {note}", flush=True)
        if t is not None and c is not None and mb is not None:
            results.setdefault(stage, []).append((n, t, c, mb))

    for size in sizes:
        t, c = time.perf_counter(), time.process_time()
        g = make_graph(args.graph, size, args.seed)
        g.index()
        n, e = len(g), g.number_of_edges()
        row(n, e, "graph", time.perf_counter() - t, time.process_time() - c, _rss_mb())
        cluster = uniform_cluster(4, 4 * g.total_memory(), type="GPU", latency_s=1.34e-4, bytes_per_s=5.7e9)
        # numba's import and cache load, once per process (the place stage does the same before its timer);
        # the forked children inherit the loaded kernels
        t, c = time.perf_counter(), time.process_time()
        if compiled.preload(n):
            row(n, e, "load_compiled", time.perf_counter() - t, time.process_time() - c, _rss_mb())
        for name in placers:
            if name in failed or (name == "m_sct" and size > args.sct_max):
                row(n, e, f"place:{name}", None, None, None, "skipped")
                continue
            res = run_placer(g, cluster, name, write=(name == "m_etf"), timeout=args.timeout)
            for stage in (f"place:{name}", f"simulate:{name}", "write"):
                if stage in res:
                    row(n, e, stage, *res[stage])
            if "error" in res:
                row(n, e, f"place:{name}", None, None, None, res["error"])
                failed.add(name)
        if args.whole_run:
            for name in args.whole_run_placers.split(","):
                wr = whole_run(size, args.timeout, args.graph, name)
                if isinstance(wr, str):
                    row(n, e, f"whole_run({args.graph},{name})", None, None, None, wr)
                else:
                    row(n, e, f"whole_run({args.graph},{name})", *wr)
        del g

    print_exponents(results)
    if args.plot:
        plot(results, args.plot, f"bench_scale, {args.graph} graphs, {time.strftime('%Y-%m-%d')}")
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
