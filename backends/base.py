"""The contracts of the framework side: backends, the capabilities they declare, models, profilers, runtimes.

A backend never imports the orchestrator; it receives plain dicts (the model config) and data-model objects.

Every stage choice is a Hydra config found through one registry (orchestrator.registry): a `conf/<group>/<name>.yaml`
whose `_target_` names a class, or, for models, profilers and runtimes, a name that the chosen backend provides
(`Backend.capabilities`). The orchestrator never inspects signatures: what a backend can do is declared here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from algorithms.cluster import Cluster
from algorithms.graph import OpGraph


def agrees(max_abs_diff: float, ref_max_abs: float, rtol: float, atol: float) -> bool:
    """The correctness rule of every runtime: a placed tensor agrees with its single-device reference when its
    largest elementwise difference is at most ``atol + rtol * max|reference|``.

    The tolerance scales with the tensor's largest magnitude, not each element's: elementwise relative checks
    fail on sums with cancellation, whose small elements carry the rounding of the large terms they came from
    (inception_v3_tiny's first conv in PyTorch: gradients up to 1.1e3, an element 7.8e-4 apart when a placement
    adds the same terms in another order). `atol` covers tensors that are zero up to rounding, where a relative
    rule alone measures noise against noise (TensorFlow gnmt_tiny under m-ETF: a gradient whose largest element
    is 3.7e-11 differs by 4e-14, 1.1e-3 of its own scale). A NaN difference never agrees."""
    return bool(max_abs_diff <= atol + rtol * ref_max_abs)


@dataclass
class CommFit:
    """A fitted communication model ``t = latency_s + bytes / bytes_per_s``; per-pair fits in `links`
    ({(src, dst): (latency_s, bytes_per_s)}), raw samples (src, dst, bytes, seconds) in `samples`."""

    latency_s: float
    bytes_per_s: float
    links: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    samples: list[tuple[str, str, float, float]] = field(default_factory=list)


@dataclass
class RunResult:
    """What a real placed execution measured.

    `step_times_s` are the measured steps after warm-up; `slow_steps` the indices of those a slow spell of a
    worker's core touched (`backends.interference.slow_steps`), which the runtime leaves out; `measured_step_s` is
    the median of the others (`counted_times`), `step_iqr_s` their inter-quartile range; `peak_memory_bytes` the
    measured peak per device; `workers` one entry per worker process, ``{"device", "pid", "cores"}`` (result.json
    `runtime_workers`)."""

    measured_step_s: float
    step_times_s: list[float]
    peak_memory_bytes: dict[str, float]
    traffic_bytes: float
    loss: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    step_iqr_s: float | None = None
    workers: list[dict[str, Any]] = field(default_factory=list)
    slow_steps: list[int] = field(default_factory=list)

    def counted_times(self) -> list[float]:
        """The measured steps `measured_step_s` is the median of: `step_times_s` less `slow_steps`."""
        slow = set(self.slow_steps)
        return [t for k, t in enumerate(self.step_times_s) if k not in slow]


@dataclass(frozen=True)
class Capabilities:
    """What a backend declares it can do (read by the orchestrator instead of guessing from signatures).

    `models`: model family -> the dotted path of its builder (conf/model/<name>.yaml with `family:` and no
    `_target_` is built by the backend's zoo); `profilers` and `runtimes`: name -> dotted class path, the classes a
    `conf/profiler/<name>.yaml` or `conf/runtime/<name>.yaml` without `_target_` gets (its other keys are the
    constructor's arguments); `device_types`: the cluster device types it can run on; `follows_plan`:
    `run(..., plan=...)` executes ops in a simulated plan's order; `times_ops`: `run(..., time_ops=True)` times
    every op on its device (`RunResult.extra["op_times_s"]`); `worker_runtimes`: the names in `runtimes` that run
    one pinned OS process per device, so that a job running one profiles, fits communication and simulates in
    that worker setting (docs/fidelity.md); `receives_up_front`: the names in `runtimes` whose CPU workers can post
    every receive, with its buffer, before the step starts (PyTorch: with ``post_receives: up_front``), so that
    the simulator then holds received copies from the step's start (`simulate(..., recv_buffers="step_start")`)."""

    models: Mapping[str, str] = field(default_factory=dict)
    profilers: Mapping[str, str] = field(default_factory=dict)
    runtimes: Mapping[str, str] = field(default_factory=dict)
    device_types: tuple[str, ...] = ("CPU",)
    follows_plan: bool = False
    times_ops: bool = False
    worker_runtimes: tuple[str, ...] = ()
    receives_up_front: tuple[str, ...] = ()


class GraphModel(ABC):
    """A model that is its op graph, no framework needed (a conf/model/<name>.yaml with `_target_`).

    Hyper-parameters are constructor arguments; `name` is the model's name in result.json."""

    name: str = "model"

    @abstractmethod
    def graph(self) -> OpGraph:
        """The training step's op graph with its costs (docs/formats.md)."""

    def fingerprint(self) -> dict[str, Any]:
        """Facts that identify the graph beyond the config (e.g. a file's digest), added to the cache key."""
        return {}


class Profiler(ABC):
    """Gives the op graph measured costs (conf/profiler/<name>.yaml: `_target_`, or a name the backend provides).

    `measures` False means the graph's own costs are used as they are (no profile stage, no communication fit);
    `comm_benchmark`, `comm_sizes`, `comm_repeats` ask the job to fit the communication model with the backend's
    micro-benchmark before placement; `uses_cluster` says the profile depends on the cluster (its config is then
    part of the profile's cache key)."""

    name: str = "profiler"
    measures: bool = True
    uses_cluster: bool = False
    comm_benchmark: bool = False
    comm_sizes: list[int] | None = None
    comm_repeats: int = 5

    @abstractmethod
    def profile(
        self, backend: Backend | None, model: Any, graph: OpGraph, cluster: Cluster, *, model_cfg: Mapping[str, Any]
    ) -> tuple[OpGraph, dict[str, Any]]:
        """The profiled graph and a JSON-able report ({} when there is nothing to report); both are cached.
        `backend` is None when the run has no framework (`backend=none`); `model` is what the backend built (or
        the GraphModel)."""

    def publish(self, report: Mapping[str, Any], out: Path) -> tuple[dict[str, float], list[Path]]:
        """Write what the report shows into the run folder `out`; return (metrics, files to log). Default:
        nothing."""
        return {}, []


class Runtime(ABC):
    """Executes a placed, scheduled training step on real devices and measures it (DESIGN.md: one OS process
    per device). Hyper-parameters (warm-up and measured steps, checks) go in the constructor; a config
    `conf/runtime/<name>.yaml` names the class with `_target_` or names a runtime its backend provides."""

    name: str = "runtime"

    @abstractmethod
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
        """Run warm-up steps, then the measured steps, of `model` (built by `backend`) with each op of `graph`
        on `placement[op]`, in the order of `schedule[device]`. `plan`, where given, is the simulated step
        (op start times and transfer arrivals) for runtimes that follow it."""


class Backend(ABC):
    """A framework adapter (PyTorch, TensorFlow); `capabilities` says what it provides (see Capabilities)."""

    name: str = "backend"
    capabilities: ClassVar[Capabilities] = Capabilities()

    @abstractmethod
    def build(self, model_cfg: Mapping[str, Any]) -> Any:
        """Build the model described by `model_cfg` (conf/model/*.yaml) and return a handle."""

    @abstractmethod
    def capture(self, model: Any) -> OpGraph:
        """The training step as an OpGraph (structure, phases, forward_of, colocation, sizes)."""

    @abstractmethod
    def profile(
        self, model: Any, graph: OpGraph, *, warmup: int = 5, steps: int = 10, batch_size: int | None = None
    ) -> OpGraph:
        """`graph` with measured costs (compute_s, persistent/temporary/output bytes, edge bytes)."""

    @abstractmethod
    def comm_benchmark(self, cluster: Cluster, sizes: list[int] | None = None, repeats: int = 5) -> CommFit:
        """Time real copies between the cluster's devices and fit latency + bytes / bandwidth."""

    @abstractmethod
    def run(
        self,
        model: Any,
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
        """Execute training steps placed and ordered as given, one thread per device in this process; measure
        step time, peak memory, traffic (the `threads` runtime). `check_correctness` None keeps the backend's
        own setting; `time_ops` and `plan` only where `capabilities` declares them (`times_ops`,
        `follows_plan`)."""
