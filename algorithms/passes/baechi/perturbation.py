"""How wrong may the profile be (Baechi 5.3, Figure 8): seeded perturbation of compute and communication."""

from __future__ import annotations

import random

from ...base import GraphPass
from ...errors import ConfigError
from ...graph import OpGraph
from ...placement import CoarseMap
from .grouping import _check_dag


class ProfilePerturbation(GraphPass):
    """Profile perturbation (Baechi 5.3, Figure 8): multiply every op's compute time and every edge's bytes
    (its communication cost) by an independent factor drawn uniformly from [1 - bound, 1 + bound].

    Seeded (`seed`) and deterministic: ops and edges are visited in the graph's insertion order.  Only the
    placer sees the perturbed costs; the orchestrator simulates the original graph.  Identity `CoarseMap`.
    O(V + E)."""

    name = "profile_perturbation"

    def __init__(self, bound: float = 0.2, seed: int = 0):
        if not 0 <= float(bound) < 1:
            raise ConfigError(f"profile perturbation: bound must lie in [0, 1), got {bound!r}")
        self.bound = float(bound)
        self.seed = int(seed)

    def apply(self, graph: OpGraph) -> tuple[OpGraph, CoarseMap]:
        rng = random.Random(self.seed)
        lo, hi = 1.0 - self.bound, 1.0 + self.bound
        out = graph.copy()
        for _, a in out.nx.nodes(data=True):
            f = rng.uniform(lo, hi)
            a["compute_s"] = a["compute_s"] * f
            if a.get("compute_s_by_type"):
                a["compute_s_by_type"] = {t: v * f for t, v in a["compute_s_by_type"].items()}
        for _, _, d in out.nx.edges(data=True):
            f = rng.uniform(lo, hi)
            if not d.get("control"):
                d["bytes"] = d["bytes"] * f
        out.invalidate()
        return _check_dag(out, self.name), CoarseMap.identity(out)
