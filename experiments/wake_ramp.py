"""How fast a core runs interpreter work right after its thread waited: idle (sleep) against busy (spin).

Issue 16's diagnosis of the lab's VM. A pinned thread keeps its core busy with a fixed 1,000-addition Python loop
(the `backends.interference.core_pace` loop), then waits for W ms, either sleeping (the core idles, as a worker
blocked in a receive does) or spinning on the clock, and times the next 129 loops one by one. Each loop's time is
divided by the median of that trial's last 33 loops, so a slow spell of the core that covers the whole trial
cancels out, and the median of that ratio over the trials is printed for loops 0, 1, 2, 4, ..., 128 after the
wait. A ratio above 1 on the first loops after a sleep, and not after a spin, would be a wake-up cost of the idle
core; 1 throughout means none.

    python experiments/wake_ramp.py --core 0 --trials 40

Measured 27 Nov 2026 (session 20, docs/fidelity.md, experiments/data/cpu/wake_ramp_s20.txt): no transient after
waits of 0.5 and 2 ms (0.96-1.06); after 10-50 ms the first loop ran 1.33-1.50x after a sleep and 1.17-1.22x after
a spin, back to 1.0 by loop 32 (about 1.5 ms). Cost: trials x waits x (100 + 129) loops plus the waits, about a minute.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

AFTER = [0, 1, 2, 4, 8, 16, 32, 64, 128]


def loop(n: int = 1000) -> float:
    """Seconds one run of the pace loop takes."""
    t = time.perf_counter()
    s = 0
    for i in range(n):
        s += i
    return time.perf_counter() - t


def spin(seconds: float) -> None:
    """Wait `seconds` without giving up the core."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def ramp(wait: float, how: str, trials: int) -> tuple[list[float], float]:
    """Median over `trials` of each loop's time after the wait over its trial's settled time, and the median
    settled time (seconds)."""
    n = AFTER[-1] + 1
    ratios: list[list[float]] = [[] for _ in range(n)]
    settled_all = []
    for _ in range(trials):
        for _ in range(100):  # busy before the wait
            loop()
        (time.sleep if how == "sleep" else spin)(wait)
        xs = [loop() for _ in range(n)]
        settled = statistics.median(xs[-33:])
        settled_all.append(settled)
        for k, x in enumerate(xs):
            ratios[k].append(x / settled)
    return [statistics.median(r) for r in ratios], statistics.median(settled_all)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--core", type=int, default=0)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--waits-ms", type=float, nargs="+", default=[0.5, 2.0, 10.0, 50.0])
    args = ap.parse_args(argv)
    os.sched_setaffinity(0, {args.core})
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}: core {args.core}, {args.trials} trials")
    for wait in args.waits_ms:
        for how in ("sleep", "spin"):
            med, settled = ramp(wait / 1e3, how, args.trials)
            cells = " ".join(f"{k}:{med[k]:.2f}" for k in AFTER)
            print(f"{how:5s} {wait:5.1f} ms: {cells} | settled loop {settled * 1e6:.0f} us", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
