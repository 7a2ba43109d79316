"""m-SCT: memory-constrained Small Communication Time placement (seed 001, Baechi, section 2.4)."""

from __future__ import annotations

import logging
import os
import time
from types import ModuleType
from typing import Any, NamedTuple

from ...base import Placer
from ...cluster import Cluster
from ...errors import ConfigError
from ...graph import OpGraph
from ...placement import Placement
from .exec_model import ExecModel
from .safeguards import place_checked
from .sct_lp import (
    DEFAULT_LP_OPTIONS,
    LP_FORMULATIONS,
    LP_METHODS,
    STREAMS_ABOVE_OPS,
    WINDOW_ABOVE_OPS,
    WINDOW_OPS,
    favorite_children,
    sct_lp,
    sct_lp_windowed,
)
from .sct_queue import SCTQueue

__all__ = ["MSCTPlacer", "favorite_children", "sct_lp", "sct_lp_windowed"]

log = logging.getLogger(__name__)

#: Graphs of at least this many ops are list-scheduled by the compiled port of `SCTQueue`
#: (`etf_kernel.run_sct`, parallel mode, numba installed): the same placement, far faster; smaller ones by the
#: Python classes, which need no compiled code loaded.  Set to None to always use the Python classes.
COMPILED_MIN_OPS: int | None = 2000


def _kernel(graph: OpGraph, cluster: Cluster) -> ModuleType | None:
    """The `etf_kernel` module when it applies to this graph and cluster (`COMPILED_MIN_OPS`), else None."""
    if COMPILED_MIN_OPS is None or cluster.mode != "parallel" or graph.index().n < COMPILED_MIN_OPS:
        return None
    try:
        from . import etf_kernel
    except ImportError as exc:  # numba missing: the Python classes give the same placement, slower
        log.info("m-SCT: compiled list scheduling unavailable (%s); using the Python one", exc)
        return None
    return etf_kernel


def _cpus() -> int:
    """The CPUs this process may run on (the windowed LP's runs go on threads only when there are two)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class SCTCounts(NamedTuple):
    """What a list scheduling run of m-SCT reports about its queue (``info``)."""

    n_dropped: int
    n_parked: int
    n_reestimated: int
    n_held_back: int
    excluded: list[bool]


class MSCTPlacer(Placer):
    """m-SCT: SCT's favorite-child list scheduling with memory limits; full devices are excluded.

    Baechi section 2.4.  (1) Solve the LP relaxation of the favorite-child ILP, equation (2), with HiGHS'
    interior-point method (`sct_lp`); (2) round it with `threshold` (0.1 as in 4.3) and repair so that every
    op has at most one favorite child and one favorite parent (`favorite_children`); (3) schedule like ETF
    on the finite devices (the same pair queue, execution model, dynamic memory and co-adjusted colocation
    as m-ETF, see `exec_model` and `pair_queue`), but (`sct_queue.SCTQueue`): a favorite child *prefers*
    its favorite parent's device: it goes elsewhere only when another device starts it earlier by more
    than the transfer that staying saves (latency + the edge's bytes over the link); among pairs that could
    start at the same time the favorite child on its parent's device goes first, then urgent ops (ops whose
    inputs could be on any device by then), then the rest; (4) when a device runs out of available memory
    it is excluded from further placement
    (`exclude_full`, the paper's rule; ops of a colocation group already pinned there still go there).  A
    colocation group that does not fit only drops that pair (3.1: the algorithm's next device choice); a later
    member that finds its group's device full makes the list scheduling run again with that group kept off
    that device (`group_retries` per group, as in m-ETF; the LP is solved once).

    Choices where the paper is vague: the finite-device rules of [17] ("prefers placing the favorite child
    ... on the same device", "prioritizes urgent tasks") are rendered as the tie classes above and the
    transfer-time slack of the preference; urgency ignores communication queues.  "Runs out of available
    memory" under dynamic memory (4.2): with `exclusion="exhausted"` (default) a device is excluded when it
    could not hold the chosen op even with none of its transient tensors live (what stays allocated for the
    step plus the op exceeds its memory); a refusal caused by tensors live at that moment only parks the
    pair until the device changes, as in m-ETF, since they are freed later.  `exclusion="refusal"` excludes
    at the first refusal (on an operator-level GNMT at 60% of the need per device that excludes all four
    devices within the forward pass, because list scheduling fills every device to its limit with live
    activations).
    `memory_aware=False` gives classical SCT (memory tracked, never refused), which can overflow a device
    (Figure 1); `group_reserve` as in m-ETF; `lp_method` picks the LP solver (`sct_lp`) and `lp_options`
    HiGHS options for it (default `DEFAULT_LP_OPTIONS`).  `lp_formulation` picks the LP: "full" (`sct_lp`,
    the whole graph), "windowed" (`sct_lp_windowed`: windows of `lp_window` ops along the topological order,
    linear in the ops, favourite children not those of the whole LP) or "auto" (default: the whole LP up to
    `lp_window_above` ops, the windowed one above; the choice and its measured effect on makespans are in
    docs/scale.md, "m-SCT's windowed SCT LP").  `lp_streams`: the runs of windows of the windowed LP solved
    side by side (`sct_lp_windowed`'s `streams`); None (default) takes 2 from `STREAMS_ABOVE_OPS` ops (None:
    never), 1 below.  The placement does not depend on the machine's cores: only how long it takes.

    `replay_retries` and `single_device_fallback` as in m-ETF (`safeguards.place_checked`).  `info` holds
    lp_time_s, lp_status, n_favorite_children, n_excluded_devices, the predicted makespan and the predicted
    peak bytes per device.  An op that fits nowhere raises `InfeasiblePlacement`.

    Implementation (issue 22): in a ``parallel``-communication cluster, graphs of `COMPILED_MIN_OPS` ops or
    more run the list scheduling compiled with numba (`etf_kernel.run_sct`, a port of `SCTQueue` and
    `ExecModel`): the same placement, predicted times and peaks, bit for bit (``info["compiled"]``).

    Complexity: the LP (interior point on V + E variables; windowed: V / window interior points on
    O(window) variables) plus m-ETF's O((V D + R)(log(V D) + d)).
    """

    name = "m_sct"

    def __init__(
        self,
        threshold: float = 0.1,
        exclude_full: bool = True,
        memory_aware: bool = True,
        group_reserve: str = "persistent",
        lp_method: str = "highs-ipm",
        exclusion: str = "exhausted",
        lp_options: dict[str, Any] | None = None,
        group_retries: int = 16,
        replay_retries: int = 8,
        single_device_fallback: bool = True,
        lp_formulation: str = "auto",
        lp_window: int | None = None,
        lp_window_above: int | None = None,
        lp_streams: int | None = None,
    ):
        if lp_formulation not in LP_FORMULATIONS:
            raise ConfigError(f"placer.lp_formulation: {lp_formulation!r} is not one of {LP_FORMULATIONS}")
        self.lp_formulation = lp_formulation
        self.lp_window = WINDOW_OPS if lp_window is None else int(lp_window)
        if self.lp_window < 1:
            raise ConfigError(f"placer.lp_window: {lp_window!r} must be >= 1 op")
        self.lp_window_above = WINDOW_ABOVE_OPS if lp_window_above is None else int(lp_window_above)
        if lp_streams is not None and int(lp_streams) < 1:
            raise ConfigError(f"placer.lp_streams: {lp_streams!r} must be >= 1 (or null: by size)")
        self.lp_streams = None if lp_streams is None else int(lp_streams)
        if group_retries < 0:
            raise ConfigError(f"placer.group_retries: {group_retries!r} must be >= 0")
        if replay_retries < 0:
            raise ConfigError(f"placer.replay_retries: {replay_retries!r} must be >= 0")
        self.group_retries = int(group_retries)
        self.replay_retries = int(replay_retries)
        self.single_device_fallback = bool(single_device_fallback)
        self.lp_options = dict(DEFAULT_LP_OPTIONS if lp_options is None else lp_options)
        self.exclusion = exclusion
        if lp_method not in LP_METHODS:
            raise ConfigError(f"placer.lp_method: {lp_method!r} is not one of {LP_METHODS}")
        self.lp_method = lp_method
        self.group_reserve = group_reserve
        if not 0 < threshold <= 1:
            raise ConfigError(f"placer.threshold must lie in (0, 1], got {threshold!r}")
        self.threshold = float(threshold)
        self.exclude_full = bool(exclude_full)
        self.memory_aware = bool(memory_aware)

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        t0 = time.perf_counter()
        model = ExecModel(graph, cluster, memory_aware=self.memory_aware, group_reserve=self.group_reserve)
        compute = model.mean_durations()
        windowed = self.lp_formulation == "windowed" or (
            self.lp_formulation == "auto" and model.n > self.lp_window_above
        )
        if windowed:
            streams = self.lp_streams
            if streams is None:
                streams = 2 if STREAMS_ABOVE_OPS is not None and model.n >= STREAMS_ABOVE_OPS else 1
            x, facts = sct_lp_windowed(
                graph,
                cluster,
                compute,
                self.lp_method,
                options=self.lp_options,
                window=self.lp_window,
                streams=streams,
                parallel=_cpus() > 1,
            )
        else:
            x, facts = sct_lp(graph, cluster, compute, self.lp_method, options=self.lp_options)
            facts["lp_formulation"] = "full"
        fav = favorite_children(graph, x, self.threshold)
        kernel = _kernel(graph, cluster)
        exclude_full = self.exclude_full and self.memory_aware

        first = [True]

        def build(banned: set[int], margins: list[float]) -> tuple[ExecModel, SCTCounts]:
            if first[0] and not banned and not any(margins):
                m = model
            else:
                m = ExecModel(graph, cluster, self.memory_aware, self.group_reserve, margins)
            first[0] = False
            if kernel is not None:
                return m, SCTCounts(*kernel.run_sct(m, fav, exclude_full, self.exclusion, banned))
            queue = SCTQueue(m, favorite_parent=fav, exclude_full=exclude_full, exclusion=self.exclusion, banned=banned)
            queue.run()
            counts = SCTCounts(queue.n_dropped, queue.n_parked, queue.n_reestimated, queue.n_held_back, queue.excluded)
            return m, counts

        def info_of(model: ExecModel, queue: SCTCounts) -> dict[str, Any]:
            info = dict(facts)
            info.update(
                n_favorite_children=sum(1 for f in fav if f >= 0),
                n_excluded_devices=sum(queue.excluded),
                n_dropped_pairs=queue.n_dropped,
                n_parked_pairs=queue.n_parked,
                n_held_back=queue.n_held_back,
                n_reestimated=queue.n_reestimated,
                compiled=kernel is not None,
            )
            return info

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
        info = pl.info
        info["algorithm_time_s"] = time.perf_counter() - t0
        info.setdefault("n_favorite_children", sum(1 for f in fav if f >= 0))
        log.info(
            "m-SCT placed %d ops (%d favorite children) on %d devices; predicted makespan %.6g s; "
            "LP %.3f s, total %.3f s",
            model.n,
            info["n_favorite_children"],
            model.D,
            pl.info["predicted_makespan_s"],
            info.get("lp_time_s", 0.0),
            info["algorithm_time_s"],
        )
        return pl
