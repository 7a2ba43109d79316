"""The TensorFlow backend (`backend=tensorflow`): model zoo in `tf.compat.v1` graph mode, capture with
colocation groups, step-stats profiler, communication micro-benchmark, placed execution.

Used by the orchestrator as::

    backend = instantiate(cfg.backend)                     # conf/backend/tensorflow.yaml
    model = backend.build(model_cfg)                       # plain dict of conf/model/<name>.yaml
    graph = backend.capture(model)
    graph = backend.profile(model, graph, warmup=5, steps=10, batch_size=None)
    fit = backend.comm_benchmark(cluster, sizes, repeats)
    result = backend.run(model, graph, placement, schedule, cluster, warmup=5, steps=20)

See models.py, capture.py, profiler.py, comm.py and runtime.py for what each step does and where it comes from.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ info/warning lines, unless set

from algorithms.cluster import Cluster
from algorithms.errors import ConfigError
from algorithms.graph import OpGraph
from backends.base import Backend, Capabilities, CommFit, RunResult
from backends.profilers import MeasuredProfiler

from .capture import capture as _capture
from .comm import comm_benchmark as _comm_benchmark
from .families import _BUILDERS
from .models import TFModel, build_model
from .profiler import CALIBRATIONS
from .profiler import profile as _profile
from .runtime import run_placed

__all__ = ["TFBackend", "TFMeasuredProfiler", "TFModel"]


class TFBackend(Backend):
    """TensorFlow 2 (tf.compat.v1 graph mode) backend.

    Hyper-parameters: `inter_op_threads` / `intra_op_threads` (session thread pools; 0 lets TensorFlow
    choose), `graph_rewrites` (False keeps Grappler and constant folding off so the ops that run are the ones
    captured and placed), `profile_statistic` (mean as Baechi 5.1, or median, over profiled steps),
    `profile_inter_op_threads` (1 by default: ops are profiled one at a time, as the simulator runs them on a
    device, so that concurrent ops do not inflate each other's measured time; 0 lets TensorFlow choose),
    `profile_calibration` ("untraced_step", the default, scales the step stats' op times so that their sum
    matches an untraced single-device step, removing the tracer's overhead, about 1.5x to 2x here; "none"
    keeps the raw step-stats times as Baechi did; see profiler.profile),
    `check_correctness` (run compares its loss after one step with a single-device run), `loss_rtol` (the
    tolerance of that comparison). `name` is accepted so that conf/backend/tensorflow.yaml can carry the
    backend's name beside its `_target_`.
    """

    name = "tensorflow"
    #: The runtime named `real` is the one `runtime=real` runs (the one-process-per-device runtime replaces
    #: ThreadsRuntime there). TensorFlow's executor picks the order among ready ops: no plan is followed, and
    #: the placed run does not time single ops.
    capabilities = Capabilities(
        models={family: f"{fn.__module__}.{fn.__qualname__}" for family, fn in _BUILDERS.items()},
        profilers={"measured": "backends.tensorflow.TFMeasuredProfiler"},
        runtimes={
            "threads": "backends.threads.ThreadsRuntime",
            "real": "backends.tensorflow.distributed.TFDistributedRuntime",
        },
        device_types=("CPU", "GPU"),
        follows_plan=False,
        times_ops=False,
        worker_runtimes=("real",),
    )

    def __init__(
        self,
        inter_op_threads: int = 0,
        intra_op_threads: int = 0,
        graph_rewrites: bool = False,
        profile_statistic: str = "mean",
        check_correctness: bool = True,
        loss_rtol: float = 1e-4,
        profile_inter_op_threads: int = 1,
        profile_calibration: str = "untraced_step",
        name: str = "tensorflow",
    ):
        if name != "tensorflow":
            raise ConfigError(f"backend.name={name!r} does not match TFBackend ('tensorflow')")
        if int(inter_op_threads) < 0 or int(intra_op_threads) < 0:
            raise ConfigError("backend.inter_op_threads and backend.intra_op_threads must be >= 0")
        if profile_statistic not in ("mean", "median"):
            raise ConfigError(f"backend.profile_statistic={profile_statistic!r} is not one of ['mean', 'median']")
        if profile_calibration not in CALIBRATIONS:
            raise ConfigError(f"backend.profile_calibration={profile_calibration!r} is not one of {list(CALIBRATIONS)}")
        if profile_calibration == "untraced_step" and int(profile_inter_op_threads) != 1:
            raise ConfigError(
                "backend.profile_calibration=untraced_step needs backend.profile_inter_op_threads=1; "
                "set profile_calibration=none to profile with more threads"
            )
        self.inter_op_threads = int(inter_op_threads)
        self.profile_inter_op_threads = int(profile_inter_op_threads)
        self.profile_calibration = str(profile_calibration)
        self.intra_op_threads = int(intra_op_threads)
        self.graph_rewrites = bool(graph_rewrites)
        self.profile_statistic = profile_statistic
        self.check_correctness = bool(check_correctness)
        self.loss_rtol = float(loss_rtol)

    def build(self, model_cfg: Mapping[str, Any]) -> TFModel:
        """Build the model of `model_cfg` (families linreg, mlp, inception_v3, gnmt, transformer, gpt)."""
        return build_model(model_cfg)

    def capture(self, model: TFModel) -> OpGraph:
        return _capture(model)

    def profile(
        self, model: TFModel, graph: OpGraph, *, warmup: int = 5, steps: int = 10, batch_size: int | None = None
    ) -> OpGraph:
        return _profile(
            model,
            graph,
            warmup=warmup,
            steps=steps,
            batch_size=batch_size,
            statistic=self.profile_statistic,
            inter_op_threads=self.profile_inter_op_threads,
            intra_op_threads=self.intra_op_threads,
            calibration=self.profile_calibration,
        )

    def comm_benchmark(self, cluster: Cluster, sizes: list[int] | None = None, repeats: int = 5) -> CommFit:
        return _comm_benchmark(
            cluster, sizes, repeats, inter_op_threads=self.inter_op_threads, intra_op_threads=self.intra_op_threads
        )

    def run(
        self,
        model: TFModel,
        graph: OpGraph,
        placement: Mapping[str, str],
        schedule: Mapping[str, list[str]],
        cluster: Cluster,
        *,
        warmup: int = 5,
        steps: int = 20,
        check_correctness: bool | None = None,
        time_ops: bool = False,
        plan: Any = None,
    ) -> RunResult:
        """Run placed training steps; the schedule is advisory for TensorFlow (its executor picks the order
        among ready ops). `RunResult.loss` is the loss of the second step, i.e. after one placed update;
        `extra` holds the per-step losses and, with `check_correctness` (None: the backend's setting), the
        single-device reference. `time_ops` and `plan` are refused (see `capabilities`)."""
        if plan is not None or time_ops:
            raise ConfigError(
                "backend tensorflow cannot follow a plan or time single ops in a placed run "
                "(capabilities.follows_plan and times_ops are False)"
            )
        check = self.check_correctness if check_correctness is None else bool(check_correctness)
        return run_placed(
            model,
            graph,
            placement,
            schedule,
            cluster,
            warmup=warmup,
            steps=steps,
            inter_op_threads=self.inter_op_threads,
            intra_op_threads=self.intra_op_threads,
            graph_rewrites=self.graph_rewrites,
            check_correctness=check,
            rtol=self.loss_rtol,
        )


class TFMeasuredProfiler(MeasuredProfiler):
    """`profiler=measured` on TensorFlow: `MeasuredProfiler`, which can also measure in the setting of
    `TFDistributedRuntime` (`runtime=real`, issue 16): ops traced in one pinned `tf.distribute.Server` worker
    of the cluster's first device (intra-op threads = its cores, one inter-op thread), driven over gRPC as a
    placed run is, op times calibrated to the untraced single-device step less the empty step
    (`dist_profile.profile_distributed`, with the backend's `profile_statistic` and `profile_calibration`); the
    communication model fitted from gRPC transfers between two worker processes
    (`dist_profile.comm_benchmark_distributed`, which also measures the empty step of two workers and the cost
    of a transfer in a burst); with ``comm_calibration: in_step``, and with ``auto`` (the default) in the
    workers' setting, the hop latency, per-message and per-byte costs are then fitted to the runtime's placed
    steps of two calibration programs (`calibrate.calibrate_in_step`, about five minutes more on cpu2, once per
    worker setting: the fit is cached). ``auto`` took the burst benchmark's costs until 27 Nov 2026; two sweeps
    of five models x 7 placers on cpu2 (docs/fidelity.md, sessions 24 and 25) then gave the in-step costs 15.5 %
    and 11.2 % median error over 31 runs each, against 19.3 % and 15.2 % with the benchmark's, and the full-size
    mlp 14.1 % and 8.0 % against 30.1 % and 23.7 % (mlp_tiny and inception_v3_tiny were better with the
    benchmark's in both). Cost: one worker start and warmup + 2 x steps steps; the fit: two worker starts and
    len(sizes) x 2 x repeats runs."""

    supports_workers = True
    has_in_step_calibration = True

    def worker_setting(
        self, backend: Backend, cluster: Cluster, threads: int | None, cuda_graph: bool = False
    ) -> dict[str, Any]:
        if cuda_graph:
            raise ConfigError("runtime.cuda_graph=true is a PyTorch GPU option; the TensorFlow runtime has none")
        cores = int(cluster.devices[0].cores)
        return {
            "runtime": "tf_distributed",
            "device": cluster.devices[0].type.lower(),
            "pinned": True,
            "cores": cores,
            "intra_op_threads": cores,
            "inter_op_threads": 1,
        }

    def profile_in_workers(
        self, backend: Backend, model: Any, graph: OpGraph, cluster: Cluster
    ) -> tuple[OpGraph, dict[str, Any]]:
        from .dist_profile import profile_distributed

        if not isinstance(backend, TFBackend):
            raise ConfigError(f"{type(self).__name__} needs backend=tensorflow, got {backend.name!r}")
        g = profile_distributed(
            model,
            graph,
            cluster,
            warmup=self.warmup,
            steps=self.steps,
            batch_size=self.batch_size,
            statistic=backend.profile_statistic,
            calibration=backend.profile_calibration,
        )
        return g, dict(g.nx.graph.get("profile", {}))

    def comm_in_workers(self, backend: Backend, cluster: Cluster) -> CommFit:
        from .dist_profile import comm_benchmark_distributed

        fit = comm_benchmark_distributed(cluster, self.comm_sizes, self.comm_repeats)
        if self.calibration() != "in_step" or len(cluster.devices) < 2:
            return fit
        from .calibrate import calibrate_in_step

        total = fit.send_overhead_s + fit.recv_overhead_s
        cal = calibrate_in_step(
            cluster.with_comm(fit.latency_s, fit.bytes_per_s, {}),
            step_overhead_s=fit.step_overhead_s,
            send_share=fit.send_overhead_s / total if total > 0 else 0.5,
            benchmark_costs=(fit.send_overhead_s, fit.recv_overhead_s),
        )
        # the in-step hop for every pair (the benchmark's per-pair links would override it); the samples stay
        # the benchmark's, fitted with its own latency (`pingpong_latency_s`, which comm.json's residual uses)
        return dataclasses.replace(
            fit,
            latency_s=cal.latency_s,
            links={},
            send_overhead_s=cal.send_overhead_s,
            recv_overhead_s=cal.recv_overhead_s,
            pingpong_latency_s=fit.latency_s,
            calibration_rel_rms=cal.rel_rms,
            send_byte_s=cal.send_byte_s,
            recv_byte_s=cal.recv_byte_s,
        )

    def fixed_step_s(self, report: Mapping[str, Any], comm: Mapping[str, Any], n_workers: int) -> float:
        """The empty step (client, master and executors running one NoOp): the profile's on one worker, the
        fit's (`step_overhead_s`, measured on two workers) on more (`dist_profile.predicted_step`: the op times
        are calibrated to the single-device step less that fixed cost, which the prediction adds back)."""
        one = float(report.get("step_overhead_s") or 0.0)
        if n_workers <= 1:
            return one
        return float(comm.get("step_overhead_s") or one)
