"""Measure every op of a captured training step: compute time and memory (Baechi 4.1 and 4.3).

The captured program is executed op by op on one device for `warmup` unmeasured steps (bootstrap effects,
Baechi 4.3) and `steps` measured ones; an op's compute time is the median of its measured times. On CUDA each
op is bracketed by synchronisations (each op is then charged a round trip the pipelined step does not pay: on
an H200 the lab's small models summed to 1.6–3 times their step; `profile_in_worker` times a GPU worker's
loop instead, docs/fidelity.md), and its temporary memory is the allocator's peak during the op minus the
memory held before it and minus its outputs (``torch.cuda.max_memory_allocated``); on the CPU memory comes from
the real tensors: persistent = parameters and optimizer state, output = storage an op allocates for values used
by other ops, temporary = storage allocated for values used only inside the op.

`batch_size` profiles at another batch size than the model's (Celeritas 4.2.1, the Standard Evaluation): the
step is traced again at that size (the op names do not depend on it) and the measured costs are written onto
the ops of the given graph, together with the edge sizes at that batch size.

Cost: (warmup + steps) training steps plus O(V + E) bookkeeping.
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from collections import defaultdict
from typing import Any

import torch
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from algorithms.errors import ConfigError, InvalidGraph
from algorithms.graph import OpGraph

from .. import interference
from .capture import build_graph, program_matching, trace_program
from .cudagraph import costs_less_event_nodes
from .models.common import TorchModel
from .program import Program, resolve

log = logging.getLogger(__name__)


def _time_ops_cpu(prog: Program, flat, warmup: int, steps: int) -> dict[str, list[float]]:
    from .program import run_program

    times: dict[str, list[float]] = defaultdict(list)
    with logging_redirect_tqdm():
        for k in tqdm(
            range(warmup + steps), desc="profiling (warm-up + measured steps)", unit="step", disable=None, leave=False
        ):
            rec = (lambda op, s: times[op].append(s)) if k >= warmup else None
            run_program(prog, flat, on_op=rec)
    return times


def _time_ops_cuda(
    prog: Program, flat, warmup: int, steps: int, device: torch.device
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Per-op times with synchronisation around each op, and per-op temporary bytes from the allocator."""
    times: dict[str, list[float]] = defaultdict(list)
    temp: dict[str, float] = {}
    keep = set(prog.outputs)
    run_alloc = prog.alloc_when_run()  # a tuple's items moved to their own op count as their producer's
    for k in tqdm(
        range(warmup + steps), desc="profiling (warm-up + measured steps)", unit="step", disable=None, leave=False
    ):
        env = {r.nid: flat[r.index] for r in prog.nodes if r.kind == "placeholder"}
        env.update({nid: c.to(device) for nid, c in prog.consts.items()})
        get = env.__getitem__
        last: dict[int, str] = {}
        for op, nids in prog.op_nodes.items():
            for nid in nids:
                for i in prog.nodes[nid].inputs:
                    last[i] = op
        free_after: dict[str, list[int]] = defaultdict(list)
        for i, op in last.items():
            if i not in keep and prog.nodes[i].kind == "call":
                free_after[op].append(i)
        for op, nids in prog.op_nodes.items():
            torch.cuda.synchronize(device)
            before = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
            t0 = time.perf_counter()
            out_alloc = 0.0
            for nid in nids:
                r = prog.nodes[nid]
                if r.kind == "call":
                    env[nid] = r.target(*resolve(r.args, get), **resolve(r.kwargs, get))
                    out_alloc += run_alloc[nid]
            torch.cuda.synchronize(device)
            if k >= warmup:
                times[op].append(time.perf_counter() - t0)
                peak = torch.cuda.max_memory_allocated(device)
                temp[op] = max(temp.get(op, 0.0), max(0.0, peak - before - out_alloc))
            for i in free_after.get(op, ()):
                env.pop(i, None)
    return times, temp


def _write_costs(
    graph: OpGraph,
    measured: OpGraph,
    times: dict[str, list[float]],
    temp: dict[str, float],
    profiled_on: str,
    b: int,
    batch_size: int | None,
    stat: Any = statistics.median,
) -> OpGraph:
    """A copy of `graph` with each op's measured times reduced by `stat` (the median by default) and the
    measured memory and edge sizes. O(V + E)."""
    out = graph.copy(graph.name if batch_size is None else f"{graph.name}@b{b}")
    for op in out.ops:
        a, m = out.op(op), measured.op(op)
        a["compute_s"] = stat(times[op]) if times.get(op) else 0.0
        a["persistent_bytes"] = m["persistent_bytes"]
        a["output_bytes"] = m["output_bytes"]
        a["temporary_bytes"] = temp.get(op, m["temporary_bytes"])
        a["profiled_on"] = profiled_on
        a["profiled_batch"] = b
    for u, v, d in out.edges():
        if measured.nx.has_edge(u, v):
            d["bytes"] = measured.nx.edges[u, v]["bytes"]
    out.invalidate()
    return out


def profile_graph(
    model: TorchModel,
    graph: OpGraph,
    *,
    granularity: str,
    device: torch.device,
    warmup: int = 5,
    steps: int = 10,
    batch_size: int | None = None,
) -> OpGraph:
    """A copy of `graph` with measured compute_s and memory of every op at `batch_size` on `device`."""
    if steps < 1:
        raise ValueError(f"profiler.steps must be >= 1, got {steps}")
    b = int(batch_size or model.batch_size)
    prog = trace_program(model, granularity, b, device=device)
    measured = build_graph(prog)
    missing = [op for op in graph.ops if op not in measured]
    if missing:
        raise InvalidGraph(
            f"graph {graph.name!r} has ops the {granularity}-level capture of {model.name!r} at "
            f"batch {b} does not, e.g. {missing[:3]}; capture and profile with the same backend "
            f"settings"
        )
    flat = [t.to(device) for t in prog.flat_inputs(model)]
    if device.type == "cuda":
        times, temp = _time_ops_cuda(prog, flat, warmup, steps, device)
    else:
        times, temp = _time_ops_cpu(prog, flat, warmup, steps), {}
    out = _write_costs(graph, measured, times, temp, device.type, b, batch_size)
    total = sum(out.op(o)["compute_s"] for o in out.ops)
    log.info("profiled %s at batch %d on %s: %d ops, sum of op times %.4g s", model.name, b, device, len(out), total)
    return out


# ---------------------------------------------------------------------------- profile in the worker's setting
STATISTICS = ("scaled_median", "median", "mean")


def worker_setting(
    cluster: Any, threads: int | None = None, cuda: bool = False, cuda_graph: bool = False
) -> dict[str, Any]:
    """What the process-per-device runtime's workers look like, for a profile cache key: the runtime, the
    cores each worker owns and its intra-op threads (None: one per core), pinned or not, the device kind, and
    ``cuda_graph: true`` where GPU workers replay the step as a CUDA graph (`backends.torch.cudagraph`; the key
    is absent otherwise, so earlier profiles keep their keys). A cluster whose CPU devices own different core
    counts is profiled with the first device's setting (a warning names the others)."""
    if cuda_graph and not cuda:
        raise ConfigError(f"runtime.cuda_graph=true needs GPU workers; cluster {cluster.name!r} runs on CPUs")
    cores = sorted({d.cores for d in cluster.devices})
    if len(cores) > 1:
        log.warning(
            "cluster %r: devices own %s cores; profiling with %d", cluster.name, cores, cluster.devices[0].cores
        )
    c = int(cluster.devices[0].cores)
    host = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    setting: dict[str, Any] = {
        "runtime": "torch_distributed",
        "device": "cuda" if cuda else "cpu",
        "pinned": not cuda,
        "cores": c,
        "threads": int(threads) if threads else c,
        # the workers busy at once in a placed run, one per device while the host has cores for them
        "corun": 1 if cuda else max(1, min(len(cluster.devices), host // max(1, c))),
    }
    if cuda_graph:
        setting["cuda_graph"] = True
        # the plain replays in one block before the timed ones: alternating them read 0.5-1.9 % slower than a
        # placed run's back-to-back replays on an H100 (session 24), in one block 0.05-0.8 %
        setting["untimed"] = "block"
    return setting


def _launch_together(jobs: list[Any], launch: Any, timeout_s: float) -> list[Any]:
    """Run `launch(job, timeout_s)` for every job at the same time (one thread each); the reports in job order.
    The first failure is raised once all have finished."""
    if len(jobs) == 1:
        return [launch(jobs[0], timeout_s)]
    import threading

    out: list[Any] = [None] * len(jobs)
    errors: list[BaseException] = []

    def go(k: int) -> None:
        try:
            out[k] = launch(jobs[k], timeout_s)
        except BaseException as exc:  # raised below, in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(k,), daemon=True) for k in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def _without_slow_steps(rep: dict[str, Any], plain: list[bool]) -> dict[str, Any] | None:
    """A profiling worker's report without the steps a slow spell of its core touched
    (`interference.slow_steps` on its ``paces``; `plain[k]`: measured step k ran without per-op timing, as
    `worker.untimed_flags` laid them out), with ``slow_steps`` (the timed steps left out) added. The report as
    it is where it has no paces; None where fewer than `interference.fast_share_needed` of its timed or of its
    untimed steps were fast. The report as it is, too, while slow spells prevail (`interference.spells_prevail`:
    then every step counts, as in the runs). O(ops * steps)."""
    flags = interference.slow_steps([rep.get("paces") or []])
    if flags is None or len(flags) != len(plain) or interference.spells_prevail():
        return rep
    timed_fast = [not f for f, p in zip(flags, plain) if not p]
    plain_fast = [not f for f, p in zip(flags, plain) if p]
    need = interference.fast_share_needed
    if sum(timed_fast) < need(len(timed_fast)) or (plain_fast and sum(plain_fast) < need(len(plain_fast))):
        return None
    out = dict(rep)
    out["op_times"] = {op: [x for x, ok in zip(xs, timed_fast) if ok] for op, xs in rep["op_times"].items()}
    out["times"] = [x for x, ok in zip(rep["times"], timed_fast) if ok]
    out["untimed_times"] = [x for x, ok in zip(rep.get("untimed_times", []), plain_fast) if ok]
    out["slow_steps"] = len(timed_fast) - sum(timed_fast)  # timed steps left out
    return out


def _pooled(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One profiling report from several co-running workers: every worker's op samples and step times."""
    if len(reports) == 1:
        return reports[0]
    op_times: dict[str, list[float]] = {}
    for rep in reports:
        for op, xs in rep["op_times"].items():
            op_times.setdefault(op, []).extend(xs)
    return {
        "op_times": op_times,
        "times": [t for rep in reports for t in rep["times"]],
        "untimed_times": [t for rep in reports for t in rep.get("untimed_times", [])],
    }


def profile_in_worker(
    model: TorchModel,
    graph: OpGraph,
    *,
    granularity: str = "operator",
    setting: dict[str, Any] | None = None,
    warmup: int = 5,
    steps: int = 10,
    batch_size: int | None = None,
    timeout_s: float = 600.0,
    statistic: str = "scaled_median",
    untimed_steps: int | None = None,
    max_interference: float | None = 0.05,
    retries: int = 2,
) -> tuple[OpGraph, dict[str, Any]]:
    """Profile every op in the setting a distributed-runtime worker runs it in (issue 16).

    One worker process of `backends.torch.distributed`, pinned to `setting["cores"]` host cores with
    `setting["threads"]` intra-op threads, runs the whole step on one device in capture order through the
    worker's own execution path (argument resolution, memory accounting and freeing included), timing each op
    (median over `steps` measured steps after `warmup`). ``setting["corun"]`` such workers (default 1;
    `worker_setting` gives one per device while the host has cores for them) run at the same time on disjoint
    cores, as the placed run's workers do, and their samples are pooled: a core runs slower while its neighbour
    is busy (shared cache and memory bandwidth; gnmt_tiny's single-device step on the lab's VM, 255 steps each,
    interleaved: 33.0 ms median with the other core busy against 31.5 ms with it idle), and the profile takes
    corun times the samples in the same time. Memory and edge sizes come from the capture, as in
    `profile_graph`. An op's cost (`statistic`):

    * ``"scaled_median"`` (default): its median, scaled by (median single-device step) / (sum of the op
      medians), so that the ops add up to the measured step. The step scaled to is that of as many steps
      run *without* the per-op timing, alternating with the timed ones in the same workers (`untimed_steps`,
      `worker.untimed_flags`; ``setting["untimed"] = "block"`` runs them all first, back to back as a placed
      run's steps are): a placed run does not time its ops, and on a GPU, where the host's loop sets the
      step, timing 1632 ops adds a few percent to gnmt_tiny's step (the H100 sweeps of session 14
      over-predicted 9 of 12 single-device steps, median +4.7 %). On a core shared in time with other processes an
      op is now and then preempted; the median of each op drops those waits although every step pays some
      (gnmt_tiny on a loaded 2-core machine: op medians sum to 31 ms, the median step is 88 ms). The scaling
      spreads that difference over the ops in proportion to their medians (a choice: where the waits fall is
      not measured). On a quiet machine the factor is close to 1 (the check reports it).
    * ``"median"``: the plain median (the factor is then reported only); ``"mean"``: the mean (not robust:
      one preempted step moves it).

    On a GPU (``setting["device"] == "cuda"``: one worker, no pinning, the first GPU) an op's sample is its time
    in the worker's loop on the host's clock (its launches), with no synchronisation or event per op, and the
    step is timed with two CUDA events. The lab's models are small: their kernels are shorter than their
    launches, so the device keeps up with the host and the step is the host's loop plus the last kernels; the
    scaled median spreads what the step has beyond the ops' sum over the ops. A choice: timing each op on the
    device instead perturbs what it measures (an event recorded after each of gnmt_tiny's 1632 ops took its
    H200 step from 23.8 to 69.8 ms; ops between synchronisations, `profile_graph`, summed to 48.9 ms), and a
    model whose kernels outlast their launches would need the device's times too (not done). With
    ``setting["cuda_graph"]`` the worker replays the step as a CUDA graph after warm-up (`backends.torch.cudagraph`)
    and an op's sample is its time on the device between two event nodes of a timed graph; the scaled median
    then takes the same cost per event node off every op's median (`cudagraph.costs_less_event_nodes`) so that
    the ops add up to the plain graph's replay, which is what a `runtime.cuda_graph=true` run measures.

    Returns the profiled graph and a check: the sum of the op costs against the same statistic of the measured
    single-device steps of that run (``sum_op_s``, ``step_s``, ``overhead_s``), the sum of the op medians and
    the median step, and the setting, and ``host_interference``: the share of the workers' cores other
    processes used during the measured steps (`backends.interference`). A profile above `max_interference` is
    taken again, up to `retries` more times, and the least disturbed kept, as the runtime does with a placed run
    (every attempt's share in ``interference_attempts``). Cost: one process start and warmup + steps +
    untimed_steps steps per attempt (`untimed_steps`: as many as `steps` by default; none unless the statistic
    is the scaled median)."""
    if statistic not in STATISTICS:
        raise ValueError(f"profiler statistic must be one of {STATISTICS}, got {statistic!r}")
    from .distributed import WorkerJob, dump_program, free_port, launch
    from .worker import untimed_flags

    if steps < 1:
        raise ValueError(f"profiler.steps must be >= 1, got {steps}")
    setting = dict(setting or {"runtime": "torch_distributed", "device": "cpu", "pinned": True, "cores": 1})
    setting.setdefault("threads", setting.get("cores", 1))
    b = int(batch_size or model.batch_size)
    cuda = setting.get("device") == "cuda"
    if cuda and not torch.cuda.is_available():
        raise ConfigError("profiler worker setting device=cuda but no CUDA device is available")
    prog = program_matching(model, graph, granularity, b, ["cuda", "cpu"] if cuda else ["cpu"])
    measured = build_graph(prog)
    host = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    per = int(setting.get("cores", 1))
    corun = 1 if cuda else int(setting.get("corun", 1))
    layout = setting.get("untimed", "alternate")
    if layout not in ("alternate", "block"):
        raise ConfigError(f"profiler worker setting 'untimed' must be 'alternate' or 'block', got {layout!r}")
    if corun < 1:
        raise ConfigError(f"profiler worker setting 'corun' must be >= 1, got {corun}")
    order = list(prog.op_nodes)
    program, flat = dump_program(prog), [t.cpu() for t in prog.flat_inputs(model)]
    jobs = [
        WorkerJob(
            program=program,
            flat=flat,
            placement={op: "dev0" for op in order},
            schedule={"dev0": order},
            devices=["dev0"],
            cores=[[] if cuda else sorted({host[(k * per + j) % len(host)] for j in range(per)})],
            cuda=cuda,
            port=free_port(),
            warmup=int(warmup),
            steps=int(steps),
            time_ops=True,
            threads=int(setting["threads"]),
            untimed_steps=int(steps if untimed_steps is None else untimed_steps) if statistic == "scaled_median" else 0,
            untimed_block=layout == "block",
            cuda_graph=cuda and bool(setting.get("cuda_graph")),
        )
        for k in range(corun)
    ]

    plain = untimed_flags(jobs[0].steps, jobs[0].untimed_steps, jobs[0].untimed_block)

    def measure() -> tuple[float | None, list[dict[str, Any]], interference.Kind]:
        reports = [r[0] for r in _launch_together(jobs, launch, timeout_s)]
        share = interference.others_share([r.get("core_samples") or (None, None) for r in reports])
        interference.pace_floor([x for r in reports for x in r.get("paces") or []])  # every worker's, first
        kept = [_without_slow_steps(r, plain) for r in reports]
        slow = [k is None for k in kept]
        # a worker whose slow spells left too few fast steps disturbs the profile as much as a busy neighbour
        worst = max([share or 0.0, *(1.0 if s else 0.0 for s in slow)]) if share is not None or any(slow) else None
        flags = [interference.slow_steps([r.get("paces") or []]) for r in reports]
        kind = interference.kind_of(share, [any(f) for f in flags if f], limit)
        return worst, [r if k is None else k for r, k in zip(reports, kept)], kind

    limit, tries = interference.check_policy(max_interference, retries)
    kept_share, kept, shares = interference.least_disturbed(measure, limit, tries, f"the profile of {model.name}")
    rep = _pooled(kept)
    stat: Any = statistics.fmean if statistic == "mean" else statistics.median
    sum_median = sum(statistics.median(v) for v in rep["op_times"].values())
    timed_median = statistics.median(rep["times"])
    step_median = statistics.median(rep["untimed_times"]) if rep.get("untimed_times") else timed_median
    if statistic == "scaled_median":
        scale = step_median / sum_median if sum_median > 0 else 1.0

        def stat(xs: list[float]) -> float:
            return scale * statistics.median(xs)

    where = ("cuda-graph-worker" if setting.get("cuda_graph") else "cuda-worker") if cuda else "cpu-worker"
    samples = rep["op_times"]
    per_event = None
    if cuda and setting.get("cuda_graph") and statistic == "scaled_median":
        # the timed graph's event nodes cost about the same per op: taken off each op, not scaled away
        costs, per_event = costs_less_event_nodes({op: statistics.median(v) for op, v in samples.items()}, step_median)
        samples = {op: [c] for op, c in costs.items()}

        def stat(xs: list[float]) -> float:
            return xs[0]

    out = _write_costs(graph, measured, samples, {}, where, b, batch_size, stat)
    total = sum(out.op(o)["compute_s"] for o in out.ops)
    step = statistics.fmean(rep["times"]) if statistic == "mean" else step_median
    info = {
        "sum_op_s": total,
        "step_s": step,
        "overhead_s": step - total,
        "sum_op_median_s": sum_median,
        "step_median_s": step_median,
        "step_timed_median_s": timed_median,  # the steps whose ops were timed
        "median_scale": step_median / sum_median if sum_median > 0 else 1.0,
        "statistic": statistic,
        "setting": setting,
        "steps_measured": len(rep["times"]),  # over every co-running worker, slow spells left out
        "slow_steps": sum(r.get("slow_steps", 0) for r in kept),
        "host_interference": kept_share,
        "interference_attempts": shares,
    }
    if per_event is not None:
        info["event_node_s"] = per_event  # `cudagraph.costs_less_event_nodes`'s cost per event node
    log.info(
        "profiled %s at batch %d in a worker (%s): %d ops; sum of op %ss %.4g s against the %s single-device step "
        "%.4g s (%.1f%% outside the ops); sum of op medians %.4g s, median step %.4g s",
        model.name,
        b,
        setting,
        len(out),
        statistic,
        total,
        statistic,
        step,
        100.0 * (step - total) / step if step > 0 else 0.0,
        sum_median,
        info["step_median_s"],
    )
    return out, info
