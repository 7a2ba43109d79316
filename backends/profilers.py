"""The profilers every backend provides: `file` (the graph's own costs) and `measured` (the backend's profiler).

`conf/profiler/file.yaml` names `FileProfiler` with `_target_`; `conf/profiler/measured.yaml` names the profiler
`measured`, which each backend maps to `MeasuredProfiler` in its `capabilities.profilers`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from algorithms.cluster import Cluster
from algorithms.errors import ConfigError
from algorithms.graph import OpGraph

from .base import Backend, Profiler


class FileProfiler(Profiler):
    """Costs already in the graph (a graph file or the synthetic generator): nothing is measured."""

    measures = False

    def profile(
        self, backend: Backend | None, model: Any, graph: OpGraph, cluster: Cluster, *, model_cfg: Mapping[str, Any]
    ) -> tuple[OpGraph, dict[str, Any]]:
        return graph, {}


class MeasuredProfiler(Profiler):
    """Per-op compute time and memory measured by the backend (warm-up steps, then the median of measured steps).

    `batch_size` None profiles at the model's batch size; `comm_benchmark` also fits latency + bytes / bandwidth
    between the cluster's devices (sizes `comm_sizes`, `comm_repeats` repeats each). Cost: warmup + steps
    training steps of the model on one device, plus the micro-benchmark."""

    def __init__(
        self,
        warmup: int = 5,
        steps: int = 10,
        batch_size: int | None = None,
        comm_benchmark: bool = True,
        comm_sizes: Sequence[int] | None = None,
        comm_repeats: int = 5,
    ):
        if int(steps) < 1 or int(warmup) < 0:
            raise ConfigError(f"profiler.steps must be >= 1 and profiler.warmup >= 0, got {steps} and {warmup}")
        self.warmup, self.steps = int(warmup), int(steps)
        self.batch_size = None if batch_size is None else int(batch_size)
        self.comm_benchmark = bool(comm_benchmark)
        self.comm_sizes = [int(s) for s in comm_sizes] if comm_sizes else None
        self.comm_repeats = int(comm_repeats)

    def profile(
        self, backend: Backend | None, model: Any, graph: OpGraph, cluster: Cluster, *, model_cfg: Mapping[str, Any]
    ) -> tuple[OpGraph, dict[str, Any]]:
        if backend is None:
            raise ConfigError("profiler=measured needs a framework backend (backend=torch or backend=tensorflow)")
        g = backend.profile(model, graph, warmup=self.warmup, steps=self.steps, batch_size=self.batch_size)
        return g, {}
