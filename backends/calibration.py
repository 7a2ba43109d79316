"""The framework-neutral part of the in-step calibration of per-message costs (issue 16): calibration placements
by blocks of the topological order, the fit of the hop latency and the per-message processor time to measured
placed steps, and the fit of a per-byte processor time to the placed steps of a second, wider program. The
backends run the steps: `backends.torch.calibrate` (gloo workers) and `backends.tensorflow.calibrate` (gRPC
servers); `backends/torch/calibrate.py`'s docstring says why and how.
"""

from __future__ import annotations

import logging
import math
import statistics
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

# the second calibration program (sessions 23-24): the same kind of step with 8 layers 32 times as wide and a
# batch 8 times as large, so that its messages carry 256 KB (activations) to 4 MB (weights, gradients) where the
# first program's carry 1-4 KB: the sizes that dominate the traffic of full-size models (gnmt: 84-85 % of the
# bytes in messages of 512 KB and more; weight gradients of 1-2 MB and more). The per-byte processor time is
# fitted on it (`fit_byte_costs`). Measured on the lab's VM: the per-byte time grows with the messages' size,
# 1.06 ns per byte on 12 layers 256 wide (64-256 KB), 1.12-1.42 ns on 8 layers 512 wide (128 KB-1 MB, session
# 23's program), 1.39 ns on this one (session 24), against the 1.4-1.5 ns (gnmt) and 1.5-3 ns (mlp) that
# full-size two-device runs asked for. With it the full-size models' error fell from 12.0 / 15.4 % (gnmt / mlp,
# session 23, 512 wide) to 4.6 / 2.8 % (session 24), and to 5.7 / 12.3 % on session 23's own runs re-predicted.
WIDE_CALIBRATION_MODEL: dict[str, Any] = {
    **CALIBRATION_MODEL,
    "name": "calibration_mlp_wide",
    "batch_size": 64,
    "in_features": 1024,
    "hidden": [1024] * 8,
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
    # the per-byte processor time fitted on the wide program (0 where it was not run), its placements (as
    # `placements`, plus the prediction without per-byte costs) and the relative RMS error at the fit
    send_byte_s: float = 0.0
    recv_byte_s: float = 0.0
    byte_placements: list[dict[str, Any]] = field(default_factory=list)
    rel_rms_bytes: float = math.nan
    # the wide program's single-device step in the workers' setting (median over the rounds; NaN where it was not
    # run): the machine's speed when the costs were measured, which `rescale_factor` compares with the profile's
    speed_reference_s: float = math.nan
    # what was measured, for a fit under another execution model (`fit_calibration`)
    measured: CalibrationRuns | None = field(default=None, repr=False, compare=False)


@dataclass
class CalibrationRuns:
    """What `calibrate` measured, before any fit: per program (the calibration program, then the wide one when
    it ran) the mean profile and per block placement (block, placement, schedule, median measured step)."""

    pair: Cluster
    profile: OpGraph
    runs: list[tuple[int, dict[str, str], dict[str, list[str]], float]]
    profile_step_s: list[float]
    wide_profile: OpGraph | None = None
    wide_runs: list[tuple[int, dict[str, str], dict[str, list[str]], float]] = field(default_factory=list)
    wide_step_s: list[float] = field(default_factory=list)  # the wide program's single-device step per round


#: (cluster with the latency tried, placement, schedule, send s, receive s) -> predicted step seconds; a
#: predictor that models per-byte costs also takes ``send_byte_s=`` and ``recv_byte_s=`` (`gloo_predictor`)
Predictor = Callable[..., float]


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


def gloo_predictor(
    graph: OpGraph,
    host_cores: int | None,
    shared_core_slowdown: float = 0.0,
    recv_work: str = "in_consumer",
    send_wake_s: float = 0.0,
) -> Predictor:
    """The simulator's step in the PyTorch workers' setting: every receive posted at the step's start (gloo),
    devices sharing `host_cores` cores (at `shared_core_slowdown`, `algorithms.simulator`), each receive's
    processor time spent as `recv_work` says (`simulate(recv_work=...)`), a send to an idle receiver costing
    `send_wake_s` more (`simulate(send_wake_s=...)`)."""

    def pred(
        cl: Cluster,
        p: Mapping[str, str],
        o: Mapping[str, list[str]],
        s: float,
        r: float,
        send_byte_s: float = 0.0,
        recv_byte_s: float = 0.0,
    ) -> float:
        return simulate(
            graph,
            cl,
            p,
            dict(o),
            host_cores=host_cores,
            send_overhead_s=s,
            recv_overhead_s=r,
            send_byte_s=send_byte_s,
            recv_byte_s=recv_byte_s,
            recv_buffers="step_start",
            record_memory=False,
            shared_core_slowdown=shared_core_slowdown,
            recv_work=recv_work,
            send_wake_s=send_wake_s,
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


def fit_byte_costs(
    cluster: Cluster,
    runs: Sequence[tuple[Mapping[str, str], Mapping[str, list[str]], float]],
    predictor: Predictor,
    send_s: float,
    recv_s: float,
    send_share: float = 0.5,
    max_byte_s: float = 10e-9,
    points: int = 21,
    refinements: int = 4,
) -> tuple[float, float, float]:
    """(send_byte_s, recv_byte_s, relative RMS error): the processor time per byte of a message (split
    ``send_share : 1 - send_share`` as the per-message time is) that minimises the squared relative error of
    `predictor` over `runs` = [(placement, schedule, measured step s)] on `cluster` (the fitted latency), with the
    per-message costs (`send_s`, `recv_s`) kept. The per-message costs come from the narrow program, whose
    messages are too small (1-4 KB) for their bytes to matter; the wide program's messages (256 KB-4 MB) then tell
    the per-byte time apart (a sequential fit, not a joint one: each parameter is fitted where it dominates). A
    grid of `points` over [0, `max_byte_s`] refined `refinements` - 1 times (a quarter of the span each time;
    ties to the smaller value). O(refinements points len(runs)) simulations."""
    if not runs:
        raise ConfigError("fit_byte_costs: no calibration runs")
    if any(m <= 0 for _, _, m in runs):
        raise ConfigError("fit_byte_costs: a measured step is not positive")

    def loss(x: float) -> float:
        sb, rb = send_share * x, (1.0 - send_share) * x
        return sum(
            ((predictor(cluster, p, o, send_s, recv_s, send_byte_s=sb, recv_byte_s=rb) - m) / m) ** 2
            for p, o, m in runs
        )

    lo, span = 0.0, float(max_byte_s)
    best = (math.inf, 0.0)
    for _ in range(refinements):
        for b in range(points):
            x = lo + b * span / (points - 1)
            if x < 0:
                continue
            val = loss(x)
            if val < best[0] - 1e-15:
                best = (val, x)
        span /= 4.0
        lo = best[1] - span / 2
    _, x = best
    return send_share * x, (1.0 - send_share) * x, math.sqrt(best[0] / len(runs))


@dataclass
class WideProgram:
    """The second calibration program of `calibrate` (`WIDE_CALIBRATION_MODEL`'s capture): its graph, and how to
    profile it and run a placement of it (as `calibrate`'s `profile` and `run`)."""

    graph: OpGraph
    profile: Callable[[], tuple[OpGraph, float]]
    run: Callable[[OpGraph, Mapping[str, str], Mapping[str, list[str]]], list[float]]


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
    wide: WideProgram | None = None,
    keep_latency: bool = False,
) -> InStepCalibration:
    """The calibration both backends run: `graph` (the calibration program's capture) placed by each block
    length of `blocks` over the two devices of `pair`; `rounds` rounds of one `profile()` (the profiled graph
    and its single-device step) and one `run(profiled graph, placement, schedule)` (measured step times) per
    placement in a new random order (`seed`); then the latency and per-message costs fitted to the median
    steps on the mean profile with the runtime's `make_predictor(profile)`, or, where it fits better, the
    per-message costs with `pair`'s latency kept (the error is piecewise linear and not convex in the two: the
    refined grid may settle in a worse cell than the one-dimensional fit); with `keep_latency` always the latter
    (the caller's measured hop latency trusted over the fitted one; `backends.torch.calibrate`).
    `benchmark_costs`: the benchmark's (send, receive) costs, whose error on the same placements is reported
    beside. With `wide` (a predictor that takes per-byte costs), each round also profiles the wide program and runs
    its placements by the same blocks, and the per-byte processor time is fitted on them with the latency and
    per-message costs kept (`fit_byte_costs`). Cost: rounds x (one profile + len(blocks) runs) per program, and the
    fits' simulations."""
    import random

    from backends.profilers import mean_profile

    if rounds < 1:
        raise ConfigError(f"calibration rounds must be >= 1, got {rounds}")
    names = pair.names
    programs = [(graph, profile, run)] + ([(wide.graph, wide.profile, wide.run)] if wide is not None else [])
    cases: list[list[tuple[int, dict[str, str], dict[str, list[str]]]]] = []
    for g0, _, _ in programs:
        cs = []
        for b in blocks:
            p = block_placement(g0, names, int(b))
            cs.append((int(b), p, topo_schedule(g0, p, names)))
        cases.append(cs)
    rng = random.Random(seed)
    profiles: list[list[OpGraph]] = [[] for _ in programs]
    steps: list[float] = []
    wide_steps: list[float] = []
    times: list[dict[int, list[float]]] = [{b: [] for b, _, _ in cs} for cs in cases]
    for _ in range(rounds):
        for k, (_, prof_fn, run_fn) in enumerate(programs):
            g, step = prof_fn()
            profiles[k].append(g)
            if k == 0:
                steps.append(step)
            else:
                wide_steps.append(step)
            for b, p, o in rng.sample(cases[k], len(cases[k])):
                times[k][b].extend(run_fn(g, p, o))
    data = CalibrationRuns(
        pair,
        mean_profile(profiles[0]),
        [(b, p, o, statistics.median(times[0][b])) for b, p, o in cases[0]],
        steps,
    )
    if wide is not None:
        data.wide_profile = mean_profile(profiles[1])
        data.wide_runs = [(b, p, o, statistics.median(times[1][b])) for b, p, o in cases[1]]
        data.wide_step_s = wide_steps
    return fit_calibration(
        data,
        make_predictor,
        send_share=send_share,
        benchmark_costs=benchmark_costs,
        what=what,
        keep_latency=keep_latency,
        rounds=rounds,
    )


def fit_calibration(
    data: CalibrationRuns,
    make_predictor: Callable[[OpGraph], Predictor],
    *,
    send_share: float = 0.5,
    benchmark_costs: tuple[float, float] | None = None,
    what: str = "",
    keep_latency: bool = False,
    rounds: int = 0,
) -> InStepCalibration:
    """The fits of `calibrate` on what it measured (`data`, also kept in its result's ``measured``), with the
    predictor `make_predictor(profile)` gives: the same measurements fitted under another execution model
    (TensorFlow's pulled receives, `backends.tensorflow.calibrate`). `rounds` is only logged."""
    pair = data.pair
    prof = data.profile
    pred = make_predictor(prof)
    cases0 = [(b, p, o) for b, p, o, _ in data.runs]
    runs = [(p, o, m) for _, p, o, m in data.runs]
    lat, send_s, recv_s, rms = fit_message_costs(prof, pair, runs, send_share=send_share, predictor=pred)
    _, send_fixed, recv_fixed, rms_fixed = fit_message_costs(
        prof, pair, runs, send_share=send_share, latency_s=pair.latency_s, predictor=pred
    )
    if keep_latency or rms_fixed < rms:
        lat, send_s, recv_s, rms = pair.latency_s, send_fixed, recv_fixed, rms_fixed
    fitted = pair.with_comm(lat, pair.bytes_per_s)

    def table(g0: OpGraph, cs: list, rs: list, prd: Predictor, **byte_costs: float) -> list[dict[str, Any]]:
        out = []
        for (b, p, o), (_, _, m) in zip(cs, rs):
            row = {
                "block": b,
                "messages": len(simulate(g0, pair, p, dict(o), record_memory=False).transfers),
                "measured_s": m,
                "predicted_s": prd(fitted, p, o, send_s, recv_s, **byte_costs),
                "predicted_without_costs_s": prd(pair, p, o, 0.0, 0.0),
            }
            if byte_costs:
                row["predicted_without_byte_costs_s"] = prd(fitted, p, o, send_s, recv_s)
            out.append(row)
        return out

    rows = table(prof, cases0, runs, pred)
    bench_err = []
    if benchmark_costs is not None:
        for row, (_, p, o) in zip(rows, cases0):
            row["predicted_benchmark_s"] = pred(pair, p, o, *benchmark_costs)
            bench_err.append((row["predicted_benchmark_s"] - row["measured_s"]) / row["measured_s"])
    rms_bench = math.sqrt(sum(e * e for e in bench_err) / len(bench_err)) if bench_err else math.nan
    send_b = recv_b = 0.0
    byte_rows: list[dict[str, Any]] = []
    rms_bytes = math.nan
    if data.wide_profile is not None:
        wprof = data.wide_profile
        wpred = make_predictor(wprof)
        wruns = [(p, o, m) for _, p, o, m in data.wide_runs]
        send_b, recv_b, rms_bytes = fit_byte_costs(fitted, wruns, wpred, send_s, recv_s, send_share=send_share)
        byte_rows = table(
            wprof, [(b, p, o) for b, p, o, _ in data.wide_runs], wruns, wpred, send_byte_s=send_b, recv_byte_s=recv_b
        )
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
    if data.wide_profile is not None:
        log.info(
            "in-step calibration, per byte (%s, the wide program): send %.3g ns, receive %.3g ns per byte; relative "
            "RMS error %.1f%% over %s",
            pair.name,
            1e9 * send_b,
            1e9 * recv_b,
            100.0 * rms_bytes,
            ", ".join(
                f"B={r['block']}: {r['messages']} msgs {1e3 * r['measured_s']:.3g}/{1e3 * r['predicted_s']:.3g} ms "
                f"({1e3 * r['predicted_without_byte_costs_s']:.3g} without)"
                for r in byte_rows
            ),
        )
    return InStepCalibration(
        lat,
        send_s,
        recv_s,
        rows,
        rms,
        data.profile_step_s,
        send_fixed,
        recv_fixed,
        rms_fixed,
        rms_bench,
        send_byte_s=send_b,
        recv_byte_s=recv_b,
        byte_placements=byte_rows,
        rel_rms_bytes=rms_bytes,
        speed_reference_s=statistics.median(data.wide_step_s) if data.wide_step_s else math.nan,
        measured=data,
    )


def rescale_factor(profile_reference_s: float | None, calibration_reference_s: float | None) -> float | None:
    """The factor the in-step message costs are multiplied by so that they belong to the hour the model was
    profiled in rather than the hour they were calibrated in: the wide calibration program's single-device step in
    the workers' setting when the model was profiled, over the same step when the costs were calibrated
    (`InStepCalibration.speed_reference_s`). The hypothesis behind it: a slow hour slows a message's processor
    time as it slows the ops (over nine consumer-model fits of sessions 41-42 the per-byte time, 1.25-1.91 ns,
    followed that step, 47.9-92.4 ms, with correlation 0.88). Session 43's pre-declared test across hours did not
    bear it out (costs from an hour whose step was 20 % slower predicted 6.2 % as fitted, 7.7 % rescaled;
    docs/fidelity.md), so `profiler.comm_rescale` defaults to ``none``.
    None where either reference is missing or not a positive finite number (a profile or fit from before the
    references were measured, a GPU or TensorFlow fit): the costs are then used as calibrated. O(1)."""
    try:
        p, c = float(profile_reference_s), float(calibration_reference_s)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(p) and math.isfinite(c) and p > 0 and c > 0):
        return None
    return p / c


__all__ = [
    "CALIBRATION_MODEL",
    "CalibrationRuns",
    "InStepCalibration",
    "WIDE_CALIBRATION_MODEL",
    "WideProgram",
    "Predictor",
    "calibrate",
    "block_placement",
    "fit_calibration",
    "fit_byte_costs",
    "fit_message_costs",
    "gloo_predictor",
    "rescale_factor",
    "topo_schedule",
    "two_devices",
]
