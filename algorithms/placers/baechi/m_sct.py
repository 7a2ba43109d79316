"""m-SCT: memory-constrained Small Communication Time placement (seed 001, Baechi, section 2.4)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple, TypeVar

from ... import compiled_mode
from ...base import Placer
from ...cluster import Cluster
from ...errors import ConfigError
from ...graph import OpGraph
from ...placement import Placement
from .exec_model import ExecModel, durations, mean_durations
from .safeguards import place_checked
from .sct_lp import (
    DEFAULT_LP_OPTIONS,
    LP_FORMULATIONS,
    LP_METHODS,
    STREAMS_ABOVE_OPS,
    WINDOW_ABOVE_OPS,
    favorite_children,
    sct_lp,
    sct_lp_windowed,
    window_ops,
)
from .sct_queue import SCTQueue

__all__ = ["MSCTPlacer", "favorite_children", "sct_lp", "sct_lp_windowed"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Graphs of at least this many ops are list-scheduled by the compiled port of `SCTQueue`
#: (`etf_kernel.run_sct`, parallel mode, numba installed): the same placement, far faster; smaller ones by the
#: Python classes, which need no compiled code loaded.  Set to None to always use the Python classes.
COMPILED_MIN_OPS: int | None = 2000


def _kernel(graph: OpGraph, cluster: Cluster) -> ModuleType | None:
    """The `etf_kernel` module when it applies to this graph and cluster (`COMPILED_MIN_OPS`), else None."""
    if cluster.mode != "parallel" or not compiled_mode.applies(graph.index().n, COMPILED_MIN_OPS):
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


def _solve_lp_beside(solve: Callable[[], T], build: Callable[[], ExecModel]) -> tuple[ExecModel, T]:
    """Run `build` (the execution model) on a thread of its own while this thread runs `solve` (the windowed SCT
    LP), and return both results.  Why: at 10^6 ops the LP's two runs of windows keep both cores busy but for
    the GIL-bound moments between HiGHS calls, and the model's construction (Python over every op, 1-2 s) fills
    them instead of running before the LP.  Neither reads what the other writes (the graph's index is built
    before), so the results are those of running them one after the other.  The LP stays on the calling
    thread, whose memory the list scheduling reuses afterwards (the other way round, the peak RSS of the 1M
    whole run grew by about 250 MB).  An error of `build` is raised after the LP has finished."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="m-sct-model") as pool:
        fut = pool.submit(build)
        result = solve()
        return fut.result(), result


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
    docs/scale.md, "m-SCT's windowed SCT LP").  `lp_window`: None (default) takes `sct_lp.window_ops`: 500 ops
    (`WINDOW_OPS`), 250 (`LARGE_WINDOW_OPS`) from `LARGE_WINDOW_FROM_OPS` ops on, where HiGHS' time is most of
    the run (docs/scale.md, "m-SCT at 1M, session 17").  `lp_streams`: the runs of windows of the windowed LP
    solved side by side (`sct_lp_windowed`'s `streams`); None (default) takes 2 from `STREAMS_ABOVE_OPS` ops
    (None: never), 1 below.  The placement does not depend on the machine's cores: only how long it takes.
    With more than one CPU the windowed LP runs while another thread builds the execution model
    (`_solve_lp_beside`); the same placement.

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
        self.lp_window = None if lp_window is None else int(lp_window)
        if self.lp_window is not None and self.lp_window < 1:
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
        n = graph.index().n
        # the LP needs only each op's mean execution time; the rest of the execution model (Python over every
        # op, about 1-2 s at 10^6 ops) is built while the LP's threads solve (`_solve_lp_beside`)
        compute = mean_durations(durations(graph, cluster))
        windowed = self.lp_formulation == "windowed" or (self.lp_formulation == "auto" and n > self.lp_window_above)

        def new_model() -> ExecModel:
            return ExecModel(graph, cluster, memory_aware=self.memory_aware, group_reserve=self.group_reserve)

        if windowed:
            streams = self.lp_streams
            if streams is None:
                streams = 2 if STREAMS_ABOVE_OPS is not None and n >= STREAMS_ABOVE_OPS else 1
            window = window_ops(n) if self.lp_window is None else self.lp_window

            def solve() -> tuple[Any, dict]:
                return sct_lp_windowed(
                    graph,
                    cluster,
                    compute,
                    self.lp_method,
                    options=self.lp_options,
                    window=window,
                    streams=streams,
                    parallel=_cpus() > 1,
                )

            model, (x, facts) = _solve_lp_beside(solve, new_model) if _cpus() > 1 else (new_model(), solve())
        else:
            model = new_model()
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
