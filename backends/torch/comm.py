"""Communication micro-benchmark: time real copies between device pairs and fit latency + bytes / bandwidth.

Baechi 4.1 builds its communication cost function by linear regression over a micro-benchmark of transfers of
various sizes; Celeritas 4.2.1 uses the same linear fit ``t = k d + b``. Here each ordered pair of distinct
cluster devices copies tensors of every size in `sizes` `repeats` times through the runtime's own copy path
(a destination copy engine: queue hand-off, ``clone()`` on CPU, an asynchronous copy on CUDA), so the fit
includes what the runtime pays per transfer. One warm-up copy per pair and size is discarded. Least squares
over the samples gives the global fit and one fit per pair; a negative intercept is clipped to zero, and a
non-positive slope means bandwidth too high to measure (reported as 1e15 bytes/s).

Cost: pairs x sizes x (repeats + 1) copies.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from algorithms.cluster import Cluster

from ..base import CommFit
from .devices import CopyEngine, PhysDevice, map_devices

log = logging.getLogger(__name__)

DEFAULT_SIZES = (1024, 16384, 262144, 1048576, 4194304, 16777216)
MAX_BYTES_PER_S = 1e15


def fit_linear(samples: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares (latency_s, bytes_per_s) of ``t = latency + bytes / bandwidth`` over (bytes, s) pairs."""
    if not samples:
        raise ValueError("no samples to fit")
    x = np.array([b for b, _ in samples], dtype=float)
    y = np.array([t for _, t in samples], dtype=float)
    if np.ptp(x) == 0:
        return max(0.0, float(y.mean())), MAX_BYTES_PER_S
    A = np.stack([np.ones_like(x), x], axis=1)
    (a, k), *_ = np.linalg.lstsq(A, y, rcond=None)
    if a < 0:  # refit through the origin
        a, k = 0.0, float((x @ y) / (x @ x))
    bw = 1.0 / k if k > 1.0 / MAX_BYTES_PER_S else MAX_BYTES_PER_S
    return float(a), float(bw)


def _time_copy(engine: CopyEngine, value: torch.Tensor, src: PhysDevice) -> float:
    done = threading.Event()
    box: list = []

    def finished(out, ev):
        box.append((out, ev))
        done.set()

    ready = None
    if src.is_cuda:
        torch.cuda.synchronize(src.torch_device)
    t0 = time.perf_counter()
    engine.submit(value, src, ready, finished)
    done.wait()
    out, ev = box[0]
    if isinstance(ev, BaseException):
        raise ev
    if ev is not None:
        ev.synchronize()
    return time.perf_counter() - t0


def comm_benchmark(
    cluster: Cluster, sizes: Sequence[int] | None = None, repeats: int = 5, prefer: str = "auto"
) -> CommFit:
    """Fit the communication model of `cluster`'s devices as the runtime maps them (see module docstring)."""
    sizes = [int(s) for s in (sizes or DEFAULT_SIZES)]
    devs = map_devices(cluster, prefer)
    if len(devs) < 2:
        return CommFit(0.0, MAX_BYTES_PER_S)
    engines = {d.name: CopyEngine(d) for d in devs}
    samples: list[tuple[str, str, float, float]] = []
    try:
        for s in devs:
            for d in devs:
                if s.name == d.name:
                    continue
                for size in sizes:
                    t = torch.empty(max(1, size // 4), dtype=torch.float32, device=s.torch_device).fill_(1.0)
                    _time_copy(engines[d.name], t, s)  # warm-up
                    for _ in range(repeats):
                        samples.append((s.name, d.name, float(t.numel() * 4), _time_copy(engines[d.name], t, s)))
    finally:
        for e in engines.values():
            e.close()
    lat, bw = fit_linear([(b, t) for _, _, b, t in samples])
    links = {}
    for s in devs:
        for d in devs:
            if s.name != d.name:
                links[(s.name, d.name)] = fit_linear([(b, t) for a, c, b, t in samples if a == s.name and c == d.name])
    log.info(
        "comm benchmark on %s: latency %.3g s, bandwidth %.3g B/s (%d samples)", cluster.name, lat, bw, len(samples)
    )
    return CommFit(lat, bw, links, samples)


@dataclass
class DistributedCommFit(CommFit):
    """A CommFit plus the processor time a worker spends per message it sends / receives (for
    `simulate(..., send_overhead_s=..., recv_overhead_s=...)`)."""

    send_overhead_s: float = 0.0
    recv_overhead_s: float = 0.0
    #: With the in-step calibration: the ping-pong's own latency, which its samples are fitted with (the
    #: fit's `latency_s` is then the in-step one); NaN otherwise.
    pingpong_latency_s: float = math.nan
    #: The simulator's charge for time-sharing a host core (`simulate(shared_core_slowdown=...)`) that this fit
    #: was made with and the predictions of these workers use where they share cores (0: none).
    shared_core_slowdown: float = 0.0
    #: The processor time per byte of a message sent / received (`simulate(send_byte_s=, recv_byte_s=)`), from
    #: the in-step calibration's wide program; 0 without it.
    send_byte_s: float = 0.0
    recv_byte_s: float = 0.0
    #: Where the simulator spends a receive's processor time (`simulate(recv_work=...)`): the model the in-step
    #: costs were fitted under, which the predictions must use with them ("in_consumer" without that fit).
    recv_work: str = "in_consumer"
    #: The wide calibration program's single-device step when the in-step costs were measured (NaN without that
    #: fit): the machine's speed then, against which a profile's own reference rescales them
    #: (`backends.calibration.rescale_factor`).
    speed_reference_s: float = math.nan
    #: With `send_wake`: the median isend of 1 KB to a receiver blocked in wait() and to a computing one
    #: (`wake.send_wake_cost`), and their difference, which the in-step fit charged per send to an idle receiver
    #: and the predictions charge with these costs (`simulate(send_wake_s=...)`); NaN / 0 without.
    send_to_idle_s: float = math.nan
    send_to_busy_s: float = math.nan
    send_wake_s: float = 0.0


def fit_linear_relative(samples: Sequence[tuple[float, float]], stat: str = "median") -> tuple[float, float]:
    """(latency_s, bytes_per_s) minimising the squared *relative* error of ``latency + bytes / bandwidth``
    over the per-size medians (`stat="median"`) or means (`"mean"`) of (bytes, s) samples: tiny and huge
    transfers weigh alike (an absolute fit over 1 KB..64 MB is set by the largest transfers and misses the
    latency that small tensors pay). The median per size drops the outliers of a shared machine; the mean keeps
    them, which is what a step of many messages pays (its time is a sum over hundreds of transfers, so its median
    is near the sum of their means). Same clipping as `fit_linear`. O(samples log samples)."""
    if stat not in ("median", "mean"):
        raise ValueError(f"stat must be 'median' or 'mean', got {stat!r}")
    agg = np.median if stat == "median" else np.mean
    if not samples:
        raise ValueError("no samples to fit")
    by: dict[float, list[float]] = {}
    for b, t in samples:
        by.setdefault(float(b), []).append(float(t))
    x = np.array(sorted(by), dtype=float)
    y = np.array([float(agg(by[b])) for b in x])
    if len(x) < 2:
        return max(0.0, float(y.mean())), MAX_BYTES_PER_S
    w = 1.0 / np.maximum(y, 1e-12)
    A = np.stack([np.ones_like(x), x], axis=1) * w[:, None]
    (a, k), *_ = np.linalg.lstsq(A, y * w, rcond=None)
    if a < 0:
        a, k = 0.0, float(np.sum(w * w * x * y) / np.sum(w * w * x * x))
    if k <= 1.0 / MAX_BYTES_PER_S:
        return float(a), MAX_BYTES_PER_S
    return float(a), float(1.0 / k)


DISTRIBUTED_SIZES = (1024, 16384, 262144, 1048576, 4194304, 16777216, 67108864)


def _fit_and_log(raw: Sequence[tuple[float, float]], sizes: Sequence[int], what: str) -> tuple[float, float]:
    """`fit_linear_relative` over the per-size means (a step pays the mean hop), with its relative residual
    logged."""
    lat, bw = fit_linear_relative(raw, stat="mean")
    rel = np.array([(lat + b / bw - t) / t for b, t in raw if t > 0])
    log.info(
        "distributed comm fit on %s: latency %.3g s, bandwidth %.3g B/s; relative residual: median |r| %.1f%%, "
        "RMS %.1f%% over %d samples of %d..%d bytes",
        what,
        lat,
        bw,
        100.0 * float(np.median(np.abs(rel))),
        100.0 * float(np.sqrt(np.mean(rel**2))),
        len(raw),
        min(sizes),
        max(sizes),
    )
    return lat, bw


def _nccl_fit(cluster: Cluster, sizes: Sequence[int], repeats: int, timeout_s: float) -> DistributedCommFit:
    """The NCCL branch of `comm_benchmark_distributed`: fit, residual logged, samples kept."""
    from .distributed import nccl_pingpong

    raw = nccl_pingpong(sizes, int(repeats), timeout_s)
    lat, bw = _fit_and_log(raw, sizes, f"{cluster.name} (NCCL)")
    a, c = cluster.names[0], cluster.names[1]
    return DistributedCommFit(lat, bw, {}, [(a, c, b, t) for b, t in raw], 0.0, 0.0)


def comm_benchmark_distributed(
    cluster: Cluster,
    sizes: Sequence[int] | None = None,
    repeats: int = 5,
    timeout_s: float = 600.0,
    transport_policy: str = "idle",
    in_step: bool = False,
    in_step_rounds: int = 2,
    cuda: bool = False,
    shared_core_slowdown: float = 0.0,
    recv_work: str = "in_consumer",
    send_wake: bool = False,
) -> DistributedCommFit:
    """Fit ``latency + bytes / bandwidth`` from the process-per-device runtime's own send/recv (issue 16).

    Two worker processes, pinned as the cluster's first two devices' workers are (`worker_cores`), send
    tensors of every size in `sizes` (default 1 KB to 64 MB) with ``isend``/``irecv`` over gloo as a placed
    step does (`distributed.pingpong`: the receive posted first, the receiver blocked in ``wait()`` while the
    sender computes); a sample is the time from the ``isend`` to the receiver's wake-up. The fit
    (`fit_linear_relative` over the per-size means) and its residual (root mean square, absolute and relative
    to the mean sample) are logged and kept in the samples. All device pairs get
    the same fit (one host: every pair goes through the same loopback). The processor time a *busy* worker
    spends per message (`distributed._busy_message_cost`: sender and receiver run a loop of small ops, the
    receives posted first, one 1 KB message per sender op; the extra time over the same loop without
    messages, per message) is returned in the fit's `send_overhead_s` / `recv_overhead_s`. It includes what
    gloo's transport threads, pinned to the worker's core, take from its compute thread (timed on idle
    workers, as before, it missed that part). Cost: sizes x (repeats + 1) round trips plus two process
    starts. `transport_policy`: the runtime's ``transport_priority`` (`worker.lower_transport_threads`), which
    the hop and the per-message time depend on. `in_step`: replace the latency and the per-message times by the
    in-step calibration (`calibrate.calibrate_in_step`, `in_step_rounds` rounds; split between send and receive
    in the benchmark's ratio), which predicts placed steps far better (docs/fidelity.md, 24 November), and add
    its per-byte processor time (`send_byte_s` / `recv_byte_s`, fitted on its wide program); the ping-pong's
    bandwidth and samples are kept. Default off (it costs about two minutes).

    `cuda`: the cluster's devices are GPUs run by NCCL workers: the fit comes from `distributed.nccl_pingpong`
    (round trips between the first two GPUs, halved, timed with CUDA events); the per-message processor times
    are 0 (an NCCL send or receive is a kernel on its own stream, not work on the compute thread) and the gloo
    options (`transport_policy`, `in_step`) do not apply.

    `shared_core_slowdown`: the simulator's charge for time-sharing a host core (`algorithms.simulator`) where the
    cluster's workers share cores; the in-step fit is made with it, and the fit carries it to the predictions
    (comm.json's ``shared_core_slowdown``). `recv_work`: likewise the simulator's model of where a receive's
    processor time goes (`simulate(recv_work=...)`), kept in the fit (comm.json's ``recv_work``) with the in-step
    costs; without the in-step fit the costs are the benchmark's, paid in the consumer. `send_wake` (with
    `in_step`): first time an isend to an idle and to a computing receiver (`wake.send_wake_cost`, a few seconds)
    and fit the in-step costs with the difference charged per send to an idle receiver (comm.json's
    ``send_wake_s``, ``send_to_idle_s``, ``send_to_busy_s``).
    """
    import os

    from algorithms.cluster import worker_cores

    from .distributed import pingpong

    if len(cluster.devices) < 2:
        return DistributedCommFit(0.0, MAX_BYTES_PER_S)
    sizes = [int(s) for s in (sizes or DISTRIBUTED_SIZES)]
    if cuda:
        return _nccl_fit(cluster, sizes, repeats, timeout_s)
    host = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    cores = worker_cores(cluster, host)[:2]
    raw, send_s, recv_s = pingpong(cores, sizes, int(repeats), timeout_s, policy=transport_policy)
    lat, bw = _fit_and_log(raw, sizes, f"{cluster.name} (gloo, workers pinned to {cores})")
    for size in sizes:
        med = float(np.median([t for b, t in raw if int(b) == size] or [0.0]))
        log.debug("  %d bytes: measured median %.4g s, fit %.4g s", size, med, lat + size / bw)
    log.info("per-message processor time: send %.3g s, receive %.3g s", send_s, recv_s)
    if in_step:
        from .calibrate import calibrate_in_step

        total = send_s + recv_s
        to_idle = to_busy = math.nan
        wake_s = 0.0
        if send_wake:
            from .wake import send_wake_cost

            to_idle, to_busy = send_wake_cost([c[0] for c in cores], timeout_s=timeout_s)
            wake_s = max(0.0, to_idle - to_busy)
            log.info(
                "isend of 1 KB: %.3g s to an idle receiver, %.3g s to a computing one; %.3g s charged per send to an "
                "idle receiver",
                to_idle,
                to_busy,
                wake_s,
            )
        cal = calibrate_in_step(
            cluster.with_comm(lat, bw),
            transport_policy=transport_policy,
            rounds=in_step_rounds,
            timeout_s=timeout_s,
            send_share=send_s / total if total > 0 else 0.5,
            shared_core_slowdown=shared_core_slowdown,
            recv_work=recv_work,
            send_wake_s=wake_s,
        )
        pingpong = lat
        lat, send_s, recv_s = cal.latency_s, cal.send_overhead_s, cal.recv_overhead_s
        send_b, recv_b = cal.send_byte_s, cal.recv_byte_s
        reference = cal.speed_reference_s
    else:
        pingpong = math.nan
        send_b = recv_b = 0.0
        reference = math.nan
        to_idle = to_busy = math.nan
        wake_s = 0.0
    a, c = cluster.names[0], cluster.names[1]
    fit = DistributedCommFit(lat, bw, {}, [(a, c, b, t) for b, t in raw], send_s, recv_s, pingpong)
    fit.shared_core_slowdown = float(shared_core_slowdown)
    fit.send_byte_s, fit.recv_byte_s = float(send_b), float(recv_b)
    fit.recv_work = recv_work if in_step else "in_consumer"
    fit.speed_reference_s = float(reference)
    fit.send_to_idle_s, fit.send_to_busy_s, fit.send_wake_s = float(to_idle), float(to_busy), float(wake_s)
    return fit
