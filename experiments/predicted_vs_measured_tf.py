"""Predicted against measured step time per placer for GNMT and Inception-V3 on the TensorFlow backend.

For each model: build it (conf/model/<name>.yaml, whose default sizes run on this machine in minutes; change
them with --set), capture, profile (Baechi 5.1: warm-up steps, then traced steps averaged), fit the
communication model with the micro-benchmark between the cluster's devices, then for the single-device
placement, the expert placement (GNMT: Baechi 5.3's rules from the model config; skipped for a model without
rules) and every placer configured under conf/placer/ that can be built alone, predict the step time with
`algorithms.simulator.simulate` on the profiled graph and the fitted cluster, and measure it with
`TFBackend.run` (first --warmup steps discarded, mean of the next --steps, Celeritas 6.3). The profile is
calibrated to an untraced single-device step by default (--calibration none keeps the raw step-stats times,
which tracing inflates by about 1.5x to 2x here).

TensorFlow's executor runs ready ops in its own order, so the prediction uses the simulator's first-in
first-out dispatch (no static schedule), the closest of its policies to TensorFlow's ready queue.

Prints one row per (model, placer): predicted and measured seconds and the relative error
(predicted - measured) / measured; --json writes the rows.

    python experiments/predicted_vs_measured_tf.py
    python experiments/predicted_vs_measured_tf.py --models gnmt --cluster cpu4 --placers single expert m_etf
    python experiments/predicted_vs_measured_tf.py --models gnmt --set gnmt.batch_size=64
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from typing import Any

from algorithms.cluster import Cluster, Link
from algorithms.errors import ConfigError
from algorithms.placement import check_placement
from algorithms.placers.baseline import ExpertPlacer, SinglePlacer
from algorithms.simulator import simulate
from orchestrator.context import build_cluster
from orchestrator.registry import available, instantiate, load_choice

log = logging.getLogger("predicted_vs_measured_tf")


def load_cluster(name: str, seed: int = 0) -> Cluster:
    """conf/cluster/`name`.yaml (or a plugin's) as the orchestrator builds it."""
    return build_cluster(load_choice("cluster", name, seed=seed), name)


def parse_sets(sets: list[str]) -> dict[str, dict[str, Any]]:
    """``model.key=value`` strings -> {model: {key: value}} (values parsed as JSON when they are)."""
    out: dict[str, dict[str, Any]] = {}
    for s in sets:
        lhs, _, value = s.partition("=")
        model, _, key = lhs.partition(".")
        if not key:
            raise SystemExit(f"--set {s!r}: expected MODEL.KEY=VALUE, e.g. gnmt.batch_size=64")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        out.setdefault(model, {})[key] = parsed
    return out


def placers(model_cfg: dict[str, Any], only: list[str] | None, seed: int) -> list[tuple[str, Any, str | None]]:
    """(label, placer or None, reason skipped) for single, expert and every other conf/placer/*.yaml."""
    out: list[tuple[str, Any, str | None]] = [("single", SinglePlacer(), None)]
    rules = model_cfg.get("expert_rules") or []
    out.append(
        (
            "expert",
            ExpertPlacer(rules, strip_prefixes=model_cfg.get("expert_strip_prefixes") or []) if rules else None,
            None if rules else "the model has no expert rules",
        )
    )
    for label in available("placer"):
        if label in ("single", "expert"):
            continue
        try:
            out.append((label, instantiate(load_choice("placer", label, seed=seed, model=model_cfg), "placer"), None))
        except ConfigError as exc:  # a config needing keys this script does not compose
            out.append((label, None, str(exc)))
    if only:
        out = [p for p in out if p[0] in only]
    return out


def profiled_on_worker(
    backend: Any, name: str, cluster: Cluster, seed: int, only: list[str] | None = None
) -> tuple[Any, Any, dict[str, Any]]:
    """conf/model/`name`.yaml built by `backend` (a `TFBackend`), its graph captured and profiled on a pinned
    worker (`dist_profile.profile_distributed`: 3 warm-up and 5 traced steps), and the placers that can be built
    for it (`placers`, restricted to `only`): (model, profiled graph, {label: placer}). The start of the scripts
    that look inside TensorFlow's placed steps (tf_message_cpu.py, tf_op_inflation.py, tf_worker_perf.py)."""
    from backends.tensorflow.config import load_model_cfg
    from backends.tensorflow.dist_profile import profile_distributed

    cfg = load_model_cfg(name, None, seed=seed)
    model = backend.build(cfg)
    graph = profile_distributed(model, backend.capture(model), cluster, warmup=3, steps=5)
    return model, graph, {label: p for label, p, _ in placers(cfg, only, seed) if p is not None}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["gnmt", "inception_v3"])
    ap.add_argument("--cluster", default="cpu4")
    ap.add_argument("--placers", nargs="*", default=None, help="labels to keep (default: all)")
    ap.add_argument("--set", action="append", default=[], help="MODEL.KEY=VALUE model config override")
    ap.add_argument("--profile-warmup", type=int, default=5)
    ap.add_argument("--profile-steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--inter-op-threads", type=int, default=2)
    ap.add_argument("--intra-op-threads", type=int, default=1)
    ap.add_argument("--comm-repeats", type=int, default=5)
    ap.add_argument(
        "--calibration",
        default="untraced_step",
        choices=["none", "untraced_step"],
        help="profile calibration (TFBackend.profile_calibration)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write the rows to this JSON file")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    from backends.tensorflow import TFBackend
    from backends.tensorflow.config import load_model_cfg

    backend = TFBackend(
        inter_op_threads=args.inter_op_threads,
        intra_op_threads=args.intra_op_threads,
        profile_calibration=args.calibration,
        check_correctness=False,
    )
    base_cluster = load_cluster(args.cluster)
    fit = backend.comm_benchmark(base_cluster, None, args.comm_repeats)
    links = {pair: Link(lat, bw) for pair, (lat, bw) in fit.links.items()}
    cluster = base_cluster.with_comm(fit.latency_s, fit.bytes_per_s, links)
    print(
        f"cluster {args.cluster}: {len(cluster)} devices; fitted comm latency {fit.latency_s:.3g} s, "
        f"bandwidth {fit.bytes_per_s:.3g} bytes/s; threads inter {args.inter_op_threads} "
        f"intra {args.intra_op_threads}"
    )
    sets = parse_sets(args.set)
    rows: list[dict[str, Any]] = []
    header = f"{'model':<14}{'placer':<14}{'devices':>8}{'predicted_s':>13}{'measured_s':>12}{'rel_error':>11}"
    for name in args.models:
        cfg = load_model_cfg(name, sets.get(name), seed=args.seed)
        t0 = time.perf_counter()
        model = backend.build(cfg)
        graph = backend.profile(model, backend.capture(model), warmup=args.profile_warmup, steps=args.profile_steps)
        info = graph.nx.graph.get("profile", {})
        print(
            f"\n{name}: {len(graph)} ops, profiled in {time.perf_counter() - t0:.1f} s; sum of op times "
            f"{sum(a['compute_s'] for _, a in graph.nx.nodes(data=True)):.4g} s (calibration "
            f"{info.get('calibration')}, scale {info.get('scale', 1.0):.3f})"
        )
        print(header)
        for label, placer, why in placers(cfg, args.placers, args.seed):
            if placer is None:
                print(f"{name:<14}{label:<14}  skipped: {why}")
                continue
            try:
                placement = placer.place(graph, cluster)
                assign = placement.assignment if hasattr(placement, "assignment") else dict(placement)
                check_placement(graph, cluster, assign)
            except Exception as exc:
                print(f"{name:<14}{label:<14}  placement failed: {type(exc).__name__}: {exc}")
                continue
            sim = simulate(graph, cluster, assign)
            res = backend.run(model, graph, assign, {}, cluster, warmup=args.warmup, steps=args.steps)
            err = (sim.makespan - res.measured_step_s) / res.measured_step_s
            row = {
                "model": name,
                "placer": label,
                "devices_used": len(set(assign.values())),
                "predicted_step_s": sim.makespan,
                "measured_step_s": res.measured_step_s,
                "measured_median_s": res.extra["step_time_median_s"],
                "rel_error": err,
                "predicted_traffic_bytes": sim.traffic_bytes,
                "measured_traffic_bytes": res.traffic_bytes,
                "predicted_peak_bytes": sim.peak_memory,
                "measured_peak_bytes": res.peak_memory_bytes,
                "predicted_busy_s": sim.busy_s,
                "measured_busy_s": res.extra["device_busy_s"],
            }
            rows.append(row)
            print(
                f"{name:<14}{label:<14}{row['devices_used']:>8}{sim.makespan:>13.4g}{res.measured_step_s:>12.4g}"
                f"{err:>+11.1%}"
            )
    if rows:
        mean_abs = sum(abs(r["rel_error"]) for r in rows) / len(rows)
        print(f"\nmean |relative error| over {len(rows)} placements: {mean_abs:.1%}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    return rows


if __name__ == "__main__":
    main()
