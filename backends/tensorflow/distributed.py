"""Placed execution on TensorFlow's distributed runtime: one pinned worker process per device (issue 16).

`TFDistributedRuntime.run` starts a `WorkerPool` (workers.py: one `tf.distribute.Server` process per device the
placement uses, pinned to the device's cores, ``intra_op_parallelism_threads = cores``,
``inter_op_parallelism_threads = 1``), rebuilds the model in the client (same config, same op names, same
seeded weights and data), puts every placed op on ``/job:worker/task:k`` of its device with
`runtime.apply_placement` (colocation groups and ops reading a variable follow it; what is left, e.g. the
``init`` NoOp, TensorFlow's placer puts on task 0, the master), and runs the training step from a client
`tf.compat.v1.Session` on task 0's gRPC target, in graph mode with graph rewrites off (session.py), so the
ops that run are the ops captured, profiled and placed. Tensors between tasks go by TensorFlow's own
send/recv over gRPC. This is the setting of Baechi 5 (TF's distributed master executing a placed graph); the
client process only issues ``Session.run`` and waits.

Measurements (module-level helpers do the parsing):

* step time: wall clock of ``Session.run([train_op, loss])`` in the client; `warmup` steps discarded, then
  `steps` measured (10 by default); `measured_step_s` is their median, `step_iqr_s` the inter-quartile range.
  Before each measured step and after the last the client asks every worker for its core's pace
  (`WorkerPool.paces`, `interference.core_pace` on the worker's pinned core); the steps a slow spell of the
  VM's cores touched are left out of the median by the rule the PyTorch runtime and both backends' profiles
  follow (`interference.steps_to_drop`; `RunResult.slow_steps`, their count in ``extra["slow_steps"]``), and
  a set with too few fast steps is measured again like one other processes disturbed
  (`interference.least_disturbed`). Before 27 Nov 2026 the TensorFlow workers took no paces and only
  other processes were seen.
* traffic: measured, from an extra traced step (``FULL_TRACE``; traced again, up to `trace_attempts` steps, while
  a pair of tasks the placement cuts shows no receive, `traced_step`): the ``RecvTensor`` records TensorFlow's
  gRPC rendezvous writes, ``[<bytes>B] ... <tensor> from <task> to <task>``, summed over pairs of different
  tasks (a record of 0.1 MiB or more says ``[<x.x>MB]``; its exact size comes from the static shape of the
  source op's output that fits the rounding, `recv_traffic`). The graph-edge estimate the simulator uses is
  in ``extra["traffic_estimate_bytes"]``.
* peak memory per device: TensorFlow's CPU allocator keeps no per-device statistics a client can read
  (``tf.config.experimental.get_memory_info`` covers GPU/TPU only), so the figure is the process's tensor
  allocations as TensorFlow records them: the bytes the traced ``init`` run left allocated on that task
  (variables, optimizer slots) plus the peak of the net allocations of that task's ops during a traced training
  step (allocation records, as `profiler.allocation_peaks`), with each tensor received over gRPC, which no op's
  records hold, counted from its arrival to the end of its last reader on the task (`received_buffers`). Each
  worker's RSS growth over the run
  (``ru_maxrss`` less the resident set when the server was ready) is reported beside it in
  ``extra["rss_growth_bytes"]``; it also counts the executors, gRPC buffers and allocator caching. A task
  whose step stats hold no allocation records falls back to the RSS growth; ``extra["memory_source"]`` says
  which figure each device got.
* correctness (`check_correctness`): the loss and every gradient the optimizer applies (the ``gradients/``
  inputs of the update ops) as the first training step computes them (fetched with that step: with the order
  enforced, fetching them alone would run the updates chained before them), and every variable after that
  step's update (parameters and optimizer slots, read by `variable_reads`), are compared with the same values
  from a fresh build run wholly on the pool's first worker (`_reference`: the workers' kernels and thread
  count); the loss must agree within `loss_rtol`, every gradient and every updated variable by
  `backends.base.agrees` (largest difference at most ``grad_atol + grad_rtol * max|reference|``;
  ``extra["grad_max_rel_error"]``, ``extra["grad_max_abs_error"]`` and ``extra["update_max_rel_error"]``, with
  ``extra["update_worst_variable"]``, report the worst). The loss after one placed update is reported
  (``extra["loss_after_update_rel_error"]``) but not judged: it carries the update's rounding through another
  forward pass, which a badly conditioned model amplifies (inception_v3_tiny on two devices: gradients and
  every updated variable within 6e-6 of the reference, the loss after its first SGD step, which raises the loss
  from 2.55 to 3.12, 2.1e-4 apart, over the `loss_rtol` of 1e-4 that judged it until 29 Nov 2026 and printed
  a false MISMATCH for three of six inception_v3_tiny placements in the fidelity sweeps); the variables
  themselves say whether the update was right.
* anatomy of the traced step (`step_anatomy.anatomy`, ``extra["step_anatomy"]``): the share of it during which
  no task ran an op, each device's traced busy time against its ops' profiled time, when each task requested its
  first tensor, and the quantiles of the hops (a received tensor's arrival less its producer's end).
* processor time: each worker process's user + system time over the measured steps, per step, from procfs
  (``extra["worker_cpu_per_step_s"]``, {device: s}; whole clock ticks, so steps of a few milliseconds need
  tens of them to read it within a few percent). It holds what the traced ops leave out, gRPC's and the
  executor's work for each message (and about 0.1 ms per step of the pace probes).
* workers: ``[{"device", "pid", "cores", "task"}]``; a cluster asking for more cores than the host has is
  logged as a warning and flagged in ``extra["oversubscribed"]`` (the ratio in ``extra["oversubscription"]``).

Order (``order``): with ``"executor"`` (the default) the schedule is advisory: each worker's executor runs its
ready ops in its own order (one at a time, since ``inter_op_parallelism_threads = 1``), so `schedule` is
checked against the placement but not enforced. With ``"schedule"`` each device's ops are chained in the
schedule's order by control edges (`runtime.enforce_order`), so every worker runs exactly its list, as the
PyTorch workers and the simulator's static schedule do (``extra["schedule_enforced"]``, the edges added in
``extra["order_control_edges"]``).
Workers are always stopped, also when the run fails (`WorkerPool.close` in a ``finally``).

Complexity: O(V + E) to place and to parse the traced steps, plus the steps themselves and the worker start-up
(one interpreter importing TensorFlow per device, seconds each).
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from algorithms.cluster import Cluster
from algorithms.errors import ConfigError
from algorithms.graph import OpGraph
from algorithms.placement import check_placement, check_schedule
from backends import interference
from backends.base import Backend, RunResult, Runtime, agrees

from .models import TFModel, build_model
from .runtime import apply_placement, crossing_pairs, enforce_order, traffic_bytes
from .session import session_config
from .step_anatomy import anatomy
from .trace_records import MIB, RECV_LABEL, task_of_device
from .workers import WorkerPool

log = logging.getLogger(__name__)

#: `TFDistributedRuntime(order=...)`: the executor's own order among ready ops, or the schedule's, enforced
ORDERS = ("executor", "schedule")
v1 = tf.compat.v1


def _receives(step_stats: Any, sizes: Mapping[str, Sequence[float]] | None) -> list[tuple[int, int, str, float, int]]:
    """(src task, dst task, source op, bytes, arrival µs) of every gRPC receive between different tasks in one
    traced step (``RecvTensor`` records; bytes as `recv_traffic` reads them). O(records × outputs per op)."""
    out = []
    for ds in step_stats.dev_stats:
        for ns in ds.node_stats:
            if ns.node_name != "RecvTensor":
                continue
            m = RECV_LABEL.match(ns.timeline_label)
            if not m:
                continue
            exact, mib, op, src_dev, dst_dev = m.groups()
            src, dst = task_of_device(src_dev), task_of_device(dst_dev)
            if src is None or dst is None or src == dst:
                continue
            if exact is not None:
                nbytes = float(exact)
            else:
                nbytes = float(mib) * MIB
                fits = {b for b in (sizes or {}).get(op, ()) if abs(b - nbytes) <= 0.05 * MIB + 0.5}
                if len(fits) == 1:
                    nbytes = float(next(iter(fits)))
            rel = ns.all_end_rel_micros or ns.op_end_rel_micros
            out.append((src, dst, op, nbytes, int(ns.all_start_micros + rel)))
    return out


def recv_traffic(step_stats: Any, sizes: Mapping[str, Sequence[float]] | None = None) -> dict[tuple[int, int], float]:
    """(src task, dst task) -> bytes received over gRPC in one traced step (``RecvTensor`` records).

    TensorFlow labels a receive of 0.1 MiB or more in MiB with one decimal ("[1.5MB]"), so its exact size is
    lost. `sizes` (source op name -> the byte sizes of its outputs, from the static shapes of the placed graph;
    `output_bytes`) restores it: the one output size within the label's rounding (±0.05 MiB) is taken, and the
    label's value where none or several sizes fit. Before 27 Nov 2026 such labels were not parsed at all and
    every tensor from 0.1 MiB on was left out of the measured traffic (full-size mlp: 7.5 KB measured
    against 3.7 MB sent). O(records × outputs per op)."""
    out: dict[tuple[int, int], float] = {}
    for src, dst, _, nbytes, _ in _receives(step_stats, sizes):
        out[(src, dst)] = out.get((src, dst), 0.0) + nbytes
    return out


def traced_step(
    run: Any,
    expected: set[tuple[int, int]],
    sizes: Mapping[str, Sequence[float]] | None,
    attempts: int,
) -> tuple[Any, int, set[tuple[int, int]]]:
    """Trace training steps until one holds a ``RecvTensor`` record for every (src task, dst task) pair that
    `expected` names (the tensor edges the placement cuts), at most `attempts` steps; return (the most complete
    step's ``RunMetadata``, steps traced, pairs still missing from it).

    `run()` runs one traced step and returns its ``RunMetadata``. A receiving task writes the records of the
    tensors it received into its own step stats, and a traced step can come back without one task's records
    (seen once in CI, under full load: the cpu0 -> cpu1 receives of mlp_tiny absent, the other direction
    present), which would read as no traffic on that pair. The most complete step is the one covering the most
    expected pairs, then with the most bytes received. O(attempts × records)."""
    if attempts < 1:
        raise ConfigError(f"runtime needs at least one traced step, got {attempts}")
    best, best_key, missing = None, (-1, -1.0), set(expected)
    for k in range(1, attempts + 1):
        md = run()
        recv = recv_traffic(md.step_stats, sizes)
        key = (len(expected & set(recv)), float(sum(recv.values())))
        if key > best_key:
            best, best_key, missing = md, key, expected - set(recv)
        if not missing:
            return best, k, missing
    return best, attempts, missing


def received_buffers(
    step_stats: Any, sizes: Mapping[str, Sequence[float]] | None, consumers: Mapping[str, set[str]]
) -> dict[int, list[tuple[int, int]]]:
    """dst task -> allocation events (µs, ±bytes) of the tensors it received over gRPC in one traced step.

    The gRPC layer allocates a received tensor outside any op, so no op's allocation records hold it (the
    full-size mlp's two-device runs measured 1.5-3.1 MB against 3.9-5.5 MB predicted before 27 Nov 2026). Each
    receive is counted from its arrival (the ``RecvTensor`` record's end) to the end of the last op on that task
    that reads the source op's outputs (`consumers`: op name -> the ops that take one of its outputs, from the
    placed graph), as the simulator counts a received copy; with no such op in the trace, to the step's end
    (left allocated). O(records + ops)."""
    ends: dict[int, dict[str, int]] = {}
    for ds in step_stats.dev_stats:
        task = task_of_device(ds.device)
        if task is None:
            continue
        mine = ends.setdefault(task, {})
        for ns in ds.node_stats:
            t = int(ns.all_start_micros + (ns.all_end_rel_micros or ns.op_end_rel_micros))
            mine[ns.node_name] = max(mine.get(ns.node_name, t), t)
    out: dict[int, list[tuple[int, int]]] = {}
    for _, dst, op, nbytes, arrive in _receives(step_stats, sizes):
        if nbytes <= 0:
            continue
        last = [ends.get(dst, {})[c] for c in consumers.get(op, ()) if c in ends.get(dst, {})]
        lst = out.setdefault(dst, [])
        lst.append((arrive, int(nbytes)))
        if last:
            lst.append((max(max(last), arrive), -int(nbytes)))
    return out


def op_consumers(graph: Any) -> dict[str, set[str]]:
    """op name -> the names of the ops that take one of its outputs as an input, in a `tf.Graph`. O(edges)."""
    out: dict[str, set[str]] = {}
    for op in graph.get_operations():
        for t in op.inputs:
            out.setdefault(t.op.name, set()).add(op.name)
    return out


def output_bytes(graph: Any) -> dict[str, list[float]]:
    """op name -> the byte sizes of its outputs whose shapes are fully known, in a `tf.Graph`. O(outputs)."""
    out: dict[str, list[float]] = {}
    for op in graph.get_operations():
        sizes = []
        for t in op.outputs:
            shape = t.shape
            if shape.rank is None or not shape.is_fully_defined() or t.dtype.size is None:
                continue
            n = 1
            for d in shape.as_list():
                n *= int(d)
            sizes.append(float(n * t.dtype.size))
        if sizes:
            out[op.name] = sizes
    return out


def task_allocations(
    step_stats: Any, extra: Mapping[int, Sequence[tuple[int, int]]] | None = None
) -> dict[int, tuple[float, float]]:
    """task -> (net bytes allocated at the end of the step, peak of the net allocations during it), from the
    allocation records of that task's ops, and the events in `extra` (task -> (µs, ±bytes), e.g.
    `received_buffers`). O(records log records)."""
    events: dict[int, list[tuple[int, int]]] = {t: list(v) for t, v in (extra or {}).items()}
    for ds in step_stats.dev_stats:
        task = task_of_device(ds.device)
        if task is None or "/stream:" in ds.device:
            continue
        lst = events.setdefault(task, [])
        for ns in ds.node_stats:
            for m in ns.memory:
                for r in m.allocation_records:
                    lst.append((int(r.alloc_micros), int(r.alloc_bytes)))
    out: dict[int, tuple[float, float]] = {}
    for task, lst in events.items():
        if not lst:
            continue
        lst.sort(key=lambda e: (e[0], -e[1]))
        cur = peak = 0
        for _, b in lst:
            cur += b
            peak = max(peak, cur)
        out[task] = (float(cur), float(peak))
    return out


def task_busy(step_stats: Any) -> dict[int, float]:
    """task -> summed op times (seconds) of its ops in one traced step."""
    out: dict[int, float] = {}
    for ds in step_stats.dev_stats:
        task = task_of_device(ds.device)
        if task is None or "/stream:" in ds.device:
            continue
        for ns in ds.node_stats:
            if ns.node_name in ("RecvTensor", "_SOURCE"):
                continue
            t = ns.all_end_rel_nanos or ns.all_end_rel_micros * 1000
            out[task] = out.get(task, 0.0) + t * 1e-9
    return out


def gradient_tensors(model: TFModel) -> list[tf.Tensor]:
    """The gradients the optimizer applies: inputs of the update ops that come from ``gradients/``, in graph
    order (the same list, by name, for every build of one config)."""
    scope = model.optimizer_scope.rstrip("/") + "/"
    out: list[tf.Tensor] = []
    seen: set[str] = set()
    for op in model.graph.get_operations():
        if not op.name.startswith(scope) or "Apply" not in op.type:
            continue
        for t in op.inputs:
            if t.op.name.startswith("gradients") and t.name not in seen:
                seen.add(t.name)
                out.append(t)
    return out


def iqr(values: list[float]) -> float:
    """Inter-quartile range (0 for fewer than two values)."""
    if len(values) < 2:
        return 0.0
    q = statistics.quantiles(values, n=4, method="inclusive")
    return float(q[2] - q[0])


def model_variables(model: TFModel) -> list[Any]:
    """The model's variables, the optimizer's slots included (``GLOBAL_VARIABLES``), in graph order: the same
    list, by name, for every build of one config."""
    return list(model.graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES))


def variable_reads(model: TFModel) -> list[tf.Tensor]:
    """A fresh read of each of `model_variables` on its variable's device, for the correctness check: reads that
    no training step runs and that carry no control input (`enforce_order` has chained the step's own reads),
    so that fetching them after a step reads the updated values and runs nothing else."""
    out = []
    with model.graph.as_default(), tf.name_scope("correctness_check"):
        for v in model_variables(model):
            with tf.device(v.handle.op.device):
                out.append(tf.raw_ops.ReadVariableOp(resource=v.handle, dtype=v.dtype.base_dtype))
    return out


def _reference(
    model: TFModel, names: list[str], target: str, device: str
) -> tuple[list[np.ndarray], list[float], dict[str, np.ndarray]]:
    """Single-device values of tensors `names` before any update, the losses of two training steps, and every
    variable after the first ({op name: value}), from a fresh build run wholly on `device`, a worker of the run's
    own pool (its session `target`).

    On the workers, not in the client: a kernel's reductions are split by the intra-op thread count, and a
    client's local session takes the thread pool of the process's first session (a profile's, say), so it sums
    in another order than the workers. Mostly that is rounding, but a badly conditioned model amplifies it:
    inception_v3_tiny's training-mode batch norms over maps of a few pixels gave gradients 43 % apart
    (largest absolute difference 66) and a loss after one update of 3.12 against 2.15, with the placed run on
    one device; run on a worker, the two are bit for bit equal. The reference's variables share the worker's
    resource container with the placed run's; its ``init_op`` assigns their initial values again."""
    ref = build_model(model.cfg, model.batch_size)
    for op in ref.graph.get_operations():
        op._set_device(device)
    tensors = [ref.graph.get_tensor_by_name(n) for n in names]
    variables = model_variables(ref)
    reads = variable_reads(ref)
    with v1.Session(target, graph=ref.graph, config=session_config(allow_soft_placement=True)) as sess:
        sess.run(ref.init_op)
        values = sess.run(tensors)
        losses = [float(sess.run([ref.train_op, ref.loss])[1])]
        after = dict(zip((v.op.name for v in variables), sess.run(reads)))
        losses.append(float(sess.run([ref.train_op, ref.loss])[1]))
    return values, losses, after


def _diff_scale(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(largest |a - b|, largest |b|); (inf, 0) when the shapes differ."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return math.inf, 0.0
    if not a.size:
        return 0.0, 0.0
    return float(np.max(np.abs(a - b))), float(np.max(np.abs(b)))


def _rel_error(a: np.ndarray, b: np.ndarray) -> float:
    """Largest |a - b| over largest |b| (the scale floored at 1e-12)."""
    diff, scale = _diff_scale(a, b)
    return diff / max(1e-12, scale) if math.isfinite(diff) else math.inf


class TFDistributedRuntime(Runtime):
    """`runtime=real` for TensorFlow: one pinned `tf.distribute.Server` process per device (module docstring).

    Hyper-parameters: `warmup` (discarded steps), `steps` (measured steps, >= 1; 10 by default),
    `check_correctness` with `loss_rtol`, `grad_rtol` and `grad_atol` (`backends.base.agrees`),
    `graph_rewrites` (False: Grappler off, the ops that run are the ones placed), `host_cores` (the cores to
    pin workers to; the client's affinity by default),
    `start_timeout_s` (worker start-up; importing TensorFlow takes seconds per process on a busy host),
    `max_interference` / `retries`: measured steps during which other tasks used more than `max_interference`
    of the workers' cores (`backends.interference`, the client and its workers counted as the measurement's own;
    0.05 by default, None: never) are measured again in the same session, up to `retries` more times (2); the
    least disturbed set is kept (`extra["host_interference"]`, every attempt's in `extra["interference_attempts"]`).
    `cuda_graph` (conf/runtime/real.yaml's key for the PyTorch runtime) must stay false. `trace_attempts` (3):
    the most steps traced for the measured traffic and memory until one holds every cut pair's receives
    (`traced_step`; the count in ``extra["traced_steps"]``, pairs never seen in ``extra["traffic_pairs_missing"]``).
    `order`: ``"executor"`` (TensorFlow's executor orders the ready ops; the schedule is advisory) or
    ``"schedule"`` (each device runs its ops in the schedule's order, `runtime.enforce_order`; module docstring).
    `post_receives` (the PyTorch runtime's key) is accepted and changes nothing: TensorFlow's rendezvous allocates
    a received tensor when it arrives, the placers' model, whatever it says.

    After `run`, `last_step_stats` holds the traced step's ``StepStats`` (per-op start and duration on every
    task), for experiments that look inside a step (`experiments/tf_op_inflation.py`); it is not in the result.
    """

    name = "real"

    def __init__(
        self,
        warmup: int = 5,
        steps: int = 10,
        check_correctness: bool = True,
        loss_rtol: float = 1e-4,
        grad_rtol: float = 1e-4,
        grad_atol: float = 1e-6,
        graph_rewrites: bool = False,
        host_cores: list[int] | None = None,
        start_timeout_s: float = 300.0,
        max_interference: float | None = 0.05,
        retries: int = 2,
        cuda_graph: bool = False,
        trace_attempts: int = 3,
        order: str = "executor",
        post_receives: str = "within_limit",
    ):
        if order not in ORDERS:
            raise ConfigError(f"runtime.order must be one of {list(ORDERS)} for TensorFlow, got {order!r}")
        self.order = order
        if cuda_graph:
            raise ConfigError("runtime.cuda_graph=true is a PyTorch GPU option; the TensorFlow runtime has none")
        if post_receives not in ("up_front", "within_limit"):
            raise ConfigError(f"runtime.post_receives {post_receives!r} is not one of ['up_front', 'within_limit']")
        if int(warmup) < 0 or int(steps) < 1:
            raise ConfigError(f"runtime needs warmup >= 0 and steps >= 1, got warmup={warmup}, steps={steps}")
        if not (loss_rtol >= 0 and grad_rtol >= 0 and grad_atol >= 0):
            raise ConfigError("runtime.loss_rtol, runtime.grad_rtol and runtime.grad_atol must be >= 0")
        self.warmup = int(warmup)
        self.steps = int(steps)
        self.check_correctness = bool(check_correctness)
        self.loss_rtol = float(loss_rtol)
        self.grad_rtol = float(grad_rtol)
        self.grad_atol = float(grad_atol)
        self.graph_rewrites = bool(graph_rewrites)
        self.host_cores = list(host_cores) if host_cores is not None else None
        self.start_timeout_s = float(start_timeout_s)
        self.max_interference, self.retries = interference.check_policy(max_interference, retries)
        if int(trace_attempts) < 1:
            raise ConfigError(f"runtime.trace_attempts must be >= 1, got {trace_attempts}")
        self.trace_attempts = int(trace_attempts)
        self.last_step_stats: Any = None

    def run(
        self,
        backend: Backend,
        model: Any,
        graph: OpGraph,
        placement: Mapping[str, str],
        schedule: Mapping[str, list[str]],
        cluster: Cluster,
        *,
        plan: Any = None,
    ) -> RunResult:
        """Start the workers, run and measure the placed step (module docstring), stop the workers. `plan` is
        not used; `schedule` is enforced with ``order="schedule"`` and advisory otherwise. `backend` is not used
        either (the model carries its config)."""
        if not isinstance(model, TFModel):
            raise ConfigError(f"TFDistributedRuntime runs TensorFlow models, got {type(model).__name__}")
        assign = dict(placement.assignment if hasattr(placement, "assignment") else placement)
        check_placement(graph, cluster, assign)
        if schedule:
            check_schedule(graph, assign, {d: list(o) for d, o in schedule.items()})
        used = [d for d in cluster.names if d in set(assign.values())]
        t_start = time.perf_counter()
        pool = WorkerPool(cluster, used, self.host_cores, self.start_timeout_s)
        try:
            pool.start()
            startup_s = time.perf_counter() - t_start
            result = self._run_on(pool, model, graph, assign, cluster, schedule)
            result.extra["startup_s"] = startup_s
            return result
        finally:
            pool.close()

    def _run_on(
        self,
        pool: WorkerPool,
        model: TFModel,
        graph: OpGraph,
        assign: dict[str, str],
        cluster: Cluster,
        schedule: Mapping[str, list[str]],
    ) -> RunResult:
        devmap = pool.device_map()
        task_dev = {w.task: w.device for w in pool.workers}
        placed = build_model(model.cfg, model.batch_size)
        n_placed = apply_placement(placed, assign, devmap)
        enforced = self.order == "schedule" and bool(schedule)
        chained = enforce_order(placed, schedule) if enforced else 0
        grads = gradient_tensors(placed) if self.check_correctness else []
        variables = [v.op.name for v in model_variables(placed)] if self.check_correctness else []
        reads = variable_reads(placed) if self.check_correctness else []
        config = session_config(graph_rewrites=self.graph_rewrites)
        trace = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)
        losses: list[float] = []
        with v1.Session(pool.target, graph=placed.graph, config=config) as sess:
            md_init = v1.RunMetadata()
            sess.run(placed.init_op, options=trace, run_metadata=md_init)
            fetches = [placed.train_op, placed.loss]
            grad_values: list[Any] = []
            if grads:  # the first training step, its loss and gradients fetched with it (before any update)
                first_step = sess.run(fetches + grads)
                losses.append(float(first_step[1]))
                grad_values = first_step[1:]
            updated = dict(zip(variables, sess.run(reads))) if reads else {}  # every variable after that step
            cores = sorted({c for w in pool.workers for c in w.cores})
            pids = [w.pid for w in pool.workers]
            bar = tqdm(total=self.warmup + self.steps, desc="run (warm-up + measured steps)", unit="step",
                       disable=None, leave=False)  # fmt: skip
            for _ in range(self.warmup - len(losses)):
                _, loss = sess.run(fetches)
                losses.append(float(loss))
                bar.update()
            first = [True]

            def measure() -> tuple[
                float | None, tuple[list[float], list[bool] | None, dict[str, float]], interference.Kind
            ]:
                before = interference.sample(cores, pids)
                cpu0 = {w.device: interference.process_cpu_s(w.pid) for w in pool.workers}
                times = []
                paces = [pool.paces()]  # every worker's core pace before each measured step and after the last
                for _ in range(self.steps):
                    t0 = time.perf_counter()
                    _, loss = sess.run(fetches)
                    times.append(time.perf_counter() - t0)
                    paces.append(pool.paces())
                    if first[0]:  # the losses of the first measured set follow the warm-up's
                        losses.append(float(loss))
                        bar.update()
                first[0] = False
                share = interference.others_share([(before, interference.sample(cores, pids))])
                cpu1 = {w.device: interference.process_cpu_s(w.pid) for w in pool.workers}
                # each worker's processor time per measured step (gRPC and executor work beside the ops)
                cpu = {
                    d: (cpu1[d] - c0) / len(times) for d, c0 in cpu0.items() if c0 is not None and cpu1[d] is not None
                }
                flags = interference.slow_steps([list(p) for p in zip(*paces)])
                kind = interference.kind_of(share, flags, self.max_interference)
                return interference.spell_disturbance(share, flags), (times, flags, cpu), kind

            kept_share, (times, flags, worker_cpu), shares = interference.least_disturbed(
                measure, self.max_interference, self.retries, f"{model.name} on the TensorFlow workers"
            )
            slow = interference.steps_to_drop(flags, len(times))
            left_out = set(slow or ())
            measured = [t for k, t in enumerate(times) if k not in left_out]
            bar.close()
            sizes = output_bytes(placed.graph)
            dev_task = {d: t for t, d in task_dev.items()}
            expected = {(dev_task[a], dev_task[b]) for a, b in crossing_pairs(graph, assign)}

            def traced() -> Any:
                md = v1.RunMetadata()
                sess.run(fetches, options=trace, run_metadata=md)
                return md

            md, traced_steps, missing = traced_step(traced, expected, sizes, self.trace_attempts)
            if missing:
                log.warning(
                    "%d traced steps held no receive records for %s: their traffic reads as 0",
                    traced_steps,
                    ", ".join(f"{task_dev[a]}->{task_dev[b]}" for a, b in sorted(missing)),
                )
        stats = pool.stats()
        self.last_step_stats = md.step_stats

        # where each op ran
        misplaced = []
        for ds in md.step_stats.dev_stats:
            task = task_of_device(ds.device)
            dev = task_dev.get(task) if task is not None else None
            for ns in ds.node_stats:
                want = assign.get(ns.node_name)
                if want is not None and want != dev:
                    misplaced.append(ns.node_name)
        if misplaced:
            log.warning("%d ops ran on another device than placed, e.g. %s", len(misplaced), misplaced[:3])

        # traffic, memory, busy time per device
        recv = recv_traffic(md.step_stats, sizes)
        by_pair = {(task_dev[s], task_dev[d]): b for (s, d), b in recv.items()}
        held = task_allocations(md_init.step_stats)
        # tensors received over gRPC are allocated outside every op: counted from the receives' records
        step = task_allocations(md.step_stats, received_buffers(md.step_stats, sizes, op_consumers(placed.graph)))
        rss_growth = {d: float(max(0, s["maxrss"] - s["rss_at_start"])) for d, s in stats.items()}
        peaks: dict[str, float] = {d: 0.0 for d in cluster.names}
        source: dict[str, str] = {}
        for w in pool.workers:
            if w.task in held or w.task in step:
                peaks[w.device] = held.get(w.task, (0.0, 0.0))[0] + step.get(w.task, (0.0, 0.0))[1]
                source[w.device] = "tensor allocations"
            else:
                peaks[w.device] = rss_growth[w.device]
                source[w.device] = "rss growth"
        busy = {d: 0.0 for d in cluster.names}
        for task, b in task_busy(md.step_stats).items():
            if task in task_dev:
                busy[task_dev[task]] = b

        extra: dict[str, Any] = {
            "losses": losses,
            "warmup": self.warmup,
            "steps": self.steps,
            "ops_placed": n_placed,
            "misplaced_ops": len(misplaced),
            "step_time_mean_s": statistics.fmean(measured),
            "device_busy_s": busy,
            "worker_cpu_per_step_s": worker_cpu,
            "schedule_enforced": enforced,
            "order_control_edges": chained,
            "traffic_source": "RecvTensor records of a traced step",
            "traced_steps": traced_steps,
            "traffic_pairs_missing": [f"{task_dev[a]}->{task_dev[b]}" for a, b in sorted(missing)],
            "traffic_by_pair_bytes": {f"{s}->{d}": b for (s, d), b in by_pair.items()},
            "traffic_estimate_bytes": traffic_bytes(graph, assign),
            "memory_source": source,
            "rss_growth_bytes": rss_growth,
            "memory_held_after_init_bytes": {task_dev[t]: h[0] for t, h in held.items() if t in task_dev},
            "memory_step_peak_bytes": {task_dev[t]: p[1] for t, p in step.items() if t in task_dev},
            "oversubscribed": pool.oversubscribed,
            "oversubscription": sum(cluster.device(d).cores for d in pool.devices or [])
            / max(1, len(pool.host_cores or [])),
            "host_cores": list(pool.host_cores or []),
            "devices": devmap,
            "runtime": "tf.distribute.Server per device",
            "host_interference": kept_share,
            "interference_attempts": shares,
            # steps a slow spell of a worker's core touched, left out of the median (None: every step counted)
            "slow_steps": None if slow is None else len(slow),
            "spells_prevail": interference.spells_prevail(),
        }
        # where the traced step's time went (step_anatomy): idle share, hops, when each task first asked for a tensor
        idx = graph.index()
        extra["step_anatomy"] = anatomy(md.step_stats, dict(zip(idx.names, idx.compute_s)), task_dev)
        loss = losses[1] if len(losses) > 1 else losses[0]  # the loss after one update, as before
        if self.check_correctness:
            names = [placed.loss.name] + [t.name for t in grads]
            first = pool.workers[0]
            ref_values, ref_losses, ref_after = _reference(model, names, pool.target, devmap[first.device])
            errs = [_rel_error(a, b) for a, b in zip(grad_values, ref_values)]
            diffs = [_diff_scale(a, b) for a, b in zip(grad_values[1:], ref_values[1:])]
            # the update: every variable after the first step (parameters and optimizer slots) against the
            # reference's, by the gradients' rule
            upd = {n: _diff_scale(updated[n], ref_after[n]) if n in ref_after else (math.inf, 0.0) for n in updated}
            worst = max(upd, key=lambda n: upd[n][0] / max(1e-12, upd[n][1]), default=None)
            loss0 = losses[0]
            later = losses[1] if len(losses) > 1 else math.nan
            ref_later = ref_losses[1]
            extra.update(
                reference_loss=ref_losses[0],
                loss_abs_error=abs(loss0 - ref_losses[0]),
                loss_match=bool(errs[0] <= self.loss_rtol) and math.isfinite(loss0),
                gradients_checked=len(grads),
                grad_max_rel_error=max(errs[1:], default=0.0),
                initial_loss_rel_error=errs[0],
                grad_max_abs_error=max((d for d, _ in diffs), default=0.0),
                grad_match=all(agrees(d, sc, self.grad_rtol, self.grad_atol) for d, sc in diffs),
                variables_checked=len(upd),
                update_max_rel_error=0.0 if worst is None else upd[worst][0] / max(1e-12, upd[worst][1]),
                update_worst_variable=worst,
                update_match=all(agrees(d, sc, self.grad_rtol, self.grad_atol) for d, sc in upd.values())
                and math.isfinite(later),
                # reported, not judged: the loss after one update carries the update's rounding through a
                # forward pass, which a badly conditioned model amplifies (module docstring)
                loss_after_update=later,
                reference_loss_after_update=ref_later,
                loss_after_update_rel_error=abs(later - ref_later) / max(1.0, abs(ref_later)),
            )
            # result.json's `correct`, as the PyTorch runtimes report it: loss, gradients and update match
            extra["correct"] = bool(extra["loss_match"] and extra["grad_match"] and extra["update_match"])
            if not extra["correct"]:
                log.warning(
                    "placed run differs from a single device: loss %.8g vs %.8g, largest gradient error %.3g, "
                    "largest variable error after the first update %.3g (%s)",
                    loss0,
                    ref_losses[0],
                    extra["grad_max_rel_error"],
                    extra["update_max_rel_error"],
                    worst,
                )
        result = RunResult(
            measured_step_s=float(statistics.median(measured)),
            step_times_s=times,
            peak_memory_bytes=peaks,
            traffic_bytes=float(sum(by_pair.values())),
            loss=loss,
            extra=extra,
            step_iqr_s=iqr(measured),
            workers=[w.to_dict() for w in pool.workers],
            slow_steps=list(slow or ()),
        )
        log.info(
            "ran %s on %d worker processes: step %.4g s (median of %d, IQR %.3g) after %d warm-up; traffic %.4g bytes",
            model.name,
            len(pool.workers),
            result.measured_step_s,
            self.steps,
            result.step_iqr_s,
            self.warmup,
            result.traffic_bytes,
        )
        return result
