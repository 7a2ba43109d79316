"""The thesis' schedulers (seed 004, chapter 5): FIFO, PCT and MSR.

Each scheduler runs the discrete-event simulator (`algorithms.simulator.simulate`) with a `DispatchPolicy`:
the simulator makes every decision at the device with the lowest local time after processing every event up
to that time (thesis 3.2), so a scheduler never decides without knowing which ops are executable then. The
per-device order the simulation executed is the schedule; replayed as a static schedule it reproduces the
same run (same start times, same makespan). Schedulers work on any placement (they never move an op).

`Scheduler.run` returns the whole `SimResult` of the policy run, with the decision log
(time, device, number of executable ops) that Figure 7.10 plots.
"""

from __future__ import annotations

import logging
from abc import abstractmethod

from ..base import Scheduler
from ..cluster import Cluster
from ..dispatch import DispatchPolicy, FifoPolicy, SimState
from ..graph import OpGraph
from ..placement import Placement, Schedule
from ..sim_result import SimResult
from ..simulator import simulate

log = logging.getLogger(__name__)

#: Eq. 5.2: points for a successor that becomes executable on an idle device.
IDLE_BONUS = 5


def path_computation_time(graph: OpGraph, cluster: Cluster, device_of: list[int]) -> list[float]:
    """Eq. 5.1: ``PCT(n_i) = max over succs n_j of (PCT(n_j) + transfer time(n_i, n_j)) + exec(n_i, d(n_i))``.

    The execution time is the op's time on its own device (``#ops / speed``, or its per-type cost); the
    transfer time is 0 on one device and ``latency + bytes / rate`` of the device pair otherwise. A sink's PCT
    is its execution time. Indices follow ``graph.index()``; `device_of` gives each op's device index.
    O(V + E)."""
    idx = graph.index()
    devs = cluster.devices
    lat, bw = cluster.latency_table, cluster.bandwidth_table
    pct = [0.0] * idx.n
    for i in range(idx.n - 1, -1, -1):
        di = device_of[i]
        best = 0.0
        for j, b in idx.succ[i]:
            dj = device_of[j]
            v = pct[j] + (0.0 if dj == di else lat[di][dj] + b / bw[di][dj])
            if v > best:
                best = v
        d = devs[di]
        pct[i] = best + idx.exec_time(i, d.type, d.speed)
    return pct


class PctPolicy(DispatchPolicy):
    """Highest path computation time first (eq. 5.1); ties: the op that became executable first."""

    def prepare(self, graph: OpGraph, cluster: Cluster, device_of: list[int]) -> None:
        self.pct = path_computation_time(graph, cluster, device_of)

    def key(self, op: int, ready_time: float, seq: int) -> tuple:
        return (-self.pct[op],)


class MsrPolicy(DispatchPolicy):
    """Maximum successor rank first (eq. 5.2), PCT (eq. 5.1) as tie-breaker, then the lowest topological index.

    ``successor rank(n_i) = sum over succs n_j of [1 + (d(n_j) != d(n_i)) + (|pred_notex(n_j)| == 1)
    + IDLE_BONUS * (idle(d(n_j)) and |pred_notex(n_j)| == 1)]``

    ``pred_notex(n_j)`` are n_j's predecessors that have not finished (n_i, an executable op not yet run, is
    one of them, so ``== 1`` means n_i is the last). ``idle(d)`` holds when device d runs nothing and has no
    executable op at the decision time (`SimState.device_idle`); the deciding device itself is never idle (it is
    choosing among executable ops). The first two terms are static and precomputed.

    Complexity per decision: O(sum of the candidates' out-degrees).
    """

    dynamic = True

    def prepare(self, graph: OpGraph, cluster: Cluster, device_of: list[int]) -> None:
        idx = graph.index()
        self.pct = path_computation_time(graph, cluster, device_of)
        self.succ = [[j for j, _ in idx.succ[i]] for i in range(idx.n)]
        self.base = [sum(1 + (device_of[j] != device_of[i]) for j in self.succ[i]) for i in range(idx.n)]
        self.device_of = device_of

    def successor_rank(self, i: int, state: SimState) -> int:
        r = self.base[i]
        unfinished = state.unfinished_preds
        dev = self.device_of
        for j in self.succ[i]:
            if unfinished[j] == 1:
                r += 1
                if state.device_idle(dev[j]):
                    r += IDLE_BONUS
        return r

    def choose(self, device: int, candidates: list[int], state: SimState) -> int:
        best_k, best_key = 0, None
        for k, i in enumerate(candidates):
            key = (self.successor_rank(i, state), self.pct[i], -i)
            if best_key is None or key > best_key:
                best_k, best_key = k, key
        return best_k


class _PolicyScheduler(Scheduler):
    """A scheduler that runs the simulator with its dispatch policy and returns the executed order."""

    @abstractmethod
    def policy(self) -> DispatchPolicy:
        """The dispatch policy the simulator consults at each decision."""

    def run(
        self,
        graph: OpGraph,
        cluster: Cluster,
        placement: Placement,
        *,
        record_decisions: bool = True,
        record_memory: bool = False,
    ) -> SimResult:
        """Simulate with this scheduler's policy; the result's `order` is the schedule, `decisions` the log."""
        return simulate(
            graph,
            cluster,
            placement,
            policy=self.policy(),
            record_decisions=record_decisions,
            record_memory=record_memory,
        )

    def order(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Schedule:
        res = self.run(graph, cluster, placement, record_decisions=False)
        log.debug("%s: simulated makespan %.6g s", self.name, res.makespan)
        return {d: list(res.order.get(d, [])) for d in cluster.names}


class FIFOScheduler(_PolicyScheduler):
    """FIFO (thesis 5.2): each device runs its executable ops in the order they became executable.

    Ops that become executable at the same instant keep the simulator's event order. O((V + E) log V).
    """

    name = "fifo"

    def policy(self) -> DispatchPolicy:
        return FifoPolicy()


class PCTScheduler(_PolicyScheduler):
    """PCT (thesis 5.3): run the executable op with the largest upward path computation time (eq. 5.1) first.

    PCT is computed once per placement (scheduling preprocessing) in O(V + E); the simulation keeps a heap per
    device: O((V + E) log V) overall.
    """

    name = "pct"

    def policy(self) -> DispatchPolicy:
        return PctPolicy()


class MSRScheduler(_PolicyScheduler):
    """MSR (thesis 5.4): run the executable op with the maximum successor rank (eq. 5.2, idle bonus 5) first,
    PCT breaking ties.

    The rank depends on the state at the decision (which successors would become executable, which devices are
    idle), so each decision scans the device's executable ops: O(sum over decisions of the candidates'
    out-degrees) on top of the simulation.
    """

    name = "msr"

    def policy(self) -> DispatchPolicy:
        return MsrPolicy()
