"""The plugin contract: small interfaces with hyper-parameters in the constructor and one verb.

    Placer.place(graph, cluster) -> Placement
    Scheduler.order(graph, cluster, placement) -> Schedule
    GraphPass.apply(graph) -> (OpGraph, CoarseMap)
    PipelineScheduler.schedule(blocks, devices, memory, n_micro) -> PipelineSchedule

Each concrete class is selected by a Hydra YAML whose `_target_` names it; `name` and the first line of the
class docstring are what `python -m orchestrator.catalog` lists.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from .cluster import Cluster
from .graph import OpGraph
from .placement import CoarseMap, Placement, Schedule


class Placer(ABC):
    """Assigns every op of a graph to a device of a cluster."""

    name: str = "placer"

    @abstractmethod
    def place(self, graph: OpGraph, cluster: Cluster) -> Placement: ...


class Scheduler(ABC):
    """Chooses the execution order of the ops placed on each device."""

    name: str = "scheduler"

    @abstractmethod
    def order(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Schedule: ...


class GraphPass(ABC):
    """Rewrites a graph into a (usually smaller) one and says which original ops each new op stands for."""

    name: str = "pass"

    @abstractmethod
    def apply(self, graph: OpGraph) -> tuple[OpGraph, CoarseMap]: ...


class PipelineScheduler(ABC):
    """Gives every block of N micro-batches a start time on its devices."""

    name: str = "pipeline"

    @abstractmethod
    def schedule(self, blocks: Any, devices: Any, memory: Any, n_micro: int) -> Any: ...


def describe(obj_or_cls: Any) -> str:
    """First line of a plugin's docstring (for catalogues and logs)."""
    doc = (obj_or_cls.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""
