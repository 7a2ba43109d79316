"""What m-ETF and m-SCT do around their list scheduling so that a placement they return fits when the
simulator replays it (issue 17): colocation retries, a check of replays (sequential mode, and copies held from
the step's start), and the one-device placement when the model fits on one device and the list scheduling found
nothing.

Why the sequential check.  In sequential-communication mode (Baechi 3.4) the placer's model and the
simulator share one model of transfer order (`algorithms.comm_queue`: first-in first-out at production), so
the placer's times are the simulator's; but a list scheduler learns of a transfer only when its consumer is
placed, and a transfer requested earlier than ones already planned delays them, so the placer re-times the
ops placed so far (`exec_model.ExecModel._retime`), which moves some of them after their memory was checked.
On 1,000 fuzzed cases (`benchmarks/fuzz_placers.py --mode sequential --no-replay-check`) that leaves 1 of 397
m-ETF and 2 of 400 m-SCT placements running out of memory in the replay (22 and 24 of about 400 when the
placer reserved the queues in placement order).  The placements are therefore replayed, and a device that
overflows gets its limit in the placer's accounting lowered by the overflow (a margin), and the list
scheduling runs again, at most `sim_retries` times; then the placer raises `InfeasiblePlacement` with the
simulator's OOM.
In parallel mode the placer's memory is an upper bound of the replay's and no check is needed, unless the cluster
holds received copies from the step's start (`Cluster.recv_buffers`, the lab's process-per-device runtime with
``post_receives=up_front``): the list scheduling charges a copy from its arrival, so such placements are replayed
too, and a device the copies overfill gets the same margin (gnmt_mem_limited at 0.7 of the need on cpu4 with the
runtime posting every receive up front, session 40: m-SCT's placement peaked at 64.7 MB on cpu1 in its own
accounting and 73.0 MB with the copies held, over the 70.6 MB limit).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from ...cluster import Cluster
from ...errors import InfeasiblePlacement
from ...graph import OpGraph, gc_paused
from ...memory import single_device_placement
from ...placement import Placement
from ...simulator import simulate
from .exec_model import ExecModel
from .pair_queue import place_with_group_retries

log = logging.getLogger(__name__)

#: Whether sequential-mode placements are replayed and checked (`place_checked`); off only to measure what the
#: check catches (``benchmarks/fuzz_placers.py --no-replay-check``).
REPLAY_CHECK = True

#: build(banned (group, device) pairs, per-device memory margins) -> a model that has been placed, and what
#: `info_of` reads about its queue (the queue itself, or its counts).
Build = Callable[[set[int], list[float]], tuple[ExecModel, Any]]


@gc_paused()
def place_checked(
    graph: OpGraph,
    cluster: Cluster,
    build: Build,
    info_of: Callable[[ExecModel, Any], dict[str, Any]],
    *,
    group_retries: int,
    sim_retries: int,
    memory_aware: bool,
    single_device_fallback: bool,
) -> Placement:
    """Run the list scheduling (`build`) with colocation retries (`place_with_group_retries`), check the
    replays where the placer's accounting is not an upper bound (module docstring), and fall back to the
    one-device placement when the list scheduling finds nothing but one device holds the model
    (`single_device_fallback`).  `info_of` gives the
    placement's info.  Each check costs one simulation, O((V + E) log V)."""
    D = len(cluster.devices)
    margins = [0.0] * D
    check = REPLAY_CHECK and memory_aware and (cluster.mode == "sequential" or cluster.recv_buffers != "arrival")
    last_oom = None
    for attempt in range(sim_retries + 1):
        try:
            (model, queue), retries = place_with_group_retries(lambda banned: build(banned, margins), D, group_retries)
        except InfeasiblePlacement as exc:
            fb = (
                single_device_placement(graph, cluster, {"list_scheduling": str(exc)})
                if single_device_fallback
                else None
            )
            if fb is None:
                raise
            log.info("list scheduling found no placement (%s); the model fits on one device: placed there", exc)
            return fb
        info = info_of(model, queue)
        info.update(n_group_retries=retries, n_replay_retries=attempt)
        pl = model.placement(info)
        if not check:
            return pl
        res = simulate(graph, cluster, pl.assignment, pl.order, record_memory=False)
        if res.oom is None:
            return pl
        last_oom = res.oom
        p = cluster.index_of(res.oom.device)
        over = res.oom.used_bytes - res.oom.limit_bytes
        margins[p] += over * (1 + 1e-6) + 1e-9 * max(
            1.0, res.oom.limit_bytes if math.isfinite(res.oom.limit_bytes) else 1.0
        )
        log.info("replay: %s; placing again with %.6g bytes less on that device", res.oom.message(), over)
    fb = single_device_placement(graph, cluster, {}) if single_device_fallback else None
    if fb is not None:
        return fb
    assert last_oom is not None
    raise InfeasiblePlacement(
        f"the placement's replay still runs out of memory after {sim_retries} retries: {last_oom.message()}"
    )
