"""Send/receive insertion after partitioning (thesis, seed 004, section 2.4) and the thesis' metrics.

`insert_send_recv` rewrites a placed graph the way the thesis' partitioning post-processing does (2.4, 3.1.4):
for every producer and every *other* device that holds at least one of its consumers, one receive op (on the
consumer device) and, with ``send_ops=True``, one send op (on the producer's device) are inserted, so the
tensor crosses once however many consumers it has there. The producer feeds the send op, the send op feeds the
receive op (the only cross-device edge left), and the receive op feeds every consumer on its device. All edges
of the pair carry the tensor's size (Figure 2.2: "this amount of data is also transferred on the edges (8,14), (14,15),
(15,4) and (15,9)").

Send and receive ops take no time (the thesis: "The receive nodes take zero execution units"). In the
simulator every op, even a zero-time one, waits for its device to be free and for the scheduler to pick it, so
an explicit send op can delay a transfer behind a long op of the producer's device. The thesis' worked example
(Table 2.1) lists receive ops in the device orders but no send ops: the tensor leaves as soon as the producer
finishes. Hence the default ``send_ops=False``: the producer feeds the receive op directly (the producer ->
receive edge is the cross-device edge), which reproduces the example's 14 EU. Memory: the
receive op holds the received copy (its `output_bytes` is the tensor size); the send op is a view of the
producer's output (0 bytes). The simulator also allocates the arriving tensor until its last consumer on the
device (the receive op) has run, so for the instant the receive op runs the copy is counted twice; peak memory
on the rewritten graph can therefore exceed the original graph's by one tensor per device. When the consumers
on one device read edges of different sizes (multi-output producers of training graphs), the pair carries the
largest, as the simulator does.

Metrics: `traffic` is eq. 2.2 (sum of the sizes of cross-device edges) and `makespan` eq. 2.1 (the time the
last device finishes, from the simulator). On the graph returned by `insert_send_recv`, `traffic` counts each
(producer, device) tensor once, which is also the simulator's `traffic_bytes`; on the original graph it counts
every cut edge (the simulator's `cut_edge_bytes`).

Complexity: O(V + E) for the insertion and for `traffic`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from .cluster import Cluster
from .dispatch import DispatchPolicy
from .graph import OpGraph
from .placement import Placement, Schedule
from .simulator import simulate

log = logging.getLogger(__name__)


def _assignment(placement: Placement | Mapping[str, str]) -> Mapping[str, str]:
    return placement.assignment if isinstance(placement, Placement) else placement


def insert_send_recv(
    graph: OpGraph, placement: Placement | Mapping[str, str], *, send_ops: bool = False
) -> tuple[OpGraph, Placement]:
    """Return a new graph with one receive op (and, with `send_ops`, one send op) per (producer, destination
    device) and the placement extended to the new ops. The input graph and placement are not modified. Send ops
    are named ``<producer>/_send/<device>`` and receive ops ``<producer>/_recv/<device>`` (with a numeric suffix
    in the unlikely case that name is taken)."""
    assign = dict(_assignment(placement))
    new = graph.copy(graph.name)
    g = new.nx
    order = graph.topological_order()
    pairs = 0

    def fresh(base: str) -> str:
        name, k = base, 1
        while name in g:
            name = f"{base}#{k}"
            k += 1
        return name

    for u in order:
        du = assign[u]
        by_dev: dict[str, list[str]] = {}
        for v in graph.nx.successors(u):
            dv = assign[v]
            if dv != du:
                by_dev.setdefault(dv, []).append(v)
        if not by_dev:
            continue
        phase = graph.op(u).get("phase", "forward")
        for dv in sorted(by_dev):
            cons = by_dev[dv]
            datas = [graph.nx.edges[u, v] for v in cons]
            control = all(d.get("control") for d in datas)
            size = 0.0 if control else max(float(d.get("bytes", 0)) for d in datas if not d.get("control"))
            r = fresh(f"{u}/_recv/{dv}")
            new.add_op(r, type="Recv", phase=phase, compute_s=0.0, output_bytes=size, recv_of=u)
            if send_ops:
                s = fresh(f"{u}/_send/{dv}")
                new.add_op(s, type="Send", phase=phase, compute_s=0.0, output_bytes=0, send_of=u)
                new.add_edge(u, s, bytes=size, control=control)
                new.add_edge(s, r, bytes=size, control=control)
                assign[s] = du
            else:
                new.add_edge(u, r, bytes=size, control=control)
            for v, d in zip(cons, datas):
                g.remove_edge(u, v)
                new.add_edge(r, v, bytes=float(d.get("bytes", 0)), control=bool(d.get("control")))
            assign[r] = dv
            pairs += 1
    new.invalidate()
    info = dict(placement.info) if isinstance(placement, Placement) else {}
    info["send_recv_pairs"] = pairs
    log.debug("inserted %d send/receive pairs", pairs)
    return new, Placement(assign, None, info)


def traffic(graph: OpGraph, placement: Placement | Mapping[str, str]) -> float:
    """Eq. 2.2: the sum of the sizes of the edges whose ends sit on different devices (control edges: 0)."""
    assign = _assignment(placement)
    tot = 0.0
    for u, v, d in graph.edges():
        if assign[u] != assign[v] and not d.get("control"):
            tot += float(d.get("bytes", 0))
    return tot


def makespan(
    graph: OpGraph,
    cluster: Cluster,
    placement: Placement | Mapping[str, str],
    schedule: Schedule | None = None,
    policy: DispatchPolicy | None = None,
) -> float:
    """Eq. 2.1: ``max over devices of exec(d)``, the time the last device finishes (including the last
    transfer), from the discrete-event simulator with the given static schedule or dispatch policy."""
    return simulate(graph, cluster, placement, schedule, policy, record_memory=False).makespan
