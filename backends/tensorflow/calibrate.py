"""In-step calibration of the per-message costs on TensorFlow's distributed runtime (issue 16, TensorFlow half).

`dist_profile.comm_benchmark_distributed` measures the processor time a transfer costs the sending and the
receiving worker from bursts of 256-byte tensors read by one ``Identity`` each (procfs time against the burst
length). In a placed training step the transfers are of many sizes, interleaved with the ops, and the
executor's ready queue decides when each ``Send``/``Recv`` pair runs: on the quiet host the burst costs
over-predicted the message-heavy placements up to 2.8 times (gnmt_tiny, docs/fidelity.md, 26 November).

As `backends.torch.calibrate` does for the gloo workers, this module measures the costs where they are paid:
`TFDistributedRuntime` (one pinned ``tf.distribute.Server`` per device, the client's session driving both)
runs a calibration program that is none of the evaluated models (`CALIBRATION_MODEL`: a 24-layer, 32-wide MLP
training step built from raw ops, a few hundred ops of tens of microseconds) placed by blocks of its
topological order (`backends.calibration.block_placement`: a colocation group, a variable and the ops that
update it, stays on one device), several block lengths, so that the number of cross-device tensors varies
widely. The ops are profiled in a pinned worker (`dist_profile.profile_distributed`). The hop latency and the
per-message processor time (split between sender and receiver in the burst benchmark's ratio) are then the
pair with which the simulator, as `experiments/fidelity_tf.py` predicts a step (`tf_predictor`: the
simulator's default dispatch, since TensorFlow's executor keeps no given order, plus the measured empty step
of the workers used, `dist_profile.predicted_step`), predicts those steps best
(`backends.calibration.fit_message_costs`); or, where it fits better, the per-message time with the
benchmark's latency kept. Profiles and placed runs alternate over `rounds` in a new random order each round
(this machine's speed drifts over minutes); the profile used is the mean of the rounds'.

A choice, as on PyTorch: one (send, receive) pair for every tensor whatever its size; what it absorbs beyond
gRPC's own work is what the real step pays per tensor on average, not a model of each mechanism. The bytes are
in the hop's ``bytes / bandwidth`` and, with `byte_costs` (the default), in a processor time per byte sent and
received: as on PyTorch, each round also profiles and runs the same blocks of a second program whose messages
carry 256 KB-4 MB (`WIDE_CALIBRATION_MODEL`, 8 layers 1024 wide at batch 64), and the per-byte time is fitted
on its steps with the latency and per-message costs kept (`backends.calibration.fit_byte_costs`). Copying a
tensor into and out of a gRPC message costs the workers' own cores on this host; the burst benchmark's
256-byte tensors cannot see it.

Cost: rounds x (one profile + len(blocks) placed runs) worker-pool starts (an interpreter importing TensorFlow
each) per program, and grid x placements simulations of each calibration program.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from algorithms.cluster import Cluster
from algorithms.errors import ConfigError
from algorithms.graph import OpGraph
from algorithms.simulator import simulate
from backends.calibration import (
    CALIBRATION_MODEL,
    WIDE_CALIBRATION_MODEL,
    InStepCalibration,
    Predictor,
    WideProgram,
    calibrate,
    fit_calibration,
    two_devices,
)

DEFAULT_BLOCKS = (2, 8, 32, 128)  # block lengths along the topological order (ops per block)


def tf_predictor(
    graph: OpGraph, step_overhead_s: Mapping[int, float], recv_requests: str = "posted", order: str = "executor"
) -> Predictor:
    """The predicted step of a placement on TensorFlow's runtime: the simulator's makespan with per-message and
    per-byte costs, plus the empty step of as many workers as the placement uses (`dist_profile.predicted_step`).
    `order`: ``"executor"`` (the runtime's default: its executor keeps no given order, so the simulator's own
    dispatch and the schedule is not used) or ``"schedule"`` (the runtime enforces the schedule, the simulator
    replays it). `recv_requests`: the simulator's model of when a receive is asked for (``"when_idle"``:
    TensorFlow's pulled receives)."""
    from .dist_profile import predicted_step

    def pred(
        cl: Cluster, p: Mapping[str, str], o: Mapping[str, list[str]], s: float, r: float, **per_byte: float
    ) -> float:
        # per_byte: send_byte_s / recv_byte_s, passed on to the simulator (`Predictor`)
        sim = simulate(
            graph, cl, p, schedule=dict(o) if order == "schedule" else None, send_overhead_s=s, recv_overhead_s=r,
            record_memory=False, recv_requests=recv_requests, **per_byte,
        )  # fmt: skip
        return predicted_step(sim.makespan, graph, step_overhead_s, len(set(p.values())))

    return pred


def calibrate_in_step(
    cluster: Cluster,
    *,
    step_overhead_s: float,
    send_share: float = 0.5,
    benchmark_costs: tuple[float, float] = (0.0, 0.0),
    blocks: Sequence[int] = DEFAULT_BLOCKS,
    rounds: int = 2,
    warmup: int = 3,
    steps: int = 10,
    profile_warmup: int = 5,
    profile_steps: int = 10,
    seed: int = 0,
    model_cfg: Mapping[str, object] | None = None,
    byte_costs: bool = True,
    recv_requests: str = "posted",
    order: str = "executor",
) -> InStepCalibration:
    """Fit the hop latency and per-message costs to `TFDistributedRuntime`'s own placed steps (module docstring).

    `cluster` carries the benchmark's fit (latency and bandwidth, `Cluster.with_comm`); `step_overhead_s` is
    the benchmark's empty step of two workers; `send_share` the sender's share of a message's processor time
    (the burst benchmark's ratio); `benchmark_costs` its (send, receive) costs, for the comparison logged.
    `model_cfg`: calibrate on block placements of this model instead of `CALIBRATION_MODEL`. What a transfer
    costs on TensorFlow's runtime depends on the model (block placements, 26 Nov 2026: inception_v3_tiny 85-93 µs
    per transfer at 467-1786 transfers per step, gnmt_tiny 67-75 µs at 398-1627, each flat in the count), so the
    costs of the model being evaluated come from its own block placements, none of them a placement under
    evaluation. `byte_costs`: also fit the per-byte processor time on the wide program (module docstring).
    `recv_requests`: the predictor's model of TensorFlow's receives (`tf_predictor`); `refit` fits the same
    measurements under the other one. `order`: the runtime's (`TFDistributedRuntime(order=...)`; with
    ``"schedule"`` each block placement runs, and is simulated, in the topological order)."""
    from . import TFBackend
    from .dist_profile import profile_distributed
    from .distributed import TFDistributedRuntime

    # one hop for the pair: per-pair links would override the latency being fitted
    pair = dataclasses.replace(two_devices(cluster), links={})
    backend = TFBackend()
    model = backend.build(dict(model_cfg) if model_cfg is not None else CALIBRATION_MODEL)
    captured = backend.capture(model)
    runtime = TFDistributedRuntime(warmup=warmup, steps=steps, check_correctness=False, order=order)

    def profile() -> tuple[OpGraph, float]:
        g = profile_distributed(model, captured, pair, warmup=profile_warmup, steps=profile_steps)
        return g, float(g.nx.graph["profile"]["untraced_step_s"])

    def run(g: OpGraph, p: Mapping[str, str], o: Mapping[str, list[str]]) -> list[float]:
        return runtime.run(backend, model, g, p, o, pair).step_times_s

    wide = None
    if byte_costs:
        wmodel = backend.build(dict(WIDE_CALIBRATION_MODEL))
        wcaptured = backend.capture(wmodel)

        def wprofile() -> tuple[OpGraph, float]:
            g = profile_distributed(wmodel, wcaptured, pair, warmup=profile_warmup, steps=profile_steps)
            return g, float(g.nx.graph["profile"]["untraced_step_s"])

        def wrun(g: OpGraph, p: Mapping[str, str], o: Mapping[str, list[str]]) -> list[float]:
            return runtime.run(backend, wmodel, g, p, o, pair).step_times_s

        wide = WideProgram(wcaptured, wprofile, wrun)

    return calibrate(
        captured,
        pair,
        blocks,
        profile,
        run,
        lambda prof: tf_predictor(prof, {2: float(step_overhead_s)}, recv_requests, order),
        rounds=rounds,
        seed=seed,
        send_share=send_share,
        benchmark_costs=benchmark_costs,
        wide=wide,
    )


def refit(
    cal: InStepCalibration,
    *,
    step_overhead_s: float,
    recv_requests: str,
    send_share: float = 0.5,
    benchmark_costs: tuple[float, float] = (0.0, 0.0),
    latency_s: float | None = None,
    order: str = "executor",
) -> InStepCalibration:
    """The costs `cal`'s measurements give under `tf_predictor(..., recv_requests, order)` (`order`: the one
    `cal` ran with), measured once
    (`backends.calibration.fit_calibration`): the posted and the pulled model of the receives compared on the
    same steps. `latency_s`: keep this hop latency and fit only the per-message times (e.g. a model's own block
    placements fitted with the calibration program's hop, whose chains cannot tell the two apart)."""
    if cal.measured is None:
        raise ConfigError("refit needs a calibration that kept its measurements (calibrate_in_step's)")
    data = cal.measured
    if latency_s is not None:
        data = dataclasses.replace(data, pair=data.pair.with_comm(float(latency_s), data.pair.bytes_per_s))
    return fit_calibration(
        data,
        lambda prof: tf_predictor(prof, {2: float(step_overhead_s)}, recv_requests, order),
        send_share=send_share,
        benchmark_costs=benchmark_costs,
        what=f", refit with {recv_requests} receives"
        + ("" if latency_s is None else f", hop kept at {latency_s:.3g} s"),
        keep_latency=latency_s is not None,
    )


__all__ = ["CALIBRATION_MODEL", "InStepCalibration", "calibrate_in_step", "refit", "tf_predictor"]
