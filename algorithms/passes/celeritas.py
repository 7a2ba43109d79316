"""CelerFusion: Celeritas' Optimal Operation Fusion as a graph pass (seed 002, section 5.1.3, Algorithm 1).

The pass runs CPD-TOPO (equations 2 and 3), the breakpoint dynamic program (equations 4 to 6) with exploration
range `R` and per-cluster memory limit M = `memory_fraction` x `device_memory_bytes` (times
`cluster_memory_fraction`, the cluster config's own memory scaling), and returns the coarse
graph (a DAG by Lemma 2, checked) with its `CoarseMap` (members in a topological order of the original graph).
See `algorithms.placers.celeritas.fusion` for the recurrences, the choices made and the coarse node
attributes.

Costs: when the orchestrator binds the selected cluster (`bind(cluster)`, called before `apply`), the pass uses
the cluster's averaged costs exactly like the Celeritas placer (`placers.celeritas.common`: mean execution time
over the devices, mean link latency and inverse bandwidth) and M = `memory_fraction` x the smallest device
memory. Without a bound cluster (or where given explicitly, which takes precedence) they come from the
constructor: `device_memory_bytes` (None: no memory limit, only R bounds a cluster) times
`cluster_memory_fraction`, and the link model ``latency_s + bytes / bytes_per_s`` (bytes_per_s None: bytes are
the cost), with `compute_s` as the computation time.

Colocation: any placer may follow this pass, so the coarse graph must carry the colocation constraints
itself. `colocation="split"` (default): after the breakpoint program, every member of a colocation group that
ended up in more than one cluster is cut out as a singleton coarse node carrying its group, and its cluster is
cut around it (the pieces stay contiguous in the topological order, so Lemma 2 still holds);
groups lying whole inside one cluster need no constraint. This costs fusion: on training graphs, where each
variable is colocated with its update op at the other end of the step, every variable and update op stands
alone. `colocation="supergroup"` instead unites groups that share a coarse node (union-find); on such graphs it
unites nearly everything into one group, i.e. one device. The Celeritas placer's internal fusion
(optimizer=none, placer=celeritas) applies the paper's op-level rule instead (6.1) and loses neither.
Fusing ops that need different device types into one coarse node is never done.

Complexity: O(V + E log dmax + E * R).
"""

from __future__ import annotations

import logging
import math

from ..base import GraphPass
from ..cluster import Cluster
from ..errors import ConfigError
from ..graph import OpGraph
from ..placement import CoarseMap
from ..placers.celeritas.common import CommModel, mean_compute
from ..placers.celeritas.fusion import fuse

log = logging.getLogger(__name__)


class CelerFusion(GraphPass):
    """Celeritas fusion: CPD-TOPO order cut at the optimal breakpoints into clusters of <= R ops and <= M bytes."""

    name = "celer_fusion"

    def __init__(
        self,
        R: int = 200,
        memory_fraction: float = 0.25,
        device_memory_bytes: float | None = None,
        latency_s: float | None = None,
        bytes_per_s: float | None = None,
        cluster_memory_fraction: float = 1.0,
        colocation: str = "split",
    ):
        if colocation not in ("split", "supergroup"):
            raise ConfigError(f"colocation must be 'split' or 'supergroup', got {colocation!r}")
        self.colocation = colocation
        if int(R) < 1:
            raise ConfigError(f"R (exploration range) must be >= 1, got {R!r}")
        if not memory_fraction > 0:
            raise ConfigError(f"memory_fraction must be > 0, got {memory_fraction!r}")
        self.R = int(R)
        self.memory_fraction = float(memory_fraction)
        self.device_memory_bytes = (
            None if device_memory_bytes is None else float(device_memory_bytes) * float(cluster_memory_fraction)
        )
        self.explicit_comm = latency_s is not None or bytes_per_s is not None
        self.comm = CommModel.of_link(float(latency_s or 0.0), None if bytes_per_s is None else float(bytes_per_s))
        self.cluster: Cluster | None = None

    def bind(self, cluster: Cluster) -> CelerFusion:
        """Take the costs and the memory limit from the cluster the graph will be placed on."""
        self.cluster = cluster
        return self

    @property
    def memory_limit(self) -> float:
        mem = self.device_memory_bytes
        if mem is None and self.cluster is not None:
            mem = min(d.memory_bytes for d in self.cluster.devices)
        if mem is None or math.isinf(mem):
            return math.inf
        return self.memory_fraction * mem

    def apply(self, graph: OpGraph) -> tuple[OpGraph, CoarseMap]:
        idx = graph.index()
        if self.cluster is not None:
            w = mean_compute(idx, self.cluster)
            comm = self.comm if self.explicit_comm else CommModel.of_cluster(self.cluster)
        else:
            w, comm = list(idx.compute_s), self.comm
        fu = fuse(graph, w, comm, R=self.R, M=self.memory_limit, colocation=self.colocation)
        fu.coarse_map.check_covers(graph)
        log.info("celer_fusion: %d ops -> %d coarse ops (M = %.4g bytes)", idx.n, len(fu.coarse), self.memory_limit)
        return fu.coarse, fu.coarse_map
