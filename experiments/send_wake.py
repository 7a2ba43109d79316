"""Print what a gloo isend of 1 KB holds its sender for, to a receiver blocked in wait() (its core idle) and to a
computing one (`backends.torch.wake.send_wake_cost`), a few times over: the wake-up charge of the simulator
(`simulate(send_wake_s=...)`, `profiler.comm_send_wake`).

    python experiments/send_wake.py [--repeats 3] [--sends 200] [--gap-us 300]
"""

from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> int:
    from backends.torch.wake import send_wake_cost

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sends", type=int, default=200)
    ap.add_argument("--gap-us", type=float, default=300.0, help="the sender's compute between sends")
    args = ap.parse_args(argv)
    now = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print(f"{now}: {args.sends} sends of 1 KB, {args.gap_us:.0f} us apart")
    for k in range(args.repeats):
        idle, busy = send_wake_cost(n=args.sends, gap_us=args.gap_us)
        print(
            f"{k}: to an idle receiver {idle * 1e6:.1f} us, to a computing one {busy * 1e6:.1f} us: "
            f"{1e6 * (idle - busy):.1f} us more"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
