"""Shared machinery of the thesis' partitioners (seed 004, chapter 4): assignment units, feasibility, ranks.

Assignment units (4.1)
----------------------
A colocation group, or an op outside every group, is an *assignment unit*: it is placed in one pass, on one
device. A unit carries the device constraint of its members (the graph validator guarantees a group asks for
one type at most), its operation count and its estimated memory size.

Feasibility (4.1)
-----------------
A device is feasible for a unit when (1) the unit's device constraint equals the device type or the unit has
none, and (2) the whole unit fits into the device's remaining memory. The memory a unit needs is the sum of its
members' estimated sizes (Table 2.2)::

    size_est(n) = memory demand(n) + output tensor size(n) + sum of input tensor sizes(n)

The thesis' memory demand is a single static number per node; this project splits it into `persistent_bytes`
and `temporary_bytes`, so the memory demand used here is ``persistent_bytes + temporary_bytes``. Input tensor
sizes are the bytes of the op's incoming edges (control edges count 0). For a colocation group the members'
estimates are summed as the thesis' constraint 3 does (``sum over v on d of size_est(v) < memory size(d)``),
so a tensor passed between two members is counted as the producer's output and as the consumer's input: a
conservative estimate. The thesis writes the constraint with a strict ``<``; this module accepts an exact fit
(``used + size <= memory``), which only matters for hand-made instances.

Operation counts and execution time
-----------------------------------
The thesis measures work in operations (#ops) and device speed in operations per time unit. Here an op's
#ops is its `compute_s` (its time at speed 1), and the time of op i on device d is
``graph.index().exec_time(i, d.type, d.speed)``, which honours `compute_s_by_type`. ``exec_min(d)`` (eq. 4.5,
``#ops(d) / speed(d)``) is kept as the sum of the execution times of the ops assigned to d, which equals eq. 4.5
when no op has per-type costs.

Greedy partitioners can fail on tight instances that an exact bin packing would solve (bin packing with types
is NP-hard); they then raise `InfeasiblePlacement` naming the unit that found no feasible device.

Complexity: building the units is O(V + E); a feasibility query is O(D).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...cluster import Cluster
from ...errors import InfeasiblePlacement
from ...graph import GraphIndex, OpGraph
from ...placement import Placement

log = logging.getLogger(__name__)


@dataclass
class Unit:
    """An assignment unit: a colocation group or a lone op (thesis 4.1)."""

    id: int
    name: str  # group name, or op name for a lone op
    members: list[int]  # op indices (topological order)
    device_type: str | None
    size: float  # sum of the members' size_est, bytes
    ops: float  # sum of the members' #ops (compute_s)
    is_group: bool
    base_by_type: dict[str, float] = field(default_factory=dict)  # sum of per-type base times

    def describe(self) -> str:
        kind = "colocation group" if self.is_group else "op"
        return f"{kind} {self.name!r}"


def size_est(idx: GraphIndex, i: int) -> float:
    """Estimated memory of op i (Table 2.2): memory demand + output tensor + input tensors, in bytes."""
    return idx.persistent[i] + idx.temporary[i] + idx.output[i] + sum(b for _, b in idx.pred[i])


def build_units(graph: OpGraph, cluster: Cluster | None = None) -> tuple[list[Unit], list[int]]:
    """The assignment units of `graph`, ordered by the topological position of their first member, and the
    unit index of every op. O(V + E)."""
    idx = graph.index()
    types = sorted({d.type for d in cluster.devices}) if cluster is not None else []
    unit_of = [-1] * idx.n
    units: list[Unit] = []
    by_group: dict[str, Unit] = {}
    for i in range(idx.n):
        grp = idx.colocation[i]
        if grp is not None and grp in by_group:
            u = by_group[grp]
            u.members.append(i)
        else:
            u = Unit(len(units), grp if grp is not None else idx.names[i], [i], None, 0.0, 0.0, grp is not None)
            units.append(u)
            if grp is not None:
                by_group[grp] = u
        unit_of[i] = u.id
        u.size += size_est(idx, i)
        u.ops += idx.compute_s[i]
        if idx.device_type[i] is not None:
            u.device_type = idx.device_type[i]
        for t in types:
            by = idx.compute_by_type[i]
            u.base_by_type[t] = u.base_by_type.get(t, 0.0) + (by.get(t, idx.compute_s[i]) if by else idx.compute_s[i])
    return units, unit_of


class AssignState:
    """Devices' remaining memory and load while a partitioner assigns units. O(D) per feasibility query."""

    def __init__(self, graph: OpGraph, cluster: Cluster, units: list[Unit], unit_of: list[int]):
        self.graph = graph
        self.cluster = cluster
        self.idx = graph.index()
        self.units = units
        self.unit_of = unit_of
        self.nd = len(cluster.devices)
        self.types = [d.type for d in cluster.devices]
        self.speed = [float(d.speed) for d in cluster.devices]
        self.cap = [float(d.memory_bytes) for d in cluster.devices]
        self.used = [0.0] * self.nd
        self.load = [0.0] * self.nd  # exec_min(d): sum of execution times of the assigned ops
        self.ops_on = [0.0] * self.nd  # #ops(d)
        self.dev_of = [-1] * self.idx.n  # d(n), -1 while unplaced (Table 2.2)
        self.unit_dev = [-1] * len(units)
        # numpy mirrors for vectorised feasibility queries over all devices
        self.used_np = np.zeros(self.nd)
        self.cap_np = np.array(self.cap, dtype=float)
        self.load_np = np.zeros(self.nd)
        self._type_mask = {t: np.array([x == t for x in self.types]) for t in set(self.types)}
        self._all = np.ones(self.nd, dtype=bool)
        present = set(self.types)
        for u in units:
            if u.device_type is not None and u.device_type not in present:
                raise InfeasiblePlacement(
                    f"{u.describe()} needs a {u.device_type} device but cluster {cluster.name!r} has only "
                    f"{sorted(present)}"
                )

    # ------------------------------------------------------------------ queries
    def type_ok(self, unit: Unit, d: int) -> bool:
        return unit.device_type is None or unit.device_type == self.types[d]

    def fits(self, size: float, d: int) -> bool:
        return self.used[d] + size <= self.cap[d]

    def feasible(self, unit: Unit) -> list[int]:
        """Devices feasible for the unit (type fits and the whole unit fits in the remaining memory), in
        device order. O(D), vectorised."""
        mask = self._all if unit.device_type is None else self._type_mask.get(unit.device_type)
        if mask is None:
            return []
        return np.flatnonzero(mask & (self.used_np + unit.size <= self.cap_np)).tolist()

    def exec_vector(self, unit: Unit, devices: np.ndarray) -> np.ndarray:
        """Execution time of the whole unit on each of `devices`."""
        return np.array([unit.base_by_type.get(self.types[d], unit.ops) / self.speed[d] for d in devices], dtype=float)

    def is_feasible(self, unit: Unit, d: int) -> bool:
        return self.type_ok(unit, d) and self.fits(unit.size, d)

    def exec_on(self, unit: Unit, d: int) -> float:
        """Execution time of the whole unit on device d."""
        return unit.base_by_type.get(self.types[d], unit.ops) / self.speed[d]

    def assigned(self, unit: Unit) -> bool:
        return self.unit_dev[unit.id] >= 0

    # ------------------------------------------------------------------ updates
    def assign(self, unit: Unit, d: int) -> None:
        if self.unit_dev[unit.id] >= 0:
            raise AssertionError(f"{unit.describe()} assigned twice")
        self.unit_dev[unit.id] = d
        for i in unit.members:
            self.dev_of[i] = d
        self.used[d] += unit.size
        self.used_np[d] = self.used[d]
        self.load[d] += self.exec_on(unit, d)
        self.load_np[d] = self.load[d]
        self.ops_on[d] += unit.ops

    def infeasible(self, unit: Unit, what: str = "") -> InfeasiblePlacement:
        """The error for a unit that found no feasible device, with the numbers a user needs."""
        fitting = [d for d in range(self.nd) if self.type_ok(unit, d)]
        free = max((self.cap[d] - self.used[d] for d in fitting), default=0.0)
        kind = f"{unit.device_type} " if unit.device_type else ""
        return InfeasiblePlacement(
            f"{what}{unit.describe()} ({len(unit.members)} op(s), estimated size {unit.size:.6g} bytes) fits on "
            f"no {kind}device: the largest remaining memory among the {len(fitting)} {kind}device(s) is "
            f"{free:.6g} bytes. Give the cluster more memory, or use a placer that packs memory more tightly."
        )

    def placement(self, order: dict[str, list[str]] | None = None, **info: Any) -> Placement:
        names = self.idx.names
        devs = self.cluster.names
        unplaced = [names[i] for i in range(self.idx.n) if self.dev_of[i] < 0]
        if unplaced:
            raise AssertionError(f"ops left unplaced: {unplaced[:5]}")
        assignment = {names[i]: devs[self.dev_of[i]] for i in range(self.idx.n)}
        info.setdefault("devices_used", len(set(self.dev_of)))
        return Placement(assignment, order, info)


# ---------------------------------------------------------------------- ranks
def operations_source_rank(idx: GraphIndex, with_parent: bool = False):
    """Eq. 4.3: ``src(n) = max over preds p of (src(p) + #ops(p))``, 0 for sources. With `with_parent`,
    also the path predecessor giving the maximum (-1 for sources; ties to the lowest index). O(V + E)."""
    ops = idx.compute_s
    src = [0.0] * idx.n
    par = [-1] * idx.n
    for i in range(idx.n):
        best, bp = 0.0, -1
        for p, _ in idx.pred[i]:
            v = src[p] + ops[p]
            if bp < 0 or v > best or (v == best and p < bp):
                best, bp = v, p
        src[i] = best
        par[i] = bp
    return (src, par) if with_parent else src


def operations_sink_rank(idx: GraphIndex) -> list[float]:
    """Eq. 4.4: ``sink(n) = max over succs s of sink(s) + #ops(n)``. O(V + E)."""
    ops = idx.compute_s
    sink = [0.0] * idx.n
    for i in range(idx.n - 1, -1, -1):
        sink[i] = max((sink[j] for j, _ in idx.succ[i]), default=0.0) + ops[i]
    return sink


def operations_rank(idx: GraphIndex) -> list[float]:
    """Operations rank (4.4.1) = operations source rank (4.3) + operations sink rank (4.4). It equals the
    #ops of the longest (by #ops) source-to-sink path through the node; critical-path nodes share the maximum."""
    src = operations_source_rank(idx)
    sink = operations_sink_rank(idx)
    return [a + b for a, b in zip(src, sink)]


def average_speed(cluster: Cluster) -> float:
    """Eq. 4.2: ``speed_avr = sum of device speeds / |D|``."""
    return sum(d.speed for d in cluster.devices) / len(cluster.devices)


def average_comm(cluster: Cluster) -> tuple[float, float]:
    """(mean latency, mean transfer rate) over ordered pairs of distinct devices; (0, inf) for one device."""
    n = len(cluster.devices)
    if n < 2:
        return 0.0, math.inf
    lat = bw = 0.0
    for i in range(n):
        for j in range(n):
            if i != j:
                lat += cluster.latency_table[i][j]
                bw += cluster.bandwidth_table[i][j]
    pairs = n * (n - 1)
    return lat / pairs, bw / pairs


def upward_rank(graph: OpGraph, cluster: Cluster) -> tuple[list[float], list[float], float, float]:
    """HEFT's upward rank as the thesis adapts it (4.3.1, eq. 4.1 and 4.2).

    ``rank_u(n_i) = w_i + max over succs n_j of (c_ij + rank_u(n_j))``, ``rank_u`` of a sink = ``w_i``, with
    ``w_i = #ops(n_i) / speed_avr`` (eq. 4.2) and ``c_ij = bytes(i, j) / average transfer rate``. The average
    transfer rate is the arithmetic mean of the per-pair rates over ordered pairs of distinct devices; the
    mean latency is added to c_ij (the thesis folds the startup cost into a send node's cost, "not processor
    specific"). An op with per-type costs uses the mean of its base time over the cluster's devices as #ops.
    Returns (rank, w, mean latency, mean rate). O(V + E + D^2).
    """
    idx = graph.index()
    savg = average_speed(cluster)
    lat, rate = average_comm(cluster)
    types = [d.type for d in cluster.devices]
    w = [0.0] * idx.n
    for i in range(idx.n):
        by = idx.compute_by_type[i]
        base = (sum(by.get(t, idx.compute_s[i]) for t in types) / len(types)) if by else idx.compute_s[i]
        w[i] = base / savg
    rank = [0.0] * idx.n
    for i in range(idx.n - 1, -1, -1):
        best = 0.0
        for j, b in idx.succ[i]:
            c = (lat + b / rate) if len(types) > 1 else 0.0
            v = c + rank[j]
            if v > best:
                best = v
        rank[i] = w[i] + best
    return rank, w, lat, rate


def memory_by_device(graph: OpGraph, placement: Placement | dict[str, str]) -> dict[str, float]:
    """Sum of size_est of the ops on each device (the quantity the thesis' constraint 3 bounds)."""
    assign = placement.assignment if isinstance(placement, Placement) else placement
    idx = graph.index()
    out: dict[str, float] = {}
    for i, name in enumerate(idx.names):
        d = assign[name]
        out[d] = out.get(d, 0.0) + size_est(idx, i)
    return out


def unit_order(units: Sequence[Unit], groups_first: bool) -> Iterable[Unit]:
    """Units in topological order of their first member; with `groups_first`, colocation groups first."""
    if not groups_first:
        return list(units)
    return [u for u in units if u.is_group] + [u for u in units if not u.is_group]
