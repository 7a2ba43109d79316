"""What a gloo send of a small message costs its sender when the receiver's core is idle (issue 16, session 43).

A gloo ``isend`` writes its payload to the pair's socket from the caller's thread (once the receiver has
announced the receive). On a virtual machine whose guest halts an idle vCPU at once (the lab's VM:
``guest_halt_poll_ns`` = 0), the write's wake-up of a receiver blocked in ``wait()`` reaches a halted vCPU, and the
sender's thread pays for it: on the lab's VM (30 Nov 2026) an ``isend`` of 1 KB took 46-54 us when the receiver was
blocked in ``wait()`` and 13-18 us when it was computing, its receives posted (nine measurements of 200 sends each).
Off in the profiler by default (`profiler.comm_send_wake`): the in-step calibration cannot separate the charge from
the per-message costs (docs/fidelity.md, session 43). Traced placed
steps agree: 39-55 us per send on latency-bound placements (gnmt_tiny's expert, mlp_tiny's m-TOPO), 24-27 us on
message-heavy ones. `send_wake_cost` measures the two medians between two workers pinned as the runtime's are; the
simulator charges the difference per message sent to an idle device (`simulate(send_wake_s=...)`).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from algorithms.errors import ConfigError


def _compute(us: float, a: Any, b: Any) -> None:
    t_end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < t_end:
        a @ b


def _worker(rank: int, cores: list[int], mode: str, n: int, gap_us: float, port: int, out: Any) -> None:
    import torch
    import torch.distributed as dist

    from .worker import lower_transport_threads

    os.sched_setaffinity(0, {cores[rank]})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    lower_transport_threads("idle")
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    x = torch.ones(256)  # 1 KB
    try:
        for rnd in range(2):  # the first round warms up
            dist.barrier()
            if rank == 0:
                ts = []
                for _ in range(n):
                    _compute(gap_us, a, b)
                    t0 = time.perf_counter()
                    w = dist.isend(x, 1)
                    ts.append(time.perf_counter() - t0)
                    w.wait()
                if rnd == 1:
                    out.put(ts)
            else:
                bufs = [torch.empty(256) for _ in range(n)]
                if mode == "idle":  # blocked in wait() for each message: the core halts in between
                    for buf in bufs:
                        dist.irecv(buf, 0).wait()
                else:  # every receive posted, then computing through the sender's whole loop
                    works = [dist.irecv(buf, 0) for buf in bufs]
                    _compute(n * gap_us * 1.5 + 20000, a, b)
                    for w in works:
                        w.wait()
            dist.barrier()
    finally:
        dist.destroy_process_group()


def send_wake_cost(
    cores: list[int] | None = None, n: int = 200, gap_us: float = 300.0, timeout_s: float = 120.0
) -> tuple[float, float]:
    """(median isend time to an idle receiver, median to a computing one), in seconds: two processes pinned to
    `cores` (default: the host's first two), one intra-op thread each, gloo's transport threads at idle priority
    as the runtime's; the sender computes about `gap_us` between `n` sends of 1 KB (after as many warm-up sends).
    Cost: two pairs of process starts and 4 x n x `gap_us` of sending (about 1 s), a few seconds in all."""
    import socket

    import torch.multiprocessing as mp

    host = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    cores = list(cores) if cores is not None else host[:2]
    if len(cores) < 2:
        raise ConfigError(f"send_wake_cost needs two host cores, got {cores}")
    medians = []
    ctx = mp.get_context("spawn")
    for mode in ("idle", "busy"):
        with socket.socket() as sock:  # a free port for the rendezvous
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        q = ctx.Queue()
        procs = [ctx.Process(target=_worker, args=(r, cores, mode, n, gap_us, port, q)) for r in range(2)]
        for p in procs:
            p.start()
        try:
            ts = q.get(timeout=timeout_s)
        finally:
            for p in procs:
                p.join(timeout=timeout_s)
                if p.is_alive():
                    p.kill()
        medians.append(statistics.median(ts))
    return medians[0], medians[1]


__all__ = ["send_wake_cost"]
