"""The memory a model needs: one definition shared by the placers, the passes and the orchestrator.

`single_device_need` is the peak memory of the whole graph run on one device in its topological order (the
index order of `OpGraph.index`), charged as the simulator charges it (`algorithms.simulator.simulate`):
persistent bytes for the whole step; an op's temporary and output bytes from its start; its temporary bytes
until its end; its output until its last consumer has finished (a sink's output until its own end).  On one
device nothing is ever sent, so no received copies are charged, and execution times play no part: the need
is a property of the graph alone.  It is what Baechi calls the memory a model "requires" (seed 001, 2.2
m-TOPO's cap and 3.3 forward-only placement: "when one device could hold the model") and what the
orchestrator's ``cluster.need_fraction`` scales (Table 4 gives each device a fraction of it).

It equals the simulator's peak for the one-device placement replayed in topological order (checked by
`tests/test_baechi_passes.py`); a first-in first-out replay of the same placement may order independent ops
differently and peak higher or lower.  `single_device_placement` is that placement, the last resort of the
memory-aware placers when one device holds the model.
"""

from __future__ import annotations

from typing import Any

from .cluster import Cluster
from .graph import GraphIndex, OpGraph
from .placement import Placement


def single_device_need(graph: OpGraph | GraphIndex) -> float:
    """Peak memory of `graph` run on one device in topological order (module docstring). O(V + E)."""
    idx = graph.index() if isinstance(graph, OpGraph) else graph
    live = peak = 0.0
    remaining = [len(s) for s in idx.succ]
    for i in range(idx.n):
        live += idx.temporary[i] + idx.output[i]
        if live > peak:
            peak = live
        live -= idx.temporary[i] + (0.0 if idx.succ[i] else idx.output[i])
        for j, _ in idx.pred[i]:
            remaining[j] -= 1
            if remaining[j] == 0:
                live -= idx.output[j]
    return sum(idx.persistent) + peak


def single_device_placement(graph: OpGraph, cluster: Cluster, info: dict[str, Any]) -> Placement | None:
    """The whole graph on the first device that may run every op and holds its single-device need
    (`algorithms.memory.single_device_need`), in topological order; None when no device does."""
    idx = graph.index()
    types = {t for t in idx.device_type if t is not None}
    need = single_device_need(idx)
    for d in cluster.devices:
        if (not types or types == {d.type}) and need <= d.memory_bytes:
            info = dict(info)
            info.update(
                fallback="single_device",
                n_ops=idx.n,
                predicted_makespan_s=sum(idx.exec_time(i, d.type, d.speed) for i in range(idx.n)),
            )
            for e in cluster.devices:
                info[f"predicted_peak_bytes.{e.name}"] = need if e is d else 0.0
            order = {e.name: (list(idx.names) if e is d else []) for e in cluster.devices}
            return Placement({op: d.name for op in idx.names}, order, info)
    return None
