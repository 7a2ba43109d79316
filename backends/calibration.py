"""The framework-neutral part of the in-step calibration of per-message costs (issue 16): calibration placements
by blocks of the topological order, and the fit of the hop latency and the per-message processor time to
measured placed steps. The backends run the steps: `backends.torch.calibrate` (gloo workers) and
`backends.tensorflow.calibrate` (gRPC servers); `backends/torch/calibrate.py`'s docstring says why and how.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from algorithms.cluster import Cluster
from algorithms.errors import ConfigError
from algorithms.graph import OpGraph
from algorithms.simulator import simulate

log = logging.getLogger(__name__)

# the calibration program of both backends: none of the evaluated models (a deep, narrow MLP training step:
# many small ops, as the tiny models have)
CALIBRATION_MODEL: dict[str, Any] = {
    "name": "calibration_mlp",
    "kind": "framework",
    "family": "mlp",
    "batch_size": 8,
    "in_features": 32,
    "hidden": [32] * 24,
    "classes": 8,
    "optimizer": "sgd",
    "lr": 0.01,
    "seed": 0,
}


@dataclass
class InStepCalibration:
    """The hop latency and per-message costs fitted in the runtime's own placed steps, how well they fit, and
    per calibration placement what was measured and predicted."""

    latency_s: float
    send_overhead_s: float
    recv_overhead_s: float
    placements: list[dict[str, Any]] = field(default_factory=list)  # per block length: messages, measured, predicted
    rel_rms: float = 0.0  # root mean square of the relative errors at the fit
    profile_step_s: list[float] = field(default_factory=list)  # the profiled single-device step of each round
    # the per-message times fitted with the latency kept at the cluster's (the benchmark's), and their error
    send_fixed_latency_s: float = 0.0
    recv_fixed_latency_s: float = 0.0
    rel_rms_fixed_latency: float = 0.0
    # the benchmark's own costs on the same placements (NaN where not computed)
    rel_rms_benchmark: float = math.nan


#: (cluster with the latency tried, placement, schedule, send s, receive s) -> predicted step seconds
Predictor = Callable[[Cluster, Mapping[str, str], Mapping[str, list[str]], float, float], float]


def block_placement(graph: OpGraph, devices: Sequence[str], block: int) -> dict[str, str]:
    """Op number k of `graph`'s topological order on ``devices[(k // block) % len(devices)]``, except that every
    op of a colocation group goes where the group's first op in that order goes (TensorFlow's variables and
    the ops that update them). O(V + E)."""
    if block < 1:
        raise ConfigError(f"calibration block length must be >= 1, got {block}")
    if not devices:
        raise ConfigError("calibration needs at least one device")
    order = graph.topological_order()
    out = {op: devices[(k // block) % len(devices)] for k, op in enumerate(order)}
    first: dict[str, str] = {}
    for op in order:
        grp = graph.op(op).get("colocation")
        if grp is not None:
            out[op] = first.setdefault(grp, out[op])
    return out


def topo_schedule(graph: OpGraph, placement: Mapping[str, str], devices: Sequence[str]) -> dict[str, list[str]]:
    """Each device's ops in `graph`'s topological order (the order the calibration runs and simulates)."""
    out: dict[str, list[str]] = {d: [] for d in devices}
    for op in graph.topological_order():
        out[placement[op]].append(op)
    return out


def two_devices(cluster: Cluster) -> Cluster:
    """The cluster's first two devices and the links between them (a calibration runs one pair of workers, as
    the communication benchmarks do)."""
    if len(cluster.devices) < 2:
        raise ConfigError(f"in-step calibration needs two devices; cluster {cluster.name!r} has one")
    if len(cluster.devices) == 2:
        return cluster
    data = cluster.to_dict()
    data["devices"] = data["devices"][:2]
    data["links"] = [ln for ln in data.get("links", []) if {ln.get("src"), ln.get("dst")} <= set(cluster.names[:2])]
    return Cluster.from_dict(data, f"{cluster.name}[:2]")


def gloo_predictor(graph: OpGraph, host_cores: int | None, shared_core_slowdown: float = 0.0) -> Predictor:
    """The simulator's step in the PyTorch workers' setting: every receive posted at the step's start (gloo),
    devices sharing `host_cores` cores (at `shared_core_slowdown`, `algorithms.simulator`)."""

    def pred(cl: Cluster, p: Mapping[str, str], o: Mapping[str, list[str]], s: float, r: float) -> float:
        return simulate(
            graph,
            cl,
            p,
            dict(o),
            host_cores=host_cores,
            send_overhead_s=s,
            recv_overhead_s=r,
            recv_buffers="step_start",
            record_memory=False,
            shared_core_slowdown=shared_core_slowdown,
        ).makespan

    return pred


def fit_message_costs(
    graph: OpGraph,
    cluster: Cluster,
    runs: Sequence[tuple[Mapping[str, str], Mapping[str, list[str]], float]],
    host_cores: int | None = None,
    send_share: float = 0.5,
    max_latency_s: float = 2e-3,
    max_message_s: float = 1e-3,
    points: int = 11,
    refinements: int = 4,
    latency_s: float | None = None,
    predictor: Predictor | None = None,
) -> tuple[float, float, float, float]:
    """(latency_s, send_s, recv_s, relative RMS error): the hop latency and the per-message processor time
    (``send_s + recv_s``, split ``send_share : 1 - send_share``) that minimise the squared relative error between
    the simulator's step and the measured one over `runs` = [(placement, schedule, measured step s)], the
    cluster's bandwidth kept. The two are told apart because a hop costs its latency only where a receiver waits
    for it (on the critical path) while every message costs its processor time; the split of that time between
    sender and receiver is not identifiable from steps in which both devices wait for each other (a chain pays
    both), so it is given (the busy-worker benchmark's ratio, `distributed._busy_message_cost`). A grid of
    `points` x `points` over [0, `max_latency_s`] x [0, `max_message_s`], refined `refinements` - 1 times around
    the best point (a quarter of the span each time; ties go to the smaller values). With `latency_s` given
    the latency is kept at that value (e.g. the ping-pong's, which measures the hop directly) and only the
    per-message time is fitted. `predictor(cluster, placement, schedule, send_s, recv_s)` gives a run's predicted
    step (default `gloo_predictor(graph, host_cores)`: the PyTorch workers' setting). O(refinements points^2
    len(runs)) simulations (points, not points^2, with a fixed latency)."""
    if not runs:
        raise ConfigError("fit_message_costs: no calibration runs")
    if any(m <= 0 for _, _, m in runs):
        raise ConfigError("fit_message_costs: a measured step is not positive")
    if not 0.0 <= send_share <= 1.0:
        raise ConfigError(f"fit_message_costs: send_share must be in [0, 1], got {send_share!r}")
    bw = cluster.bytes_per_s
    pred = predictor or gloo_predictor(graph, host_cores)

    def loss(lat: float, msg: float) -> float:
        cl = cluster.with_comm(lat, bw)
        s, r = send_share * msg, (1.0 - send_share) * msg
        return sum(((pred(cl, p, o, s, r) - m) / m) ** 2 for p, o, m in runs)

    lo = [0.0 if latency_s is None else float(latency_s), 0.0]
    span = [float(max_latency_s) if latency_s is None else 0.0, float(max_message_s)]
    best = (math.inf, 0.0, 0.0)
    for _ in range(refinements):
        step = [x / (points - 1) for x in span]
        for a in range(points if latency_s is None else 1):
            lat = lo[0] + a * step[0]
            if lat < 0:
                continue
            for b in range(points):
                msg = lo[1] + b * step[1]
                if msg < 0:
                    continue
                val = loss(lat, msg)
                if val < best[0] - 1e-15:
                    best = (val, lat, msg)
        span = [x / 4.0 for x in span]
        lo = [best[1] - span[0] / 2, best[2] - span[1] / 2]
    if not math.isfinite(best[0]):
        raise ConfigError("fit_message_costs: no admissible point (negative latency_s?)")
    _, lat, msg = best
    return lat, send_share * msg, (1.0 - send_share) * msg, math.sqrt(best[0] / len(runs))


def calibrate(
    graph: OpGraph,
    pair: Cluster,
    blocks: Sequence[int],
    profile: Callable[[], tuple[OpGraph, float]],
    run: Callable[[OpGraph, Mapping[str, str], Mapping[str, list[str]]], list[float]],
    make_predictor: Callable[[OpGraph], Predictor],
    *,
    rounds: int = 2,
    seed: int = 0,
    send_share: float = 0.5,
    benchmark_costs: tuple[float, float] | None = None,
    what: str = "",
) -> InStepCalibration:
    """The calibration both backends run: `graph` (the calibration program's capture) placed by each block
    length of `blocks` over the two devices of `pair`; `rounds` rounds of one `profile()` (the profiled graph
    and its single-device step) and one `run(profiled graph, placement, schedule)` (measured step times) per
    placement in a new random order (`seed`); then the latency and per-message costs fitted to the median
    steps on the mean profile with the runtime's `make_predictor(profile)`, or, where it fits better, the
    per-message costs with `pair`'s latency kept (the error is piecewise linear and not convex in the two: the
    refined grid may settle in a worse cell than the one-dimensional fit). `benchmark_costs`: the benchmark's
    (send, receive) costs, whose error on the same placements is reported beside. Cost: rounds x (one profile +
    len(blocks) runs), and the fits' simulations."""
    import random
    import statistics

    from backends.profilers import mean_profile

    if rounds < 1:
        raise ConfigError(f"calibration rounds must be >= 1, got {rounds}")
    names = pair.names
    cases = []
    for b in blocks:
        p = block_placement(graph, names, int(b))
        cases.append((int(b), p, topo_schedule(graph, p, names)))
    rng = random.Random(seed)
    profiles: list[OpGraph] = []
    steps: list[float] = []
    times: dict[int, list[float]] = {b: [] for b, _, _ in cases}
    for _ in range(rounds):
        g, step = profile()
        profiles.append(g)
        steps.append(step)
        for b, p, o in rng.sample(cases, len(cases)):
            times[b].extend(run(g, p, o))
    prof = mean_profile(profiles)
    pred = make_predictor(prof)
    runs = [(p, o, statistics.median(times[b])) for b, p, o in cases]
    lat, send_s, recv_s, rms = fit_message_costs(prof, pair, runs, send_share=send_share, predictor=pred)
    _, send_fixed, recv_fixed, rms_fixed = fit_message_costs(
        prof, pair, runs, send_share=send_share, latency_s=pair.latency_s, predictor=pred
    )
    if rms_fixed < rms:
        lat, send_s, recv_s, rms = pair.latency_s, send_fixed, recv_fixed, rms_fixed
    fitted = pair.with_comm(lat, pair.bytes_per_s)
    rows, bench_err = [], []
    for (b, p, o), (_, _, m) in zip(cases, runs):
        row = {
            "block": b,
            "messages": len(simulate(prof, pair, p, dict(o), record_memory=False).transfers),
            "measured_s": m,
            "predicted_s": pred(fitted, p, o, send_s, recv_s),
            "predicted_without_costs_s": pred(pair, p, o, 0.0, 0.0),
        }
        if benchmark_costs is not None:
            row["predicted_benchmark_s"] = pred(pair, p, o, *benchmark_costs)
            bench_err.append((row["predicted_benchmark_s"] - m) / m)
        rows.append(row)
    rms_bench = math.sqrt(sum(e * e for e in bench_err) / len(bench_err)) if bench_err else math.nan
    log.info(
        "in-step calibration (%s%s, %d rounds): latency %.3g s, send %.3g s, receive %.3g s per message; relative "
        "RMS error %.1f%% (benchmark's costs: %.1f%%) over %s",
        pair.name,
        what,
        rounds,
        lat,
        send_s,
        recv_s,
        100.0 * rms,
        100.0 * rms_bench,
        ", ".join(
            f"B={r['block']}: {r['messages']} msgs {1e3 * r['measured_s']:.3g}/{1e3 * r['predicted_s']:.3g} ms"
            for r in rows
        ),
    )
    return InStepCalibration(lat, send_s, recv_s, rows, rms, steps, send_fixed, recv_fixed, rms_fixed, rms_bench)


__all__ = [
    "CALIBRATION_MODEL",
    "InStepCalibration",
    "Predictor",
    "calibrate",
    "block_placement",
    "fit_message_costs",
    "gloo_predictor",
    "topo_schedule",
    "two_devices",
]
