"""When a message reaches a waiting worker whose core another worker keeps busy (issue 16, cpu4).

A trace of mlp_tiny on cpu4 (four workers on two cores; docs/fidelity.md, session 35) found messages to a worker
blocked in a receive taking 0.65-0.77 ms (median) from the sender's ``isend`` to the end of the receiver's
``wait()`` where the two workers share a core, and 55-90 us where they do not. The simulator's shared-core model
lets the two workers take turns op by op and reads a message when it arrives.

This experiment isolates the hop. Two worker processes are pinned as the runtime pins them, gloo's transport
threads under SCHED_IDLE (`backends.torch.worker.lower_transport_threads`). Rank 1 posts a receive and waits
for it. Rank 0 leaves the barrier, sends 1 KB with ``isend`` and then computes for ``busy`` milliseconds (small
matrix products) before it blocks in a receive of its own. The hop is the time from the ``isend`` to the end of
rank 1's ``wait()`` on the host's monotonic clock. Two placements, interleaved trial by trial:

- ``other``: rank 1 pinned to the other core;
- ``same``: rank 1 pinned to rank 0's core (what cpu4 does to cpu0 and cpu2 on a 2-core host).

Per placement and ``busy`` it prints the median hop and the median of (hop - busy): about ``busy`` plus a
constant means the message waits until the sender's worker blocks; a hop that stops growing with ``busy`` means
the scheduler's time slice ends the wait.

    python experiments/shared_core_hop.py --busy 0.1 0.3 1 3 10 --trials 15

Measured 29 Nov 2026 (session 35, the lab's 2-vCPU VM, two runs; `experiments/data/cpu/shared_core_hop_s35.txt`):
on the other core the hop is 57-70 us whatever the sender does; on the sender's core it is the sender's busy time
plus 13-29 us for every busy time up to 3 ms. At 10 ms the median is 4.6-10.1 ms: some trials end near 3.4 ms,
where the scheduler's time slice gives the receiver its turn. So a waiting worker's message is read when the
worker that holds the shared core blocks (or, after about 3 ms, is preempted), not when it arrives.

Cost: 2 x trials x sum(busy) of compute, a few seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PLACEMENTS = ("other", "same")


def spin(seconds: float, a: Any, b: Any) -> float:
    """Matrix products for about `seconds`; the time they took."""
    import torch

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        torch.mm(a, b)
    return time.perf_counter() - t0


def worker(rank: int, port: int, cores: list[int], busy: list[float], trials: int, results: Any) -> None:
    import torch
    import torch.distributed as dist

    from backends.torch.worker import lower_transport_threads, pin_worker

    pin_worker([cores[rank]])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    lower_transport_threads("idle")
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    out: list[tuple[float, float, float]] = []  # (busy asked, rank 0's isend time, compute end) / rank 1's arrival
    tag = 0
    for trial in range(trials + 1):  # trial 0 warms up
        for s in busy:
            buf = torch.empty(256)
            back = torch.empty(1)
            if rank == 1:
                w = dist.irecv(buf, 0, tag=tag)
            else:
                w_back = dist.irecv(back, 1, tag=tag + 1)
            dist.barrier()
            if rank == 0:
                t_send = time.perf_counter()
                send = dist.isend(torch.ones(256), 1, tag=tag)
                spin(s, a, b)
                t_end = time.perf_counter()
                send.wait()
                w_back.wait()  # rank 0 blocks here, as a worker blocks in a receive
                if trial:
                    out.append((s, t_send, t_end))
            else:
                w.wait()
                t_arr = time.perf_counter()
                dist.isend(torch.ones(1), 0, tag=tag + 1).wait()
                if trial:
                    out.append((s, t_arr, 0.0))
            tag += 2
    dist.barrier()
    dist.destroy_process_group()
    results.put((rank, {"rows": out}))


def measure(cores: list[int], busy: list[float], trials: int) -> list[tuple[float, float, float]]:
    """Per trial and busy time: (busy, hop, compute end - isend), seconds."""
    from backends.torch.worker import free_port, spawn_and_collect

    got = spawn_and_collect(worker, (free_port(), cores, busy, trials), 2, "shared_core_hop workers", 600.0)
    return [(s, arr - ts, te - ts) for (s, ts, te), (_, arr, _) in zip(got[0]["rows"], got[1]["rows"])]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--busy", type=float, nargs="+", default=[0.1, 0.3, 1.0, 3.0, 10.0], help="milliseconds")
    ap.add_argument("--trials", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=2, help="each placement this many times, alternating")
    args = ap.parse_args(argv)
    host = sorted(os.sched_getaffinity(0))
    if len(host) < 2:
        print("needs two cores", file=sys.stderr)
        return 1
    busy = [b / 1e3 for b in args.busy]
    rows: dict[str, list[tuple[float, float, float]]] = {p: [] for p in PLACEMENTS}
    for _ in range(args.rounds):
        for p in PLACEMENTS:
            rows[p].extend(measure([host[0], host[1] if p == "other" else host[0]], busy, args.trials))
    for p in PLACEMENTS:
        for s in busy:
            hops = [h for b, h, _ in rows[p] if b == s]
            spans = [c for b, _, c in rows[p] if b == s]
            print(
                f"{p:5s} busy {1e3 * s:6.2f} ms (ran {1e3 * statistics.median(spans):6.3f}): hop median "
                f"{1e6 * statistics.median(hops):8.1f} us, p25 {1e6 * sorted(hops)[len(hops) // 4]:8.1f}, "
                f"p75 {1e6 * sorted(hops)[3 * len(hops) // 4]:8.1f}; hop - compute "
                f"{1e6 * statistics.median(h - c for _, h, c in [r for r in rows[p] if r[0] == s]):+8.1f} us",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
