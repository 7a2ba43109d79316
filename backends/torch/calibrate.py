"""In-step calibration of the per-message processor time of the process-per-device runtime (issue 16).

The issue asks that the communication model be "fitted from this runtime's own send/recv between two worker
processes". `comm.comm_benchmark_distributed` does that for the hop (``latency + bytes / bandwidth``, a
ping-pong to a blocked receiver) and measures a per-message processor time on two busy workers that bounce
1 KB messages (`distributed._busy_message_cost`). Inside a placed step the messages cost more than that
benchmark says: on gnmt_tiny m-SCT (about 330 messages each way per step) the compute thread spends about
90 us of processor time per message against 73 us in the benchmark, and blocks about 20 ms per step beyond it
(docs/fidelity.md). The benchmark's loop differs from a step in what matters to gloo: its messages are of one
size and evenly spaced, its receiver reads them in batches of ~50 in one blocking wait, and its sender never
receives while it sends.

This module measures the per-message costs *in the setting they are paid in*: the real worker step
(`distributed.TorchDistributedRuntime`, `worker._Worker.step`: every receive posted up front, an ``isend``
right after the producing op, a wait where a value is first needed) on a synthetic calibration program that is
none of the evaluated models (`CALIBRATION_MODEL`: a 24-layer, 32-wide MLP training step, about 300 ops of
tens of microseconds, as the tiny models' ops are). Its ops are profiled in the worker
(`profiler.profile_in_worker`); it is placed by *blocks of the topological order* (op k on device
``(k // B) % 2`` for several block lengths B), which gives a known and widely varying number of cross-device
messages, both ways, with and without overlap between the devices; each placement is run and its median step
measured. The hop latency and the per-message processor time (``send_overhead_s + recv_overhead_s``, split in
the busy benchmark's ratio) are then the pair that makes `algorithms.simulator.simulate` (with the ping-pong's
bandwidth, the runtime's receive buffers and host cores) predict those steps best: least squares of the
*relative* error over the placements (`fit_message_costs`), on a grid refined three times (the predicted step
is piecewise linear in the two, so a grid search is robust where a gradient method is not), or, where it fits
better, the one-dimensional fit with the ping-pong's latency kept (the error is not convex in the two). The
fit and its residual are logged and returned.

Which workers: the first two devices, one pair of workers on cores of their own, as the benchmark runs, or,
where the cluster's workers share host cores (`algorithms.cluster.oversubscription` > 1, cpu4 on two cores),
every device of the cluster (``devices="all"``, the default ``"auto"`` chooses it there): op k then goes on
device ``(k // B) % n``, the workers share their cores as a placed run's do, and the fitted per-message time
includes what a message costs on a shared core (the wake-ups and switches between two busy workers, which the
simulator's turn-taking does not charge). Measured on cpu4 (docs/fidelity.md, session 14): the pair's fit gave
8-18 us per message and under-predicted the multi-device placements by 25-40 %.

Which latency (session 34): on workers that share host cores the two-parameter fit is not used; the
per-message time is fitted with the ping-pong's measured hop latency kept. The two-parameter fit always explains
the calibration program best (it has one more parameter), but on the evaluated models it did worse: in all six
cpu4 sweeps of the four tiny models (sessions 16-34, docs/fidelity.md) the ping-pong's latency gave the lower
median error (13.0 against 11.1 %, 14.0 / 13.4, 15.2 / 14.1, 14.6 / 11.5, 12.4 / 5.2 and, decided before it
ran, 12.8 / 5.0 %). On cpu2 neither is consistently better, and the lower calibration error still chooses:
session 35 tested keeping the ping-pong's latency there too, with conditions written before three sweeps; it was
lower in two of them but had the worst of the six medians (8.6 % against the fit's 4.6 / 5.9 / 7.7 %), so the rule
stays on shared cores only.

Per byte (session 23): a second program (`WIDE_CALIBRATION_MODEL`: 8 layers 1024 wide at batch 64 since
session 24, messages of 256 KB to 4 MB against the first program's 1-4 KB) is profiled and run by the same
blocks in every round, and a processor time per byte of a message (`simulate(send_byte_s=, recv_byte_s=)`,
split as the per-message time) is fitted on its placements with the latency and per-message costs kept
(`fit_byte_costs`). On the lab's VM the
first program's costs under-predicted wider programs' placed steps by 15-39 % (12 to 24 layers 128-256 wide),
about 1-1.5 ns per byte sent: loopback TCP copies each message on the workers' own cores, while the ping-pong's
bandwidth only delays its arrival. ``byte_costs=False`` leaves it out (the per-byte time is then 0).

Where a receive's time goes (session 42, docs/fidelity.md): the fit is made under the simulator's
`recv_work` (``calibrate_in_step(recv_work=...)``, the profiler's ``comm_recv_work``). Gloo's transport thread
runs at idle priority, so it could read a message in an idle moment of its worker rather than in the op that
needs it (``"when_idle"``, or only the payload's bytes, ``"bytes_when_idle"``). Two tests decided before their
sweeps kept the consumer model: reading whole messages in idle time gave the four tiny models 13.9 % on cpu2
against 8.3 % (its fit of this program was worse too: 12.4 against 6.9 % relative RMS), reading only the bytes
12.5 % on cpu4 against 9.3 %, each fitted on the same calibration runs.

A choice: one (send, receive) pair per message and one per byte, whatever the message's size, as the simulator
models it; what this pair absorbs beyond gloo's own work (the
blocking that a receive forces on a busy worker, the pair-lock contention between ``isend`` and the transport
thread) is whatever the real step pays per message on average, not a model of each mechanism. Profiling and the
placed runs alternate over `rounds` (in a new random order each round) because this machine's speed drifts by
tens of percent over minutes (docs/fidelity.md); the profile used is the mean of the rounds'.

Cost: rounds x (one profile + len(blocks) placed runs) process starts, each warmup + steps steps of a ~300-op
program, and grid x placements simulations of that program (a few seconds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from algorithms.cluster import Cluster, oversubscription
from algorithms.errors import ConfigError
from algorithms.graph import OpGraph
from backends.calibration import (
    CALIBRATION_MODEL,
    WIDE_CALIBRATION_MODEL,
    InStepCalibration,
    WideProgram,
    block_placement,
    calibrate,
    fit_message_costs,
    gloo_predictor,
    topo_schedule,
    two_devices,
)

DEFAULT_BLOCKS = (2, 6, 24, 96)  # block lengths along the topological order (ops per block)


def predict(
    graph: OpGraph,
    cluster: Cluster,
    placement: Mapping[str, str],
    schedule: Mapping[str, list[str]],
    send_s: float,
    recv_s: float,
    host_cores: int | None,
    shared_core_slowdown: float = 0.0,
) -> float:
    """The simulator's step for one calibration placement with per-message costs (send_s, recv_s), in the gloo
    workers' setting (`backends.calibration.gloo_predictor`)."""
    return gloo_predictor(graph, host_cores, shared_core_slowdown)(cluster, placement, schedule, send_s, recv_s)


def calibration_cluster(cluster: Cluster, host_cores: int, devices: str = "auto") -> Cluster:
    """The devices the calibration runs on: the first two (``"pair"``), all of them (``"all"``), or ``"auto"``:
    all where the cluster's workers share the `host_cores` (module docstring), else the pair."""
    if devices not in ("auto", "pair", "all"):
        raise ConfigError(f"calibration devices must be 'auto', 'pair' or 'all', got {devices!r}")
    if devices == "auto":
        devices = "all" if oversubscription(cluster, host_cores) > 1 else "pair"
    return two_devices(cluster) if devices == "pair" else cluster


def speed_reference(
    cluster: Cluster,
    *,
    host_cores: int | None = None,
    devices: str = "auto",
    warmup: int = 3,
    steps: int = 10,
    timeout_s: float = 600.0,
) -> float:
    """The machine's speed now, as the in-step calibration measures it: the wide calibration program's
    (`WIDE_CALIBRATION_MODEL`) median single-device step in the setting of the calibration's workers
    (`calibration_cluster` of `cluster`, `worker_setting`), through `profile_in_worker` as each calibration round
    profiles it. Taken when a model is profiled, it is the numerator of `backends.calibration.rescale_factor`; the
    calibration's own rounds give the denominator (`InStepCalibration.speed_reference_s`). Cost: one worker start
    and warmup + 2 x steps steps of the wide program (about 50 ms each on the lab's VM): a few seconds."""
    import os

    from . import TorchBackend
    from .profiler import profile_in_worker, worker_setting

    if host_cores is None:
        host_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    pair = calibration_cluster(cluster, host_cores, devices)
    backend = TorchBackend(threads=1)
    model = backend.build(WIDE_CALIBRATION_MODEL)
    _, chk = profile_in_worker(
        model, backend.capture(model), setting=worker_setting(pair), warmup=warmup, steps=steps, timeout_s=timeout_s
    )
    return float(chk["step_s"])


def calibrate_in_step(
    cluster: Cluster,
    *,
    transport_policy: str = "idle",
    blocks: Sequence[int] = DEFAULT_BLOCKS,
    rounds: int = 2,
    warmup: int = 3,
    steps: int = 10,
    seed: int = 0,
    timeout_s: float = 600.0,
    host_cores: int | None = None,
    send_share: float = 0.5,
    devices: str = "auto",
    shared_core_slowdown: float = 0.0,
    byte_costs: bool = True,
    keep_latency: bool | None = None,
    recv_work: str = "in_consumer",
    send_wake_s: float = 0.0,
) -> InStepCalibration:
    """Fit the per-message send / receive processor time from the runtime's own placed steps (module docstring).

    `cluster` must carry the communication fit's bandwidth already (`Cluster.with_comm`); the latency and the
    per-message processor time are fitted here (`fit_message_costs`), the latter split between sender and
    receiver by `send_share` (the busy benchmark's ratio, see `fit_message_costs`). `transport_policy`: the
    runtime's ``transport_priority``. `devices`: ``"pair"`` (the first two devices, one pair of workers, as in the
    benchmark), ``"all"`` (every device of the cluster) or ``"auto"`` (all where the workers share host cores,
    else the pair; module docstring); `host_cores` and `shared_core_slowdown` as for `simulate` (default: the
    host's cores; no slowdown): the fit is made with the simulator the predictions will use. `byte_costs`: also
    fit the per-byte processor time on the wide program (module docstring). `keep_latency`: fit the per-message
    time with the ping-pong's hop latency kept rather than fitting the latency too; None (the default) keeps it
    where the workers share host cores (module docstring, "Which latency"). `recv_work`: the simulator's model of
    where a receive's processor time goes (`simulate(recv_work=...)`, `algorithms.simulator`'s module docstring),
    under which the costs are fitted and must be used. `send_wake_s`: the extra time a send to an idle receiver
    holds its sender (`simulate(send_wake_s=...)`, `backends.torch.wake`), charged in the fit's predictions."""
    import os

    from . import TorchBackend
    from .distributed import TorchDistributedRuntime
    from .profiler import profile_in_worker, worker_setting

    if host_cores is None:
        host_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    pair = calibration_cluster(cluster, host_cores, devices)
    if keep_latency is None:
        keep_latency = oversubscription(cluster, host_cores) > 1
    backend = TorchBackend(threads=1)
    model = backend.build(CALIBRATION_MODEL)
    graph = backend.capture(model)
    runtime = TorchDistributedRuntime(
        warmup=warmup, steps=steps, check_correctness=False, timeout_s=timeout_s, transport_priority=transport_policy
    )

    def profile() -> tuple[OpGraph, float]:
        g, chk = profile_in_worker(model, graph, setting=worker_setting(pair), warmup=warmup, steps=steps)
        return g, float(chk["step_s"])

    def run(_: OpGraph, p: Mapping[str, str], o: Mapping[str, list[str]]) -> list[float]:
        return runtime.run(backend, model, graph, p, o, pair).counted_times()

    wide = None
    if byte_costs:
        wmodel = backend.build(WIDE_CALIBRATION_MODEL)
        wgraph = backend.capture(wmodel)

        def wprofile() -> tuple[OpGraph, float]:
            g, chk = profile_in_worker(wmodel, wgraph, setting=worker_setting(pair), warmup=warmup, steps=steps)
            return g, float(chk["step_s"])

        def wrun(_: OpGraph, p: Mapping[str, str], o: Mapping[str, list[str]]) -> list[float]:
            return runtime.run(backend, wmodel, wgraph, p, o, pair).counted_times()

        wide = WideProgram(wgraph, wprofile, wrun)

    return calibrate(
        graph,
        pair,
        blocks,
        profile,
        run,
        lambda prof: gloo_predictor(prof, host_cores, shared_core_slowdown, recv_work, send_wake_s),
        rounds=rounds,
        seed=seed,
        send_share=send_share,
        what=f", transport {transport_policy}, receives read {recv_work}"
        + (f", a send to an idle receiver {send_wake_s * 1e6:.1f} us more" if send_wake_s else ""),
        wide=wide,
        keep_latency=keep_latency,
    )


__all__ = [
    "CALIBRATION_MODEL",
    "InStepCalibration",
    "block_placement",
    "calibrate_in_step",
    "calibration_cluster",
    "fit_message_costs",
    "speed_reference",
    "topo_schedule",
]
