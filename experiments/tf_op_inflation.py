"""Do TensorFlow's ops run slower when their model is split over two workers? Per-op traced times, one device
against several (issue 16).

TensorFlow's multi-device steps on this VM are under-predicted for inception_v3_tiny and over-predicted for
gnmt_tiny by the same per-message costs (docs/fidelity.md, sessions 36-37), and the workers' cores are 80-90 %
busy where the traces show no op for most of the step. This script asks whether the ops themselves take longer
in a placed step than on one device, which a cost charged per message cannot follow when it grows with the
model's compute instead of its messages.

For each model it profiles the graph on a pinned worker (`dist_profile.profile_distributed`), then runs the
single-device placement and each multi-device placement `--repeats` times, interleaved, on pinned gRPC workers
(`TFDistributedRuntime`), and reads each run's traced step (`last_step_stats`). Each op's traced time is the
median over the repeats; only the graph's own ops count (TensorFlow's ``_Send``/``_Recv``, ``_SOURCE`` and the
receive records are left out). Per multi-device placement and device it prints:

* the sum of its ops' traced times, against the sum of the same ops' traced times in the single-device step
  (ratio; both steps traced, so tracing's own cost is on both sides);
* that ratio for the ops next to a cut edge (they send or receive a tensor across devices) and for the others;
* that ratio for the ops that take at least `--long-us` microseconds on one device and for the shorter ones;
* the added op time per step (ms) beside the step's transfers (the simulator's count).

    python experiments/tf_op_inflation.py --models gnmt_tiny transformer_tiny inception_v3_tiny mlp
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections import defaultdict
from typing import Any

from predicted_vs_measured_tf import load_cluster, profiled_on_worker

from algorithms.simulator import simulate


def traced_op_times(step_stats: Any, names: set[str]) -> dict[str, float]:
    """{graph op: traced duration in seconds} from one traced step (ops not in `names` left out)."""
    out: dict[str, float] = {}
    for ds in step_stats.dev_stats:
        if "/stream:" in ds.device:
            continue
        for ns in ds.node_stats:
            if ns.node_name in names:
                dur = max(1, int(ns.all_end_rel_micros or ns.op_end_rel_micros)) * 1e-6
                out[ns.node_name] = out.get(ns.node_name, 0.0) + dur
    return out


def overlap_share(step_stats: Any, names: set[str]) -> dict[str, float]:
    """Per task (its device string), the share of its graph ops' traced time during which another of its graph
    ops was traced running too: on a one-core worker with one inter-op thread, ops that overlap took turns on
    the core (one ran inline on another thread, e.g. a receive's callback), so each one's traced time holds
    the other's."""
    out: dict[str, float] = {}
    for ds in step_stats.dev_stats:
        if "/stream:" in ds.device:
            continue
        iv = sorted(
            (int(ns.all_start_micros), int(ns.all_start_micros) + max(1, int(ns.all_end_rel_micros or 0)))
            for ns in ds.node_stats
            if ns.node_name in names
        )
        if not iv:
            continue
        total = sum(e - s for s, e in iv)
        events = sorted([(s, 1) for s, _ in iv] + [(e, -1) for _, e in iv])
        depth, last, shared = 0, events[0][0], 0
        for t, d in events:
            if depth >= 2:
                shared += (t - last) * depth
            depth += d
            last = t
        out[ds.device] = shared / total if total > 0 else 0.0
    return out


def medians(samples: list[dict[str, float]]) -> dict[str, float]:
    """Per op, the median over the samples that hold it."""
    per: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        for k, v in s.items():
            per[k].append(v)
    return {k: statistics.median(v) for k, v in per.items()}


def ratio(multi: dict[str, float], single: dict[str, float], ops: list[str]) -> tuple[float, float, float]:
    """(sum over `ops` traced in the placed step, the same ops' sum on one device, their ratio)."""
    ops = [o for o in ops if o in multi and o in single]
    a, b = sum(multi[o] for o in ops), sum(single[o] for o in ops)
    return a, b, (a / b if b > 0 else float("nan"))


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["gnmt_tiny", "transformer_tiny", "inception_v3_tiny", "mlp"])
    ap.add_argument("--placers", nargs="+", default=["m_topo", "m_etf", "m_sct", "heft", "celeritas"])
    ap.add_argument("--cluster", default="cpu2")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each placement, interleaved")
    ap.add_argument("--long-us", type=float, default=20.0, help="an op at least this long on one device is long")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from backends.tensorflow import TFBackend
    from backends.tensorflow.distributed import TFDistributedRuntime

    print(f"load average at start: {os.getloadavg()[0]:.2f} (1 min)")
    base = load_cluster(args.cluster)
    backend = TFBackend()
    runtime = TFDistributedRuntime(warmup=args.warmup, steps=args.steps, check_correctness=False)
    rows: list[dict[str, Any]] = []
    for name in args.models:
        model, graph, candidates = profiled_on_worker(backend, name, base, args.seed)
        names = set(graph.ops())
        runs: dict[str, dict[str, str]] = {"single": dict(candidates["single"].place(graph, base).assignment)}
        for label in args.placers:
            if label in candidates:
                assign = dict(candidates[label].place(graph, base).assignment)
                if len(set(assign.values())) >= 2:
                    runs[label] = assign
        traces: dict[str, list[dict[str, float]]] = defaultdict(list)
        steps: dict[str, list[float]] = defaultdict(list)
        cpu: dict[str, list[float]] = defaultdict(list)
        overlaps: dict[str, dict[str, list[float]]] = defaultdict(dict)
        for _ in range(args.repeats):
            for label, assign in runs.items():
                res = runtime.run(backend, model, graph, assign, {}, base)
                traces[label].append(traced_op_times(runtime.last_step_stats, names))
                for dev, share in overlap_share(runtime.last_step_stats, names).items():
                    overlaps[label].setdefault(dev, []).append(share)
                steps[label].append(res.measured_step_s)
                cpu[label].append(sum(res.extra["worker_cpu_per_step_s"].values()))
        single = medians(traces["single"])
        s_step = statistics.median(steps["single"])
        print(
            f"\n{name}: {len(names)} ops; single device {s_step * 1e3:.2f} ms measured, its ops traced "
            f"{sum(single.values()) * 1e3:.2f} ms, worker cpu {statistics.median(cpu['single']) * 1e3:.2f} ms/step"
        )
        long_ops = {o for o, t in single.items() if t >= args.long_us * 1e-6}
        for label, assign in runs.items():
            if label == "single":
                continue
            multi = medians(traces[label])
            transfers = simulate(graph, base, assign, record_memory=False).transfers
            cut = {t[0] for t in transfers}
            cut |= {c for t in transfers for c in graph.successors(t[0]) if assign[c] == t[2]}
            meas = statistics.median(steps[label])
            line = (
                f"  {label:<9} measured {meas * 1e3:6.2f} ms, worker cpu {statistics.median(cpu[label]) * 1e3:6.2f} "
                f"ms/step, {len(transfers)} transfers"
            )
            print(line)
            print(
                "    ops' traced time shared with another op of the same task: "
                + ", ".join(f"{d.rsplit('/', 2)[-2]} {statistics.median(v):.0%}" for d, v in overlaps[label].items())
                + " (one device: "
                + ", ".join(f"{statistics.median(v):.0%}" for v in overlaps["single"].values())
                + ")"
            )
            row: dict[str, Any] = {"model": name, "placer": label, "measured_step_s": meas, "transfers": len(transfers)}
            for dev in sorted(set(assign.values())):
                ops = [o for o in names if assign[o] == dev]
                a, b, r = ratio(multi, single, ops)
                _, _, r_cut = ratio(multi, single, [o for o in ops if o in cut])
                _, _, r_in = ratio(multi, single, [o for o in ops if o not in cut])
                _, _, r_long = ratio(multi, single, [o for o in ops if o in long_ops])
                _, _, r_short = ratio(multi, single, [o for o in ops if o not in long_ops])
                print(
                    f"    {dev}: {len(ops):5d} ops traced {a * 1e3:6.2f} ms against {b * 1e3:6.2f} ms on one device "
                    f"(x{r:.2f}; next to a cut x{r_cut:.2f}, others x{r_in:.2f}; long x{r_long:.2f}, "
                    f"short x{r_short:.2f}); added {(a - b) * 1e3:+.2f} ms"
                )
                row[dev] = {"ops": len(ops), "traced_s": a, "single_traced_s": b, "ratio": r, "ratio_cut": r_cut,
                            "ratio_other": r_in, "ratio_long": r_long, "ratio_short": r_short}  # fmt: skip
            rows.append(row)
    print(f"\nload average at end: {os.getloadavg()[0]:.2f} (1 min)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
