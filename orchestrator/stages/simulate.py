"""Stage simulate: the simulator's prediction of the placed, scheduled step; and the per-run pictures."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from pathlib import Path

from algorithms.ccr import graph_ccr
from algorithms.cluster import Cluster
from algorithms.graph import OpGraph, atomic_write_json
from algorithms.placement import Schedule
from algorithms.sim_result import SimResult, sim_result_from_dict, sim_result_to_dict
from algorithms.simulator import simulate

from ..context import JobContext

log = logging.getLogger("orchestrator")


def _save(r: SimResult, p: Path) -> None:
    atomic_write_json(p / "sim.json", sim_result_to_dict(r))


def _load(p: Path) -> SimResult:
    with open(p / "sim.json") as f:
        return sim_result_from_dict(json.load(f))


def stage_simulate(
    ctx: JobContext, graph: OpGraph, cluster: Cluster, assignment: dict[str, str], schedule: Schedule, skey: str
) -> SimResult:
    def compute() -> SimResult:
        return simulate(graph, cluster, assignment, schedule)

    res = ctx.stage("simulate", {"cluster": cluster.to_dict()}, [skey], compute, _save, _load)
    return res.value


def run_ccr(graph: OpGraph, cluster: Cluster) -> float | None:
    """result.json's `ccr`: the graph's communication-to-computation ratio on the cluster it was placed on
    (Celeritas eq. 1, `algorithms.ccr`), or None where it is not finite (no computation)."""
    c = graph_ccr(graph, cluster)
    return c if math.isfinite(c) else None


def plots(
    sim: SimResult, out: Path, graph: OpGraph | None = None, assignment: dict[str, str] | None = None
) -> list[Path]:
    """Per-run pictures: the device timeline (Gantt), memory over time with the limits, and for small graphs
    the placement drawn on the graph. A picture never fails a job."""
    from .. import plots as draw

    jobs: list[tuple[str, Callable[[Path], object]]] = [
        ("device_timeline.png", lambda p: draw.device_utilization_png(sim, p)),
        ("memory.png", lambda p: draw.memory_png(sim, p)),
    ]
    if graph is not None and assignment is not None:
        jobs.append(
            ("placement_graph.png", lambda p: draw.placement_graph_png(graph, assignment, p, devices=sim.devices))
        )
    paths = []
    for name, fn in jobs:
        try:
            if fn(out / name):
                paths.append(out / name)
        except Exception as exc:
            log.warning("could not draw %s: %s", name, exc)
    return paths
