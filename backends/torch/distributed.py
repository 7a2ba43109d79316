"""Placed execution with one OS process per device on torch.distributed (issue 16; DESIGN.md's runtime).

Processes
---------
`TorchDistributedRuntime.run` starts one worker per cluster device that holds an op, a parameter or an input
(a device the placement leaves empty gets none: listed in ``extra["idle_devices"]``, its peak memory 0) with
``torch.multiprocessing`` (spawn) and
joins them into a process group on a free local TCP port (parallel sweeps do not collide): gloo for CPU
devices, NCCL when every device is a GPU and CUDA is present. A CPU worker is pinned with
``os.sched_setaffinity`` to the host cores `algorithms.cluster.worker_cores` gives its device and sets its
intra-op threads to that core count. When the devices ask for more cores than the host has, several workers
share a core: the run logs a warning and records ``extra["oversubscribed"]`` (cores asked / host cores);
`algorithms.simulator.simulate(..., host_cores=...)` models that sharing.

Execution (one training step)
-----------------------------
Every worker (`backends/torch/worker.py`) holds the captured program (`capture.Program`, shipped pickled with its
aten targets by name) and the analysis of `runtime.PlacedExecutor` (which values go where, when each is freed, the
in-place parameter updates), and runs its device's ops in the order of ``schedule[device]``, node by node, exactly
as the thread runtime and the profiler do (``target(*resolve(args))``). A value consumed on another device is sent
once per destination with ``isend`` right after it is computed (parameters and inputs at the start of the step);
the receiver posts every ``irecv`` (gloo: before the step where memory allows, below; NCCL: when first needed) into
buffers of the value's known shape, in the sender's send order (NCCL matches point-to-point operations in order;
gloo also by tag), and waits for one only when an op needs it. The step starts at a barrier; a worker's step ends
when its last op has run, its sends are done and its new parameters are in place; the step time is the slowest
worker's. CPU workers then wait in a second, untimed barrier: a worker done with its step would otherwise keep a
core it shares with one still in the step (its bookkeeping between steps), and that worker's messages are read only
when the core idles (`experiments/shared_core_hop.py`; docs/fidelity.md, session 35). Forward, loss, backward and
the optimizer update all run; parameters stay on their Variable op's device between steps.

When receives are posted (gloo, `post_receives`)
------------------------------------------------
``up_front`` posts every receive before the step, so that the peers' transport threads read the announcements
during the step's barrier and every ``isend`` finds its receive waiting and writes the payload at once from the
sender's own thread; the buffers are held from the step's start (the simulator's ``recv_buffers="step_start"``,
which the placers then plan for). ``within_limit`` (the default) holds each buffer no earlier than the device's
memory limit allows: the first step posts every receive when an op first needs it (the least memory the step can
hold) and records the worker's live memory per op; the worker then plans each receive's posting as early as its
device's limit allows (`worker.plan_receive_posts`; with room, up front as above) and the workers exchange the
plans. A sender whose value goes to a receiver that posts later does not wait for that send where it frees the
value (the receiver may be waiting for this sender: a deadlock); a thread waits for it and the value's memory stays
counted until the send completes. The placers plan with copies held from their arrival
(``recv_buffers="arrival"``). The price: a receive posted after its ``isend`` is written by the sender's transport
thread, which runs at idle priority (`worker.lower_transport_threads`) when the sender's core idles, so such a
message can arrive later than the simulator's link predicts. ``extra["late_receives"]`` counts the receives each
worker posts after the step's start.

Measured
--------
Warm-up steps, then `steps` measured ones: median and inter-quartile range of the step time (on a GPU the time
between two CUDA events recorded on the worker's stream at the step's start and end, the host clock's time
kept as ``extra["wall_step_s"]``); per worker the
peak of live tensor bytes (parameters, outputs until their last local use or their last send, receive buffers
from their posting (gloo: before the step where the device's limit allows, see above) until their last local use;
the job's prediction holds the copies as the workers post them (`orchestrator.stages.simulate`); on CUDA the
allocator's peak instead), and the growth of the process's RSS; bytes sent per step. A worker
whose live bytes (same accounting) exceed its device's ``memory_bytes`` stops with `OutOfMemory` naming the
device and the op or receive buffer; `launch` raises it in the caller, so the run's status is "oom".
With `check_correctness`, the loss and gradients of the first step are compared with a single-device
execution (`runtime.compare_outputs`) on the workers' kind of device: on a GPU the reference runs on the first
worker's GPU, so that it uses the same kind of kernels (cuDNN's TF32 convolutions, on by default, are about 1e-3
apart from the CPU's float32); cuDNN may still choose another TF32 algorithm there than in the worker, so where a
worker computes in TF32 the check's relative tolerance is `tf32_rtol` (`check_rtol`).

Cost: per step, the ops plus O(N + U) Python work per worker and one message per (value, destination).
Start-up: one process spawn (a Python and torch import) per device and one pickled program per worker.
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from algorithms.cluster import Cluster, oversubscription, worker_cores
from algorithms.errors import ConfigError, OutOfMemory

from .. import interference
from ..base import RunResult, Runtime
from .capture import program_matching
from .devices import PhysDevice
from .program import Program, run_program
from .reference import compare_outputs
from .runtime import PlacedExecutor
from .worker import (
    POST_RECEIVES,
    TRANSPORT_POLICIES,
    WorkerError,
    WorkerJob,
    _alloc,
    _worker_main,
    dump_program,
    free_port,
    lower_transport_threads,
    pin_worker,
    spawn_and_collect,
    value_spec,
    value_specs,
)

log = logging.getLogger(__name__)


def _raise_worker_error(job: WorkerJob, rank: int, rep: dict[str, Any], results: Any) -> None:
    """Raise the failure a worker reported. A worker over its device's memory limit reports an out-of-memory
    error; its peers then fail too (their messages never come), possibly first: the other reports of the next
    two seconds are read so that OutOfMemory (status "oom") wins over the peers' consequential errors."""
    reps = [(rank, rep)]
    deadline = time.monotonic() + 2.0
    while not any("oom" in r for _, r in reps) and time.monotonic() < deadline:
        try:
            reps.append(results.get(timeout=max(0.01, deadline - time.monotonic())))
        except Exception:  # queue.Empty
            break
    for _, r in reps:
        if "oom" in r:
            o = r["oom"]
            raise OutOfMemory(
                o["message"], op=o["op"], device=o["device"], used_bytes=o["used_bytes"], limit_bytes=o["limit_bytes"]
            )
    raise WorkerError(f"worker for device {job.devices[rank]!r} failed: {rep['error']}")


def launch(job: WorkerJob, timeout_s: float = 600.0) -> list[dict[str, Any]]:
    """Run `job` on one spawned process per device; return each worker's report, in device order."""
    n = len(job.devices)

    def failed(rank: int, rep: dict[str, Any], results: Any) -> None:
        _raise_worker_error(job, rank, rep, results)

    reports = spawn_and_collect(_worker_main, (job,), n, f"workers {job.devices}", timeout_s, on_error=failed)
    return [reports[k] for k in range(n)]


def _busy_loop(n: int, a: torch.Tensor, b: torch.Tensor) -> None:
    for _ in range(n):
        torch.mm(a, b)


def _busy_message_cost(rank: int, n_msg: int, two_way: bool, tag0: int, lag: int = 50) -> float:
    """Processor time one message costs a busy worker, as in a placed step (issue 16).

    One way (`two_way` false): rank 0 sends, rank 1 receives. Two ways: both do both at once, as the two
    workers of a placed step do. As the runtime does, a receiving rank posts its `n_msg` receives of 1 KB before
    the barrier that starts the timed part (the posting is timed on its own and added); then every rank runs
    ``n_msg + lag`` small ops (a 64 x 64 matrix product, tens of microseconds; two on a rank that only
    receives); a sending rank sends one message after each of the first `n_msg` ops (``contiguous()`` +
    ``isend``, waited for at the end, as the worker waits where the value is freed), and a receiving rank waits
    for message k after op k + `lag`, by when it has arrived (the lag is milliseconds, the hop a fraction of
    one) but has not been read: gloo's device loop runs under SCHED_IDLE (`worker.lower_transport_threads`) and reads
    it in that wait, as in a step. The extra time over the same ops without messages, per message, is the
    rank's cost: the isend calls, the posting, and reading the arrivals. A wait for a message that has not
    arrived yet is not in it (that is the hop's latency, `_pingpong_main`). Mean over 10 trials after a warm-up
    trial (not the median: a rare long block is part of what a step of hundreds of messages pays). Returns
    seconds per message."""
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    msg = torch.ones(256)
    sends, recvs = two_way or rank == 0, two_way or rank == 1
    ops = n_msg + lag
    # one way, the receiver's ops are twice the sender's, so that it does not catch up with the sender (which
    # pays the send on top of its op) and wait for messages still on their way
    reps = 2 if recvs and not sends else 1
    _busy_loop(50, a, b)
    costs = []
    for trial in range(11):
        dist.barrier()
        t0 = time.perf_counter()
        _busy_loop(ops * reps, a, b)
        base = time.perf_counter() - t0
        tag = tag0 + trial * n_msg
        t0 = time.perf_counter()
        rworks = [dist.irecv(torch.empty(256), 1 - rank, tag=tag + k) for k in range(n_msg)] if recvs else []
        posting = time.perf_counter() - t0
        dist.barrier()
        t0 = time.perf_counter()
        sworks = []
        for k in range(ops):
            _busy_loop(reps, a, b)
            if sends and k < n_msg:
                sworks.append(dist.isend(msg.contiguous(), 1 - rank, tag=tag + k))
            if recvs and k >= lag:
                rworks[k - lag].wait()
        for w in sworks:
            w.wait()
        spent = time.perf_counter() - t0 + posting
        if trial > 0:
            costs.append((spent - base) / n_msg)
    return max(0.0, float(statistics.fmean(costs)))


def _pingpong_main(
    rank: int,
    port: int,
    cores: list[list[int]],
    sizes: list[int],
    repeats: int,
    policy: str,
    results: Any,
) -> None:
    """Two pinned workers time one-way transfers of a tensor of every size with isend/irecv as a placed step
    makes them (the runtime's own path): the receiver posts its receive and blocks in ``wait()`` while the
    sender computes for about a millisecond (the receiver's core may meanwhile go to another process, as in a
    step), then the sender sends; a sample is the time from the ``isend`` call to the receiver's return from
    ``wait()`` (``time.perf_counter`` is the host's monotonic clock in both processes). Rank 1 reports the
    samples (a ping-pong, which this was, blocks only briefly and measured a third of the hop a step pays).
    Then both measure the per-message processor time on busy workers (`_busy_message_cost`)."""
    try:
        pin_worker(cores[rank])
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
        lower_transport_threads(policy)  # as the runtime's workers run them
        samples = []
        a = torch.randn(32, 32)
        stamp = torch.zeros(1, dtype=torch.float64)
        for size in sizes:
            buf = torch.ones(max(1, size // 4), dtype=torch.float32)
            for k in range(repeats + 1):  # the first transfer of each size is a warm-up
                r = dist.irecv(buf, 0, tag=k) if rank == 1 else None
                dist.barrier()
                if rank == 0:
                    t_busy = time.perf_counter()
                    while time.perf_counter() - t_busy < 1e-3:
                        torch.mm(a, a)
                    t0 = time.perf_counter()
                    dist.isend(buf, 1, tag=k).wait()
                    stamp[0] = t0
                    dist.send(stamp, 1, tag=100_000 + k)
                else:
                    if r is not None:
                        r.wait()
                    t1 = time.perf_counter()
                    dist.recv(stamp, 0, tag=100_000 + k)
                    if k > 0:
                        samples.append((float(buf.numel() * 4), max(0.0, t1 - float(stamp[0]))))
        one_way = _busy_message_cost(rank, 200, two_way=False, tag0=200_000)
        two_way = _busy_message_cost(rank, 200, two_way=True, tag0=300_000)
        results.put((rank, {"samples": samples, "one_way_s": one_way, "two_way_s": two_way}))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException as exc:
        import traceback

        results.put((rank, {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}))
        raise


def pingpong(
    cores: list[list[int]], sizes: Sequence[int], repeats: int, timeout_s: float = 600.0, policy: str = "idle"
) -> tuple[list[tuple[float, float]], float, float]:
    """(bytes, one-way seconds) samples between two worker processes pinned to `cores[0]` and `cores[1]`, and
    the processor time per message of a send and of a receive on busy workers (`_busy_message_cost`). `policy`:
    what gloo's transport threads get (`worker.lower_transport_threads`), as the measured runtime's
    ``transport_priority``: the hop and the per-message time depend on it."""
    if policy not in TRANSPORT_POLICIES:
        raise ConfigError(f"transport policy {policy!r} is not one of {list(TRANSPORT_POLICIES)}")
    args = (free_port(), cores, [int(s) for s in sizes], int(repeats), policy)
    reps = spawn_and_collect(_pingpong_main, args, 2, "comm benchmark workers", timeout_s)
    # one way: rank 0's cost is a send's, rank 1's a receive's. Two ways (each rank sends and receives one
    # message per op, as the workers of a step do): a rank pays a send and a receive, and more than the sum of
    # the one-way costs (both transport threads and the compute thread share the core); the excess is put on
    # the send, which the simulator charges where the value is produced
    recv_s = reps[1]["one_way_s"]
    both = 0.5 * (reps[0]["two_way_s"] + reps[1]["two_way_s"])
    send_s = max(reps[0]["one_way_s"], both - recv_s)
    log.info(
        "busy per-message time: one way send %.3g s, receive %.3g s; both ways %.3g s per message pair",
        reps[0]["one_way_s"],
        recv_s,
        both,
    )
    return reps[1]["samples"], send_s, recv_s


def _nccl_pingpong_main(rank: int, port: int, sizes: list[int], repeats: int, results: Any) -> None:
    """Two GPU workers (one per GPU, as the runtime's NCCL workers) time round trips of a tensor of every size
    with send/recv over NCCL; a sample is half of rank 0's round trip, timed with CUDA events on its stream."""
    try:
        dev = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
        samples = []
        for size in sizes:
            buf = torch.ones(max(1, size // 4), dtype=torch.float32, device=dev)
            for k in range(repeats + 1):  # the first round trip of each size is a warm-up (and NCCL's set-up)
                dist.barrier()
                torch.cuda.synchronize(dev)
                if rank == 0:
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    dist.send(buf, 1)
                    dist.recv(buf, 1)
                    end.record()
                    torch.cuda.synchronize(dev)
                    if k > 0:
                        samples.append((float(buf.numel() * 4), 0.5 * start.elapsed_time(end) / 1e3))
                else:
                    dist.recv(buf, 0)
                    dist.send(buf, 0)
                    torch.cuda.synchronize(dev)
        results.put((rank, {"samples": samples}))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException as exc:
        import traceback

        results.put((rank, {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}))
        raise


def nccl_pingpong(sizes: Sequence[int], repeats: int, timeout_s: float = 600.0) -> list[tuple[float, float]]:
    """(bytes, one-way seconds) samples between two GPU worker processes over NCCL (`_nccl_pingpong_main`).
    Needs two CUDA devices: NCCL refuses two ranks on one GPU."""
    if not torch.cuda.is_available():
        raise ConfigError("the NCCL communication benchmark needs CUDA devices; none is available")
    args = (free_port(), [int(s) for s in sizes], int(repeats))
    return spawn_and_collect(_nccl_pingpong_main, args, 2, "NCCL comm benchmark workers", timeout_s)[0]["samples"]


def iqr(xs: Sequence[float]) -> float:
    """Inter-quartile range (0 for fewer than two samples)."""
    if len(xs) < 2:
        return 0.0
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return float(q[2] - q[0])


@dataclass
class Prepared:
    """A job ready to launch and what `TorchDistributedRuntime.finish` needs to judge its reports."""

    job: WorkerJob
    prog: Program
    flat: list[torch.Tensor]
    extra: dict[str, Any]
    names: list[str]
    model_name: str
    cluster_name: str


def pace_filter(reports: Sequence[Mapping[str, Any]], times: Sequence[float]) -> list[int] | None:
    """The indices of the measured steps (`times`) a slow spell of a worker's core touched, to be left out
    (`interference.steps_to_drop` on the flags `interference.slow_steps` gives the workers' ``paces``); None
    where every step counts. O(workers * steps)."""
    return interference.steps_to_drop(interference.slow_steps([r.get("paces") or [] for r in reports]), len(times))


def worst_disturbance(share: float | None, reports: Sequence[Mapping[str, Any]]) -> float | None:
    """What `interference.least_disturbed` weighs a run by (`interference.spell_disturbance` on the workers'
    paces). O(workers * steps)."""
    return interference.spell_disturbance(share, interference.slow_steps([r.get("paces") or [] for r in reports]))


def median_step_timeline(
    reports: Sequence[Mapping[str, Any]], times: Sequence[float], names: Sequence[str]
) -> list[dict[str, Any]]:
    """The ops of the median measured step as the workers ran them (result `extra["op_timeline"]`, trace.json's
    measured part): ``{"op", "device", "start_s", "end_s"}`` sorted by start, in seconds from the earliest worker's
    start of that step. The workers' clocks are `time.perf_counter`, the host's monotonic clock shared by its
    processes, so one worker's later barrier exit shows as a later start. Empty when a worker reported no spans
    (several hosts under torchrun do not share a clock: there each worker starts at 0). O(ops)."""
    if not times or any(len(r.get("spans") or ()) != len(times) for r in reports):
        return []
    k = sorted(range(len(times)), key=times.__getitem__)[len(times) // 2]
    zero = min(r["spans"][k][0] for r in reports)
    rows = []
    for name, r in zip(names, reports):
        t0, spans = r["spans"][k]
        off = t0 - zero
        rows.extend({"op": op, "device": name, "start_s": off + s, "end_s": off + e} for op, s, e in spans)
    rows.sort(key=lambda x: x["start_s"])
    return rows


def trace_summary(traces: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Medians over the measured steps of one worker's trace (`runtime.trace=true`, a debug option): the step,
    the time blocked in receive waits, in isend calls, in waits for sends, in the step's set-up (posting the
    receives, sending the parameters), and the count of receives and sends; and the step's tail after its last
    op: the parameter moves (``tail_moves_s``), the waits for sends (``tail_send_wait_s``) and posting the next
    step's receives (``tail_post_s``; gloo, about 13 us per receive on the lab's VM, session 18). Seconds.
    O(steps x messages)."""
    if not traces:
        return {}

    def med(xs: list[float]) -> float:
        return float(statistics.median(xs))

    return {
        "step_s": med([t["end"] - t["t0"] for t in traces]),
        "recv_wait_s": med([sum(e - s for s, e in t["waited"].values()) for t in traces]),
        "send_s": med([t["spent"]["send"] for t in traces]),
        "send_wait_s": med([t["spent"]["send_wait"] for t in traces]),
        "setup_s": med([t["setup"] - t["t0"] for t in traces]),
        "receives": med([float(len(t["waited"])) for t in traces]),
        "sends": med([float(len(t["sent_at"])) for t in traces]),
        "tail_moves_s": med([t["tail"]["moves"] for t in traces]),
        "tail_send_wait_s": med([t["tail"]["send_wait"] for t in traces]),
        "tail_post_s": med([t["tail"]["post"] for t in traces]),
    }


def trace_hops(traces: Sequence[Sequence[Mapping[str, Any]]], cores: Sequence[Sequence[int]]) -> dict[str, Any]:
    """Hops to a waiting worker in the debug trace (`runtime.trace=true`): for every value a worker waited for
    and had started waiting for before its sender posted the ``isend``, the time from that ``isend`` to the end
    of the wait, on the host's monotonic clock. Split by whether the two workers share a host core (`cores`: each
    worker's cores, in the traces' order): on a shared core the receiver's idle-class transport thread reads the
    message only when the core idles (experiments/shared_core_hop.py). Per kind, the count and the median, 25th
    and 75th percentiles in seconds; ``{}`` without traces. Waits for a value sent by several workers, or sent
    before the receiver waited, are not counted. O(steps x messages)."""
    if not traces or any(not t for t in traces):
        return {}
    hops: dict[str, list[float]] = {"same_core": [], "other_core": []}
    sets = [set(c) for c in cores]
    for k in range(min(len(t) for t in traces)):
        senders: dict[Any, list[tuple[int, float]]] = {}
        for w, t in enumerate(traces):
            for nid, ts in t[k]["sent_at"].items():
                senders.setdefault(nid, []).append((w, ts))
        for w, t in enumerate(traces):
            for nid, (tw, te) in t[k]["waited"].items():
                got = senders.get(nid)
                if got is None or len(got) != 1:
                    continue
                src, ts = got[0]
                if src != w and tw <= ts:
                    hops["same_core" if sets[src] & sets[w] else "other_core"].append(te - ts)
    out: dict[str, Any] = {}
    for kind, xs in hops.items():
        if xs:
            xs.sort()
            out[kind] = {
                "count": len(xs),
                "median_s": float(statistics.median(xs)),
                "p25_s": xs[len(xs) // 4],
                "p75_s": xs[(3 * len(xs)) // 4],
            }
    return out


# ---------------------------------------------------------------------------- the runtime plugin
def uses_cuda(cluster: Cluster, device: str = "auto") -> bool:
    """Whether the runtime's workers run on GPUs (NCCL): `device` "cuda", or "auto" with CUDA present and every
    device of `cluster` a GPU."""
    have = torch.cuda.is_available() and torch.cuda.device_count() > 0
    if device == "cuda":
        if not have:
            raise ConfigError("runtime.device=cuda but no CUDA device is available")
        return True
    return device == "auto" and have and all(d.type == "GPU" for d in cluster.devices)


def check_rtol(rtol: float, tf32_rtol: float, reports: Sequence[Mapping[str, Any]]) -> float:
    """The relative tolerance of the correctness check: `rtol`, or `tf32_rtol` where it is larger and a worker
    computed in TF32 (its report's ``tf32``, `reference.tf32_in_effect`).

    Why: the reference runs in this process on the same GPU, but cuDNN may pick another convolution algorithm
    there than in the worker (the heuristics see another workspace and memory state), and two TF32 algorithms
    round differently. Full-size inception_v3 on one H100 (27 Nov 2026, `experiments/tf32_check.py`, eager and
    graphed alike): loss equal, a stem convolution's weight gradient 7.7e-4-8.0e-4 of its largest magnitude
    apart (TF32's unit roundoff is 4.9e-4), which failed the 1e-4 default; with ``NVIDIA_TF32_OVERRIDE=0``
    1.6e-5-1.8e-5. The default `tf32_rtol` 5e-3 is about 6 times the measured difference; a placement error
    (a wrong, stale or missing tensor) moves a gradient by a large part of its scale."""
    if any(r.get("tf32") for r in reports):
        return max(float(rtol), float(tf32_rtol))
    return float(rtol)


def _to_cpu(v: Any) -> Any:
    return v.cpu() if isinstance(v, torch.Tensor) else v


class TorchDistributedRuntime(Runtime):
    """One OS process per device on torch.distributed (gloo on CPU, NCCL on CUDA); see the module docstring.

    warmup/steps: unmeasured and measured steps (steps >= 1; 10 by default); check_correctness: compare the
    first step's loss and gradients with a single-device step within rtol/atol (`tf32_rtol` for rtol where a CUDA
    worker computes in TF32: `check_rtol`; the one used is in `extra["rtol"]`); threads: intra-op threads per
    CPU worker (None: the worker's core count); device: "auto" (CUDA when every device is a GPU and CUDA is
    present), "cpu" or "cuda"; timeout_s: how long the workers may take in all; trace: a debug option that
    records per step each worker's time blocked in receive waits, in isend calls and in the set-up
    (`extra["trace"]`, see `trace_summary`; off by default: it adds a clock read per op and message);
    pin_transport_threads: False pins a CPU worker only after gloo has started its transport threads, which
    then run on any host core instead of taking turns with the worker's compute thread on its own core (one
    A/B on gnmt_tiny m-SCT under load: 118 ms against 164 ms; on mlp_tiny within the noise);
    transport_priority: what gloo's device loop threads get, "idle" (SCHED_IDLE, the default), "nice" (nice 19,
    better on a host other sessions keep busy) or "normal" (see `worker.lower_transport_threads`);
    max_interference / retries: a CPU run during whose measured steps other tasks used more than
    `max_interference` of the workers' cores (`backends.interference`; 0.05 by default, None: never) is run again
    in fresh workers, up to `retries` more times (2), and the least disturbed attempt is kept; every attempt's
    share is in `extra["interference_attempts"]`, the kept one in `extra["host_interference"]`. Why: an idle-class
    transport thread waits for a core that another task holds, so a quarter of the cores taken by another process
    made transformer_tiny's m-SCT step 31 ms against 9 ms quiet (26 Nov 2026); cuda_graph: on a GPU, the
    measured steps replay a CUDA graph of the step captured after warm-up (`backends.torch.cudagraph`: the
    device's time without the host's per-op launches; `extra["cuda_graph"]`), for placements that use one GPU
    (a ConfigError otherwise: NCCL inside the graph is not written); post_receives: when a gloo worker posts its
    receives, "within_limit" (the default) or "up_front" (see the module docstring; NCCL workers post each receive
    when it is needed).
    """

    name = "torch_distributed"

    def __init__(
        self,
        warmup: int = 3,
        steps: int = 10,
        check_correctness: bool = True,
        rtol: float = 1e-4,
        atol: float = 1e-5,
        tf32_rtol: float = 5e-3,
        threads: int | None = None,
        device: str = "auto",
        timeout_s: float = 600.0,
        granularity: str | None = None,
        trace: bool = False,
        pin_transport_threads: bool = True,
        transport_priority: str = "idle",
        max_interference: float | None = 0.05,
        retries: int = 2,
        cuda_graph: bool = False,
        post_receives: str = "within_limit",
    ):
        if int(steps) < 1:
            raise ConfigError(f"runtime.steps must be >= 1, got {steps}")
        if int(warmup) < 0:
            raise ConfigError(f"runtime.warmup must be >= 0, got {warmup}")
        if device not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"runtime.device {device!r} is not one of ['auto', 'cpu', 'cuda']")
        self.warmup, self.steps = int(warmup), int(steps)
        self.check_correctness = bool(check_correctness)
        self.rtol, self.atol = float(rtol), float(atol)
        self.tf32_rtol = float(tf32_rtol)
        self.threads = int(threads) if threads else None
        self.device = device
        self.timeout_s = float(timeout_s)
        self.granularity = granularity
        self.trace = bool(trace)
        self.pin_transport_threads = bool(pin_transport_threads)
        if transport_priority not in TRANSPORT_POLICIES:
            raise ConfigError(
                f"runtime.transport_priority {transport_priority!r} is not one of {list(TRANSPORT_POLICIES)}"
            )
        self.transport_priority = transport_priority
        self.max_interference, self.retries = interference.check_policy(max_interference, retries)
        self.cuda_graph = bool(cuda_graph)
        if post_receives not in POST_RECEIVES:
            raise ConfigError(f"runtime.post_receives {post_receives!r} is not one of {list(POST_RECEIVES)}")
        self.post_receives = post_receives
        if self.cuda_graph and self.warmup < 1:
            raise ConfigError("runtime.cuda_graph=true needs runtime.warmup >= 1 (the first step runs eagerly)")

    def use_cuda(self, cluster: Cluster) -> bool:
        return uses_cuda(cluster, self.device)

    def run(
        self,
        backend: Any,
        model: Any,
        graph: Any,
        placement: Mapping[str, str],
        schedule: Mapping[str, list[str]],
        cluster: Cluster,
        *,
        plan: Any = None,
    ) -> RunResult:
        """Prepare the job, run it on one spawned process per device, and collect the result. `plan` is not
        used: each worker follows its device's order and receives as soon as a value is needed."""
        prepared = self.prepare(backend, model, graph, placement, schedule, cluster)

        def measure() -> tuple[float | None, list[dict[str, Any]], interference.Kind]:
            reports = launch(prepared.job, self.timeout_s)
            share = interference.others_share([r.get("core_samples") or (None, None) for r in reports])
            flags = interference.slow_steps([r.get("paces") or [] for r in reports])
            kind = interference.kind_of(share, flags, self.max_interference)
            return worst_disturbance(share, reports), reports, kind

        _, reports, shares = interference.least_disturbed(
            measure, self.max_interference, self.retries, f"{prepared.model_name} on {prepared.cluster_name}"
        )
        res = self.finish(prepared, reports)
        res.extra["interference_attempts"] = shares
        return res

    def prepare(
        self,
        backend: Any,
        model: Any,
        graph: Any,
        placement: Mapping[str, str],
        schedule: Mapping[str, list[str]] | None,
        cluster: Cluster,
    ) -> Prepared:
        """Check the placement and schedule (errors before any process starts) and build the workers' job."""
        assign = dict(getattr(placement, "assignment", placement))
        granularity = self.granularity or getattr(backend, "granularity", "operator")
        cuda = self.use_cuda(cluster)
        prog = program_matching(model, graph, granularity, model.batch_size, ["cuda", "cpu"] if cuda else ["cpu"])
        if schedule is None:
            schedule = {d.name: [] for d in cluster.devices}
            for op in prog.op_nodes:
                schedule[assign[op]].append(op)
        sched = {d.name: list(schedule.get(d.name, [])) for d in cluster.devices}
        params = [p.detach().cpu() for p in model.module.parameters()]
        flat = [t.cpu() for t in prog.flat_inputs(model, params=params)]
        # check the placement and schedule here (clear errors before any process starts)
        phys = [PhysDevice(d.name, torch.device("cpu")) for d in cluster.devices]
        P, S = prog.n_params, prog.n_params * prog.n_state
        probe = PlacedExecutor(
            prog, assign, sched, phys, flat[:P], flat[P : P + S], flat[P + S :], start_threads=False,
            share_storages=not cuda,
        )  # fmt: skip
        sent = {i for i, dests in probe.sends.items() if dests}
        host = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
        cores = worker_cores(cluster, host)
        # a device that holds nothing (no op, no parameter or input) gets no worker: an idle device of a real
        # cluster costs the others nothing, but an idle worker here shares their cores and joins every step's
        # barrier (transformer_tiny on one device of cpu4: 6.1-6.5 ms with three idle workers, 4.5-4.9 ms alone)
        used = {probe.node_dev[r.nid] for r in prog.nodes if r.nid in probe.node_dev}
        keep = [k for k in range(len(cluster.devices)) if k in used] or [0]
        idle = [cluster.names[k] for k in range(len(cluster.devices)) if k not in keep]
        names = [cluster.names[k] for k in keep]
        cores = [cores[k] for k in keep]
        sched = {n: sched[n] for n in names}
        if self.cuda_graph and not cuda:
            raise ConfigError(f"runtime.cuda_graph=true needs GPU workers; cluster {cluster.name!r} runs on CPUs")
        if self.cuda_graph and len(keep) > 1:
            raise ConfigError(
                f"runtime.cuda_graph=true runs a placement on one GPU; this one uses {names} (NCCL send/recv "
                "inside a CUDA graph is not written)"
            )
        ratio = oversubscription(cluster, len(host))
        extra: dict[str, Any] = {"host_cores": len(host), "backend": "nccl" if cuda else "gloo"}
        if idle:
            extra["idle_devices"] = idle
        if ratio > 1 and not cuda:
            log.warning(
                "cluster %r asks for %d cores but this host gives %d: %.2g workers share each core "
                "(the simulator models the sharing with host_cores=%d)",
                cluster.name,
                sum(d.cores for d in cluster.devices),
                len(host),
                ratio,
                len(host),
            )
            extra["oversubscribed"] = ratio
        job = WorkerJob(
            program=dump_program(prog),
            flat=flat,
            placement=assign,
            schedule=sched,
            devices=names,
            cores=cores,
            cuda=cuda,
            port=free_port(),
            warmup=self.warmup,
            steps=self.steps,
            retain_first=self.check_correctness,
            specs=value_specs(prog, flat, sent, "cuda" if cuda else "cpu"),
            threads=self.threads,
            trace=self.trace,
            pin_transport=self.pin_transport_threads,
            transport_policy=self.transport_priority,
            memory_limits=[float(cluster.devices[k].memory_bytes) for k in keep],
            cuda_graph=self.cuda_graph,
            post_receives=self.post_receives,
        )
        return Prepared(job, prog, flat, extra, names, model.name, cluster.name)

    def finish(self, prepared: Prepared, reports: list[dict[str, Any]]) -> RunResult:
        """The RunResult from the workers' reports (in device order): step = slowest worker per step."""
        prog, flat, extra = prepared.prog, prepared.flat, dict(prepared.extra)
        P = prog.n_params
        n_steps = len(reports[0]["times"])
        times = [max(r["times"][k] for r in reports) for k in range(n_steps)]
        losses = next((r["losses"] for r in reports if r["losses"]), [])
        if self.check_correctness:
            # the reference runs with the workers' intra-op threads: a reduction split over another number of
            # threads adds in another order (inception_v3_tiny's first conv: weight gradients up to 1.1e3, 0.47
            # apart between 1 and 2 threads), and that is not what the check is after
            counts = {r["threads"] for r in reports}
            before = torch.get_num_threads()
            if not prepared.job.cuda and len(counts) == 1:
                torch.set_num_threads(int(counts.pop()))
            try:
                if prepared.job.cuda:
                    gpu = torch.device("cuda", 0)
                    ref = [_to_cpu(v) for v in run_program(prog, [t.to(gpu) for t in flat])]
                else:
                    ref = run_program(prog, flat)
            finally:
                torch.set_num_threads(before)
            outs: list[Any] = [torch.tensor(losses[0]) if losses else ref[0]]
            grads: dict[int, Any] = {}
            for r in reports:
                grads.update({i: torch.from_numpy(a) for i, a in (r["grads"] or {}).items()})
            outs.extend(grads.get(i) for i in prog.outputs[1 : 1 + P])
            outs.extend([None] * (len(prog.outputs) - len(outs)))
            if any(g is None for g in outs[1 : 1 + P]):
                missing = [prog.param_names[k] for k, g in enumerate(outs[1 : 1 + P]) if g is None]
                raise WorkerError(f"the workers returned no gradient for {missing[:3]}")
            info = compare_outputs(outs, ref, prog, check_rtol(self.rtol, self.tf32_rtol, reports), self.atol)
            if not info["correct"]:
                log.warning("placed step differs from the single-device step: %s", info)
            extra.update(info)
        if prepared.job.cuda_graph or prepared.job.host_graphs:
            extra["cuda_graph"] = True
            extra["cuda_graph_check"] = reports[0].get("graph_check")
        if prepared.job.post_receives == "within_limit" and not prepared.job.cuda and len(reports) > 1:
            # the receives each worker's plan posts after the step's start (worker.plan_receive_posts)
            extra["late_receives"] = {prepared.names[k]: r.get("late_receives") for k, r in enumerate(reports)}
        slow = pace_filter(reports, times)
        left_out = set(slow or ())
        counted = [t for k, t in enumerate(times) if k not in left_out]
        measured = statistics.median(counted)
        names = prepared.names
        extra["slow_steps"] = len(slow) if slow is not None else None
        extra["spells_prevail"] = interference.spells_prevail()  # then every step counted (pace_filter)
        if slow is not None:
            extra["core_pace_floor_s"] = interference.pace_floor()
        extra.update(
            {
                "losses": losses,
                "rss_growth_bytes": {names[k]: r["rss_growth"] for k, r in enumerate(reports)},
                "tensor_peak_bytes": {names[k]: r["tensor_peak"] for k, r in enumerate(reports)},
                # GPU workers: the allocator's bytes beside the tensors (backends.torch.cuda_memory); 0 on CPUs
                "framework_reserve_bytes": {names[k]: float(r.get("reserve", 0)) for k, r in enumerate(reports)},
                # GPU workers: the allocator's allocated / requested peaks of the first step and of the later ones
                # (worker.allocator_peaks); None on CPUs
                "allocator_peaks_bytes": {names[k]: r.get("allocator_peaks") for k, r in enumerate(reports)},
                "threads_per_worker": {names[k]: r["threads"] for k, r in enumerate(reports)},
                # gloo transport threads each worker set to nice 19 (worker.lower_transport_threads)
                "lower_transport_threads": {
                    names[k]: r.get("lower_transport_threads", 0) for k, r in enumerate(reports)
                },
                "worker_step_s": {names[k]: statistics.median(r["times"]) for k, r in enumerate(reports)},
                "post_receives": prepared.job.post_receives if not prepared.job.cuda else "when_needed",
                # worker.core_pace before each measured step and after the last (CPU workers)
                "core_paces_s": {names[k]: r.get("paces", []) for k, r in enumerate(reports)},
                "wall_step_s": statistics.median(
                    max(r.get("wall_times", r["times"])[k] for r in reports) for k in range(n_steps)
                ),
            }
        )
        # the share of the workers' cores other tasks took during the measured steps (None: not measured)
        extra["host_interference"] = interference.others_share([r.get("core_samples") or (None, None) for r in reports])
        if self.trace:
            extra["trace"] = {names[k]: trace_summary(r.get("traces", [])) for k, r in enumerate(reports)}
            extra["trace_hops"] = trace_hops([r.get("traces", []) for r in reports], prepared.job.cores)
        timeline = median_step_timeline(reports, times, names)
        if timeline:
            extra["op_timeline"] = timeline
            extra["op_timeline_clock"] = (
                "one process per device, spans from each worker's barrier exit on the host's monotonic clock; "
                "a span includes the op's waits for values received from other devices"
            )
        traffic = sum(r["traffic"] for r in reports)
        log.info(
            "ran %s on %s (%d processes, %s): median step %.4g s, IQR %.3g s over %d steps, traffic %.3g B/step",
            prepared.model_name,
            prepared.cluster_name,
            len(reports),
            extra["backend"],
            measured,
            iqr(times),
            len(times),
            traffic,
        )
        return RunResult(
            measured_step_s=measured,
            step_times_s=times,
            # a device without a worker (`idle_devices`) allocated nothing
            peak_memory_bytes={
                **{names[k]: float(r["peak"]) for k, r in enumerate(reports)},
                **{d: 0.0 for d in extra.get("idle_devices", [])},
            },
            traffic_bytes=float(traffic),
            loss=losses[0] if losses else None,
            extra=extra,
            step_iqr_s=iqr(counted),
            workers=[{"device": names[k], "pid": r["pid"], "cores": r["cores"]} for k, r in enumerate(reports)],
            slow_steps=list(slow or ()),
        )


__all__ = [
    "_alloc",
    "_worker_main",
    "value_spec",
    "TorchDistributedRuntime",
    "Prepared",
    "WorkerJob",
    "WorkerError",
    "launch",
    "dump_program",
    "value_specs",
    "pin_worker",
    "free_port",
    "iqr",
    "pingpong",
    "nccl_pingpong",
    "trace_hops",
    "trace_summary",
    "uses_cuda",
]
