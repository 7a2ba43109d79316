"""MITE partitioning (thesis, seed 004, section 4.7, equations 4.6 to 4.16)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import ModuleType

import numpy as np
from tqdm import tqdm

from ... import compiled_mode
from ...base import Placer
from ...cluster import Cluster
from ...errors import ConfigError
from ...graph import OpGraph, gc_paused
from ...placement import Placement
from .common import AssignState, Unit, build_units, operations_rank, unit_order

log = logging.getLogger(__name__)

#: Graphs of at least this many ops are placed by the compiled loops (`mite_kernel`, numba installed), MITE's
#: and DFS's alike: the same placement, many times faster at 10^5-10^6 ops (docs/scale.md, "m-TOPO, MITE and
#: DFS compiled"); smaller ones by the Python loops, which need no compiled code loaded.  Set to None to always
#: use the Python code.
COMPILED_MIN_OPS: int | None = 2000


def kernel(graph: OpGraph) -> ModuleType | None:
    """The `mite_kernel` module when it applies to this graph (`COMPILED_MIN_OPS`), else None."""
    if not compiled_mode.applies(graph.index().n, COMPILED_MIN_OPS):
        return None
    try:
        from . import mite_kernel
    except ImportError as exc:  # numba missing: the Python code gives the same placement, slower
        log.info("MITE/DFS: compiled loop unavailable (%s); using the Python one", exc)
        return None
    return mite_kernel


#: Eq. 4.11: the traffic factor of a device that adds no traffic while another feasible device would.
ZERO_TRAFFIC = 0.000001


@dataclass
class MiteFactors:
    """The factors of eq. 4.6 for one unit over its feasible devices `devices` (arrays aligned with them)."""

    devices: np.ndarray
    traffic_temp: np.ndarray  # eq. 4.7 / 4.10 (seconds of transfer)
    traffic: np.ndarray  # eq. 4.11
    exec_temp: np.ndarray  # eq. 4.12 (seconds)
    exec: np.ndarray  # eq. 4.13
    memory: np.ndarray  # eq. 4.14
    importance: float  # eq. 4.16
    boost: np.ndarray  # eq. 4.15

    @property
    def heu(self) -> np.ndarray:
        """Eq. 4.6: traffic x execution time x memory x importance speed boost."""
        return self.traffic * self.exec * self.memory * self.boost

    @property
    def traffic_exec(self) -> np.ndarray:
        """The product DFS partitioning minimises (4.8)."""
        return self.traffic * self.exec


class MiteScorer:
    """Incremental evaluation of MITE's factors while units are assigned (shared by MITE and DFS).

    Keeps, for every op, the set of devices that already hold one of its successors (for ``cond_pred`` of
    eq. 4.8) and the per-pair transfer time model ``latency + bytes / rate`` as numpy rows, so that one unit is
    scored against all devices with O(deg(unit)) vector operations of length |D|.
    """

    def __init__(self, st: AssignState, zero_traffic: float = ZERO_TRAFFIC):
        self.st = st
        self.zero_traffic = float(zero_traffic)
        self.idx = st.idx
        cl = st.cluster
        self.lat = np.array(cl.latency_table, dtype=float)
        self.bw = np.array(cl.bandwidth_table, dtype=float)
        self.speed = np.array(st.speed, dtype=float)
        self.cap = np.array(st.cap, dtype=float)
        self.succ_devs: list[set[int]] = [set() for _ in range(self.idx.n)]
        self.orank = operations_rank(self.idx)
        self.omax = max(self.orank, default=0.0)
        self.m_min = 1.0  # m~ of eq. 4.14: minimal non-zero memory portion, initialised to 1
        self.type_names = sorted(set(st.types))
        self.type_idx = np.array([self.type_names.index(t) for t in st.types], dtype=int)
        finite = np.isfinite(self.cap) & (self.cap > 0)
        self.inv_cap = np.where(finite, 1.0 / np.where(finite, self.cap, 1.0), 0.0)

    def _row(self, src_dev: int, nbytes: float) -> np.ndarray:
        """Transfer time from src_dev to every device (0 to itself)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            r = self.lat[src_dev] + nbytes / self.bw[src_dev]
        r[src_dev] = 0.0
        return r

    def _col(self, dst_dev: int, nbytes: float) -> np.ndarray:
        """Transfer time from every device to dst_dev (0 from itself)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            c = self.lat[:, dst_dev] + nbytes / self.bw[:, dst_dev]
        c[dst_dev] = 0.0
        return c

    def traffic_temp(self, unit: Unit) -> np.ndarray:
        """Eq. 4.7 summed over the unit (eq. 4.10), for every device d_x.

        Predecessor side: an assigned predecessor p outside the unit on a device other than d_x adds
        ``weight / rate(d(p), d_x)`` unless p already has another successor on d_x (``cond_pred``, eq. 4.8).
        A predecessor feeding several members is counted once (one send/receive pair, 2.4), with its largest
        edge. Successor side: for each member, each device holding one of its assigned successors adds one
        transfer ``weight / rate(d_x, d_j)`` (``cond_succ``, eq. 4.9: further successors on the same device need
        no further pair). Transfer time follows the cluster's model, ``latency + bytes / rate``. Unassigned
        neighbours add nothing (the thesis' best-case assumption).
        """
        st, idx = self.st, self.idx
        dev_of = st.dev_of
        tot = np.zeros(st.nd)
        members = set(unit.members)
        preds: dict[int, float] = {}
        for i in unit.members:
            for p, b in idx.pred[i]:
                if p in members or dev_of[p] < 0:
                    continue
                if b > preds.get(p, -1.0):
                    preds[p] = b
            dests: dict[int, float] = {}
            for j, b in idx.succ[i]:
                dj = dev_of[j]
                if dj < 0 or j in members:
                    continue
                if b > dests.get(dj, -1.0):
                    dests[dj] = b
            for dj, b in dests.items():
                tot += self._col(dj, b)
        for p, b in preds.items():
            row = self._row(dev_of[p], b)
            sd = self.succ_devs[p]
            if sd:
                row[list(sd)] = 0.0
            tot += row
        return tot

    def importance(self, unit: Unit) -> float:
        """Eq. 4.16: operations rank over the maximum operations rank (mean over a group's members); 0 when
        every rank is 0 (a graph without operations: the small-number case the thesis leaves open)."""
        if self.omax <= 0:
            return 0.0
        return sum(self.orank[i] for i in unit.members) / (self.omax * len(unit.members))

    def factors(self, unit: Unit, devices: list[int]) -> MiteFactors:
        st = self.st
        dv = np.asarray(devices, dtype=int)
        # traffic, eq. 4.7 - 4.11
        tt = self.traffic_temp(unit)[dv]
        t_hat = float(tt.max()) if len(tt) else 0.0
        if t_hat == 0.0:
            traffic = np.ones(len(dv))
        else:
            traffic = np.where(tt == 0.0, self.zero_traffic, tt / t_hat)
        # execution time, eq. 4.12 - 4.13 (e^ over the feasible devices; any positive constant gives the
        # same argmin, only e^ = 0 matters)
        et = st.load_np[dv] + self._exec_vec(unit)[dv]
        e_hat = float(et.max()) if len(et) else 0.0
        ex = np.ones(len(dv)) if e_hat == 0.0 else et / e_hat
        # memory, eq. 4.14
        mem = self.memory_factor()[dv]
        # importance speed boost, eq. 4.15 - 4.16 (f^ = fastest feasible device)
        imp = self.importance(unit)
        sp = self.speed[dv]
        f_hat = float(sp.max()) if len(sp) else 1.0
        boost = 1.0 - imp * sp / f_hat
        return MiteFactors(dv, tt, traffic, et, ex, mem, imp, boost)

    def _exec_vec(self, unit: Unit) -> np.ndarray:
        """The unit's execution time on every device (its per-type base time over the device speed)."""
        base = np.array([unit.base_by_type.get(t, unit.ops) for t in self.type_names], dtype=float)
        return base[self.type_idx] / self.speed

    def memory_factor(self) -> np.ndarray:
        """Eq. 4.14 for every device: used / size, or m~ / 10 for a device with nothing used yet, where m~ is the
        smallest non-zero portion over all devices (1 while there is none). A device of unlimited memory has
        portion 0."""
        portion = self.st.used_np * self.inv_cap
        nz = portion[portion > 0]
        m_min = float(nz.min()) if len(nz) else 1.0
        self.m_min = m_min
        return np.where(portion == 0.0, m_min / 10.0, portion)

    def assign(self, unit: Unit, d: int) -> None:
        self.st.assign(unit, d)
        idx = self.idx
        for i in unit.members:
            for p, _ in idx.pred[i]:
                self.succ_devs[p].add(d)


class MITEPlacer(Placer):
    """MITE (thesis 4.7): each unit to the feasible device minimising Memory x Importance speed boost x
    Traffic x Execution time (eq. 4.6).

    Colocation groups are assigned first, then the lone ops, each in topological order of its first member.
    For a unit a and a feasible device d_x:

    * traffic (eq. 4.7 to 4.11): transfer time the assignment would add towards already assigned neighbours,
      with send/receive aggregation (``cond_pred``, ``cond_succ``), summed over a group's members (4.10),
      divided by the maximum t^ over the feasible devices; 0.000001 for a device adding none while t^ > 0, and
      1.0 everywhere when t^ = 0;
    * execution time (eq. 4.12, 4.13): ``(#ops(d_x) + #ops(a)) / speed(d_x)`` (computed as the device's
      accumulated execution time plus the unit's time on d_x, which honours per-type costs), divided by its
      maximum e^ over the feasible devices, 1.0 when e^ = 0;
    * memory (eq. 4.14): the used portion of d_x's memory (sum of size_est), m~/10 on an empty device;
    * importance speed boost (eq. 4.15, 4.16): ``1 - importance(a) * speed(d_x) / f^`` with f^ the fastest
      feasible device's speed and importance the operations rank over the maximum operations rank (mean over
      a group's members).

    Ties (e.g. two products of 0 for the most important op on two equally fast devices) go to the lowest device
    index. See `MiteScorer.traffic_temp` for the reading of eq. 4.9 (one transfer per destination device).

    `zero_traffic` is eq. 4.11's "very small number" (0.000001 in the thesis). Because the other factors vary
    by far less than 10^6 between devices, a device that adds no traffic nearly always wins, so units gather on
    the devices of their already placed neighbours until memory runs out: the load imbalance the thesis itself
    observed (7.3). A larger value (e.g. 0.01) lets execution time and memory weigh in; the default keeps the
    thesis' value.

    Complexity: O(V + E + U * D + (V + E) * D) with numpy vectors of length D.

    Implementation (issue 22): graphs of `COMPILED_MIN_OPS` ops or more run the same loop compiled with numba
    (`mite_kernel`, over arrays), smaller ones `_place_python`; both give the same placement
    (tests/test_mite_kernel.py compares them).
    """

    name = "mite"

    def __init__(self, zero_traffic: float = ZERO_TRAFFIC):
        if not zero_traffic > 0:
            raise ConfigError(f"placer.zero_traffic must be > 0, got {zero_traffic!r}")
        self.zero_traffic = float(zero_traffic)

    @gc_paused()  # units, lists and arrays by the million, no cycles
    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        k = kernel(graph)
        if k is None:
            return self._place_python(graph, cluster)
        return k.place(k.MITE, graph, cluster, self.zero_traffic, "MITE: ")

    def _place_python(self, graph: OpGraph, cluster: Cluster) -> Placement:
        """MITE in Python: the reference of `mite_kernel` and the code path for graphs below
        `COMPILED_MIN_OPS`."""
        units, unit_of = build_units(graph, cluster)
        st = AssignState(graph, cluster, units, unit_of)
        sc = MiteScorer(st, self.zero_traffic)
        for u in tqdm(
            unit_order(units, groups_first=True), desc="MITE: assigning units", unit="unit", disable=None, leave=False
        ):
            cands = st.feasible(u)
            if not cands:
                raise st.infeasible(u, "MITE: ")
            f = sc.factors(u, cands)
            sc.assign(u, cands[int(np.argmin(f.heu))])
        return st.placement(units=len(units))
