"""Placements, per-device schedules, coarse maps, and independent checkers for them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .cluster import Cluster
from .errors import InvalidPlacement, InvalidSchedule
from .graph import OpGraph

#: A per-device execution order: device name -> op names in the order the device runs them.
Schedule = dict[str, list[str]]


@dataclass
class Placement:
    """An assignment op -> device, with what the placer learned on the way.

    `order` is the per-device order the placer's own simulation chose (m-ETF, m-SCT, HEFT, ...), or None.
    `info` holds placer-specific facts worth reporting (e.g. ``best_effort: True`` for Celeritas,
    ``oom_device`` when a placer had to overflow a device); numbers in it are logged as metrics.
    """

    assignment: dict[str, str]
    order: Schedule | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, op: str) -> str:
        return self.assignment[op]

    def __len__(self) -> int:
        return len(self.assignment)

    def __iter__(self):
        return iter(self.assignment)

    def items(self):
        return self.assignment.items()

    def devices_used(self) -> set[str]:
        return set(self.assignment.values())

    def ops_on(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = defaultdict(list)
        for op, dev in self.assignment.items():
            out[dev].append(op)
        return dict(out)


def check_placement(graph: OpGraph, cluster: Cluster, placement: Placement | Mapping[str, str]) -> None:
    """Independent checker: every op placed exactly once on a known device, colocation groups on one device,
    device-type constraints respected. Memory is not checked here (the simulator decides OOM). O(V).

    A graph with a cached index is checked with set operations first (`_plainly_valid`); anything they do not
    vouch for goes through the op-by-op loop, which names the first fault."""
    assign = placement.assignment if isinstance(placement, Placement) else placement
    if _plainly_valid(graph, cluster, assign):
        return
    names = set(cluster.names)
    types = {d.name: d.type for d in cluster.devices}
    for op in graph.ops:
        if op not in assign:
            raise InvalidPlacement(f"op {op!r} is not placed")
    group_dev: dict[str, tuple[str, str]] = {}
    for op, dev in assign.items():
        if op not in graph:
            raise InvalidPlacement(f"placement names op {op!r}, which is not in graph {graph.name!r}")
        if dev not in names:
            raise InvalidPlacement(f"op {op!r} is placed on unknown device {dev!r}; devices: {sorted(names)}")
        a = graph.op(op)
        want = a.get("device_type")
        if want is not None and types[dev] != want:
            raise InvalidPlacement(f"op {op!r} needs a {want} device but is placed on {dev!r} ({types[dev]})")
        grp = a.get("colocation")
        if grp is not None:
            if grp in group_dev and group_dev[grp][0] != dev:
                other, odev = group_dev[grp][1], group_dev[grp][0]
                raise InvalidPlacement(
                    f"colocation group {grp!r} split: op {other!r} on {odev!r}, op {op!r} on {dev!r}"
                )
            group_dev.setdefault(grp, (dev, op))


def _plainly_valid(graph: OpGraph, cluster: Cluster, assign: Mapping[str, str]) -> bool:
    """True when `check_placement`'s loop would find nothing, decided with C-level set and list operations over
    the graph's index (issue 22: the loop was 0.6-1 s of Python per 300K ops): `assign` places exactly the
    graph's ops, on devices of the cluster, each (device-type constraint, device) pair it makes is allowed and
    each colocation group sits on one device.  Only with the index cached (building it would cost more than the
    check); False says only "look op by op". O(V)."""
    idx = graph._index
    if idx is None or idx.n != len(graph) or len(assign) != idx.n:
        return False
    try:
        devs = list(map(assign.__getitem__, idx.names))
    except KeyError:
        return False
    if not set(devs) <= set(cluster.names):
        return False
    if idx.device_type.count(None) != idx.n:
        types = {d.name: d.type for d in cluster.devices}
        if any(want is not None and types[dev] != want for want, dev in set(zip(idx.device_type, devs))):
            return False
    if idx.colocation.count(None) != idx.n:
        groups = [grp for grp, _ in set(zip(idx.colocation, devs)) if grp is not None]
        if len(groups) != len(set(groups)):
            return False
    return True


def check_schedule(graph: OpGraph, placement: Placement | Mapping[str, str], schedule: Schedule) -> None:
    """Every op appears exactly once, on its placed device. (Dependency deadlocks are detected by the
    simulator, which names the stuck op.) O(V): set operations first, the op-by-op loop (which names the first
    fault) only when they find one."""
    assign = placement.assignment if isinstance(placement, Placement) else placement
    total = sum(map(len, schedule.values()))
    if total == len(graph):
        seen_ops: set[str] = set()
        for ops in schedule.values():
            seen_ops.update(ops)
        if (
            len(seen_ops) == total
            and all(map(seen_ops.__contains__, graph.ops))
            and all(list(map(assign.get, ops)).count(dev) == len(ops) for dev, ops in schedule.items())
        ):
            return
    seen: dict[str, str] = {}
    for dev, ops in schedule.items():
        for op in ops:
            if op in seen:
                raise InvalidSchedule(f"op {op!r} is scheduled twice (devices {seen[op]!r} and {dev!r})")
            seen[op] = dev
            if op not in assign:
                raise InvalidSchedule(f"schedule names op {op!r}, which is not placed")
            if assign[op] != dev:
                raise InvalidSchedule(f"op {op!r} is scheduled on {dev!r} but placed on {assign[op]!r}")
    for op in graph.ops:
        if op not in seen:
            raise InvalidSchedule(f"op {op!r} is missing from the schedule of device {assign.get(op)!r}")


def topological_schedule(
    graph: OpGraph, placement: Placement | Mapping[str, str], devices: Iterable[str] | None = None
) -> Schedule:
    """Each device runs its ops in the graph's (deterministic) topological order. O(V + E)."""
    assign = placement.assignment if isinstance(placement, Placement) else placement
    out: Schedule = {d: [] for d in (devices or [])}
    for op in graph.topological_order():
        out.setdefault(assign[op], []).append(op)
    return out


def items_follow_their_producer(graph: OpGraph, schedule: Schedule) -> Schedule:
    """`schedule` with every op of a tuple's items moved to run right after the op that makes them.

    Such an op (a captured op with an ``items_of`` attribute naming its producer P: a convolution backward's
    weight gradient, a batch norm's saved statistics; `backends.torch.capture._split_items`) computes
    nothing and holds items P allocates: a runtime has them from P's run on, whatever the order says. A
    placer's order may run other ops between P and it, and the simulator, which charges an op's output from
    that op's start, would then miss those bytes in between (session 28: five placed cpu2 runs 5-12 % under
    the workers' count). Running it right after P makes the two agree. The move is done only where the op
    reads nothing but P and sits on P's device, so it can neither deadlock the order nor start later than
    before (P has finished when the device could run it); its relative order to other moved items of the same
    producer is kept. Other ops and orders are returned unchanged. O(V + E)."""
    nodes = graph.nx._node  # networkx's documented DiGraph data structure
    pred = graph.nx._pred
    device: dict[str, str] | None = None
    after: dict[str, list[str]] = defaultdict(list)  # producer -> its items' ops to run right after it
    moved: set[str] = set()
    for op, attrs in nodes.items():
        p = attrs.get("items_of")
        if p is None or p not in nodes or any(q != p for q in pred[op]):
            continue
        if device is None:
            device = {o: d for d, ops in schedule.items() for o in ops}
        if device.get(op) is None or device.get(op) != device.get(p):
            continue
        moved.add(op)
    if not moved:
        return schedule
    out: Schedule = {}
    for d, ops in schedule.items():
        for op in ops:
            if op in moved:
                after[nodes[op]["items_of"]].append(op)
        seq: list[str] = []
        for op in ops:
            if op not in moved:
                stack = [op]
                while stack:  # an op, then its items' ops (and theirs, should an items' op make a tuple)
                    o = stack.pop()
                    seq.append(o)
                    stack.extend(reversed(after.get(o, ())))
        out[d] = seq
    return out


class CoarseMap(dict):
    """coarse op -> list of original ops (in the order they run inside the coarse op).

    Maps compose: if pass A maps original ops to A-ops and pass B maps A-ops to B-ops, then
    ``A.then(B)`` maps original ops to B-ops.
    """

    @classmethod
    def identity(cls, graph: OpGraph) -> CoarseMap:
        return cls({op: [op] for op in graph.ops})

    def then(self, later: Mapping[str, list[str]]) -> CoarseMap:
        return CoarseMap({c: [o for mid in members for o in self[mid]] for c, members in later.items()})

    def inverse(self) -> dict[str, str]:
        return {o: c for c, members in self.items() for o in members}

    def expand_assignment(self, assignment: Mapping[str, str]) -> dict[str, str]:
        return {o: dev for c, dev in assignment.items() for o in self[c]}

    def expand_schedule(self, schedule: Schedule) -> Schedule:
        return {dev: [o for c in ops for o in self[c]] for dev, ops in schedule.items()}

    def check_covers(self, original: OpGraph) -> None:
        """Every original op belongs to exactly one coarse op."""
        seen: set[str] = set()
        for members in self.values():
            for o in members:
                if o in seen:
                    raise InvalidPlacement(f"coarse map puts original op {o!r} in two coarse ops")
                seen.add(o)
        missing = [o for o in original.ops if o not in seen]
        if missing:
            raise InvalidPlacement(f"coarse map loses original ops, e.g. {missing[:5]}")
