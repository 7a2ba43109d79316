"""What every stage of one job shares: its config, output folder, stage cache, and the lazily built backend
and model (`JobContext`); the cluster built from its config (`build_cluster`); the job's failure (`JobFailed`).

Imports nothing of the orchestrator but the cache and the registry, so that app.py and every module of
orchestrator/stages/ can import it without a circle.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from algorithms.cluster import Cluster
from algorithms.graph import atomic_write_json
from backends.base import Backend

from .cache import StageCache
from .registry import build_backend, build_graph_model, check_framework_model, plain


class JobFailed(RuntimeError):
    """The job ended with status "error" (its result.json and MLflow run say why)."""


def build_cluster(cluster_cfg: Any, name: str) -> Cluster:
    """A Cluster from a conf/cluster YAML (a device list, or `generate:` for the thesis' device generator)."""
    d = dict(plain(cluster_cfg))
    if "generate" in d:
        from algorithms.workloads.synthetic import thesis_devices

        gen = dict(d.pop("generate"))
        comm = dict(d.get("comm") or {})
        gen.setdefault("latency_s", float(comm.get("latency_s", 0.0)))
        gen.setdefault("mode", comm.get("mode", "parallel"))
        cl = thesis_devices(name=name, **gen)
        if comm.get("bytes_per_s") is not None:
            cl = cl.with_comm(cl.latency_s, float(comm["bytes_per_s"]))
        frac = d.get("memory_fraction")
        return cl.scaled(float(frac)) if frac not in (None, 1, 1.0) else cl
    return Cluster.from_dict(d, name=name)


def save_json(name: str) -> Callable[[Any, Path], None]:
    """A cache `save` that writes the stage's value as `name` in the entry's folder."""

    def save(obj: Any, folder: Path) -> None:
        atomic_write_json(folder / name, obj)

    return save


def load_json(name: str) -> Callable[[Path], Any]:
    """The matching cache `load`."""

    def load(folder: Path) -> Any:
        with open(folder / name) as f:
            return json.load(f)

    return load


@dataclass
class JobContext:
    """One job's shared state. `hits` records which stages came from the cache; `metrics` and `artifacts` are
    what stages want logged beyond result.json's fields."""

    cfg: DictConfig
    out: Path
    choices: dict[str, str]
    cache: StageCache
    hits: dict[str, bool] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    artifacts: list[Path] = field(default_factory=list)
    backend: Backend | None = None
    model: Any = None
    #: The communication fit of stage comm as written to comm.json ({} when none ran); stage simulate reads
    #: the per-message processor times from it.
    comm: dict[str, Any] = field(default_factory=dict)
    #: The report of stage profile (profile_report.json; {} when nothing was measured); stage simulate reads the
    #: fixed per-step cost of a worker profile from it.
    profile: dict[str, Any] = field(default_factory=dict)
    _backend_built: bool = False
    #: Whether this job moved the process's objects to the collector's permanent generation (`freeze_graph`);
    #: `orchestrator.app.run_job` gives them back when the job ends.
    froze_gc: bool = False

    def stage(
        self,
        name: str,
        config: Any,
        upstream: list[str],
        compute: Callable[[], Any],
        save: Callable[[Any, Path], None],
        load: Callable[[Path], Any],
    ) -> Any:
        """Run (or read from the cache) one stage; see orchestrator.cache.StageCache.run."""
        res = self.cache.run(name, config, upstream, compute, save, load)
        self.hits[name] = res.hit
        return res

    def freeze_graph(self) -> None:
        """Move every object alive now (the job's graph and its index, built and validated) to Python's permanent
        GC generation until the job ends (`gc.freeze`; `run_job` calls `gc.unfreeze`).

        Why (issue 22): at 10^6 ops the graph and its index are about 10^7 container objects that live as long
        as the job and make no reference cycles, yet every collection of the generation they sit in walks them
        all: the young collection right after each paused build (`algorithms.graph.gc_paused`), then the middle
        and full ones the job's later allocations trigger.  Frozen, no collection walks them again; reference
        counting still frees them.  Cyclic garbage alive at the freeze waits for the end of the job.  A process
        that froze objects itself (a forking server) is left as it is."""
        import gc

        if not self.froze_gc and gc.get_freeze_count() == 0:
            gc.freeze()
            self.froze_gc = True

    def get_backend(self) -> Backend | None:
        """The configured backend, built once; None for `backend=none`."""
        if not self._backend_built:
            self.backend = build_backend(self.cfg.backend)
            self._backend_built = True
        return self.backend

    def model_cfg(self) -> dict[str, Any]:
        return dict(plain(self.cfg.model))

    def get_model(self) -> Any:
        """The model, built once: the GraphModel of a config with `_target_`, else the backend's zoo model."""
        if self.model is None:
            if "_target_" in self.cfg.model:
                self.model = build_graph_model(self.cfg.model)
            else:
                backend = self.get_backend()
                check_framework_model(self.model_cfg(), backend, self.choices.get("model"))
                assert backend is not None  # checked above
                self.model = backend.build(self.model_cfg())
        return self.model
