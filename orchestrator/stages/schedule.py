"""Stage schedule: each device's op order. `scheduler=placer_order` replays the placer's own order (expanded
from coarse to original ops); when it does not replay on the original graph, ops run by the placer's rank.
Whatever the scheduler, an op of a tuple's items then runs right after the op that makes them
(`algorithms.placement.items_follow_their_producer`)."""

from __future__ import annotations

import logging

from algorithms.cluster import Cluster
from algorithms.dispatch import RankPolicy
from algorithms.errors import InvalidSchedule
from algorithms.graph import OpGraph
from algorithms.placement import CoarseMap, Placement, Schedule, check_schedule, items_follow_their_producer
from algorithms.simulator import simulate

from ..context import JobContext, load_json, save_json
from ..registry import instantiate, plain

log = logging.getLogger("orchestrator")


def check_replays(graph: OpGraph, cluster: Cluster, order: Schedule) -> None:
    """Raise the simulator's `InvalidSchedule` when the static per-device `order` deadlocks, without simulating.

    A static order runs op i once its inputs have arrived and every op before it in its device's order has
    started; transfers and memory never block (`algorithms.simulator`: an out-of-memory is recorded, not
    waited on).  So the ops that ever start are those a topological sort (Kahn's) of the graph's edges plus
    the edges between consecutive ops of each device's order reaches, whatever the durations, and the
    order deadlocks exactly when that sort stops short.  The error is `simulate`'s own: the first device, in
    the cluster's order, whose next op never starts, that op, and up to three of its inputs that never run.
    This stage used to call `simulate(..., record_memory=False)` for the check and drop the result: a
    second simulation of the step (issue 22: 10-30 s at 10^6 ops); this is O(V + E) list work.
    """
    idx = graph.index()
    pos = idx.pos
    n = idx.n
    seqs = [[pos[o] for o in order.get(d.name, [])] for d in cluster.devices]
    nxt = [-1] * n  # the next op in the same device's order
    missing = [len(p) for p in idx.pred]
    for seq in seqs:
        for a, b in zip(seq, seq[1:]):
            nxt[a] = b
            missing[b] += 1
    succ = idx.succ
    stack = [i for i in range(n) if missing[i] == 0]
    started = [False] * n
    done = 0
    while stack:
        i = stack.pop()
        started[i] = True
        done += 1
        for j, _ in succ[i]:
            missing[j] -= 1
            if missing[j] == 0:
                stack.append(j)
        j = nxt[i]
        if j >= 0:
            missing[j] -= 1
            if missing[j] == 0:
                stack.append(j)
    if done == n:
        return
    names = idx.names
    for d, seq in zip(cluster.devices, seqs):
        i = next((i for i in seq if not started[i]), -1)
        if i >= 0:
            waiting = [names[j] for j, _ in idx.pred[i] if not started[j]]
            raise InvalidSchedule(
                f"schedule deadlocks: device {d.name!r} waits to run op {names[i]!r}, whose input(s) "
                f"{waiting[:3]} never run because they are ordered after a blocked op on their device"
            )
    stuck = [names[i] for i in range(n) if not started[i]]
    raise InvalidSchedule(f"simulation stopped with {len(stuck)} ops never run, e.g. {stuck[:3]}")


def stage_schedule(
    ctx: JobContext,
    graph: OpGraph,
    cluster: Cluster,
    coarse_pl: Placement,
    cmap: CoarseMap | None,
    assignment: dict[str, str],
    plkey: str,
) -> tuple[Schedule, str]:
    sched_cfg = ctx.cfg.scheduler

    def compute() -> Schedule:
        return items_follow_their_producer(graph, scheduled())

    def scheduled() -> Schedule:
        from algorithms.schedulers.baseline import PlacerOrderScheduler

        scheduler = instantiate(sched_cfg, "scheduler")
        full = Placement(assignment)
        if isinstance(scheduler, PlacerOrderScheduler) and coarse_pl.order:
            order = cmap.expand_schedule(coarse_pl.order) if cmap is not None else coarse_pl.order
            order = {d: list(order.get(d, [])) for d in cluster.names}
            try:
                check_schedule(graph, full, order)
                check_replays(graph, cluster, order)
                return order
            except InvalidSchedule as exc:
                log.warning(
                    "the placer's order does not replay on the original graph (%s); running ops by "
                    "the placer's rank instead",
                    exc,
                )
                rank = {o: k for dev_ops in order.values() for k, o in enumerate(dev_ops)}
                r = simulate(graph, cluster, full, policy=RankPolicy(rank), record_memory=False)
                return r.order
        return scheduler.order(graph, cluster, full)

    cfg = {"scheduler": plain(sched_cfg)}
    res = ctx.stage("schedule", cfg, [plkey], compute, save_json("schedule.json"), load_json("schedule.json"))
    return {d: list(v) for d, v in res.value.items()}, res.key
