"""A third-party package for the lab: a placer, a model, a profiler and a runtime, each with its YAML under conf/.

Installed with its entry point (group `placement_lab.plugins`, see pyproject.toml), it is used by name:
`placer=round_robin model=chain profiler=scaled runtime=emulated`.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from algorithms.base import Placer
from algorithms.errors import ConfigError
from algorithms.graph import OpGraph, atomic_write_json
from algorithms.placement import Placement
from backends.base import GraphModel, Profiler, RunResult, Runtime


class RoundRobinPlacer(Placer):
    """Round robin (demo plugin): the k-th op in topological order goes to device k mod |D|; colocation kept."""

    name = "round_robin"

    def __init__(self, offset: int = 0):
        self.offset = offset

    def place(self, graph, cluster):
        names = cluster.names
        group_dev: dict[str, str] = {}
        out = {}
        for k, op in enumerate(graph.topological_order()):
            grp = graph.op(op).get("colocation")
            dev = group_dev.get(grp) if grp is not None else None
            dev = dev or names[(k + self.offset) % len(names)]
            if grp is not None:
                group_dev[grp] = dev
            out[op] = dev
        return Placement(out)


class ChainModel(GraphModel):
    """A chain of `length` forward ops and their backward ops (demo plugin model, no framework needed)."""

    def __init__(self, length: int = 8, compute_s: float = 1e-3, tensor_bytes: float = 1e6, name: str = "chain"):
        if int(length) < 1:
            raise ConfigError(f"model.length must be >= 1, got {length}")
        self.length, self.compute_s, self.tensor_bytes, self.name = int(length), compute_s, tensor_bytes, name

    def graph(self) -> OpGraph:
        g = OpGraph(f"chain-{self.length}")
        for i in range(self.length):
            g.add_op(f"f{i}", type="Layer", phase="forward", compute_s=self.compute_s, output_bytes=self.tensor_bytes)
            g.add_op(
                f"b{i}",
                type="LayerGrad",
                phase="backward",
                compute_s=2 * self.compute_s,
                forward_of=f"f{i}",
                output_bytes=self.tensor_bytes,
            )
        for i in range(self.length - 1):
            g.add_edge(f"f{i}", f"f{i + 1}", self.tensor_bytes)
            g.add_edge(f"b{i + 1}", f"b{i}", self.tensor_bytes)
        g.add_edge(f"f{self.length - 1}", f"b{self.length - 1}", self.tensor_bytes)
        return g


class ScaledProfiler(Profiler):
    """Scales every op's compute time by `factor` (demo plugin profiler: e.g. a slower device generation)."""

    def __init__(self, factor: float = 2.0):
        if not factor > 0:
            raise ConfigError(f"profiler.factor must be > 0, got {factor}")
        self.factor = float(factor)

    def profile(self, backend, model, graph, cluster, *, model_cfg):
        g = graph.copy()
        for op in g.ops:
            g.op(op)["compute_s"] = self.factor * float(g.op(op).get("compute_s", 0.0))
        g.invalidate()
        total = sum(float(g.op(op)["compute_s"]) for op in g.ops)
        return g, {"factor": self.factor, "total_compute_s": total}

    def publish(self, report: Mapping[str, Any], out: Path) -> tuple[dict[str, float], list[Path]]:
        atomic_write_json(out / "scaled_profile.json", report)
        return {"demo.total_compute_s": float(report["total_compute_s"])}, [out / "scaled_profile.json"]


class EmulatedRuntime(Runtime):
    """Emulates the placed step (demo plugin runtime): one thread per device sleeps each op's compute time in
    its schedule's order once the op's inputs are done; measures the wall time of `steps` steps."""

    def __init__(self, warmup: int = 0, steps: int = 3, time_scale: float = 1.0):
        self.warmup, self.steps, self.time_scale = int(warmup), int(steps), float(time_scale)

    def _step(self, graph, schedule) -> float:
        done = {op: threading.Event() for op in graph.ops}

        def worker(ops):
            for op in ops:
                for p in graph.predecessors(op):
                    done[p].wait()
                time.sleep(self.time_scale * float(graph.op(op).get("compute_s", 0.0)))
                done[op].set()

        threads = [threading.Thread(target=worker, args=(list(ops),)) for ops in schedule.values()]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.perf_counter() - t0

    def run(self, backend, model, graph, placement, schedule, cluster, *, plan=None) -> RunResult:
        times = [self._step(graph, schedule) for _ in range(self.warmup + self.steps)][self.warmup :]
        traffic = sum(float(a.get("bytes", 0.0)) for s, d, a in graph.edges() if placement[s] != placement[d])
        return RunResult(
            measured_step_s=statistics.median(times),
            step_times_s=times,
            peak_memory_bytes={d: 0.0 for d in cluster.names},
            traffic_bytes=traffic,
        )
