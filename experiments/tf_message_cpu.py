"""Processor time of TensorFlow's placed steps, read from procfs, and the simulator fed with it (issue 16).

A traced placed step of TensorFlow's runtime shows no op running during most of it (`step_anatomy`), yet the
workers' cores are not idle. For each model and placer this script runs the placed step on pinned gRPC workers
(`TFDistributedRuntime`, `--steps` measured steps after warm-up) and prints:

* the measured step (median) and each worker's processor time per step, summed over the workers
  (``extra["worker_cpu_per_step_s"]``: user + system time of the worker processes from procfs, in clock ticks;
  30 steps of a few milliseconds read it within a few percent), and what share of the workers' cores that is;
* the transfers the placement makes (the simulator's count: one per producer and destination device, which the
  traced ``RecvTensor`` records match) and the processor time per transfer beyond the single-device step's
  (the same model's ``single`` run, measured first): ``(cpu - cpu_single) / transfers``, which also holds the
  fixed per-step cost of a second worker;
* the slope of processor time against transfers over the model's multi-device placements (least squares),
  the per-transfer figure without that fixed cost;
* the step the simulator predicts when each transfer costs that much processor time, split evenly between the
  sending and the receiving device (`simulate(send_overhead_s=c / 2, recv_overhead_s=c / 2)`), with hop
  latencies 0, 20 us and the burst benchmark's, plus the benchmark's empty step of two workers
  (`dist_profile.predicted_step`).

    python experiments/tf_message_cpu.py --models gnmt_tiny transformer_tiny inception_v3_tiny
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Any

from predicted_vs_measured_tf import load_cluster, profiled_on_worker

from algorithms.simulator import simulate


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of y against x; None with fewer than two distinct x."""
    xs = [x for x, _ in points]
    if len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(y for _, y in points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)


#: shares of a transfer's processor time charged as blocking per-message time (the rest occupies the core)
BLOCKING_SHARES = (0.0, 0.25, 0.5, 1.0)


def occupied_step(
    graph: Any, cluster: Any, assign: dict[str, str], per_transfer_s: float, blocking: float, overhead_s: float
) -> float:
    """The predicted step when a transfer's processor time `per_transfer_s` (half on the sender, half on the
    receiver) delays its device's next step of work only for the share `blocking` (the simulator's per-message
    time) and otherwise occupies the device's core: the rest is added to the device's ops in proportion to their
    compute time, as work that preempts them. A variant to look at, not the lab's model."""
    from backends.tensorflow.dist_profile import predicted_step

    first = simulate(graph, cluster, assign, record_memory=False)
    sides: dict[str, int] = {}
    for src_op, _, dst_dev, *_ in first.transfers:
        sides[assign[src_op]] = sides.get(assign[src_op], 0) + 1
        sides[dst_dev] = sides.get(dst_dev, 0) + 1
    work: dict[str, float] = {}
    for n in graph.ops():
        work[assign[n]] = work.get(assign[n], 0.0) + float(graph.op(n).get("compute_s", 0.0))
    scaled = graph.copy()
    for n in scaled.ops():
        d = assign[n]
        extra = (1.0 - blocking) * per_transfer_s / 2 * sides.get(d, 0)
        if work.get(d, 0.0) > 0:
            scaled.nx.nodes[n]["compute_s"] = float(graph.op(n).get("compute_s", 0.0)) * (1 + extra / work[d])
    scaled.invalidate()
    half = blocking * per_transfer_s / 2
    sim = simulate(scaled, cluster, assign, send_overhead_s=half, recv_overhead_s=half, record_memory=False)
    return predicted_step(sim.makespan, graph, {2: overhead_s}, len(set(assign.values())))


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["gnmt_tiny", "transformer_tiny", "inception_v3_tiny"])
    ap.add_argument("--placers", nargs="+", default=["m_topo", "m_etf", "heft", "m_sct"])
    ap.add_argument("--cluster", default="cpu2")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from backends.tensorflow import TFBackend
    from backends.tensorflow.dist_profile import comm_benchmark_distributed, predicted_step
    from backends.tensorflow.distributed import TFDistributedRuntime

    print(f"load average at start: {os.getloadavg()[0]:.2f} (1 min)")
    base = load_cluster(args.cluster)
    backend = TFBackend()
    fit = comm_benchmark_distributed(base, [1024, 65536, 1048576], 3)
    print(
        f"burst benchmark: latency {fit.latency_s * 1e6:.1f} us, bandwidth {fit.bytes_per_s / 1e6:.0f} MB/s, empty "
        f"step of two workers {fit.step_overhead_s * 1e3:.3f} ms, a transfer in a burst "
        f"{fit.per_transfer_s * 1e6:.1f} us"
    )
    runtime = TFDistributedRuntime(warmup=args.warmup, steps=args.steps, check_correctness=False)
    rows: list[dict[str, Any]] = []
    for name in args.models:
        model, graph, candidates = profiled_on_worker(backend, name, base, args.seed)
        single = runtime.run(backend, model, graph, dict(candidates["single"].place(graph, base).assignment), {}, base)
        cpu_single = sum(single.extra["worker_cpu_per_step_s"].values())
        print(
            f"\n{name}: single device {single.measured_step_s * 1e3:.2f} ms, worker cpu {cpu_single * 1e3:.2f} ms/step"
        )
        points = []
        for label in args.placers:
            if label not in candidates:
                continue
            assign = dict(candidates[label].place(graph, base).assignment)
            used = len(set(assign.values()))
            if used < 2:
                print(f"  {label:<8} one device: skipped")
                continue
            res = runtime.run(backend, model, graph, assign, {}, base)
            cpu = sum(res.extra["worker_cpu_per_step_s"].values())
            transfers = len(simulate(graph, base.with_comm(fit.latency_s, fit.bytes_per_s), assign).transfers)
            per = (cpu - cpu_single) / max(1, transfers)
            points.append((float(transfers), cpu))
            preds = {}
            for lat in (0.0, 20e-6, fit.latency_s):
                sim = simulate(
                    graph, base.with_comm(lat, fit.bytes_per_s), assign, send_overhead_s=per / 2,
                    recv_overhead_s=per / 2, record_memory=False,
                )  # fmt: skip
                preds[lat] = predicted_step(sim.makespan, graph, {2: fit.step_overhead_s}, used)
            meas = res.measured_step_s
            print(
                f"  {label:<8} measured {meas * 1e3:7.2f} ms, worker cpu {cpu * 1e3:7.2f} ms/step "
                f"({cpu / (meas * used):.0%} of {used} cores), {transfers} transfers, {per * 1e6:.1f} us each; "
                "simulated with it: "
                + "; ".join(
                    f"hop {lat * 1e6:.0f} us {p * 1e3:.2f} ms ({(p - meas) / meas:+.0%})" for lat, p in preds.items()
                )
            )
            rows.append(
                {"model": name, "placer": label, "measured_step_s": meas, "worker_cpu_per_step_s": cpu,
                 "transfers": transfers, "cpu_per_transfer_s": per, "predicted_s": preds, "assign": assign}
            )  # fmt: skip
        s = slope(points)
        if s is not None:
            print(f"  processor time per transfer, slope over the placements: {s * 1e6:.1f} us")
            for row in (r for r in rows if r["model"] == name):
                assign = row.pop("assign")
                parts = {
                    f: occupied_step(graph, base.with_comm(0.0, fit.bytes_per_s), assign, s, f, fit.step_overhead_s)
                    for f in BLOCKING_SHARES
                }
                row["predicted_occupied_s"] = parts
                meas = row["measured_step_s"]
                print(
                    f"  {row['placer']:<8} the slope's time, a share blocking and the rest on the device's ops: "
                    + "; ".join(f"{f:.0%} {p * 1e3:.2f} ms ({(p - meas) / meas:+.0%})" for f, p in parts.items())
                )
    print(f"\nload average at end: {os.getloadavg()[0]:.2f} (1 min)")
    return rows


if __name__ == "__main__":
    main()
