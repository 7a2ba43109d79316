"""Stage optimize: the configured graph passes (`optimizer.passes`, each a GraphPass config) coarsen the graph
before placement; the CoarseMap says which original ops each coarse op stands for.  Without passes (optimizer
`none`) the graph is placed as it is and the map is None, the identity: building ``{op: [op]}`` and expanding the
assignment through it cost about 1.3 s CPU of a 300K-op run and bought nothing (issue 22)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from algorithms.cluster import Cluster
from algorithms.graph import OpGraph, atomic_write_json
from algorithms.placement import CoarseMap

from ..context import JobContext
from ..registry import instantiate, plain

log = logging.getLogger("orchestrator")


def stage_optimize(
    ctx: JobContext, graph: OpGraph, pkey: str, cluster: Cluster
) -> tuple[OpGraph, CoarseMap | None, str]:
    """(coarse graph, its CoarseMap, stage key); without passes (`graph`, None: the identity, `pkey`)."""
    passes_cfg = ctx.cfg.optimizer.get("passes") or []
    if not passes_cfg:
        return graph, None, pkey

    def compute() -> tuple[OpGraph, CoarseMap]:
        g, cmap = graph, CoarseMap.identity(graph)
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
        return g, CoarseMap({c: sorted(members, key=pos.__getitem__) for c, members in cmap.items()})

    def save(v: tuple[OpGraph, CoarseMap], p: Path) -> None:
        v[0].save(p / "graph.json")
        atomic_write_json(p / "coarse_map.json", v[1])

    def load(p: Path) -> tuple[OpGraph, CoarseMap]:
        with open(p / "coarse_map.json") as f:
            return OpGraph.load(p / "graph.json"), CoarseMap(json.load(f))

    cfg = {"optimizer": plain(ctx.cfg.optimizer), "cluster": cluster.to_dict()}
    res = ctx.stage("optimize", cfg, [pkey], compute, save, load)
    g, cmap = res.value
    return g, cmap, res.key
