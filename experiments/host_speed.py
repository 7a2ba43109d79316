"""This host's own speed over time: a fixed compute loop, one thread pinned to one core, timed every 0.2 s.

The loop is forty products of 192 x 192 float32 matrices (about 6-7 ms on the lab's VM). No runtime, no messages
and no other process of ours are involved, so the spread it prints is the machine's own: the floor under any
measured step on it (docs/fidelity.md, session 16: IQR 17-18 % of the median, 10-s windows up to 20 % apart).
Run one process per core to see both at once:

    python experiments/host_speed.py 0 60 & python experiments/host_speed.py 1 60; wait

Prints the number of probes, their median, IQR (also as a share of the median), min and max, then the median
of each 10-s window and the ratio of the slowest window to the fastest.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("core", type=int, nargs="?", default=0, help="host core to pin to")
    ap.add_argument("seconds", type=float, nargs="?", default=120.0, help="how long to probe")
    args = ap.parse_args()
    os.sched_setaffinity(0, {args.core})
    torch.set_num_threads(1)
    a, b = torch.randn(192, 192), torch.randn(192, 192)

    def probe() -> float:
        t = time.perf_counter()
        for _ in range(40):
            a @ b
        return time.perf_counter() - t

    for _ in range(20):  # warm the caches and the allocator
        probe()
    xs: list[tuple[float, float]] = []
    t0 = time.time()
    while time.time() - t0 < args.seconds:
        xs.append((time.time() - t0, probe()))
        time.sleep(0.2)
    ts = [x for _, x in xs]
    med = statistics.median(ts)
    q = statistics.quantiles(ts, n=4)
    print(
        f"core {args.core}: {len(ts)} probes, median {1e3 * med:.3f} ms, IQR {1e3 * (q[2] - q[0]):.3f} ms "
        f"({100 * (q[2] - q[0]) / med:.1f} %), min {1e3 * min(ts):.3f} max {1e3 * max(ts):.3f}"
    )
    windows: dict[int, list[float]] = {}
    for t, x in xs:
        windows.setdefault(int(t // 10), []).append(x)
    meds = [statistics.median(v) for _, v in sorted(windows.items()) if len(v) > 3]
    if meds:
        print(
            "10-s window medians (ms):",
            " ".join(f"{1e3 * m:.3f}" for m in meds),
            f" slowest/fastest {max(meds) / min(meds):.2f}",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
