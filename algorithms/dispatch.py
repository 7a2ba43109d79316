"""Dispatch policies: which executable op a free device runs next in `algorithms.simulator.simulate`.

A `DispatchPolicy` either gives each op a key once it becomes executable (a heap per device, smallest key
first) or, when ``dynamic``, chooses among the executable ops at each decision from a read-only `SimState`.
`FifoPolicy` (thesis 5.2) and `RankPolicy` live here; PCT and MSR are in `algorithms.schedulers.thesis`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from .cluster import Cluster
from .graph import OpGraph


class DispatchPolicy:
    """Which executable op a free device runs next.

    A policy with ``dynamic = False`` gives each op a key when it becomes executable (smallest key runs
    first) and the simulator keeps a heap per device. A policy with ``dynamic = True`` is asked at each
    decision through `choose` with the list of executable ops of that device and the simulator state.
    """

    dynamic = False

    def prepare(self, graph: OpGraph, cluster: Cluster, device_of: list[int]) -> None:
        """Called once before the simulation (precompute ranks here)."""

    def key(self, op: int, ready_time: float, seq: int) -> tuple:
        return (seq,)

    def choose(self, device: int, candidates: list[int], state: SimState) -> int:
        """Return the position in `candidates` of the op to run (dynamic policies only)."""
        raise NotImplementedError


@dataclass
class SimState:
    """Read-only view of the simulation offered to dynamic policies."""

    now: float
    device_of: list[int]
    busy_until: list[float]
    unfinished_preds: list[int]
    ready: list[list[int]]

    def device_idle(self, device: int) -> bool:
        return self.busy_until[device] <= self.now and not self.ready[device]


class FifoPolicy(DispatchPolicy):
    """Run executable ops in the order they became executable (thesis 5.2)."""


class RankPolicy(DispatchPolicy):
    """Run the executable op with the smallest rank first (e.g. the position in a placer's own order).

    Unlike a static order, it never deadlocks: a device runs the best-ranked op that is executable now."""

    def __init__(self, rank: Mapping[str, float]):
        self.rank = rank
        self._r: list[float] = []

    def prepare(self, graph: OpGraph, cluster: Cluster, device_of: list[int]) -> None:
        names = graph.index().names
        self._r = [float(self.rank.get(n, math.inf)) for n in names]

    def key(self, op: int, ready_time: float, seq: int) -> tuple:
        return (self._r[op], seq)
