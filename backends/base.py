"""The backend contract: build a framework model, capture it as an OpGraph, profile it, run it placed.

A backend never imports the orchestrator; it receives plain dicts (the model config) and data-model objects.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from algorithms.cluster import Cluster
from algorithms.graph import OpGraph


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

    `measured_step_s` is the median of `step_times_s` (the measured steps after warm-up), `step_iqr_s` their
    inter-quartile range; `peak_memory_bytes` the measured peak per device; `workers` one entry per worker
    process, ``{"device", "pid", "cores"}`` (result.json `runtime_workers`)."""

    measured_step_s: float
    step_times_s: list[float]
    peak_memory_bytes: dict[str, float]
    traffic_bytes: float
    loss: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    step_iqr_s: float | None = None
    workers: list[dict[str, Any]] = field(default_factory=list)


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
    """A framework adapter (PyTorch, TensorFlow)."""

    name: str = "backend"

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
    ) -> RunResult:
        """Execute training steps placed and ordered as given; measure step time, peak memory, traffic."""
