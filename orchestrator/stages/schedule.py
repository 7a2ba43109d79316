"""Stage schedule: each device's op order. `scheduler=placer_order` replays the placer's own order (expanded
from coarse to original ops); when it does not replay on the original graph, ops run by the placer's rank."""

from __future__ import annotations

import logging

from algorithms.cluster import Cluster
from algorithms.dispatch import RankPolicy
from algorithms.errors import InvalidSchedule
from algorithms.graph import OpGraph
from algorithms.placement import CoarseMap, Placement, Schedule, check_schedule
from algorithms.simulator import simulate

from ..context import JobContext, load_json, save_json
from ..registry import instantiate, plain

log = logging.getLogger("orchestrator")


def stage_schedule(
    ctx: JobContext,
    graph: OpGraph,
    cluster: Cluster,
    coarse_pl: Placement,
    cmap: CoarseMap,
    assignment: dict[str, str],
    plkey: str,
) -> tuple[Schedule, str]:
    sched_cfg = ctx.cfg.scheduler

    def compute() -> Schedule:
        from algorithms.schedulers.baseline import PlacerOrderScheduler

        scheduler = instantiate(sched_cfg, "scheduler")
        full = Placement(assignment)
        if isinstance(scheduler, PlacerOrderScheduler) and coarse_pl.order:
            order = cmap.expand_schedule(coarse_pl.order)
            order = {d: list(order.get(d, [])) for d in cluster.names}
            try:
                check_schedule(graph, full, order)
                simulate(graph, cluster, full, order, record_memory=False)
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
