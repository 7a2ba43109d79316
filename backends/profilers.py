"""The profilers every backend provides: `file` (the graph's own costs), `thesis_costs` (the thesis' random costs
on the graph's structure) and `measured` (the backend's profiler).

`conf/profiler/file.yaml` names `FileProfiler` with `_target_`; `conf/profiler/measured.yaml` names the profiler
`measured`, which each backend maps in its `capabilities.profilers` to `MeasuredProfiler` or to a subclass that
can also measure in the setting of its process-per-device runtime (`TorchMeasuredProfiler`, `TFMeasuredProfiler`).
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from algorithms.cluster import Cluster
from algorithms.errors import ConfigError
from algorithms.graph import OpGraph

from .base import Backend, CommFit, Profiler

log = logging.getLogger(__name__)


class FileProfiler(Profiler):
    """Costs already in the graph (a graph file or the synthetic generator): nothing is measured. A graph whose
    ops all have no compute time (a framework model captured but never profiled) is placed and simulated as it
    is, with a warning: every placer would predict a step of about 0 s."""

    measures = False

    def profile(
        self, backend: Backend | None, model: Any, graph: OpGraph, cluster: Cluster, *, model_cfg: Mapping[str, Any]
    ) -> tuple[OpGraph, dict[str, Any]]:
        nodes = graph.nx._node  # networkx's documented DiGraph data structure
        if nodes and not any(a.get("compute_s") or a.get("compute_s_by_type") for a in nodes.values()):
            log.warning(
                "profiler=file: no op of graph %r has a compute time (a captured model that was not profiled): "
                "predicted steps will count only transfers; profiler=measured measures the ops",
                graph.name,
            )
        return graph, {}


class ThesisCostsProfiler(Profiler):
    """The thesis' random costs on the captured graph's structure (`algorithms.workloads.synthetic.thesis_costs`:
    #ops, memory demand and tensor sizes drawn from 1..100; seed 004, 6.1-6.2), as the thesis evaluates its
    TensorFlow graphs (7.2). Nothing is run; the drawn graph is cached as a profile. Keys: `thesis_costs`'."""

    comm_benchmark = False

    def __init__(self, **draws: Any):
        self.draws = dict(draws)

    def profile(
        self, backend: Backend | None, model: Any, graph: OpGraph, cluster: Cluster, *, model_cfg: Mapping[str, Any]
    ) -> tuple[OpGraph, dict[str, Any]]:
        from algorithms.workloads.synthetic import thesis_costs

        try:
            out = thesis_costs(graph, **self.draws)
        except TypeError as exc:  # an unknown key
            raise ConfigError(f"profiler=thesis_costs: {exc}") from exc
        return out, {}


class MeasuredProfiler(Profiler):
    """Per-op compute time and memory measured by the backend (warm-up steps, then the median of measured steps).

    `batch_size` None profiles at the model's batch size; `comm_benchmark` also fits latency + bytes / bandwidth
    between the cluster's devices (sizes `comm_sizes`, `comm_repeats` repeats each). Cost: warmup + steps
    training steps of the model on one device, plus the micro-benchmark.

    `setting` says where ops and messages are measured (issue 16: profile in the setting the step runs in):

    * ``"process"``: in this process (`backend.profile`, `backend.comm_benchmark`), the setting of the
      in-process runtimes;
    * ``"worker"``: in the setting of the backend's process-per-device runtime (one pinned worker process with
      the workers' thread count; communication from that runtime's own send/recv between two workers, with the
      processor time per message). Only the backends' subclasses (`supports_workers`) can;
    * ``"auto"`` (default): ``"worker"`` when the job runs a runtime the backend declares in
      `capabilities.worker_runtimes`, else ``"process"``.

    The job resolves the setting (`resolve`) and fixes the workers' setting with `use_workers` before
    profiling; that dict (cores per worker, threads, ...) is part of the profile's and the fit's cache keys.

    `comm_calibration` says where the workers' per-message costs come from: ``"benchmark"`` a
    ping-pong for the hop and a busy-worker loop for the processor time per message; ``"in_step"`` (about a
    minute more) fits hop and per-message costs to placed steps of a synthetic model in the runtime itself
    (`backends.torch.calibrate`, `backends.tensorflow.calibrate`; not on GPU workers): median prediction
    errors of 8-25% per model on pinned CPU workers, gnmt_tiny 11% where the benchmark's costs gave 29%
    (docs/fidelity.md, 24 November); ``"auto"`` in_step where the job measures in the workers' setting of a
    backend that has one (PyTorch's CPU workers; TensorFlow's workers since 27 November, when two sweeps gave its
    in-step costs 11-16 % against the benchmark's 15-19 %), else benchmark; the default since 29 Nov 2026, when
    the benchmark's costs, which have no per-byte time, predicted GNMT's message-heavy placements on cpu2 39-52 %
    short (conf/profiler/measured.yaml).

    `comm_shared_core_slowdown`: where the workers share host cores (cpu4 on two cores), the simulator's charge
    for time-sharing a core (`algorithms.simulator`, ``shared_core_slowdown``), which the workers' fit is made
    with and carries to the predictions (PyTorch's workers; 0: none).

    `comm_recv_work`: where the simulator spends a receive's processor time (`simulate(recv_work=...)`), which
    PyTorch's in-step fit is made under and carries to the predictions (comm.json's ``recv_work``):
    ``"in_consumer"`` (the default) or a read by gloo's idle-class transport thread in the receiver's idle time
    (``"when_idle"``, ``"bytes_when_idle"``); session 42's pre-declared tests kept the default
    (conf/profiler/measured.yaml).

    `comm_rescale`: ``"reference"`` multiplies the in-step per-message and per-byte costs by the machine's speed
    when the model was profiled over its speed when the costs were calibrated, each the wide calibration
    program's single-device step in the workers' setting (`backends.calibration.rescale_factor`: the profile's
    `speed_reference_s` over comm.json's), so that a fit cached from a slow hour does not charge a profile taken in
    a fast one; ``"none"`` (the default) uses the costs as calibrated: session 43's pre-declared cross-hour test
    failed (costs from an hour whose wide program ran 20 % slower predicted 6.2 % as fitted, 7.7 % rescaled;
    conf/profiler/measured.yaml). PyTorch's CPU workers measure the references; elsewhere nothing is rescaled.

    `comm_send_wake`: PyTorch's CPU workers with the in-step costs: time an isend to an idle and to a computing
    receiver and charge the difference per send to an idle receiver, in the fit and in the predictions
    (`backends.torch.wake`, `simulate(send_wake_s=...)`; comm.json's ``send_wake_s``). Off by default: it passed
    session 43's pre-declared test (median error 5.0 to 4.5 % on cpu2, 11.1 to 7.0 % on cpu4) and failed the
    replicate (13.4 % against 6.6 % on cpu2): the calibration cannot separate the charge from the per-message costs
    (docs/fidelity.md).

    `trial`: the index of an independent repetition of the whole measurement (0 by default). The profile and the
    communication fit are cached per trial, so that trials 0, 1, 2 are three measurements of the same model on
    the same machine, and a comparison of placers can be checked against their spread (`orchestrator.reproduce`
    reads it; ten fresh profiles of gnmt_mem_limited, session 31: each placer's predicted step moved 3-6 %
    (coefficient of variation), and m-ETF and m-SCT, 2 % apart on average, swapped places in 4 of 10)."""

    #: Whether this class can measure in the workers' setting (`profile_in_workers`, `comm_in_workers`).
    supports_workers: bool = False
    SETTINGS = ("auto", "worker", "process")
    CALIBRATIONS = ("benchmark", "in_step", "auto")
    RESCALES = ("none", "reference")
    #: Whether the backend's workers' runtime has an in-step calibration of its message costs.
    has_in_step_calibration: bool = False

    def __init__(
        self,
        warmup: int = 5,
        steps: int = 10,
        batch_size: int | None = None,
        comm_benchmark: bool = True,
        comm_sizes: Sequence[int] | None = None,
        comm_repeats: int = 5,
        setting: str = "auto",
        comm_calibration: str = "auto",
        comm_shared_core_slowdown: float = 0.0,
        trial: int = 0,
        comm_recv_work: str = "in_consumer",
        comm_rescale: str = "none",
        comm_send_wake: bool = False,
    ):
        if int(steps) < 1 or int(warmup) < 0:
            raise ConfigError(f"profiler.steps must be >= 1 and profiler.warmup >= 0, got {steps} and {warmup}")
        if setting not in self.SETTINGS:
            raise ConfigError(f"profiler.setting {setting!r} is not one of {list(self.SETTINGS)}")
        self.warmup, self.steps = int(warmup), int(steps)
        self.batch_size = None if batch_size is None else int(batch_size)
        self.comm_benchmark = bool(comm_benchmark)
        self.comm_sizes = [int(s) for s in comm_sizes] if comm_sizes else None
        self.comm_repeats = int(comm_repeats)
        if comm_calibration not in self.CALIBRATIONS:
            raise ConfigError(f"profiler.comm_calibration {comm_calibration!r} is not one of {list(self.CALIBRATIONS)}")
        self.setting = setting
        self.comm_calibration = comm_calibration
        if not float(comm_shared_core_slowdown) >= 0:
            raise ConfigError(f"profiler.comm_shared_core_slowdown must be >= 0, got {comm_shared_core_slowdown!r}")
        self.comm_shared_core_slowdown = float(comm_shared_core_slowdown)
        from algorithms.simulator import RECV_WORK

        if comm_recv_work not in RECV_WORK:
            raise ConfigError(f"profiler.comm_recv_work {comm_recv_work!r} is not one of {list(RECV_WORK)}")
        self.comm_recv_work = str(comm_recv_work)
        if comm_rescale not in self.RESCALES:
            raise ConfigError(f"profiler.comm_rescale {comm_rescale!r} is not one of {list(self.RESCALES)}")
        self.comm_rescale = str(comm_rescale)
        if not isinstance(comm_send_wake, bool):
            raise ConfigError(f"profiler.comm_send_wake must be true or false, got {comm_send_wake!r}")
        self.comm_send_wake = comm_send_wake
        try:
            whole = not isinstance(trial, bool) and int(trial) == trial >= 0
        except (TypeError, ValueError):
            whole = False
        if not whole:
            raise ConfigError(f"profiler.trial must be an integer >= 0, got {trial!r}")
        #: Which of several independent measurements this is (a profile and a communication fit cached per
        #: trial): `profiler.trial=0,1,2 -m` measures three, and the scoreboard reads the spread between them.
        self.trial = int(trial)
        #: The runtime's transport-thread policy (`runtime.transport_priority`, PyTorch's process-per-device
        #: runtime), which the workers' fit measures under; set by the job.
        self.transport_policy = "idle"
        #: The workers' setting measured in (set by `use_workers`); None: in this process.
        self.workers: dict[str, Any] | None = None

    def resolve(self, runtime_in_workers: bool, cluster: Cluster) -> bool:
        """Whether to measure in the workers' setting, given whether the job's runtime runs in workers. An
        explicit ``setting: worker`` that this class cannot honour on `cluster` is a ConfigError; ``auto`` then
        measures in this process."""
        want = runtime_in_workers if self.setting == "auto" else self.setting == "worker"
        if not want:
            return False
        why = self.workers_unsupported(cluster)
        if why is None:
            return True
        if self.setting == "worker":
            raise ConfigError(f"profiler.setting=worker: {why}")
        log.warning("profiling in this process, not in the runtime's workers: %s", why)
        return False

    def workers_unsupported(self, cluster: Cluster) -> str | None:
        """Why this class cannot measure in the workers' setting on `cluster` (None: it can)."""
        if not self.supports_workers:
            return f"{type(self).__name__} cannot measure in a worker process"
        return None

    def worker_setting(
        self, backend: Backend, cluster: Cluster, threads: int | None, cuda_graph: bool = False
    ) -> dict[str, Any]:
        """What the runtime's workers look like (for the cache keys): overridden by the backends' subclasses.
        `threads` is the runtime's intra-op thread count (None: one per core); `cuda_graph`: the runtime
        replays each step as a CUDA graph (`runtime.cuda_graph`; a ConfigError where the backend has none)."""
        raise ConfigError(f"{type(self).__name__} cannot measure in a worker process")

    def use_workers(self, setting: dict[str, Any] | None) -> None:
        """Measure in this workers' setting from now on (None: in this process)."""
        self.workers = None if setting is None else dict(setting)

    def profile(
        self, backend: Backend | None, model: Any, graph: OpGraph, cluster: Cluster, *, model_cfg: Mapping[str, Any]
    ) -> tuple[OpGraph, dict[str, Any]]:
        if backend is None:
            raise ConfigError("profiler=measured needs a framework backend (backend=torch or backend=tensorflow)")
        if self.workers is not None:
            return self.profile_in_workers(backend, model, graph, cluster)
        g = backend.profile(model, graph, warmup=self.warmup, steps=self.steps, batch_size=self.batch_size)
        return g, {}

    def fit_comm(self, backend: Backend, cluster: Cluster) -> CommFit:
        """The communication fit between the cluster's devices, in the setting measured in."""
        if self.workers is not None:
            return self.comm_in_workers(backend, cluster)
        if self.calibration() == "in_step":
            raise ConfigError(
                f"profiler.comm_calibration={self.comm_calibration}: calibrates the process-per-device runtime's "
                "messages, but this job measures in this process (profiler.setting, runtime)"
            )
        return backend.comm_benchmark(cluster, self.comm_sizes, self.comm_repeats)

    def calibration(self) -> str:
        """The calibration the fit uses: `comm_calibration` with ``"auto"`` resolved (`use_workers` first)."""
        if self.comm_calibration != "auto":
            return self.comm_calibration
        return "in_step" if self.has_in_step_calibration and self.workers is not None else "benchmark"

    def publish(self, report: Mapping[str, Any], out: Path) -> tuple[dict[str, float], list[Path]]:
        """The numbers of a worker profile's report (its check against the measured single-device step: e.g.
        `sum_op_s`, `step_s`, `median_scale` on PyTorch, `untraced_step_s`, `step_overhead_s`, `scale` on
        TensorFlow) as metrics `profile.<key>`; nothing to write."""
        nums = {k: v for k, v in report.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        return {f"profile.{k}": float(v) for k, v in nums.items()}, []

    def fixed_step_s(self, report: Mapping[str, Any], comm: Mapping[str, Any], n_workers: int) -> float:
        """Time every step of the workers' runtime pays besides its ops and messages, for a placement on
        `n_workers` devices, from the profile's `report` and the fit's comm.json (`comm`); added to the
        simulated makespan. 0 here: the op costs add up to the measured step."""
        return 0.0

    def profile_in_workers(
        self, backend: Backend, model: Any, graph: OpGraph, cluster: Cluster
    ) -> tuple[OpGraph, dict[str, Any]]:
        """The profile taken in a worker process of `self.workers`' setting (the backends' subclasses)."""
        raise ConfigError(f"{type(self).__name__} cannot profile in a worker process")

    def comm_in_workers(self, backend: Backend, cluster: Cluster) -> CommFit:
        """The fit from the process-per-device runtime's own transfers (the backends' subclasses)."""
        raise ConfigError(f"{type(self).__name__} cannot fit communication between worker processes")


def mean_profile(graphs: Sequence[OpGraph]) -> OpGraph:
    """A copy of ``graphs[0]`` whose op times are the mean over `graphs` (profiles of the same graph, e.g. of
    several rounds)."""
    if len(graphs) == 1:
        return graphs[0]
    out = graphs[0].copy()
    for op in out.ops:
        out.op(op)["compute_s"] = statistics.fmean(g.op(op)["compute_s"] for g in graphs)
    out.invalidate()
    return out
