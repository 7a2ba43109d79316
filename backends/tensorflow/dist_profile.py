"""Profiles taken in the setting `TFDistributedRuntime` runs in (issue 16): pinned worker processes.

`profile_distributed` measures every op in one worker process (a `WorkerPool` of the profiled device alone:
pinned to that device's cores, ``intra_op_parallelism_threads = cores``, ``inter_op_parallelism_threads =
1``), with all ops on that task, driven from a client session over gRPC exactly as a placed run is. Per-op
costs come from ``FULL_TRACE`` step statistics (Baechi 4.1 and 5.1: warm-up, then traced steps averaged;
parsed by `profiler.parse_step_stats`). Two more figures are measured in the same session:

* the untraced single-device step (median of `steps` timed ``Session.run`` calls), and
* the empty step: the median time of running one ``NoOp`` on the task, i.e. what the client, the master and
  the worker's executor cost per step regardless of the graph (on this machine it is most of a tiny model's
  step).

Both are reported beside the sum of the traced op times (``graph.nx.graph["profile"]``). The worker's core pace
is taken before each (untraced, empty) pair and after the last, and the pairs a slow spell of the VM's cores
touched are left out by the rule the runtimes follow (`interference.steps_to_drop`; a set with too few fast
pairs, or disturbed by other processes, is measured again), so that a profile and a run describe the same
state of the cores (27 Nov 2026: one model's single-device step read 4.1 and 5.0 ms in two profiles and 3.0 ms
in its run, before the TensorFlow workers took paces). With
``calibration="untraced_step"`` (the default) every op time is scaled by (untraced step - empty step) /
(traced op sum), so that the ops add up to the measured step less its fixed cost (tracing itself inflates
op times); the untraced and empty steps alternate and the difference is the median of the pairs' differences
(measured one after the other, a drift of the machine's speed made the empty step of mlp_tiny longer than its
whole step and every op time 0). Where that difference is not positive the traced times stay, with a warning;
``"none"`` keeps the raw traced times. The fixed cost is not spread over the ops: the prediction
of a step is the simulated makespan plus `step_overhead_s` (`predicted_step`), the empty step on as many
workers as the placement uses (`comm_benchmark_distributed` measures it for two or more).

`comm_benchmark_distributed` fits the communication model from this runtime's own transfers: for an ordered
pair of workers (src, dst) and each size from 1 KB to 64 MB, a float32 variable on src is read by an
``Identity`` on dst, which TensorFlow moves by its gRPC rendezvous (``RecvTensor``); the baseline is the same
read by an ``Identity`` on src grouped with a ``NoOp`` on dst (both workers take part in both runs, so only
the transfer differs). The two run alternately, `repeats` pairs, so that a drift of the machine's speed (tens
of percent over seconds on the lab's VM) hits both alike; a sample is the difference within a pair, and a size
whose median difference is not positive is left out of the fit with a warning (before, each sample was floored
at zero and the 1 KB and 256 KB medians came out 0: the fit gave 4 us and 175 GB/s). The per-size medians are
fitted to ``t = latency_s + bytes / bytes_per_s`` (Baechi 4.1's linear model) by non-negative least squares on
relative errors (`comm.fit_linear_relative`: the sizes span five decades, and an unweighted fit lets the 64 MB
point decide everything), per pair and over all pairs, and the fit's residuals (root mean square in seconds,
largest relative residual) are logged and returned.

A step of a split model moves many small tensors at once (gnmt_tiny under m_etf: about 800 of 256 bytes),
and each ``RecvTensor`` RPC costs CPU time in both worker processes, so transfers in a burst do not overlap the
way one isolated transfer suggests. The benchmark therefore also times bursts of k distinct `burst_bytes`
tensors sent in one step (k in `burst_counts`) and fits their marginal cost per transfer
(`TFCommFit.per_transfer_s`, the slope of time against k); a simulation can use it as the latency of a
sequential link (``mode: sequential``, Baechi 3.4: one tensor at a time per sender). During the bursts the
processor time of both worker processes is read from procfs (`_process_cpu_s`: every thread, gRPC's
included, since a pinned worker's threads share its cores); its slope against k is what one transfer costs the
sender and the receiver (`send_overhead_s`, `recv_overhead_s`: 72 and 95 us on the lab's VM), which the
simulator charges to the sending op and to the first op that reads the value (`simulate(...,
send_overhead_s=, recv_overhead_s=)`, as for the PyTorch workers). gnmt_tiny under m-ETF, two runs of
`experiments/fidelity_tf.py` (24 Nov 2026; each profile gave its own m-ETF placement): without them 9.2 ms
predicted against 125 ms measured (317 KB moved per step), with them 38.7 ms against 38.5 ms (122 KB).

Complexity: the steps and transfers themselves, plus O(V + records) to parse; one worker start-up (an
interpreter importing TensorFlow) per call.
"""

from __future__ import annotations

import logging
import math
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import tensorflow as tf

from algorithms.cluster import Cluster
from algorithms.errors import ConfigError
from algorithms.graph import OpGraph
from backends import interference
from backends.base import CommFit

from .comm import fit_linear, fit_linear_relative
from .models import TFModel, build_model
from .profiler import CALIBRATIONS, apply_records, parse_step_stats, resized
from .session import session_config
from .workers import WorkerPool

log = logging.getLogger(__name__)
v1 = tf.compat.v1

DIST_SIZES = (1024, 16384, 262144, 1048576, 4194304, 16777216, 67108864)


@dataclass
class TFCommFit(CommFit):
    """`CommFit` plus the fit's residuals and the empty step of the workers measured (seconds)."""

    residual_rms_s: float = 0.0
    residual_max_rel: float = 0.0
    step_overhead_s: float = 0.0
    per_transfer_s: float = 0.0
    send_overhead_s: float = 0.0
    recv_overhead_s: float = 0.0
    burst_medians: list[tuple[float, float]] = field(default_factory=list)
    medians: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    #: With the in-step calibration (`calibrate.calibrate_in_step`): the benchmark's own latency, which its
    #: samples are fitted with (`latency_s` is then the in-step one), and the calibration's relative RMS error;
    #: NaN otherwise.
    pingpong_latency_s: float = math.nan
    calibration_rel_rms: float = math.nan
    #: The processor time per byte of a message sent / received (`simulate(send_byte_s=, recv_byte_s=)`), from
    #: the in-step calibration's wide program; 0 without it.
    send_byte_s: float = 0.0
    recv_byte_s: float = 0.0


def _timed(sess: Any, fetch: Any, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        sess.run(fetch)
        out.append(time.perf_counter() - t0)
    return out


def _alternating(sess: Any, first: Any, second: Any, n: int) -> list[tuple[float, float]]:
    """`n` pairs (time of `first`, time of `second`), the two run one after the other."""
    return [(_timed(sess, first, 1)[0], _timed(sess, second, 1)[0]) for _ in range(n)]


def _process_cpu_s(pid: int) -> float:
    """Processor time (user + system) process `pid` has used so far, its exited threads included
    (``/proc/<pid>/stat``, clock ticks: 10 ms resolution at the usual 100 Hz); 0 where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_per_step(sess: Any, fetch: Any, pids: Sequence[int], n: int) -> tuple[float, ...]:
    """Processor seconds each process of `pids` spends per run of `fetch` (mean over `n` runs)."""
    before = [_process_cpu_s(p) for p in pids]
    _timed(sess, fetch, n)
    return tuple((_process_cpu_s(p) - b) / n for p, b in zip(pids, before))


def profile_distributed(
    model: TFModel,
    graph: OpGraph,
    cluster: Cluster,
    *,
    device: str | None = None,
    warmup: int = 5,
    steps: int = 10,
    batch_size: int | None = None,
    statistic: str = "mean",
    calibration: str = "untraced_step",
    host_cores: list[int] | None = None,
    max_interference: float | None = 0.05,
    retries: int = 2,
) -> OpGraph:
    """A copy of `graph` with costs measured in a pinned worker of `device` (the cluster's first by default).
    The untraced and empty steps are measured as the runtime measures its steps: the worker's core pace
    before each pair and after the last, pairs a slow spell touched left out (`interference.steps_to_drop`),
    and a set disturbed beyond `max_interference` (other processes, or too few fast pairs) measured again up
    to `retries` times (`interference.least_disturbed`)."""
    if calibration not in CALIBRATIONS:
        raise ConfigError(f"profile calibration {calibration!r} is not one of {list(CALIBRATIONS)}")
    if statistic not in ("mean", "median"):
        raise ConfigError(f"profile statistic {statistic!r} is not one of ['mean', 'median']")
    if steps < 1 or warmup < 0:
        raise ConfigError(f"profiler needs steps >= 1 and warmup >= 0, got steps={steps}, warmup={warmup}")
    device = device or cluster.names[0]
    if device not in cluster.names:
        raise ConfigError(f"profile device {device!r} is not in cluster {cluster.name!r} {cluster.names}")
    model, out = resized(model, graph, batch_size)
    with WorkerPool(cluster, [device], host_cores) as pool:
        dev = pool.device_map()[device]
        m = build_model(model.cfg, model.batch_size)
        for op in m.graph.get_operations():
            op._set_device(dev)
        with m.graph.as_default(), tf.device(dev):
            empty = tf.no_op(name="profile_empty_step")
        known = {op.name for op in m.graph.get_operations()}
        trace = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)
        fetches = [m.train_op, m.loss]
        records = []
        with v1.Session(pool.target, graph=m.graph, config=session_config()) as sess:
            sess.run(m.init_op)
            _timed(sess, fetches, warmup)
            _timed(sess, empty, 3)
            # untraced steps and empty steps alternate, so that a drift of the machine's speed hits both alike;
            # before any traced step, which may leave the session slower
            cores = pool.workers[0].cores
            pids = [w.pid for w in pool.workers]

            def measure() -> tuple[float | None, list[tuple[float, float]], interference.Kind]:
                before = interference.sample(cores, pids)
                paces, got = [pool.paces()], []
                for _ in range(max(steps, 10)):
                    got.extend(_alternating(sess, fetches, empty, 1))
                    paces.append(pool.paces())
                share = interference.others_share([(before, interference.sample(cores, pids))])
                flags = interference.slow_steps([list(p) for p in zip(*paces)])
                drop = set(interference.steps_to_drop(flags, len(got)) or ())
                kept = [pr for k, pr in enumerate(got) if k not in drop]
                kind = interference.kind_of(share, flags, max_interference)
                return interference.spell_disturbance(share, flags), kept, kind

            limit, tries = interference.check_policy(max_interference, retries)
            kept_share, pairs, shares = interference.least_disturbed(
                measure, limit, tries, f"the profile of {model.name} on a TensorFlow worker"
            )
            for _ in range(steps):
                md = v1.RunMetadata()
                sess.run(fetches, options=trace, run_metadata=md)
                records.append(parse_step_stats(md.step_stats, known))
            walls = [w for w, _ in pairs]
            empties = [e for _, e in pairs]
    seen = apply_records(out, records, statistic)
    traced_sum = sum(a["compute_s"] for _, a in out.nx.nodes(data=True))
    step_s = statistics.median(walls)
    overhead = statistics.median(empties)
    scale = 1.0
    ops_s = statistics.median(w - e for w, e in pairs)  # the ops' untraced time: paired differences
    if calibration == "untraced_step" and traced_sum > 0:
        if ops_s > 0:
            scale = ops_s / traced_sum
            for _, a in out.nx.nodes(data=True):
                a["compute_s"] *= scale
        else:  # within the noise of the empty step (a model of microsecond ops): the traced times stay
            log.warning(
                "profile of %s: the untraced step (%.4g s) is not longer than the empty step (%.4g s) beyond the "
                "noise; op times are left as traced (no calibration)",
                out.name,
                step_s,
                overhead,
            )
    out.invalidate()
    out.nx.graph["profile"] = {
        "device": device,
        "setting": f"pinned tf.distribute.Server worker, cores {cores}, intra-op threads {len(cores)}",
        "warmup": warmup,
        "steps": steps,
        "statistic": statistic,
        "traced_op_sum_s": traced_sum,
        "untraced_step_s": step_s,
        "step_overhead_s": overhead,
        "untraced_ops_s": ops_s,
        "pairs_counted": len(pairs),  # untraced/empty pairs left after slow spells
        "host_interference": kept_share,
        "interference_attempts": shares,
        "spells_prevail": interference.spells_prevail(),
        "calibration": calibration,
        "scale": scale,
    }
    log.info(
        "profiled %s in a pinned worker (%s, cores %s): %d of %d ops; traced op sum %.4g s, measured "
        "single-device step %.4g s, empty step %.4g s, op times scaled by %.3f",
        out.name,
        device,
        cores,
        seen,
        len(out),
        traced_sum,
        step_s,
        overhead,
        scale,
    )
    return out.validate()


def comm_benchmark_distributed(
    cluster: Cluster,
    sizes: Sequence[int] | None = None,
    repeats: int = 5,
    *,
    pairs: Sequence[tuple[str, str]] | None = None,
    host_cores: list[int] | None = None,
    burst_counts: Sequence[int] = (1, 16, 64, 256),
    burst_bytes: int = 256,
) -> TFCommFit:
    """Fit latency + bytes / bandwidth from gRPC transfers between worker processes (module docstring).
    `pairs` defaults to both directions between the cluster's first two devices."""
    sizes = [int(s) for s in (sizes or DIST_SIZES)]
    if repeats < 1 or not sizes or min(sizes) < 4:
        raise ConfigError(f"comm benchmark needs repeats >= 1 and sizes >= 4 bytes, got {repeats}, {sizes}")
    names = cluster.names
    if len(names) < 2:
        return TFCommFit(latency_s=0.0, bytes_per_s=math.inf)
    pairs = list(pairs or [(names[0], names[1]), (names[1], names[0])])
    for s, d in pairs:
        if s == d or s not in names or d not in names:
            raise ConfigError(f"comm benchmark pair {s}->{d} is not two devices of cluster {cluster.name!r}")
    used = [n for n in names if any(n in p for p in pairs)]
    graph = tf.Graph()
    with WorkerPool(cluster, used, host_cores) as pool:
        dev = pool.device_map()
        cross: dict[tuple[str, str, int], Any] = {}
        base: dict[tuple[str, str, int], Any] = {}
        with graph.as_default():
            noop = {}
            for n in used:
                with tf.device(dev[n]):
                    noop[n] = tf.no_op(name=f"bench/{n}/noop")
            empty = tf.group(*noop.values(), name="bench/empty")
            values = {}
            for src in {s for s, _ in pairs}:
                for size in sizes:
                    with tf.device(dev[src]):
                        var = v1.get_variable(
                            f"bench/{src}/v{size}",
                            shape=[max(1, size // 4)],
                            dtype=tf.float32,
                            initializer=v1.zeros_initializer(),
                            use_resource=True,
                        )
                        values[(src, size)] = var.value()
            for src, dst in pairs:
                for size in sizes:
                    x = values[(src, size)]
                    with tf.device(dev[src]):
                        local = tf.identity(x, name=f"bench/{src}_{dst}/local{size}")
                    base[(src, dst, size)] = tf.group(local, noop[dst])
                    with tf.device(dev[dst]):
                        cross[(src, dst, size)] = tf.identity(x, name=f"bench/{src}_{dst}/cross{size}").op
            # bursts: k distinct small tensors from the first pair's src to its dst in one step
            bsrc, bdst = pairs[0]
            bursts: dict[int, tuple[Any, Any]] = {}
            with tf.device(dev[bsrc]):
                small = v1.get_variable(
                    "bench/burst/v",
                    shape=[max(1, burst_bytes // 4)],
                    dtype=tf.float32,
                    initializer=v1.zeros_initializer(),
                    use_resource=True,
                ).value()
            for k in burst_counts:
                with tf.device(dev[bsrc]):
                    parts = [tf.identity(small, name=f"bench/burst{k}/src{j}") for j in range(k)]
                base_k = tf.group(*parts, noop[bdst])
                with tf.device(dev[bdst]):
                    cross_k = tf.group(*[tf.identity(x, name=f"bench/burst{k}/dst{j}") for j, x in enumerate(parts)])
                bursts[k] = (base_k, cross_k)
            init = v1.global_variables_initializer()
        samples: list[tuple[str, str, float, float]] = []
        medians: dict[tuple[str, str], list[tuple[float, float]]] = {}
        pids = {w.device: w.pid for w in pool.workers}
        with v1.Session(pool.target, graph=graph, config=session_config()) as sess:
            sess.run(init)
            _timed(sess, empty, 3)
            overhead = statistics.median(_timed(sess, empty, max(10, repeats)))
            for key in cross:
                sess.run(cross[key])
                sess.run(base[key])
            for (src, dst, size), op in cross.items():
                # base and cross alternate, so that a drift of the machine's speed hits both alike
                obs = [c - b for b, c in _alternating(sess, base[(src, dst, size)], op, repeats)]
                nbytes = float(max(1, size // 4) * 4)
                samples.extend((src, dst, nbytes, t) for t in obs)
                m = statistics.median(obs)
                if m > 0:
                    medians.setdefault((src, dst), []).append((nbytes, m))
                else:
                    log.warning(
                        "comm benchmark %s->%s: a %d-byte transfer measured no time over its baseline (median of "
                        "%d); left out of the fit",
                        src,
                        dst,
                        int(nbytes),
                        repeats,
                    )
            burst_medians: list[tuple[float, float]] = []
            cpu_at: dict[int, tuple[float, float]] = {}  # k -> (sender, receiver) CPU seconds per step
            for k, (base_k, cross_k) in bursts.items():
                sess.run(cross_k)
                obs = [c - b for b, c in _alternating(sess, base_k, cross_k, repeats)]
                burst_medians.append((float(k), statistics.median(obs)))
                cpu_at[k] = _cpu_per_step(sess, cross_k, [pids[bsrc], pids[bdst]], max(10, repeats))
    per_transfer = 0.0
    send_cpu = recv_cpu = 0.0
    if len(burst_medians) >= 2:
        _, inv = fit_linear(burst_medians)  # t = a + k / inv: the slope is the marginal cost of one transfer
        per_transfer = 0.0 if math.isinf(inv) else 1.0 / inv
        lo, hi = min(cpu_at), max(cpu_at)
        send_cpu = max(0.0, (cpu_at[hi][0] - cpu_at[lo][0]) / (hi - lo))
        recv_cpu = max(0.0, (cpu_at[hi][1] - cpu_at[lo][1]) / (hi - lo))
    if not any(medians.values()):
        raise ConfigError("comm benchmark: no transfer size measured any time over its baseline; nothing to fit")
    links = {pair: fit_linear_relative(pts) for pair, pts in medians.items()}
    points = [p for pts in medians.values() for p in pts]
    latency, bw = fit_linear_relative(points)
    rms, worst = residuals(points, latency, bw)
    log.info(
        "gRPC transfers between worker processes (%s): latency %.3g s, bandwidth %.3g bytes/s; residual rms "
        "%.3g s, largest relative residual %.2f; empty step on %d workers %.4g s; %d-byte transfers in a "
        "burst cost %.3g s each, %.3g s of the sender's and %.3g s of the receiver's processor time",
        ", ".join(f"{s}->{d}" for s, d in pairs),
        latency,
        bw,
        rms,
        worst,
        len(used),
        overhead,
        burst_bytes,
        per_transfer,
        send_cpu,
        recv_cpu,
    )
    return TFCommFit(
        latency_s=latency,
        bytes_per_s=bw,
        links=links,
        samples=samples,
        residual_rms_s=rms,
        residual_max_rel=worst,
        step_overhead_s=overhead,
        per_transfer_s=per_transfer,
        send_overhead_s=send_cpu,
        recv_overhead_s=recv_cpu,
        burst_medians=burst_medians,
        medians={f"{s}->{d}": pts for (s, d), pts in medians.items()},
    )


def residuals(points: Sequence[tuple[float, float]], latency_s: float, bytes_per_s: float) -> tuple[float, float]:
    """(root mean square of fit - observed, largest |fit - observed| / observed) over (bytes, seconds)."""
    if not points:
        return 0.0, 0.0
    errs = [latency_s + b / bytes_per_s - t for b, t in points]
    rms = math.sqrt(sum(e * e for e in errs) / len(errs))
    worst = max((abs(e) / t for e, (_, t) in zip(errs, points) if t > 0), default=0.0)
    return rms, worst


def predicted_step(makespan_s: float, graph: OpGraph, overheads: Mapping[int, float], n_workers: int) -> float:
    """Simulated makespan plus the fixed per-step cost of `n_workers` workers (`overheads`, measured by
    `comm_benchmark_distributed` for several workers; the profile's empty step for one)."""
    one = float(graph.nx.graph.get("profile", {}).get("step_overhead_s", 0.0))
    return makespan_s + float(overheads.get(n_workers, one if n_workers == 1 else max(overheads.values(), default=one)))
