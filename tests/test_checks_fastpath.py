"""`check_placement` and `check_schedule` answer plain placements with set operations (issue 22); on random
graphs, placements and schedules, broken in every way they check, they raise exactly what their op-by-op
definitions (copied here as they were) raise: the same error type and message, or nothing."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.cluster import Cluster, Device
from algorithms.errors import InvalidPlacement, InvalidSchedule
from algorithms.graph import OpGraph
from algorithms.placement import check_placement, check_schedule


def reference_check_placement(graph: OpGraph, cluster: Cluster, assign: Mapping[str, str]) -> None:
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


def reference_check_schedule(graph: OpGraph, assign: Mapping[str, str], schedule: dict[str, list[str]]) -> None:
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


def outcome(fn, *args) -> tuple[str, str] | None:
    try:
        fn(*args)
    except (InvalidPlacement, InvalidSchedule) as exc:
        return type(exc).__name__, str(exc)
    return None


CLUSTER = Cluster([Device("c0"), Device("c1"), Device("g0", type="GPU")])


@st.composite
def cases(draw: st.DrawFn):
    n = draw(st.integers(1, 12))
    constrained = draw(st.booleans())
    g = OpGraph("g")
    for i in range(n):
        attrs: dict = {}
        if constrained and draw(st.integers(0, 3)) == 0:
            attrs["device_type"] = "CPU"
        if constrained and draw(st.integers(0, 3)) == 0:
            attrs["colocation"] = "grp"
        g.add_op(f"op{i}", **attrs)
        if i:
            g.add_edge(f"op{draw(st.integers(0, i - 1))}", f"op{i}", bytes=1.0)
    if draw(st.booleans()):
        g.index()  # the fast path needs the cached index
    devs = ["c0", "c1", "g0"]
    assign = {f"op{i}": draw(st.sampled_from(devs)) for i in range(n)}
    fault = draw(st.sampled_from(["none", "missing", "extra", "unknown_device"]))
    if fault == "missing":
        del assign[f"op{draw(st.integers(0, n - 1))}"]
    elif fault == "extra":
        assign["ghost"] = "c0"
    elif fault == "unknown_device":
        assign[f"op{draw(st.integers(0, n - 1))}"] = "tpu9"
    schedule: dict[str, list[str]] = {d: [] for d in devs}
    for op, dev in assign.items():
        schedule.setdefault(dev, []).append(op)
    sfault = draw(st.sampled_from(["none", "drop", "twice", "wrong_device"]))
    ops = [o for v in schedule.values() for o in v]
    if sfault == "drop" and ops:
        victim = draw(st.sampled_from(ops))
        for v in schedule.values():
            if victim in v:
                v.remove(victim)
    elif sfault == "twice" and ops:
        schedule["c1"].append(draw(st.sampled_from(ops)))
    elif sfault == "wrong_device" and ops:
        victim = draw(st.sampled_from(ops))
        for v in schedule.values():
            if victim in v:
                v.remove(victim)
        schedule[draw(st.sampled_from(devs))].append(victim)
    return g, assign, schedule


@settings(max_examples=400, deadline=None)
@given(case=cases())
def test_check_placement_matches_its_op_by_op_definition(case) -> None:
    g, assign, _ = case
    assert outcome(check_placement, g, CLUSTER, assign) == outcome(reference_check_placement, g, CLUSTER, assign)


@settings(max_examples=400, deadline=None)
@given(case=cases())
def test_check_schedule_matches_its_op_by_op_definition(case) -> None:
    g, assign, schedule = case
    assert outcome(check_schedule, g, assign, schedule) == outcome(reference_check_schedule, g, assign, schedule)


def test_plain_placement_of_an_indexed_graph_passes_and_a_fault_is_named() -> None:
    g = OpGraph("g")
    for i in range(3):
        g.add_op(f"op{i}")
    g.index()
    check_placement(g, CLUSTER, {"op0": "c0", "op1": "c1", "op2": "g0"})
    assert outcome(check_placement, g, CLUSTER, {"op0": "c0", "op1": "c1", "op2": "x"}) == (
        "InvalidPlacement",
        "op 'op2' is placed on unknown device 'x'; devices: ['c0', 'c1', 'g0']",
    )
