"""What a message costs its sender when the receiver waits for it, against when the receiver is busy (issue 16).

Session 30's per-op trace of mlp_tiny m-TOPO on cpu2 (docs/fidelity.md) found the sending worker's ops 44-51 us
over their profile per send, and its later ops slower too, where the simulator charges about 22 us per send. In
that placement the receiver is always blocked in a receive's ``wait()`` when a message arrives; in the in-step
calibration's placements and the busy benchmark (`distributed._busy_message_cost`) it is mostly computing.

This experiment asks whether the receiver's state sets the sender's cost. Two workers are pinned to their own
cores with gloo's transport threads under SCHED_IDLE, as the runtime's are. Rank 0 runs `ops` small matrix
products, with `k` 1 KB messages to rank 1, one after each of its first `k` ops (``isend``, waited for when the
trial ends, as a worker waits where it frees a value). Rank 1 receives them in one of two ways:

- ``idle``: it waits for each message as soon as the previous one has come, so its core idles while rank 0
  computes, as a worker blocked in a receive does;
- ``busy``: it computes `2 * ops` products first and then waits for them all, so the messages arrive while it
  computes, as in the busy benchmark.

Rank 0's time per trial, minus the same ops without messages, divided by `k`, is the cost of one message to the
sender. Each mode reports the median over `trials` trials, each mode's trials interleaved with the other's.

    python experiments/send_to_idle.py --trials 15

Measured 28 Nov 2026 (session 30, the lab's 2-vCPU VM, idle; `experiments/data/cpu/send_to_idle_s30.txt`), per
message to the sender: 22.5-27.0 us when the receiver waits, 14.9-18.8 us when it computes (three settings of
messages and ops). A sender pays 8-9 us more per message, about half again, when its message wakes a waiting
receiver.

Cost: 2 x trials x (ops + 2 x ops) products of 64 x 64 on each core, a few seconds.
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

MODES = ("idle", "busy")


def run_ops(n: int, a: Any, b: Any) -> None:
    import torch

    for _ in range(n):
        torch.mm(a, b)


def sender_trial(k: int, ops: int, tag0: int, a: Any, b: Any) -> float:
    """Rank 0: `ops` products with a send after each of the first `k`; seconds the trial took."""
    import torch
    import torch.distributed as dist

    msg = torch.ones(256)
    works = []
    t0 = time.perf_counter()
    for i in range(ops):
        torch.mm(a, b)
        if i < k:
            works.append(dist.isend(msg.clone(), 1, tag=tag0 + i))
    for w in works:
        w.wait()
    return time.perf_counter() - t0


def receiver_trial(mode: str, k: int, ops: int, tag0: int, a: Any, b: Any) -> None:
    """Rank 1: receive the trial's `k` messages, waiting for each at once (``idle``) or after `2 * ops`
    products (``busy``)."""
    import torch
    import torch.distributed as dist

    bufs = [torch.empty(256) for _ in range(k)]
    works = [dist.irecv(bufs[i], 0, tag=tag0 + i) for i in range(k)]
    if mode == "busy":
        run_ops(2 * ops, a, b)
    for w in works:
        w.wait()


def worker(rank: int, port: int, k: int, ops: int, trials: int, results: Any) -> None:
    import torch
    import torch.distributed as dist

    from backends.torch.worker import lower_transport_threads, pin_worker

    pin_worker([rank])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    lower_transport_threads("idle")
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    times: dict[str, list[float]] = {"none": [], **{m: [] for m in MODES}}
    tag = 0
    for trial in range(trials + 1):  # the first trial of each kind is a warm-up
        for mode in ("none", *MODES):
            dist.barrier()
            if mode == "none":
                if rank == 0:
                    t0 = time.perf_counter()
                    run_ops(ops, a, b)
                    dt = time.perf_counter() - t0
                else:
                    dt = 0.0
            elif rank == 0:
                dt = sender_trial(k, ops, tag, a, b)
            else:
                receiver_trial(mode, k, ops, tag, a, b)
                dt = 0.0
            tag += k
            if trial > 0:
                times[mode].append(dt)
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        results.put(times)


def measure(k: int, ops: int, trials: int) -> dict[str, list[float]]:
    """Rank 0's seconds per trial, by receiver mode (and ``none``: the same ops without messages); two worker
    processes on cores 0 and 1."""
    import torch.multiprocessing as mp

    from backends.torch.worker import free_port

    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, port, k, ops, trials, results)) for r in range(2)]
    for p in procs:
        p.start()
    times: dict[str, list[float]] = results.get()
    for p in procs:
        p.join()
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20, help="messages per trial (k)")
    ap.add_argument("--ops", type=int, default=200, help="rank 0's products per trial")
    ap.add_argument("--trials", type=int, default=15)
    args = ap.parse_args(argv)
    if len(os.sched_getaffinity(0)) < 2:
        print("needs two cores", file=sys.stderr)
        return 1
    times = measure(args.messages, args.ops, args.trials)
    base = statistics.median(times["none"])
    print(f"rank 0: {args.ops} products, {1e3 * base:.3f} ms without messages (median of {args.trials})")
    for mode in MODES:
        t = statistics.median(times[mode])
        print(
            f"  receiver {mode:4s}: {1e3 * t:.3f} ms with {args.messages} messages, "
            f"{1e6 * (t - base) / args.messages:.1f} us per message to the sender"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
