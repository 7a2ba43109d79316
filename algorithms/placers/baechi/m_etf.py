"""m-ETF: memory-constrained Earliest Task First (seed 001, Baechi, section 2.3)."""

from __future__ import annotations

import logging
import time
from types import ModuleType
from typing import Any, NamedTuple

from ... import compiled_mode
from ...base import Placer
from ...cluster import Cluster
from ...errors import ConfigError
from ...graph import OpGraph
from ...placement import Placement
from .exec_model import ExecModel
from .pair_queue import PairQueue
from .safeguards import place_checked

log = logging.getLogger(__name__)

#: Graphs of at least this many ops are placed by the compiled list scheduling (`etf_kernel`, parallel mode,
#: numba installed): the same placement, about 30 times faster; smaller ones by the Python classes, which
#: need no compiled code loaded.  Set to None to always use the Python classes.
COMPILED_MIN_OPS: int | None = 2000


class QueueCounts(NamedTuple):
    """What a list scheduling run reports about its queue (``info``)."""

    n_dropped: int
    n_parked: int
    n_reestimated: int


def _kernel(graph: OpGraph, cluster: Cluster) -> ModuleType | None:
    """The `etf_kernel` module when it applies to this graph and cluster (`COMPILED_MIN_OPS`), else None."""
    if cluster.mode != "parallel" or not compiled_mode.applies(graph.index().n, COMPILED_MIN_OPS):
        return None
    try:
        from . import etf_kernel
    except ImportError as exc:  # numba missing: the Python classes give the same placement, slower
        log.info("m-ETF: compiled list scheduling unavailable (%s); using the Python one", exc)
        return None
    return etf_kernel


class METFPlacer(Placer):
    """m-ETF: list scheduling by earliest schedulable time over (op, device) pairs, skipping full devices.

    Baechi section 2.3.  A queue holds a pair (op, device) for every ready op and every device it may use,
    ordered by the op's earliest schedulable time on that device, equation (1): the later of the device's
    available time and the arrival of the op's last input (producer's end + transfer time when the producer
    sits elsewhere), plus in sequential-communication clusters the wait in the sender's and receiver's
    queues (3.4).  The head pair is placed if the device can hold the op.  Placing an op advances the
    device's available time and makes its children ready.  Memory is tracked dynamically as in Baechi's
    execution simulator (4.2, see `exec_model`), and colocation groups are co-adjusted (3.1): the first
    member placed takes its group, whose memory is reserved at once.

    A refused head.  The paper removes it: "If the head element (o, p) is not schedulable because device p's
    leftover memory is insufficient, then the head is removed" (2.3), which is final under its accounting,
    where leftover memory only shrinks.  With dynamic memory (4.2) a refusal at one start time can be
    lifted at a later one, once live tensors are freed; removing the pair would throw away a device that
    fits later.  So a refused pair is removed only when the device could not hold the op even with none of
    its transient memory live; otherwise it comes back, re-estimated with the device's later start time,
    once the device's clock or memory has changed (`pair_queue.PairQueue`; ``info["n_parked_pairs"]``).
    A later member of a group refused on its group's device waits the same way; if it cannot fit there even
    then (a backward op long after its forward op), the placement is run again with that group kept off
    that device; each group may be kept off at most ``min(group_retries, D - 1)`` devices
    (`pair_queue.place_with_group_retries`; ``info["n_group_retries"]`` counts the retries of all groups).

    The queue is kept as one binary heap of pairs per device, ordered by the op's data-ready time on that
    device, with lazy invalidation (entries of placed ops, dropped pairs and stored times that grew are
    dealt with when they reach a head; nothing is re-sorted).  Since the earliest schedulable time on p is
    ``max(avail[p], data ready)``, p's head is p's best pair and the queue's head is the best of the D
    heads: this is the single pair queue of 2.3, split by device.  Ties go to the earlier data-ready time,
    then to the op earlier in topological order, then to the lower device index.
    `memory_aware=False` gives classical ETF (memory tracked for reporting, never refused); `group_reserve`
    chooses what a colocation group reserves when it is pinned (`exec_model.ExecModel`; default: its members'
    persistent bytes).

    Around the list scheduling (`safeguards.place_checked`): in sequential-communication mode the placement
    is replayed by the simulator and placed again with a margin on a device that overflows (at most
    `replay_retries` times), and when the list scheduling finds nothing but one device holds the model
    (`algorithms.memory.single_device_need`), the model goes there (`single_device_fallback`,
    ``info["fallback"]``).  Otherwise an op (or group) that fits on no device raises `InfeasiblePlacement`
    naming it.  `Placement.order` is
    the per-device order of the placer's simulation; `info` holds the predicted makespan, the predicted
    peak bytes per device and the counts of dropped pairs and re-estimations.

    Implementation (issue 22): in a ``parallel``-communication cluster, graphs of `COMPILED_MIN_OPS` ops or
    more run the same list scheduling compiled with numba (`etf_kernel`, a port of `PairQueue` and
    `ExecModel`): the same placement, predicted times and peaks, bit for bit, at about 1/10 of the CPU time
    (``info["compiled"]``).  Sequential mode and smaller graphs use the Python classes.

    Complexity: O((V D + R)(log(V D) + d)) for V ops, D devices, in-degree d and R re-estimations, plus
    O(V S / 8) numpy work for the memory checks (S: ops per device).
    """

    name = "m_etf"

    def __init__(
        self,
        memory_aware: bool = True,
        group_reserve: str = "persistent",
        group_retries: int = 16,
        replay_retries: int = 8,
        single_device_fallback: bool = True,
    ):
        self.memory_aware = bool(memory_aware)
        self.group_reserve = group_reserve
        if group_retries < 0:
            raise ConfigError(f"placer.group_retries: {group_retries!r} must be >= 0")
        if replay_retries < 0:
            raise ConfigError(f"placer.replay_retries: {replay_retries!r} must be >= 0")
        self.group_retries = int(group_retries)
        self.replay_retries = int(replay_retries)
        self.single_device_fallback = bool(single_device_fallback)

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        t0 = time.perf_counter()

        kernel = _kernel(graph, cluster)

        def build(banned: set[int], margins: list[float]) -> tuple[ExecModel, QueueCounts]:
            model = ExecModel(graph, cluster, self.memory_aware, self.group_reserve, margins)
            if kernel is not None:
                return model, QueueCounts(*kernel.run(model, banned))
            queue = PairQueue(model, banned=banned)
            queue.run()
            return model, QueueCounts(queue.n_dropped, queue.n_parked, queue.n_reestimated)

        def info_of(model: ExecModel, queue: QueueCounts) -> dict[str, Any]:
            return {
                "n_dropped_pairs": queue.n_dropped,
                "n_parked_pairs": queue.n_parked,
                "n_reestimated": queue.n_reestimated,
                "compiled": kernel is not None,
            }

        pl = place_checked(
            graph,
            cluster,
            build,
            info_of,
            group_retries=self.group_retries,
            sim_retries=self.replay_retries,
            memory_aware=self.memory_aware,
            single_device_fallback=self.single_device_fallback and self.memory_aware,
        )
        pl.info["algorithm_time_s"] = time.perf_counter() - t0
        log.info(
            "m-ETF placed %d ops on %d devices; predicted makespan %.6g s in %.3f s",
            graph.index().n,
            len(cluster.devices),
            pl.info["predicted_makespan_s"],
            pl.info["algorithm_time_s"],
        )
        return pl
