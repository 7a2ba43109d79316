"""The TensorFlow calibration program's processor time per message, read from procfs (issue 16, session 44).

The in-step calibration (`backends.tensorflow.calibrate`) fits a hop latency and a processor time per message to
the steps of the calibration program placed by blocks; on its chains the two trade off freely (docs/fidelity.md,
sessions 36 and 44). The workers' processor time separates them: this script profiles the calibration program in a
pinned worker, runs it on one device and by each block length on two pinned gRPC workers (`TFDistributedRuntime`,
`--steps` measured steps, enough clock ticks for a few percent), and prints per placement its messages by kind
(`tf_message_kinds.message_kinds`), the measured step, both workers' processor time per step
(``extra["worker_cpu_per_step_s"]``) and that time beyond the single-device run's per non-constant message; then
the least-squares slope of the processor time over the non-constant messages (the per-message time without the
second worker's fixed cost).

    python experiments/tf_calibration_cpu.py [--blocks 2 4 8 32 128] [--steps 40]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from backends.calibration import CALIBRATION_MODEL, block_placement, two_devices  # noqa: E402
from experiments.predicted_vs_measured_tf import load_cluster  # noqa: E402
from experiments.tf_message_kinds import message_kinds, non_constant  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cluster", default="cpu2")
    ap.add_argument("--blocks", type=int, nargs="+", default=[2, 4, 8, 32, 128])
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args(argv)

    from backends.tensorflow import TFBackend
    from backends.tensorflow.dist_profile import profile_distributed
    from backends.tensorflow.distributed import TFDistributedRuntime

    pair = two_devices(load_cluster(args.cluster))
    backend = TFBackend()
    model = backend.build(dict(CALIBRATION_MODEL))
    graph = profile_distributed(model, backend.capture(model), pair, warmup=3, steps=10)
    runtime = TFDistributedRuntime(warmup=args.warmup, steps=args.steps, check_correctness=False)
    names = pair.names

    def cpu(res: Any) -> float:
        return float(sum(res.extra["worker_cpu_per_step_s"].values()))

    single = runtime.run(backend, model, graph, {op: names[0] for op in graph.nx.nodes}, {}, pair)
    cpu1 = cpu(single)
    print(f"single device: step {1e3 * single.measured_step_s:.3f} ms, processor time {1e3 * cpu1:.2f} ms a step")
    points = []
    for block in args.blocks:
        placement = block_placement(graph, names, block)
        res = runtime.run(backend, model, graph, placement, {}, pair)
        kinds = message_kinds(graph, placement)
        non_const = non_constant(kinds)
        extra = cpu(res) - cpu1
        points.append((non_const, extra))
        print(
            f"blocks of {block:>4}: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
            + f"; step {1e3 * res.measured_step_s:.2f} ms, processor time {1e3 * cpu(res):.2f} ms a step, "
            f"{1e6 * extra / max(non_const, 1):.1f} us per non-constant message beyond the single device"
        )  # fmt: skip
    if len({x for x, _ in points}) >= 2:
        slope, icept = np.polyfit([x for x, _ in points], [y for _, y in points], 1)
        print(f"slope: {1e6 * slope:.1f} us of processor time per non-constant message ({1e3 * icept:+.2f} ms a step)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
