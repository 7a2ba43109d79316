"""Fidelity of the simulator against the process-per-device PyTorch runtime (issue 16).

For every model x cluster: build and capture the model, profile every op in a pinned worker process with the
workers' thread count (`backends.torch.profiler.profile_in_worker`), fit the communication model from the
runtime's own send/recv (`backends.torch.comm.comm_benchmark_distributed`); then for every placer: place,
order (the placer's own order where it replays, else topological), predict the step with
`algorithms.simulator.simulate(..., host_cores=...)` and measure it with
`backends.torch.distributed.TorchDistributedRuntime` (warm-up, then the measured steps: median and IQR).
Prints per run predicted, measured median and IQR, the relative error and predicted/measured peak memory;
per model and cluster the median |predicted - measured| / measured and Kendall's tau between predicted and
measured step times. Uses only the algorithms and backends APIs (and Hydra's compose for the configs).

    python experiments/fidelity.py --models mlp_tiny gnmt_tiny --clusters cpu2 --json /tmp/fidelity.json

Timings need a quiet machine: other processes on the same cores make the measured steps (and the profile)
noisy; the IQR column shows how much. On Linux with autogroup scheduling (``/proc/sys/kernel/
sched_autogroup_enabled`` = 1, the default on desktop and many server kernels) every session is its own
scheduling group and nice values order processes only within a group: other sessions' ``nice -n 19`` does not
give the cores to this measurement. ``--autogroup-nice -20`` writes -20 to ``/proc/self/autogroup`` (needs root
or CAP_SYS_NICE), which raises this session's group, the workers included, above the others.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

log = logging.getLogger("fidelity")

MODELS = ["mlp_tiny", "gnmt_tiny", "transformer_tiny", "inception_v3_tiny"]
PLACERS = ["single", "expert", "m_topo", "m_etf", "m_sct", "celeritas", "heft"]


def refit(
    measured: Any,
    cluster: Any,
    bytes_per_s: float,
    host: int,
    shared_core_slowdown: float,
    send_share: float,
    recv_work: str,
    send_wake_s: float,
) -> tuple[Any, Any, tuple[float, ...]]:
    """A calibration's runs (`InStepCalibration.measured`) fitted again under another model of the workers
    (`recv_work`, `send_wake_s`): the fit, `cluster` with its latency and `bytes_per_s`, and its (send, receive,
    send per byte, receive per byte) costs."""
    from algorithms.cluster import oversubscription
    from backends.calibration import fit_calibration, gloo_predictor

    f2 = fit_calibration(
        measured,
        lambda prof: gloo_predictor(prof, host, shared_core_slowdown, recv_work, send_wake_s),
        send_share=send_share,
        keep_latency=oversubscription(cluster, host) > 1,
        what=f", receives read {recv_work}" + (f", {send_wake_s * 1e6:.1f} us per wake-up" if send_wake_s else ""),
    )
    costs = (f2.send_overhead_s, f2.recv_overhead_s, f2.send_byte_s, f2.recv_byte_s)
    return f2, cluster.with_comm(f2.latency_s, bytes_per_s), costs


def predict(
    graph: Any,
    assignment: dict[str, str],
    sched: Any,
    host_cores: int | None,
    buffers: str,
    cluster: Any,
    costs: tuple[float, ...],
    reads: str,
    **kw: Any,
) -> Any:
    """The simulator's step of the workers: per-message `costs` (send, receive[, send per byte, receive per
    byte]), `reads` on shared cores."""
    from algorithms.simulator import simulate

    return simulate(
        graph,
        cluster,
        assignment,
        sched,
        host_cores=host_cores,
        shared_core_reads=reads,
        send_overhead_s=costs[0],
        recv_overhead_s=costs[1],
        send_byte_s=costs[2] if len(costs) > 2 else 0.0,
        recv_byte_s=costs[3] if len(costs) > 3 else 0.0,
        recv_buffers=buffers,
        **kw,
    )


def save_case(
    folder: Path,
    model: str,
    cluster_name: str,
    placer: str,
    at: tuple[Any, ...],
    cluster: Any,
    costs: tuple[float, ...],
    shared_core_slowdown: float = 0.0,
    extra: dict[str, Any] | None = None,
) -> None:
    """Write what `predict` was given for one run: the mean profile (``<model>_<cluster>.graph.json``, once per
    model and cluster) and ``<model>_<cluster>_<placer>.case.json`` with the placement, the schedule, the
    cluster with its fitted links, the per-message and per-byte costs, the host cores and the receive buffers. The
    rows of ``--json`` hold the measured steps to compare with. `extra`: more keys for the case (fidelity_tf.py:
    the empty step its prediction adds)."""
    from algorithms.graph import atomic_write_json

    graph, assignment, sched, host_cores, buffers = at
    folder.mkdir(parents=True, exist_ok=True)
    gpath = folder / f"{model}_{cluster_name}.graph.json"
    if not gpath.exists():
        graph.save(gpath)
    case = {
        "model": model,
        "cluster_name": cluster_name,
        "placer": placer,
        "graph": gpath.name,
        "placement": dict(assignment),
        "schedule": {d: list(ops) for d, ops in sched.items()},
        "cluster": cluster.to_dict(),
        "send_overhead_s": costs[0],
        "recv_overhead_s": costs[1],
        "send_byte_s": costs[2] if len(costs) > 2 else 0.0,
        "recv_byte_s": costs[3] if len(costs) > 3 else 0.0,
        "host_cores": host_cores,
        "recv_buffers": buffers,
        "shared_core_slowdown": shared_core_slowdown,
        **(extra or {}),
    }
    atomic_write_json(folder / f"{model}_{cluster_name}_{placer}.case.json", case)


def simulate_case(case: dict[str, Any], graph: Any, **kw: Any) -> Any:
    """The simulator's step of a case `save_case` wrote (its `graph` loaded by the caller, who may share it
    between cases), with every option the prediction had; `kw` overrides (e.g. ``shared_core_slowdown``)."""
    from algorithms.cluster import Cluster
    from algorithms.simulator import simulate

    opts = {
        "host_cores": case["host_cores"],
        "send_overhead_s": case["send_overhead_s"],
        "recv_overhead_s": case["recv_overhead_s"],
        "send_byte_s": case.get("send_byte_s", 0.0),
        "recv_byte_s": case.get("recv_byte_s", 0.0),
        "recv_buffers": case["recv_buffers"],
        "shared_core_slowdown": case.get("shared_core_slowdown", 0.0),
        "recv_work": case.get("recv_work", "in_consumer"),
        **kw,
    }
    cluster = Cluster.from_dict(case["cluster"], case["cluster_name"])
    # an empty schedule is no static order (fidelity_tf.py's cases: TensorFlow's executor keeps none)
    return simulate(graph, cluster, case["placement"], case["schedule"] or None, **opts)


def core_switches(sim: Any, cluster: Any, host_cores: int | None) -> int:
    """How often a shared host core passes from one device's worker to another's in the simulated step: per core,
    the ops of the devices pinned to it in start order, counting changes of device (0 when no core is shared).
    What a per-switch cost would multiply; for the cpu4 analysis in docs/fidelity.md."""
    from algorithms.cluster import oversubscription, worker_cores

    if host_cores is None or oversubscription(cluster, host_cores) <= 1:
        return 0
    cores = worker_cores(cluster, range(host_cores))
    n = 0
    for c in range(host_cores):
        devs = {k for k, cs in enumerate(cores) if c in cs}
        seq = sorted((sim.start[i], sim.device_of[i]) for i in range(len(sim.names)) if sim.device_of[i] in devs)
        n += sum(1 for (_, a), (_, b) in zip(seq, seq[1:]) if a != b)
    return n


def compose_cfg(model: str, cluster: str, placer: str) -> Any:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        return compose(
            "config", overrides=[f"model={model}", f"cluster={cluster}", f"placer={placer}", "backend=torch"]
        )


def set_autogroup_nice(nice: int) -> None:
    """Give this session's scheduling autogroup the nice value `nice` (Linux; see the module docstring)."""
    from algorithms.errors import ConfigError

    if not -20 <= nice <= 19:
        raise ConfigError(f"--autogroup-nice must be in -20..19, got {nice}")
    path = Path("/proc/self/autogroup")
    if not path.exists():
        raise ConfigError("--autogroup-nice: this kernel has no /proc/self/autogroup (no autogroup scheduling)")
    try:
        path.write_text(str(nice))
    except OSError as exc:
        raise ConfigError(f"--autogroup-nice {nice}: cannot write {path}: {exc}") from None
    log.warning("scheduling autogroup: %s", path.read_text().strip())


def host_speed_probe(cores: list[int], reps: int = 7) -> float | None:
    """The host's speed now: the median time of a fixed single-thread compute loop (40 products of 192 x 192
    float32 matrices, about 2 ms) on each of `cores` in turn, `reps` times, the median over cores. The caller's
    affinity and thread count are restored. No runtime, no messages: what it moves with is the machine itself
    (a virtual machine's share of its host), which the sweep's rows record beside each profile and run
    (``probe_profile_s``, ``probe_run_s``) so that a prediction can be read against the speed the host had when
    its profile was taken and when the placement ran. None where affinity cannot be set."""
    import torch

    if not hasattr(os, "sched_setaffinity") or not cores:
        return None
    before, threads = os.sched_getaffinity(0), torch.get_num_threads()
    a, b = torch.randn(192, 192), torch.randn(192, 192)
    per_core = []
    try:
        torch.set_num_threads(1)
        for core in cores:
            os.sched_setaffinity(0, {core})
            ts = []
            for _ in range(reps + 2):
                t0 = time.perf_counter()
                for _ in range(40):
                    a @ b
                ts.append(time.perf_counter() - t0)
            per_core.append(statistics.median(ts[2:]))  # the first two warm the caches
    finally:
        os.sched_setaffinity(0, before)
        torch.set_num_threads(threads)
    return statistics.median(per_core)


def kendall_tau(a: list[float], b: list[float]) -> float:
    """Kendall's tau-b between two lists (nan for fewer than two items)."""
    from scipy.stats import kendalltau

    if len(a) < 2:
        return float("nan")
    return float(kendalltau(a, b).statistic)


def order_for(graph: Any, cluster: Any, placement: Any) -> dict[str, list[str]]:
    """The placer's own order where it covers every op and replays, else the topological order per device; a
    tuple's items' op right after its producer either way, as the schedule stage does."""
    from algorithms.errors import LabError
    from algorithms.placement import check_schedule, items_follow_their_producer, topological_schedule
    from algorithms.simulator import simulate

    if placement.order:
        order = {d: list(placement.order.get(d, [])) for d in cluster.names}
        try:
            check_schedule(graph, placement.assignment, order)
            simulate(graph, cluster, placement.assignment, order, record_memory=False)
            return items_follow_their_producer(graph, order)
        except LabError as exc:
            log.info("placer order does not replay (%s); using topological order", exc)
    return items_follow_their_producer(graph, topological_schedule(graph, placement.assignment, cluster.names))


def run(
    models: list[str],
    placers: list[str],
    clusters: list[str],
    warmup: int,
    steps: int,
    repeats: int,
    timeout_s: float = 600.0,
    rounds: int = 1,
    seed: int = 0,
    message_costs: str = "in_step",
    transport_priority: str = "idle",
    save_cases: Path | None = None,
    shared_core_slowdown: float = 0.0,
    cuda_graph: bool = False,
    recv_work: str = "in_consumer",
    comm_from: dict[str, Any] | None = None,
    send_wake: bool = False,
) -> list:
    """The sweep (see the module docstring). With ``rounds`` > 1 the model is profiled again in every round and
    every placement runs once per round, in a new random order each round: this machine's speed drifts by tens
    of percent over seconds and minutes (a fixed loop of small ops measured 20-42 ms on a quiet host), so one
    profile and one run per placement, taken minutes apart, compare two different machines. The prediction uses
    the mean of the rounds' profiles (placements are made on the first), the measured step is the median of
    every round's measured steps, and `profile_step_s` lists each round's single-device step (the drift).
    `host_speed_probe` times a fixed compute loop on the workers' cores before every profile and every run; each
    row gets the ratio (median probe before its runs / mean probe before the profiles) and the prediction scaled
    by it (``predicted_at_run_speed_s``): how much of a run's error the host's own change of speed explains. It
    is printed beside the prediction, never used as it.
    `save_cases`: a folder that gets what the prediction of every run used (`save_case`), so that another model
    of the runtime can be tried on the same measurements later without measuring again.

    `message_costs`: where the per-message send / receive processor time comes from: ``"in_step"`` (the
    default) fits it to the runtime's own placed steps of a synthetic calibration program
    (`backends.torch.calibrate.calibrate_in_step`, after the hop's fit); ``"benchmark"`` takes the busy-worker
    benchmark's (`comm.comm_benchmark_distributed`). `transport_priority`: the runtime's (and the
    benchmarks') gloo transport-thread policy (`backends.torch.worker.lower_transport_threads`).
    `recv_work`: where the simulator spends a receive's processor time (`simulate(recv_work=...)`), under which
    the in-step costs are fitted; each row also has the other model's prediction with its own fit of the same
    calibration runs (``predicted_other_recv_work_s``).
    `shared_core_slowdown`: the simulator's charge for time-sharing a core (`algorithms.simulator`), used by the
    in-step calibration's fit and by the predictions; each row also has the prediction without it
    (``predicted_no_slowdown_s``, the same message costs). `cuda_graph`: GPU clusters only, the runs replay the
    step as a CUDA graph and the profile times ops in a graph (`backends.torch.cudagraph`).

    The machine's speed at each profile and at the calibration (session 43): after every profile round the wide
    calibration program's single-device step is timed in the calibration's workers' setting
    (`backends.torch.calibrate.speed_reference`); each row gets the in-step costs rescaled by the mean of those
    over the calibration's own (`backends.calibration.rescale_factor`, ``profiler.comm_rescale=reference``) and
    the prediction with them (``predicted_rescaled_s``). `comm_from`: {cluster: {"comm_fit": [...], "speed_reference_s":
    ...}} of an earlier sweep (`load_comm_from`): its in-step costs are used instead of calibrating again (the
    ping-pong still runs, for the benchmark's rows), so a sweep can be predicted with another hour's fit.
    `send_wake` (`profiler.comm_send_wake`; off by default, session 43): after the calibration, time a send to
    an idle and to a computing receiver (`backends.torch.wake.send_wake_cost`), refit the in-step message costs on
    the same calibration runs with the difference charged per message to an idle receiver
    (`simulate(send_wake_s=...)`), and make that the row's prediction (``predicted_s``, ``error``,
    ``predicted_wake_s``); the fit without it stays beside (``predicted_no_wake_s``), and the rows' other variants
    (benchmark costs, ping-pong latency, receive models, rescaled, no per-byte costs, no slowdown) are of that
    fit."""
    import random

    import hydra.utils
    import torch
    from omegaconf import OmegaConf

    from algorithms.cluster import Cluster
    from algorithms.errors import ConfigError
    from algorithms.simulator import simulate
    from backends.calibration import rescale_factor
    from backends.profilers import mean_profile
    from backends.torch import TorchBackend
    from backends.torch.calibrate import calibrate_in_step, speed_reference
    from backends.torch.comm import comm_benchmark_distributed
    from backends.torch.distributed import TorchDistributedRuntime, iqr, uses_cuda
    from backends.torch.profiler import profile_graph, profile_in_worker, worker_setting

    host = len(os.sched_getaffinity(0))
    backend = TorchBackend(threads=1)
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    fits: dict[str, Any] = {}
    for cl_name in clusters:
        base = compose_cfg(models[0], cl_name, "single")
        cluster = Cluster.from_dict(OmegaConf.to_container(base.cluster, resolve=True), cl_name)
        cuda = uses_cuda(cluster)  # GPU workers on NCCL: CUDA-event profile and times, NCCL ping-pong fit
        fit = comm_benchmark_distributed(cluster, repeats=repeats, transport_policy=transport_priority, cuda=cuda)
        cluster = cluster.with_comm(fit.latency_s, fit.bytes_per_s)
        send_s, recv_s = fit.send_overhead_s, fit.recv_overhead_s
        calibration: dict[str, Any] = {}
        fixed_costs = (send_s, recv_s)
        byte_costs = (0.0, 0.0)  # per byte sent / received: the in-step calibration's wide program
        # where a receive's processor time goes (`simulate(recv_work=)`); with the in-step costs the other model
        # (bytes_when_idle beside in_consumer, else in_consumer) is refitted on the same calibration runs and
        # predicted beside it
        work = recv_work if message_costs == "in_step" and not cuda else "in_consumer"
        other_work = "in_consumer" if work != "in_consumer" else "bytes_when_idle"
        other_fit: tuple[Any, tuple[float, ...]] | None = None
        cal_reference = math.nan  # the wide program's single-device step at the calibration
        wake_fit: tuple[Any, tuple[float, ...], float] | None = None  # (cluster, costs, send_wake_s)
        if comm_from is not None and message_costs == "in_step" and not cuda and len(cluster.devices) > 1:
            if cl_name not in comm_from:
                raise ConfigError(f"--comm-from has no fit of cluster {cl_name!r} (it has {sorted(comm_from)})")
            lat0, _, send_s, recv_s, *bc = comm_from[cl_name]["comm_fit"]
            byte_costs = (float(bc[0]), float(bc[1])) if len(bc) >= 2 else (0.0, 0.0)
            cal_reference = float(comm_from[cl_name].get("speed_reference_s") or math.nan)
            cluster = cluster.with_comm(float(lat0), fit.bytes_per_s)
            calibration = {
                "from": comm_from[cl_name].get("source"),
                "speed_reference_s": cal_reference if math.isfinite(cal_reference) else None,
            }
            print(
                f"{cl_name}: in-step costs from {calibration['from']}: hop latency {lat0 * 1e3:.3g} ms, send "
                f"{send_s * 1e6:.1f} us, receive {recv_s * 1e6:.1f} us per message, {byte_costs[0] * 1e9:.2f} / "
                f"{byte_costs[1] * 1e9:.2f} ns per byte; wide program's step then {cal_reference * 1e3:.4g} ms",
                flush=True,
            )
        elif message_costs == "in_step" and not cuda and len(cluster.devices) > 1:
            total = fit.send_overhead_s + fit.recv_overhead_s
            cal = calibrate_in_step(
                cluster,
                transport_policy=transport_priority,
                rounds=rounds,
                warmup=warmup,
                steps=steps,
                seed=seed,
                send_share=fit.send_overhead_s / total if total > 0 else 0.5,
                shared_core_slowdown=shared_core_slowdown,
                recv_work=work,
            )
            share = fit.send_overhead_s / total if total > 0 else 0.5
            if cal.measured is not None:
                alt, alt_cluster, alt_costs = refit(
                    cal.measured, cluster, fit.bytes_per_s, host, shared_core_slowdown, share, other_work, 0.0
                )
                other_fit = (alt_cluster, alt_costs)
                print(
                    f"{cl_name}: refitted with receives read {other_work}: hop latency {alt.latency_s * 1e3:.3g} ms, "
                    f"send {alt.send_overhead_s * 1e6:.1f} us, receive {alt.recv_overhead_s * 1e6:.1f} us per "
                    f"message, {alt.send_byte_s * 1e9:.2f} / {alt.recv_byte_s * 1e9:.2f} ns per byte; calibration "
                    f"relative RMS {100 * alt.rel_rms:.1f}%, wide program {100 * alt.rel_rms_bytes:.1f}%",
                    flush=True,
                )
            if send_wake and cal.measured is not None:
                from backends.torch.wake import send_wake_cost

                to_idle, to_busy = send_wake_cost()
                wake_s = max(0.0, to_idle - to_busy)
                wk, wk_cluster, wk_costs = refit(
                    cal.measured, cluster, fit.bytes_per_s, host, shared_core_slowdown, share, work, wake_s
                )
                wake_fit = (wk_cluster, wk_costs, wake_s)
                print(
                    f"{cl_name}: isend of 1 KB to an idle receiver {to_idle * 1e6:.1f} us, to a computing one "
                    f"{to_busy * 1e6:.1f} us; refitted with {wake_s * 1e6:.1f} us per send to an idle receiver: hop "
                    f"latency {wk.latency_s * 1e3:.3g} ms, send {wk.send_overhead_s * 1e6:.1f} us, receive "
                    f"{wk.recv_overhead_s * 1e6:.1f} us per message, {wk.send_byte_s * 1e9:.2f} / "
                    f"{wk.recv_byte_s * 1e9:.2f} ns per byte; calibration relative RMS {100 * wk.rel_rms:.1f}%, wide "
                    f"program {100 * wk.rel_rms_bytes:.1f}%",
                    flush=True,
                )
            send_s, recv_s = cal.send_overhead_s, cal.recv_overhead_s
            byte_costs = (cal.send_byte_s, cal.recv_byte_s)
            cal_reference = cal.speed_reference_s
            calibration = {
                "speed_reference_s": cal.speed_reference_s,
                "wide_step_s": cal.measured.wide_step_s if cal.measured is not None else [],
                "rel_rms": cal.rel_rms,
                "placements": cal.placements,
                "latency_s": cal.latency_s,
                "fixed_latency": [fit.latency_s, cal.send_fixed_latency_s, cal.recv_fixed_latency_s],
                "rel_rms_fixed_latency": cal.rel_rms_fixed_latency,
                "send_byte_s": cal.send_byte_s,
                "recv_byte_s": cal.recv_byte_s,
                "byte_placements": cal.byte_placements,
                "rel_rms_bytes": cal.rel_rms_bytes,
                "recv_work": work,
                # the other model's fit of the same calibration runs (latency, send, receive, per byte)
                "other_recv_work": [other_work, *([other_fit[0].latency_s, *other_fit[1]] if other_fit else [])],
            }
            fixed_costs = (cal.send_fixed_latency_s, cal.recv_fixed_latency_s)
            print(
                f"{cl_name}: with the ping-pong latency kept: send {fixed_costs[0] * 1e6:.1f} us, receive "
                f"{fixed_costs[1] * 1e6:.1f} us, calibration relative RMS {100 * cal.rel_rms_fixed_latency:.1f}%",
                flush=True,
            )
            print(
                f"{cl_name}: in-step hop latency {cal.latency_s * 1e3:.3g} ms "
                f"(ping-pong {fit.latency_s * 1e3:.3g} ms), "
                f"message costs send {send_s * 1e6:.1f} us, receive {recv_s * 1e6:.1f} us "
                f"(benchmark: {fit.send_overhead_s * 1e6:.1f} / {fit.recv_overhead_s * 1e6:.1f} us); calibration "
                f"relative RMS {100 * cal.rel_rms:.1f}%: "
                + ", ".join(
                    f"{r['messages']} msgs {1e3 * r['measured_s']:.3g}/{1e3 * r['predicted_s']:.3g} ms"
                    for r in cal.placements
                ),
                flush=True,
            )
            print(
                f"{cl_name}: per byte send {cal.send_byte_s * 1e9:.2f} ns, receive {cal.recv_byte_s * 1e9:.2f} ns; "
                f"wide program relative RMS {100 * cal.rel_rms_bytes:.1f}%: "
                + ", ".join(
                    f"{r['messages']} msgs {1e3 * r['measured_s']:.3g}/{1e3 * r['predicted_s']:.3g} ms "
                    f"({1e3 * r['predicted_without_byte_costs_s']:.3g} without)"
                    for r in cal.byte_placements
                ),
                flush=True,
            )
            cluster = cluster.with_comm(cal.latency_s, fit.bytes_per_s)
        elif message_costs not in ("benchmark", "in_step"):
            raise ConfigError(f"--message-costs must be 'in_step' or 'benchmark', got {message_costs!r}")
        fits[cl_name] = (cluster.latency_s, fit.bytes_per_s, send_s, recv_s, *byte_costs)
        # the benchmark-only model (ping-pong hop, busy-worker message costs), predicted beside it for comparison
        bench_cluster = cluster.with_comm(fit.latency_s, fit.bytes_per_s)
        bench_costs = (fit.send_overhead_s, fit.recv_overhead_s)
        print(
            f"{cl_name}: hop latency {cluster.latency_s * 1e3:.3g} ms, {fit.bytes_per_s / 1e9:.3g} GB/s; per message "
            f"send {send_s * 1e6:.1f} us, receive {recv_s * 1e6:.1f} us ({message_costs})",
            flush=True,
        )
        for model_name in models:
            cfg = compose_cfg(model_name, cl_name, "single")
            model = backend.build(OmegaConf.to_container(cfg.model, resolve=True))
            graph = backend.capture(model)
            setting = worker_setting(cluster, cuda=cuda, cuda_graph=cuda_graph)
            sync_graph = None
            if cuda:  # for comparison: every op between two synchronisations, in this process
                try:
                    sync_graph = profile_graph(
                        model, graph, granularity=backend.granularity, device=torch.device("cuda"), warmup=warmup,
                        steps=steps,
                    )  # fmt: skip
                except Exception as exc:  # the comparison only; the measurement goes on
                    log.warning("%s: the synchronised GPU profile failed: %s", model_name, exc)
            profiled, checks = [], []
            placements: dict[str, Any] = {}
            place_s: dict[str, float] = {}
            results: dict[str, list[Any]] = {}
            probe_cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
            probes_profile: list[float | None] = []
            references: list[float] = []  # the wide program's single-device step after each profile round
            probes_run: dict[str, list[float | None]] = {}
            for rnd in range(rounds):
                probes_profile.append(host_speed_probe(probe_cores))
                g, check = profile_in_worker(model, graph, setting=setting, warmup=warmup, steps=steps)
                profiled.append(g)
                checks.append(check)
                if math.isfinite(cal_reference):
                    references.append(speed_reference(cluster, warmup=warmup, steps=steps, timeout_s=timeout_s))
                log.info(
                    "%s round %d profile check: sum of ops %.4g s, single-device step %.4g s",
                    model_name,
                    rnd,
                    check["sum_op_s"],
                    check["step_s"],
                )
                if rnd == 0:
                    for placer_name in placers:
                        pcfg = compose_cfg(model_name, cl_name, placer_name)
                        t0 = time.perf_counter()
                        try:
                            placements[placer_name] = hydra.utils.instantiate(pcfg.placer).place(g, cluster)
                        except Exception as exc:  # a placer that cannot place this model: reported, not fatal
                            log.warning("%s/%s/%s: placement failed: %s", model_name, cl_name, placer_name, exc)
                            continue
                        place_s[placer_name] = time.perf_counter() - t0
                order = list(placements)
                rng.shuffle(order)
                for placer_name in order:
                    placement = placements[placer_name]
                    probes_run.setdefault(placer_name, []).append(host_speed_probe(probe_cores))
                    res = TorchDistributedRuntime(
                        warmup=warmup,
                        steps=steps,
                        timeout_s=timeout_s,
                        transport_priority=transport_priority,
                        cuda_graph=cuda_graph,
                    ).run(backend, model, graph, placement.assignment, order_for(g, cluster, placement), cluster)
                    results.setdefault(placer_name, []).append(res)
            mean_graph = mean_profile(profiled)
            # the gloo workers post every receive before the step (these clusters set no memory limit, so the
            # default post_receives=within_limit posts them all up front after the first warm-up step); NCCL
            # workers when a value is first needed
            buffers = "arrival" if cuda else "step_start"
            # messages read on arrival; the other rule (read when a shared core idles) printed beside it
            reads = "at_arrival"
            # the in-step costs rescaled to the profiles' speed (profiler.comm_rescale=reference)
            scale = rescale_factor(statistics.fmean(references), cal_reference) if references else None
            for placer_name, placement in placements.items():
                sched = order_for(mean_graph, cluster, placement)
                at = (mean_graph, placement.assignment, sched, None if cuda else host, buffers)
                costs = (send_s, recv_s, *byte_costs)
                if save_cases is not None:
                    save_case(
                        save_cases, model_name, cl_name, placer_name, at, cluster, costs, shared_core_slowdown,
                        {"recv_work": work},
                    )  # fmt: skip
                slow: dict[str, Any] = {"shared_core_slowdown": shared_core_slowdown, "recv_work": work}
                sim = predict(*at, cluster, costs, reads, **slow)
                sim_plain = predict(*at, cluster, costs, reads, record_memory=False, recv_work=work)
                sim_no_bytes = predict(*at, cluster, (send_s, recv_s), reads, record_memory=False, **slow)
                sim_wake = (
                    predict(*at, wake_fit[0], wake_fit[1], reads, record_memory=False, send_wake_s=wake_fit[2], **slow)
                    if wake_fit is not None
                    else None
                )
                sim_rescaled = (
                    predict(*at, cluster, tuple(scale * c for c in costs), reads, record_memory=False, **slow)
                    if scale is not None
                    else None
                )
                sim_bench = predict(*at, bench_cluster, bench_costs, reads, record_memory=False, **slow)
                sim_fixed = predict(*at, bench_cluster, fixed_costs, reads, record_memory=False, **slow)
                # shared cores: the other reading rule, for comparison (the same as `sim` when no core is shared;
                # only where the consumer pays a receive's time, recv_work)
                other = "at_arrival" if reads == "when_idle" else "when_idle"
                sim_other_reads = (
                    predict(*at, cluster, costs, other, record_memory=False, **slow) if work == "in_consumer" else None
                )
                # the other model of where a receive's time goes, with its own fit of the same calibration runs
                sim_other_work = (
                    predict(
                        *at,
                        other_fit[0],
                        other_fit[1],
                        reads,
                        record_memory=False,
                        shared_core_slowdown=shared_core_slowdown,
                        recv_work=other_work,
                    )  # fmt: skip
                    if other_fit is not None
                    else None
                )
                sim_sync = (
                    simulate(sync_graph, cluster, placement.assignment, sched, record_memory=False)
                    if sync_graph is not None
                    else None
                )
                runs = results[placer_name]
                times = [t for res in runs for t in res.counted_times()]  # slow spells left out
                measured = statistics.median(times)
                used = sorted({placement.assignment[o] for o in graph.ops})
                # the prediction at the speed the host had during this placement's runs (probe before each run)
                # rather than during the profiles: a diagnostic of drift, not the lab's prediction
                p_prof = [p for p in probes_profile if p]
                p_run = [p for p in probes_run.get(placer_name, []) if p]
                drift = statistics.median(p_run) / statistics.fmean(p_prof) if p_prof and p_run else None
                rows.append(
                    {
                        "model": model_name,
                        "cluster": cl_name,
                        "placer": placer_name,
                        "devices_used": len(used),
                        "predicted_s": sim.makespan,
                        "predicted_benchmark_s": sim_bench.makespan,
                        "predicted_fixed_latency_s": sim_fixed.makespan,
                        "shared_core_reads": reads,
                        "core_switches": core_switches(sim, cluster, None if cuda else host),
                        "predicted_other_reads_s": sim_other_reads.makespan if sim_other_reads else None,
                        "recv_work": work,
                        "predicted_other_recv_work_s": sim_other_work.makespan if sim_other_work else None,
                        "shared_core_slowdown": shared_core_slowdown,
                        "predicted_no_slowdown_s": sim_plain.makespan,
                        "predicted_no_byte_costs_s": sim_no_bytes.makespan,
                        "speed_reference_profile_s": references,
                        "speed_reference_calibration_s": cal_reference if math.isfinite(cal_reference) else None,
                        "rescale": scale,
                        "predicted_rescaled_s": sim_rescaled.makespan if sim_rescaled is not None else None,
                        "send_wake_s": wake_fit[2] if wake_fit is not None else None,
                        "wake_costs": list(wake_fit[1]) + [wake_fit[0].latency_s] if wake_fit is not None else None,
                        "predicted_wake_s": sim_wake.makespan if sim_wake is not None else None,
                        "predicted_no_wake_s": sim.makespan,
                        "probe_profile_s": probes_profile,
                        "probe_run_s": probes_run.get(placer_name, []),
                        "host_speed_ratio": drift,
                        "predicted_at_run_speed_s": sim.makespan * drift if drift else None,
                        "device": "cuda" if cuda else "cpu",
                        # GPU: the ops timed between synchronisations (`profile_graph`), for comparison
                        "predicted_sync_s": sim_sync.makespan if sim_sync is not None else None,
                        # GPU: the step on the host's clock (`measured_s` is CUDA-event time there)
                        "wall_s": statistics.median(res.extra["wall_step_s"] for res in runs),
                        "transfers": len(sim.transfers),
                        "measured_s": measured,
                        "iqr_s": iqr(times),
                        "round_medians_s": [res.measured_step_s for res in runs],
                        # per round, the steps a slow spell of a core touched, left out (backends.interference)
                        "slow_steps": [len(res.slow_steps) for res in runs],
                        # per round, whether slow spells prevailed then (every step counted, in runs and profiles)
                        "spells_prevail": [res.extra.get("spells_prevail") for res in runs],
                        "error": (sim.makespan - measured) / measured,
                        # GPU workers: plus what the allocator holds beside the tensors (cuBLAS workspaces,
                        # backends/torch/cuda_memory.py), which its measured peak counts
                        "predicted_peak": max(
                            v + runs[0].extra.get("framework_reserve_bytes", {}).get(d, 0.0)
                            for d, v in sim.peak_memory.items()
                        ),
                        "measured_peak": max(max(res.peak_memory_bytes.values()) for res in runs),
                        # the workers' own count of live tensor bytes (on a GPU the allocator's peak above also
                        # holds cuBLAS's workspace and the allocator's rounding)
                        "measured_tensor_peak": max(max(res.extra["tensor_peak_bytes"].values()) for res in runs),
                        # GPU workers: the allocator's peak of the bytes the tensors asked for (no rounding), in
                        # the steps after the first (worker.allocator_peaks); None on CPUs
                        "measured_requested_peak": _requested_peak(runs),
                        "correct": all(res.extra.get("correct") for res in runs),
                        "oversubscribed": runs[0].extra.get("oversubscribed"),
                        # the share of the workers' cores other processes took, per round (backends.interference;
                        # the runtime repeats a run above 5 %) and per profile round
                        "interference": [res.extra.get("host_interference") for res in runs],
                        "interference_attempts": [res.extra.get("interference_attempts") for res in runs],
                        "profile_interference": [c.get("host_interference") for c in checks],
                        "profile_sum_s": [c["sum_op_s"] for c in checks],
                        "profile_step_s": [c["step_s"] for c in checks],
                        "profile_sum_median_s": [c["sum_op_median_s"] for c in checks],
                        "place_s": place_s[placer_name],
                        "comm_fit": fits[cl_name],
                        "calibration": calibration,
                    }
                )
                r = rows[-1]
                if sim_wake is not None:  # the lab's default prediction is the headline
                    r["predicted_s"] = sim_wake.makespan
                    r["error"] = (sim_wake.makespan - measured) / measured
                print(
                    f"{model_name:18s} {cl_name:5s} {placer_name:10s} dev={r['devices_used']} "
                    f"pred={r['predicted_s'] * 1e3:8.3f} ms  meas={r['measured_s'] * 1e3:8.3f} ms "
                    f"(IQR {r['iqr_s'] * 1e3:6.3f})  err={100 * r['error']:+6.1f}%  "
                    f"[benchmark costs: pred={r['predicted_benchmark_s'] * 1e3:8.3f} ms "
                    f"err={100 * (r['predicted_benchmark_s'] / r['measured_s'] - 1):+6.1f}%]  "
                    f"[ping-pong latency: err={100 * (r['predicted_fixed_latency_s'] / r['measured_s'] - 1):+6.1f}%]  "
                    + (
                        f"[reads {'at arrival' if reads == 'when_idle' else 'when idle'}: "
                        f"err={100 * (r['predicted_other_reads_s'] / r['measured_s'] - 1):+6.1f}%]  "
                        if r["predicted_other_reads_s"]
                        else ""
                    )
                    + (
                        f"[receives read {other_work}, refitted: "
                        f"err={100 * (r['predicted_other_recv_work_s'] / r['measured_s'] - 1):+6.1f}%]  "
                        if r["predicted_other_recv_work_s"]
                        else ""
                    )
                    + "[no shared-core slowdown: "
                    f"err={100 * (r['predicted_no_slowdown_s'] / r['measured_s'] - 1):+6.1f}%]  "
                    f"[no per-byte costs: "
                    f"err={100 * (r['predicted_no_byte_costs_s'] / r['measured_s'] - 1):+6.1f}%]  "
                    + (
                        f"[at the runs' host speed (x{drift:.3f}): "
                        f"err={100 * (r['predicted_at_run_speed_s'] / r['measured_s'] - 1):+6.1f}%]  "
                        if drift
                        else ""
                    )
                    + (
                        f"[costs rescaled x{scale:.3f}: "
                        f"err={100 * (r['predicted_rescaled_s'] / r['measured_s'] - 1):+6.1f}%]  "
                        if scale is not None
                        else ""
                    )
                    + (
                        f"[no wake-up charge: err={100 * (r['predicted_no_wake_s'] / r['measured_s'] - 1):+6.1f}%]  "
                        if r["predicted_wake_s"]
                        else ""
                    )
                    + f"msgs={r['transfers']}  "
                    f"mem pred/meas={r['predicted_peak']:.3g}/{r['measured_peak']:.3g} B  correct={r['correct']}  "
                    f"others' share of the cores {_shares(r['interference'])}"
                    + (
                        f"  [GPU: ops between syncs: pred={r['predicted_sync_s'] * 1e3:8.3f} ms "
                        f"err={100 * (r['predicted_sync_s'] / r['measured_s'] - 1):+6.1f}%; "
                        f"host-clock step {r['wall_s'] * 1e3:8.3f} ms; tensor peak {r['measured_tensor_peak']:.3g} B; "
                        f"allocator's requested peak {r['measured_requested_peak'] or float('nan'):.4g} B]"
                        if r["predicted_sync_s"] is not None
                        else ""
                    ),
                    flush=True,
                )
            steps_ms = ", ".join(f"{1e3 * c['step_s']:.3g}" for c in checks)
            probe_ms = ", ".join("-" if p is None else f"{1e3 * p:.3f}" for p in probes_profile)
            ref_ms = ", ".join(f"{1e3 * x:.4g}" for x in references) or "-"
            print(
                f"{model_name:18s} {cl_name:5s} profiled single-device step per round: {steps_ms} ms (others' share "
                f"of the cores {_shares([c.get('host_interference') for c in checks])}; "
                f"host-speed probe {probe_ms} ms; wide program's step {ref_ms} ms, at the calibration "
                f"{1e3 * cal_reference:.4g} ms)",
                flush=True,
            )
    return rows


def _requested_peak(runs: list[Any]) -> float | None:
    """The largest allocator 'requested' peak of the later steps over the runs' GPU workers, None without one."""
    vals = [
        p["later_steps"]["requested"]
        for res in runs
        for p in (res.extra.get("allocator_peaks_bytes") or {}).values()
        if p and p.get("later_steps")
    ]
    return max(vals) if vals else None


def _shares(xs: list[float | None]) -> str:
    return "/".join("-" if x is None else f"{100 * x:.0f}%" for x in xs)


def resolved(rs: list[dict[str, Any]]) -> tuple[float | None, int, int]:
    """`orchestrator.report.fidelity.resolved_order` of one model's runs: tau over the pairs whose measured
    medians differ by more than the larger IQR, the number of those pairs and how many the prediction reverses."""
    from orchestrator.report.fidelity import resolved_order

    as_report = [
        {
            "model": r["model"],
            "cluster": r["cluster"],
            "params": {},
            "status": "ok",
            "predicted_step_s": r["predicted_s"],
            "measured_step_s": r["measured_s"],
            "measured_step_iqr_s": r["iqr_s"],
        }
        for r in rs
    ]
    tau, pairs, _, reversed_pairs = resolved_order(as_report)
    return tau, pairs, reversed_pairs


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    keys = sorted({(r["model"], r["cluster"]) for r in rows})
    for model, cl in keys:
        rs = [r for r in rows if r["model"] == model and r["cluster"] == cl]
        errs = [abs(r["error"]) for r in rs]
        mem = [abs(r["predicted_peak"] - r["measured_peak"]) / r["measured_peak"] for r in rs if r["measured_peak"]]
        tau_resolved, pairs_resolved, pairs_reversed = resolved(rs)
        out.append(
            {
                "model": model,
                "cluster": cl,
                "runs": len(rs),
                "median_abs_error": statistics.median(errs),
                "kendall_tau": kendall_tau([r["predicted_s"] for r in rs], [r["measured_s"] for r in rs]),
                "kendall_tau_resolved": tau_resolved,
                "pairs": len(rs) * (len(rs) - 1) // 2,
                "pairs_resolved": pairs_resolved,
                "pairs_reversed": pairs_reversed,
                "median_abs_error_benchmark": statistics.median(
                    abs(r["predicted_benchmark_s"] - r["measured_s"]) / r["measured_s"] for r in rs
                ),
                "median_abs_error_fixed_latency": statistics.median(
                    abs(r["predicted_fixed_latency_s"] - r["measured_s"]) / r["measured_s"] for r in rs
                ),
                "kendall_tau_fixed_latency": kendall_tau(
                    [r["predicted_fixed_latency_s"] for r in rs], [r["measured_s"] for r in rs]
                ),
                "kendall_tau_benchmark": kendall_tau(
                    [r["predicted_benchmark_s"] for r in rs], [r["measured_s"] for r in rs]
                ),
                "median_abs_memory_error": statistics.median(mem) if mem else float("nan"),
                "median_abs_error_no_slowdown": statistics.median(
                    abs(r.get("predicted_no_slowdown_s", r["predicted_s"]) - r["measured_s"]) / r["measured_s"]
                    for r in rs
                ),
                "kendall_tau_no_slowdown": kendall_tau(
                    [r.get("predicted_no_slowdown_s", r["predicted_s"]) for r in rs], [r["measured_s"] for r in rs]
                ),
                "median_abs_error_other_recv_work": (
                    statistics.median(
                        abs(r["predicted_other_recv_work_s"] - r["measured_s"]) / r["measured_s"] for r in rs
                    )
                    if all(r.get("predicted_other_recv_work_s") for r in rs)
                    else None
                ),
                "median_abs_error_at_run_speed": (
                    statistics.median(
                        abs(r["predicted_at_run_speed_s"] - r["measured_s"]) / r["measured_s"] for r in rs
                    )
                    if all(r.get("predicted_at_run_speed_s") for r in rs)
                    else None
                ),
            }
        )
    return out


def load_comm_from(path: Path, reference_s: float | None = None) -> dict[str, Any]:
    """Per cluster, the in-step fit an earlier sweep's --json recorded (its rows' ``comm_fit``: latency, bandwidth,
    send, receive, send and receive per byte) and the wide program's step at its calibration
    (``calibration.speed_reference_s``; None in sweeps before session 43; `reference_s` replaces it), for
    `run(comm_from=...)`."""
    data = json.loads(Path(path).read_text())
    out: dict[str, Any] = {}
    for r in data.get("rows", []):
        cal = r.get("calibration") or {}
        out.setdefault(
            r["cluster"],
            {
                "comm_fit": r["comm_fit"],
                "speed_reference_s": reference_s if reference_s is not None else cal.get("speed_reference_s"),
                "source": str(path),
            },
        )
    if not out:
        raise SystemExit(f"--comm-from {path}: no rows")
    return out


def main(argv: list[str] | None = None) -> int:
    from algorithms.simulator import RECV_WORK

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--placers", nargs="+", default=PLACERS)
    ap.add_argument("--clusters", nargs="+", default=["cpu2"])
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--comm-repeats", type=int, default=5)
    ap.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="profile and run every placement this many times, interleaved (5: this VM's slow spells of about "
        "a second made two rounds of one placement 60 %% apart; experiments/repeat_run.py)",
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one placed run may take")
    ap.add_argument("--json", type=Path, default=None, help="write rows and summary here")
    ap.add_argument("--save-cases", type=Path, default=None, help="write each run's prediction inputs here")
    ap.add_argument(
        "--autogroup-nice",
        type=int,
        default=None,
        help="write this nice value to /proc/self/autogroup first (see the module docstring)",
    )
    ap.add_argument(
        "--message-costs",
        choices=["in_step", "benchmark"],
        default="in_step",
        help="per-message processor time: fitted to placed steps of a calibration program, or the busy benchmark's",
    )
    ap.add_argument(
        "--transport-priority",
        choices=["idle", "nice", "normal"],
        default="idle",
        help="gloo transport threads of the runtime and the benchmarks (worker.lower_transport_threads)",
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the rounds' random run order")
    ap.add_argument(
        "--shared-core-slowdown",
        type=float,
        default=None,
        help="the simulator's charge for time-sharing a core (algorithms.simulator), in calibration and predictions "
        "(default: the measured profiler's comm_shared_core_slowdown, conf/profiler/measured.yaml)",
    )
    ap.add_argument(
        "--cuda-graph",
        action="store_true",
        help="GPU clusters: replay each step as a CUDA graph, profile ops in one (runtime.cuda_graph)",
    )
    ap.add_argument(
        "--recv-work",
        choices=list(RECV_WORK),
        default="in_consumer",
        help="where the simulator spends a receive's processor time (algorithms.simulator, recv_work); the other "
        "model is refitted on the same calibration runs and printed beside it",
    )
    ap.add_argument(
        "--comm-from",
        type=Path,
        default=None,
        help="an earlier sweep's --json: use its in-step costs (and the speed they were measured at) instead of "
        "calibrating again",
    )
    ap.add_argument(
        "--comm-from-reference",
        type=float,
        default=None,
        help="seconds: the wide program's single-device step to take as --comm-from's calibration reference, for "
        "sweeps made before it was recorded (e.g. estimated from their calibration's one-device placement)",
    )
    ap.add_argument(
        "--send-wake",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="time a send to an idle and to a computing receiver, refit the in-step costs with the difference "
        "charged per send to an idle receiver and predict with it, the fit without it beside (backends.torch.wake, "
        "profiler.comm_send_wake; off by default since session 43's replicate)",
    )
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    if args.autogroup_nice is not None:
        set_autogroup_nice(args.autogroup_nice)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    load = os.getloadavg()[0]
    group = Path("/proc/self/autogroup")
    where = group.read_text().strip() if group.exists() else "no autogroup"
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}: host cores {len(os.sched_getaffinity(0))}, "
        f"load average {load:.2f}, {where}; {' '.join(sys.argv[1:] if argv is None else argv)}",
        flush=True,
    )
    slowdown = args.shared_core_slowdown
    if slowdown is None:
        from omegaconf import OmegaConf

        prof = OmegaConf.load(Path(__file__).resolve().parents[1] / "conf" / "profiler" / "measured.yaml")
        slowdown = float(prof.get("comm_shared_core_slowdown", 0.0))
    rows = run(
        args.models,
        args.placers,
        args.clusters,
        args.warmup,
        args.steps,
        args.comm_repeats,
        args.timeout,
        rounds=args.rounds,
        seed=args.seed,
        message_costs=args.message_costs,
        shared_core_slowdown=slowdown,
        transport_priority=args.transport_priority,
        save_cases=args.save_cases,
        cuda_graph=args.cuda_graph,
        recv_work=args.recv_work,
        comm_from=load_comm_from(args.comm_from, args.comm_from_reference) if args.comm_from else None,
        send_wake=args.send_wake,
    )
    summary = summarise(rows)
    print(
        f"\nmodel              cluster runs  median|err|  tau    pairs resolved (reversed), tau over them  "
        f"median|mem err|  "
        f"(benchmark costs only: median|err|  tau)  (ping-pong latency: median|err|  tau)  "
        f"[message costs: {args.message_costs}]"
    )
    for s in summary:
        print(
            f"{s['model']:18s} {s['cluster']:7s} {s['runs']:4d}  {100 * s['median_abs_error']:9.1f}%  "
            f"{s['kendall_tau']:+.2f}  {s['pairs_resolved']:2d}/{s['pairs']:2d} ({s['pairs_reversed']}), "
            + ("   -" if s["kendall_tau_resolved"] is None else f"{s['kendall_tau_resolved']:+.2f}")
            + f"              {100 * s['median_abs_memory_error']:9.1f}%          "
            f"{100 * s['median_abs_error_benchmark']:9.1f}%  {s['kendall_tau_benchmark']:+.2f}          "
            f"{100 * s['median_abs_error_fixed_latency']:9.1f}%  {s['kendall_tau_fixed_latency']:+.2f}"
            + (
                f"  (no shared-core slowdown: {100 * s['median_abs_error_no_slowdown']:.1f}% "
                f"{s['kendall_tau_no_slowdown']:+.2f})"
                if slowdown
                else ""
            )
            + (
                f"  (at the runs' host speed: {100 * s['median_abs_error_at_run_speed']:.1f}%)"
                if s.get("median_abs_error_at_run_speed") is not None
                else ""
            )
            + (
                f"  (receives read the other way, refitted: {100 * s['median_abs_error_other_recv_work']:.1f}%)"
                if s.get("median_abs_error_other_recv_work") is not None
                else ""
            )
        )
    for cl in sorted({r["cluster"] for r in rows}):
        rs = [r for r in rows if r["cluster"] == cl]
        line = f"{cl}: median |err| over all {len(rs)} runs {100 * statistics.median(abs(r['error']) for r in rs):.1f}%"
        line += f" (receives read {rs[0].get('recv_work', 'in_consumer')})"
        per_model: list[str] = []
        if all(r.get("predicted_other_recv_work_s") for r in rs):
            other = statistics.median(abs(r["predicted_other_recv_work_s"] / r["measured_s"] - 1) for r in rs)
            line += f"; the other model, refitted on the same calibration runs: {100 * other:.1f}%"
        if all(r.get("predicted_wake_s") for r in rs):
            nw = statistics.median(abs(r["predicted_no_wake_s"] / r["measured_s"] - 1) for r in rs)
            line += (
                f"; with idle receivers woken ({1e6 * rs[0]['send_wake_s']:.1f} us per send), the fit without it: "
                f"{100 * nw:.1f}%"
            )
            for m in sorted({r["model"] for r in rs}):
                mr = [r for r in rs if r["model"] == m]
                per_model.append(
                    f"  {m}: {100 * statistics.median(abs(r['error']) for r in mr):.1f}% with the wake-ups, "
                    f"{100 * statistics.median(abs(r['predicted_no_wake_s'] / r['measured_s'] - 1) for r in mr):.1f}% "
                    "without"
                )
        if all(r.get("predicted_rescaled_s") for r in rs):
            resc = statistics.median(abs(r["predicted_rescaled_s"] / r["measured_s"] - 1) for r in rs)
            factors = sorted({round(r["rescale"], 3) for r in rs})
            line += f"; costs rescaled to the profiles' speed (x{factors[0]}-{factors[-1]}): {100 * resc:.1f}%"
        print("\n".join([line, *per_model]))
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": summary, "load_start": load}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
