"""Stage optimize: the configured graph passes (`optimizer.passes`, each a GraphPass config) coarsen the graph
before placement; the CoarseMap says which original ops each coarse op stands for.  Without passes (optimizer
`none`) the graph is placed as it is and the map is None, the identity: building ``{op: [op]}`` and expanding the
assignment through it cost about 1.3 s CPU of a 300K-op run and bought nothing (issue 22)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from algorithms.cluster import Cluster
from algorithms.graph import OpGraph, atomic_write_json
from algorithms.placement import CoarseMap

from ..context import JobContext
from ..registry import instantiate, plain

log = logging.getLogger("orchestrator")


#: the time the passes took, written beside the coarse graph in the stage's cache entry
TIMES = "optimize_time.json"


def stage_optimize(
    ctx: JobContext, graph: OpGraph, pkey: str, cluster: Cluster, result: dict[str, Any] | None = None
) -> tuple[OpGraph, CoarseMap | None, str]:
    """(coarse graph, its CoarseMap, stage key); without passes (`graph`, None: the identity, `pkey`).

    The passes' wall-clock and CPU time (this process's, as `stage_place` times the placer) go into `result` as
    ``optimize_time_s`` and ``optimize_cpu_s``, 0 without passes: a paper's placement time may include its
    graph optimizations (Baechi's m-SCT as the Celeritas paper times it, Table 4). A cache hit reports the time
    of the run that computed the entry, as the placement does; None from an entry written before it was
    recorded."""
    passes_cfg = ctx.cfg.optimizer.get("passes") or []
    if not passes_cfg:
        if result is not None:
            result["optimize_time_s"] = result["optimize_cpu_s"] = 0.0
        return graph, None, pkey

    def compute() -> tuple[OpGraph, CoarseMap, dict[str, float]]:
        g, cmap = graph, CoarseMap.identity(graph)
        w0, c0 = time.perf_counter(), time.process_time()
        for i, pc in enumerate(passes_cfg):
            gp = instantiate(pc, f"optimizer.passes[{i}]")
            if hasattr(gp, "bind"):
                gp.bind(cluster)
            t0 = time.perf_counter()
            g2, m = gp.apply(g)
            log.info("pass %-24s %d -> %d ops (%.2fs)", type(gp).__name__, len(g), len(g2), time.perf_counter() - t0)
            cmap = cmap.then(m)
            g = g2
        cmap.check_covers(graph)
        # composing passes concatenates member lists; keep each coarse op's members in topological order
        pos = graph.index().pos
        coarse = CoarseMap({c: sorted(members, key=pos.__getitem__) for c, members in cmap.items()})
        times = {"optimize_time_s": time.perf_counter() - w0, "optimize_cpu_s": time.process_time() - c0}
        return g, coarse, times

    def save(v: tuple[OpGraph, CoarseMap, dict[str, float]], p: Path) -> None:
        v[0].save(p / "graph.json")
        atomic_write_json(p / "coarse_map.json", v[1])
        atomic_write_json(p / TIMES, v[2])

    def load(p: Path) -> tuple[OpGraph, CoarseMap, dict[str, float]]:
        with open(p / "coarse_map.json") as f:
            cmap = CoarseMap(json.load(f))
        times: dict[str, float] = {}
        if (p / TIMES).exists():
            with open(p / TIMES) as f:
                times = json.load(f)
        return OpGraph.load(p / "graph.json"), cmap, times

    cfg = {"optimizer": plain(ctx.cfg.optimizer), "cluster": cluster.to_dict()}
    res = ctx.stage("optimize", cfg, [pkey], compute, save, load)
    g, cmap, times = res.value
    if result is not None:
        result["optimize_time_s"] = times.get("optimize_time_s")
        result["optimize_cpu_s"] = times.get("optimize_cpu_s")
    return g, cmap, res.key
