"""One placement, run again and again in fresh workers: how far apart identical measurements are (issue 16).

The fidelity sweep (`experiments/fidelity.py`) compares a prediction with a measured median. Before reading its
error, this says how far apart two measurements of the *same* placement are on this host: the model is captured
once, placed once (`--placer`, default ``single``), and `TorchDistributedRuntime` runs it `--runs` times, each
time in new worker processes (spawn, pinned, as in the sweep), `--warmup` then `--steps` measured steps. Prints
per run the median step, its IQR, its minimum and the median of its first and last ten steps, then the spread of
the runs' medians (max / min) and their IQR as a share of their median.

    python experiments/repeat_run.py --model transformer_tiny --cluster cpu2 --runs 8

Session 17 (26 Nov 2026, quiet 2-vCPU VM): transformer_tiny on one worker gave run medians of 4.45-9.50 ms, a
single run's first ten steps 9.9 ms and last ten 4.7 ms; a fixed matrix-product loop on one core varied by
about +-10 % over half-second windows at the same time. The host has slow spells of about a second that slow
small-op (dispatch-bound) steps far more than matrix products. Cost: `--runs` process spawns and
runs x (warmup + steps) steps.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    import hydra.utils
    from omegaconf import OmegaConf

    from algorithms.cluster import Cluster
    from backends.torch import TorchBackend
    from backends.torch.distributed import TorchDistributedRuntime, iqr
    from experiments.fidelity import compose_cfg, order_for

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="transformer_tiny")
    ap.add_argument("--cluster", default="cpu2")
    ap.add_argument("--placer", default="single")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args(argv)
    if args.runs < 2 or args.steps < 4:
        ap.error("--runs needs 2 or more and --steps 4 or more")

    backend = TorchBackend(threads=1)
    cfg = compose_cfg(args.model, args.cluster, args.placer)
    cluster = Cluster.from_dict(OmegaConf.to_container(cfg.cluster, resolve=True), args.cluster)
    model = backend.build(OmegaConf.to_container(cfg.model, resolve=True))
    graph = backend.capture(model)
    placement = hydra.utils.instantiate(cfg.placer).place(graph, cluster)
    order = order_for(graph, cluster, placement)
    used = sorted(set(placement.assignment.values()))
    print(f"{args.model} on {args.cluster}, placer {args.placer} (devices {', '.join(used)}), {args.runs} runs")
    medians = []
    for k in range(args.runs):
        runtime = TorchDistributedRuntime(warmup=args.warmup, steps=args.steps, timeout_s=600)
        res = runtime.run(backend, model, graph, placement.assignment, order, cluster)
        ts = res.counted_times()
        med = statistics.median(ts)
        medians.append(med)
        print(
            f"{time.strftime('%H:%M:%S')} run {k}: median {1e3 * med:.3f} ms, IQR {1e3 * iqr(ts):.3f} ms, "
            f"min {1e3 * min(ts):.3f} ms, first ten {1e3 * statistics.median(ts[:10]):.3f} ms, "
            f"last ten {1e3 * statistics.median(ts[-10:]):.3f} ms",
            flush=True,
        )
    mid = statistics.median(medians)
    print(
        f"run medians: {1e3 * min(medians):.3f}-{1e3 * max(medians):.3f} ms "
        f"(max/min {max(medians) / min(medians):.2f}), "
        f"IQR {100 * iqr(medians) / mid:.1f} % of their median {1e3 * mid:.3f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
