"""Predicted against measured step time for GNMT and Inception-V3 (Baechi 5.3's comparison, on this machine).

For one model and backend: build, capture, profile (warm-up, then the median of measured steps), fit the
communication model with the backend's micro-benchmark, then for the single-device placement, the expert
placement (GNMT: Baechi 5.3's per-layer placement from conf/model/gnmt.yaml; Inception-V3: the expert is the
single device, as in Baechi) and every placer configured under conf/placer/, order each device by the placer's
own order (topological when it has none), predict the step time with `algorithms.simulator.simulate` and
measure it with `backend.run`. Prints one row per placement with the relative error (predicted - measured) /
measured, and optionally writes the rows as JSON.

    python experiments/predicted_vs_measured.py --backend torch --model gnmt --device cpu
    python experiments/predicted_vs_measured.py --backend torch --model inception_v3 --cluster cpu2
    python experiments/predicted_vs_measured.py --model gnmt --set hidden=512 --set batch_size=64

Backends are constructed lazily through `BACKENDS` (name -> factory), so that the script runs with only one of
PyTorch or TensorFlow installed.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from algorithms.cluster import Cluster, Link
from algorithms.errors import ConfigError
from algorithms.placers.baseline import ExpertPlacer, SinglePlacer
from algorithms.schedulers.baseline import PlacerOrderScheduler
from algorithms.simulator import simulate
from orchestrator.context import build_cluster
from orchestrator.registry import available, instantiate, load_choice

log = logging.getLogger("predicted_vs_measured")


def _torch_backend(args: argparse.Namespace) -> Any:
    from backends.torch import TorchBackend

    return TorchBackend(granularity=args.granularity, device=args.device, threads=args.threads)


def _tensorflow_backend(args: argparse.Namespace) -> Any:
    # Hook for the TensorFlow backend (its own study is experiments/predicted_vs_measured_tf.py): TensorFlow runs
    # on the CPU here; --threads sets its intra-op threads.
    from backends.tensorflow import TFBackend

    return TFBackend(intra_op_threads=args.threads or 0)


#: backend name -> factory(args); each factory imports its framework only when called.
BACKENDS: dict[str, Callable[[argparse.Namespace], Any]] = {"torch": _torch_backend, "tensorflow": _tensorflow_backend}


def model_config(name: str, sets: list[str], seed: int) -> dict[str, Any]:
    from backends.torch.config import load_model_cfg

    overrides = {}
    for s in sets:
        key, _, value = s.partition("=")
        try:
            overrides[key] = json.loads(value)
        except (json.JSONDecodeError, TypeError):
            overrides[key] = value
    return load_model_cfg(name, overrides, seed=seed)


def load_cluster(name: str, seed: int = 0) -> Cluster:
    """conf/cluster/`name`.yaml (or a plugin's) as the orchestrator builds it."""
    return build_cluster(load_choice("cluster", name, seed=seed), name)


def placers(model_cfg: dict[str, Any], cluster: Cluster, only: list[str] | None, seed: int):
    """(label, placer or None, error) for single, expert, and every conf/placer/*.yaml."""
    out: list[tuple[str, Any, str | None]] = [("single", SinglePlacer(), None)]
    if model_cfg.get("expert_rules"):
        rules = [list(r) for r in model_cfg["expert_rules"]]
        n_rule = 1 + max(int(d) for _, d in rules if isinstance(d, int))
        label = "expert"
        if n_rule > len(cluster):  # fold the expert's devices onto fewer ones, keeping neighbours together
            rules = [[p, int(d) * len(cluster) // n_rule if isinstance(d, int) else d] for p, d in rules]
            label = f"expert (folded {n_rule}->{len(cluster)})"
        out.append((label, ExpertPlacer(rules, strip_prefixes=model_cfg.get("expert_strip_prefixes") or []), None))
    else:
        out.append(("expert (= single, Baechi 5.3)", SinglePlacer(), None))
    for name in available("placer"):
        if name in ("single", "expert") or (only and name not in only):
            continue
        try:
            out.append((name, instantiate(load_choice("placer", name, seed=seed, model=model_cfg), "placer"), None))
        except ConfigError as exc:  # report, do not stop the study
            out.append((name, None, str(exc)))
    return out


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=sorted(BACKENDS), default="torch")
    p.add_argument("--model", choices=["gnmt", "inception_v3"], default="gnmt")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--cluster", default=None, help="conf/cluster name (default: cpu4 on cpu, gpu4_8gb on cuda)")
    p.add_argument("--granularity", choices=["operator", "module"], default="module")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="model config override")
    p.add_argument("--placers", nargs="*", default=None, help="only these conf/placer names")
    p.add_argument("--profile-warmup", type=int, default=3)
    p.add_argument("--profile-steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=7)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per device and when profiling")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-comm-benchmark", action="store_true")
    p.add_argument(
        "--paired",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure the single-device step right before each placement and report the error "
        "corrected by the machine's current load factor (measured / predicted single device)",
    )
    p.add_argument("--out", default=None, help="write the rows as JSON here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    backend = BACKENDS[args.backend](args)
    model_cfg = model_config(args.model, args.set, args.seed)
    cluster = load_cluster(args.cluster or ("gpu4_8gb" if args.device == "cuda" else "cpu4"))
    t = time.perf_counter()
    model = backend.build(model_cfg)
    graph = backend.capture(model)
    graph = backend.profile(model, graph, warmup=args.profile_warmup, steps=args.profile_steps)
    log.info(
        "captured and profiled %s: %d ops, %d edges in %.1f s",
        model_cfg["name"],
        len(graph),
        graph.number_of_edges(),
        time.perf_counter() - t,
    )
    if not args.no_comm_benchmark:
        prof = load_choice("profiler", "measured")
        fit = backend.comm_benchmark(cluster, list(prof.comm_sizes), int(prof.comm_repeats))
        cluster = cluster.with_comm(fit.latency_s, fit.bytes_per_s, {k: Link(*v) for k, v in fit.links.items()})
        log.info("communication: latency %.3g s, bandwidth %.3g B/s", fit.latency_s, fit.bytes_per_s)

    single_pl = SinglePlacer().place(graph, cluster)
    single_sched = PlacerOrderScheduler().order(graph, cluster, single_pl)
    single_pred = simulate(graph, cluster, single_pl, single_sched).makespan

    def load_factor() -> float:
        """Measured / predicted single-device step time now: how much slower this machine runs than when it
        was profiled (other processes share the cores)."""
        res = backend.run(
            model, graph, single_pl.assignment, single_sched, cluster, warmup=1, steps=max(3, args.steps // 2)
        )
        return res.measured_step_s / single_pred

    rows: list[dict[str, Any]] = []
    for label, placer, err in placers(model_cfg, cluster, args.placers, args.seed):
        row: dict[str, Any] = {"placement": label}
        rows.append(row)
        if placer is None:
            row["error"] = err
            continue
        try:
            t = time.perf_counter()
            pl = placer.place(graph, cluster)
            row["placement_time_s"] = time.perf_counter() - t
            sched = PlacerOrderScheduler().order(graph, cluster, pl)
            sim = simulate(graph, cluster, pl, sched)
            row.update(
                devices=len(pl.devices_used()),
                predicted_s=sim.makespan,
                predicted_traffic=sim.traffic_bytes,
                predicted_oom=sim.oom is not None,
            )
            if args.paired:
                row["load_factor"] = load_factor()
            res = backend.run(model, graph, pl.assignment, sched, cluster, warmup=args.warmup, steps=args.steps)
            busy = res.extra.get("busy_s") or {}
            row.update(
                measured_s=res.measured_step_s,
                measured_traffic=res.traffic_bytes,
                correct=res.extra.get("correct"),
                predicted_busy_s=dict(sim.busy_s),
                measured_busy_s=busy,
                measured_wait_s=res.extra.get("wait_s"),
                compute_inflation=(
                    sum(busy.values()) / sum(sim.busy_s.values()) if busy and sum(sim.busy_s.values()) > 0 else None
                ),
                rel_error=(sim.makespan - res.measured_step_s) / res.measured_step_s,
            )
            if args.paired:
                row["rel_error_load_corrected"] = (
                    sim.makespan * row["load_factor"] - res.measured_step_s
                ) / res.measured_step_s
        except Exception as exc:  # one placer failing does not stop the comparison
            log.exception("placement %s failed", label)
            row["error"] = f"{type(exc).__name__}: {exc}"

    print(
        f"\n{model_cfg['name']} ({args.backend}, {args.device}, {args.granularity} granularity, {len(graph)} ops) "
        f"on {cluster.name}: latency {cluster.latency_s:.3g} s, bandwidth {cluster.bytes_per_s:.3g} B/s"
    )
    print(
        f"{'placement':32s} {'devs':>4s} {'predicted s':>12s} {'measured s':>11s} {'rel err':>8s} "
        f"{'traffic pred/meas MB':>21s} {'busy x':>6s} {'load':>5s} {'corr err':>8s} ok"
    )
    for r in rows:
        if "error" in r:
            print(f"{r['placement']:32s} error: {r['error'][:90]}")
            continue
        print(
            f"{r['placement']:32s} {r['devices']:4d} {r['predicted_s']:12.4f} {r['measured_s']:11.4f} "
            f"{r['rel_error']:+8.1%} {r['predicted_traffic'] / 1e6:10.2f}/{r['measured_traffic'] / 1e6:<10.2f} "
            f"{r['compute_inflation'] or float('nan'):6.2f} {r.get('load_factor', float('nan')):5.2f} "
            f"{r.get('rel_error_load_corrected', float('nan')):+8.1%} {'yes' if r['correct'] else 'NO'}"
        )
    print(
        "busy x: seconds the devices spent running ops in the real step (waits excluded), summed, over the "
        "profiled compute time of the same ops; load: single-device step measured just before / predicted; "
        "corr err: (predicted x load - measured) / measured"
    )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
