"""The PyTorch backend: model zoo, capture (torch.fx / make_fx), profiler, communication benchmark, runtime.

    backend = TorchBackend(granularity="operator", device="auto", threads=None)
    model = backend.build(model_cfg)                 # conf/model/<name>.yaml as a plain dict
    graph = backend.capture(model)                   # OpGraph of forward + loss + backward + update
    graph = backend.profile(model, graph, warmup=5, steps=10, batch_size=None)
    fit = backend.comm_benchmark(cluster, sizes, repeats)
    result = backend.run(model, graph, placement, schedule, cluster, warmup=5, steps=20)

What it provides to the registry is `TorchBackend.capabilities`.
See capture.py, profiler.py, comm.py and runtime.py for what each step does and costs.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from tqdm import tqdm

from algorithms.cluster import Cluster
from algorithms.errors import ConfigError, InvalidGraph
from algorithms.graph import OpGraph

from ..base import Backend, Capabilities, CommFit, RunResult
from ..profilers import MeasuredProfiler
from .capture import GRANULARITIES, build_graph, trace_program
from .comm import comm_benchmark as _comm_benchmark
from .devices import DEVICE_CHOICES, map_devices, set_threads
from .models import BUILDERS, TorchModel, build_model
from .profiler import profile_graph
from .reference import compare_outputs, reference_step
from .runtime import PlacedExecutor

log = logging.getLogger(__name__)


class TorchBackend(Backend):
    """PyTorch backend (conf/backend/torch.yaml).

    granularity: "operator" (one op per aten op) or "module" (ops grouped per module call, see capture.py);
    device: "auto" (CUDA when present, else CPU), "cpu" or "cuda" (profiling device and how GPU-type cluster
    devices are mapped); threads: intra-op threads of each virtual CPU device, used when profiling too, so that
    an op runs in the placed step as it ran when profiled (None: PyTorch's current count when profiling, split
    among the CPU workers at run time; tiny ops then cost far more in the profile than in the run, because
    OpenMP's fork-join dominates them: 10x for gnmt_tiny on a loaded 2-core machine); check_correctness: compare the
    first placed step with a single-device step
    (loss and gradients within rtol/atol) and record the outcome in RunResult.extra.
    """

    name = "torch"
    #: The runtime named `real` is the one `runtime=real` runs (the one-process-per-device runtime replaces
    #: ThreadsRuntime there).
    capabilities = Capabilities(
        models={family: f"{fn.__module__}.{fn.__qualname__}" for family, fn in BUILDERS.items()},
        profilers={"measured": "backends.torch.TorchMeasuredProfiler"},
        runtimes={
            "threads": "backends.threads.ThreadsRuntime",
            "real": "backends.torch.distributed.TorchDistributedRuntime",
        },
        device_types=("CPU", "GPU"),
        follows_plan=True,
        times_ops=True,
        worker_runtimes=("real",),
        receives_up_front=("real",),  # gloo with post_receives=up_front: every irecv before the step (worker.py)
    )

    def __init__(
        self,
        granularity: str = "operator",
        device: str = "auto",
        threads: int | None = 1,
        check_correctness: bool = True,
        rtol: float = 1e-4,
        atol: float = 1e-5,
        name: str = "torch",
    ):
        if granularity not in GRANULARITIES:
            raise ConfigError(f"backend.granularity {granularity!r} is not one of {GRANULARITIES}")
        if device not in DEVICE_CHOICES:
            raise ConfigError(f"backend.device {device!r} is not one of {DEVICE_CHOICES}")
        self.name = name
        self.granularity = granularity
        self.device = device
        self.threads = int(threads) if threads else None
        self.check_correctness = bool(check_correctness)
        self.rtol, self.atol = float(rtol), float(atol)

    # ------------------------------------------------------------------ helpers
    def compute_device(self) -> torch.device:
        """The device a single-device profile runs on."""
        if self.device == "cuda" or (self.device == "auto" and torch.cuda.is_available()):
            if not torch.cuda.is_available():
                raise ConfigError("backend.device=cuda but no CUDA device is available")
            return torch.device("cuda", 0)
        return torch.device("cpu")

    def _threads(self):
        class _Ctx:
            def __enter__(ctx):
                ctx.prev = torch.get_num_threads()
                if self.threads:
                    torch.set_num_threads(self.threads)

            def __exit__(ctx, *exc):
                torch.set_num_threads(ctx.prev)

        return _Ctx()

    # ------------------------------------------------------------------ the contract
    def build(self, model_cfg: Mapping[str, Any]) -> TorchModel:
        return build_model(model_cfg)

    def capture(self, model: TorchModel) -> OpGraph:
        """Trace the training step (and run it once for the tensor sizes), then group it into ops; a progress bar
        (tqdm, shown on a terminal) names the phase."""
        with tqdm(total=2, desc=f"capture {model.name}: trace", unit="phase", disable=None, leave=False) as bar:
            with self._threads():
                prog = trace_program(model, self.granularity, model.batch_size, device=self.compute_device())
            bar.update()
            bar.set_description(f"capture {model.name}: op graph")
            graph = build_graph(prog).validate()
            bar.update()
        return graph

    def profile(
        self, model: TorchModel, graph: OpGraph, *, warmup: int = 5, steps: int = 10, batch_size: int | None = None
    ) -> OpGraph:
        with self._threads():
            return profile_graph(
                model,
                graph,
                granularity=self.granularity,
                device=self.compute_device(),
                warmup=int(warmup),
                steps=int(steps),
                batch_size=batch_size,
            )

    def comm_benchmark(self, cluster: Cluster, sizes: list[int] | None = None, repeats: int = 5) -> CommFit:
        return _comm_benchmark(cluster, sizes, int(repeats), prefer=self.device)

    def run(
        self,
        model: TorchModel,
        graph: OpGraph,
        placement: Mapping[str, str],
        schedule: Mapping[str, list[str]] | None,
        cluster: Cluster,
        *,
        warmup: int = 5,
        steps: int = 20,
        check_correctness: bool | None = None,
        time_ops: bool = False,
        plan: tuple[Mapping[str, float], Sequence[tuple[str, str, float]]] | None = None,
    ) -> RunResult:
        """Execute `warmup + steps` placed training steps from the model's initial parameters (the model
        itself is not modified); see runtime.py. `schedule` None means capture (topological) order.
        With `time_ops`, every op of the measured steps is timed on its device (wall time minus waits for its
        inputs; median over the steps) into `extra["op_times_s"]` (the Standard Evaluation's step 2).
        The ops of the median measured step (by step time), as they ran, go into `extra["op_timeline"]`
        ([{"op", "device", "start_s", "end_s"}], after each op's waits for its inputs; with a plan, serial in its
        order) and `extra["op_timeline_clock"]` says how they were timed (planned and serial; or synchronised: CPU,
        or CUDA with `time_ops`).
        With `plan` = (planned start per op, [(producer op, destination device, arrival time)]), e.g. from the
        simulator, the step runs on one thread in the plan's order (`PlacedExecutor.step_planned`: live memory
        per virtual device then follows the plan, and the step time is a serial one); CPU devices only."""
        if steps < 1:
            raise ConfigError(f"runtime.steps must be >= 1, got {steps}")
        assign = dict(getattr(placement, "assignment", placement))
        devices = map_devices(cluster, self.device)
        trace_dev = next((d.torch_device for d in devices if d.is_cuda), torch.device("cpu"))
        prog = trace_program(model, self.granularity, model.batch_size, device=trace_dev)
        extra_ops = [op for op in graph.ops if op not in prog.op_nodes]
        if extra_ops or len(graph) != len(prog.op_nodes):
            raise InvalidGraph(
                f"graph {graph.name!r} does not match the {self.granularity}-level capture of "
                f"{model.name!r} (e.g. {extra_ops[:3]}); run with the backend that captured it"
            )
        if schedule is None:
            schedule = {d.name: [] for d in devices}
            for op in prog.op_nodes:
                schedule[assign[op]].append(op)
        check = self.check_correctness if check_correctness is None else check_correctness
        params = [p.detach().to(trace_dev) for p in model.module.parameters()]
        flat = prog.flat_inputs(model, params=params)
        flat = [t.to(trace_dev) for t in flat]
        n_cpu = sum(1 for d in devices if not d.is_cuda)
        prev_threads, per_worker = set_threads(n_cpu, self.threads)
        check_info: dict[str, Any] = {}
        try:
            ex = PlacedExecutor(
                prog,
                assign,
                schedule,
                devices,
                flat[: prog.n_params],
                flat[prog.n_params : prog.n_params * (1 + prog.n_state)],
                flat[prog.n_params * (1 + prog.n_state) :],
                # a planned step holds each received storage once, as the simulator counts (step_planned)
                share_storages=plan is not None,
            )
            try:
                for d in devices:
                    if d.is_cuda and not d.shared:
                        torch.cuda.reset_peak_memory_stats(d.torch_device)
                ex.time_ops = bool(time_ops)
                events = None
                if plan is not None:
                    if any(d.is_cuda for d in devices):
                        raise ConfigError(
                            "runtime.order=planned runs virtual CPU devices one op at a time; "
                            "with GPUs use runtime.order=threads"
                        )
                    events = ex.plan_from(*plan)
                op_samples: dict[str, list[float]] = {}
                spans: list[dict[str, tuple[str, float, float]]] = []
                times, losses = [], []
                busy: dict[str, list[float]] = {d.name: [] for d in devices}
                wait: dict[str, list[float]] = {d.name: [] for d in devices}
                for k in tqdm(
                    range(warmup + steps), desc="run (warm-up + measured steps)", unit="step", disable=None, leave=False
                ):
                    if events is None:
                        dt, outs = ex.step(retain_grads=(k == 0 and check))
                    else:
                        dt, outs = ex.step_planned(events, retain_grads=(k == 0 and check))
                    losses.append(float(outs[0]))
                    if k == 0 and check:
                        torch.set_num_threads(max(1, self.threads or prev_threads))
                        ref = reference_step(prog, flat)
                        torch.set_num_threads(per_worker)
                        check_info = compare_outputs(outs, ref, prog, self.rtol, self.atol)
                        if not check_info["correct"]:
                            log.warning("placed step differs from the single-device step: %s", check_info)
                    if k >= warmup:
                        times.append(dt)
                        for op, t in ex.last_op_times.items():
                            op_samples.setdefault(op, []).append(t)
                        spans.append(dict(ex.last_op_spans))
                        for name in busy:
                            busy[name].append(ex.last_busy[name])
                            wait[name].append(ex.last_wait[name])
                peaks = {}
                for i, d in enumerate(devices):
                    if d.is_cuda and not d.shared:
                        peaks[d.name] = float(torch.cuda.max_memory_allocated(d.torch_device))
                    else:
                        peaks[d.name] = float(ex.peak[i])
                traffic = ex.traffic
            finally:
                ex.close()
        finally:
            torch.set_num_threads(prev_threads)
        extra = {
            "losses": losses,
            "busy_s": {k: statistics.median(v) for k, v in busy.items()},
            "wait_s": {k: statistics.median(v) for k, v in wait.items()},
            "threads_per_worker": per_worker,
            "physical_devices": {d.name: str(d.torch_device) for d in devices},
            **check_info,
        }
        if time_ops:
            extra["op_times_s"] = {op: statistics.median(v) for op, v in op_samples.items()}
        median_step = sorted(range(len(times)), key=times.__getitem__)[len(times) // 2]
        if spans and spans[median_step]:  # the ops of the median measured step, as they ran (trace.json)
            extra["op_timeline"] = [
                {"op": op, "device": dev, "start_s": s, "end_s": e}
                for op, (dev, s, e) in sorted(spans[median_step].items(), key=lambda kv: kv[1][1])
            ]
            synced = bool(time_ops) or not any(d.is_cuda for d in devices)
            extra["op_timeline_clock"] = (
                "planned order: one op at a time, serial"
                if events is not None
                else ("op ends synchronised" if synced else "CUDA kernels issued (not synchronised)")
            )
        measured = statistics.median(times)
        log.info(
            "ran %s on %s: median step %.4g s over %d steps, traffic %.3g B/step",
            model.name,
            cluster.name,
            measured,
            len(times),
            traffic,
        )
        return RunResult(
            measured_step_s=measured,
            step_times_s=times,
            peak_memory_bytes=peaks,
            traffic_bytes=traffic,
            loss=losses[0],
            extra=extra,
        )


class TorchMeasuredProfiler(MeasuredProfiler):
    """`profiler=measured` on PyTorch: `MeasuredProfiler`, which can also measure in the setting of
    `TorchDistributedRuntime` (`runtime=real`, issue 16): every op timed in one worker process of that runtime,
    pinned to a device's cores with the workers' thread count, running the whole step through the worker's own
    loop (`profiler.profile_in_worker`, its scaled-median statistic); the communication model fitted from two
    such workers' isend/irecv, with the processor time per message (`comm.comm_benchmark_distributed`). On a
    cluster of GPUs (with CUDA present) the worker is a GPU worker timing ops with CUDA events and the fit comes
    from NCCL round trips; a cluster mixing GPUs and CPUs is profiled in this process. Where the costs are
    calibrated in-step on CPU workers, the profile's report also holds `speed_reference_s`, the wide calibration
    program's single-device step just after the profile (`calibrate.speed_reference`), which
    `profiler.comm_rescale=reference` compares with the calibration's. Cost: one worker start and warmup + steps
    steps (plus a few seconds for the reference); the fit: len(sizes) x (repeats + 1) round trips and two worker
    starts."""

    supports_workers = True
    has_in_step_calibration = True

    def workers_unsupported(self, cluster: Cluster) -> str | None:
        import torch

        gpus = [d.name for d in cluster.devices if d.type == "GPU"]
        if not gpus:
            return None
        if len(gpus) < len(cluster.devices):
            others = [d.name for d in cluster.devices if d.type != "GPU"]
            return f"cluster {cluster.name!r} mixes GPUs {gpus} with other devices {others}; the runtime runs one kind"
        if not torch.cuda.is_available():
            return f"cluster {cluster.name!r} has GPUs {gpus} but this host has no CUDA device"
        return None

    def calibration(self) -> str:
        # the in-step calibration fits gloo's per-message costs; NCCL workers use the ping-pong's fit
        if (self.workers or {}).get("device") == "cuda":
            return "benchmark"
        return super().calibration()

    def worker_setting(
        self, backend: Backend, cluster: Cluster, threads: int | None, cuda_graph: bool = False
    ) -> dict[str, Any]:
        from .distributed import uses_cuda
        from .profiler import worker_setting

        return worker_setting(cluster, threads, cuda=uses_cuda(cluster), cuda_graph=cuda_graph)

    def profile_in_workers(
        self, backend: Backend, model: Any, graph: OpGraph, cluster: Cluster
    ) -> tuple[OpGraph, dict[str, Any]]:
        from .profiler import profile_in_worker

        if not isinstance(backend, TorchBackend):
            raise ConfigError(f"{type(self).__name__} needs backend=torch, got {backend.name!r}")
        g, report = profile_in_worker(
            model,
            graph,
            granularity=backend.granularity,
            setting=self.workers,
            warmup=self.warmup,
            steps=self.steps,
            batch_size=self.batch_size,
        )
        if (self.workers or {}).get("device") != "cuda" and self.calibration() == "in_step":
            # the machine's speed at this profile, for the in-step costs' rescaling (`profiler.comm_rescale`)
            from .calibrate import speed_reference

            report = {**report, "speed_reference_s": speed_reference(cluster)}
        return g, report

    def comm_in_workers(self, backend: Backend, cluster: Cluster) -> CommFit:
        from .comm import comm_benchmark_distributed

        return comm_benchmark_distributed(
            cluster,
            self.comm_sizes,
            self.comm_repeats,
            transport_policy=self.transport_policy,
            in_step=self.calibration() == "in_step",
            cuda=(self.workers or {}).get("device") == "cuda",
            shared_core_slowdown=self.comm_shared_core_slowdown,
            recv_work=self.comm_recv_work,
            send_wake=self.comm_send_wake and self.calibration() == "in_step",
        )


__all__ = ["TorchBackend", "TorchMeasuredProfiler", "TorchModel", "build_model"]
