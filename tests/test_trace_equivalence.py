"""`orchestrator.trace.predicted_events` (issue 22: the cut found by a partial sort, the shown ops selected with
numpy) gives the events of its old op-by-op definition, copied below, on simulated steps with and without a
cut (every `max_ops` from none to all ops), an out-of-memory step (NaN times) included."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from orchestrator import trace
from orchestrator.trace import _US, _tracks, _x
from tests.test_trace import _case


def old_cut_time(sim: Any, max_ops: int | None) -> float:
    """The start time of the (max_ops + 1)-th op that ran, in start order; infinity when no cut is needed."""
    if max_ops is None:
        return math.inf
    starts = [s for s in sim.start if s == s]
    if len(starts) <= max_ops:
        return math.inf
    starts.sort()
    return starts[max_ops]


def old_predicted_events(
    sim: Any, graph: Any = None, cluster: Any = None, max_ops: int | None = 100_000
) -> list[dict[str, Any]]:
    """The events of a `SimResult` (pid 1). `graph` (an OpGraph) adds each op's compute time and output bytes
    to its args; `cluster` orders the device tracks as the cluster does (default: the result's order).  Above
    `max_ops` ops that ran, only the events before the start of the next op in start order are kept (module
    docstring)."""
    devices = list(cluster.names) if cluster is not None else list(sim.devices)
    devices += [d for d in sim.devices if d not in devices]
    cut = old_cut_time(sim, max_ops)
    label = "predicted (simulator)"
    what = ""
    if cut < math.inf:
        ran = sum(1 for s in sim.start if s == s)
        shown = sum(1 for s in sim.start if s < cut)
        what = f"first {shown} of {ran} ops (up to t = {cut:.6g} s of {sim.makespan:.6g} s)"
        label += f", {what}"
        _ = ("trace.json: %s ops ran, more than %s: the trace holds the %s", ran, max_ops, what)
    links = sorted({(src, dst) for _, src, dst, s, *_ in sim.transfers if s < cut})
    events, tid = _tracks(1, label, devices, links)
    for i, name in enumerate(sim.names):
        s, e = sim.start[i], sim.end[i]
        if s != s or e != e or s >= cut:  # NaN: never ran (after an OOM the simulator still reports the rest)
            continue
        dev = sim.devices[sim.device_of[i]]
        args: dict[str, Any] = {"device": dev}
        if graph is not None and name in graph:
            attrs = graph.op(name)
            for k in ("type", "compute_s", "output_bytes", "phase"):
                if attrs.get(k) is not None:
                    args[k] = attrs[k]
        events.append(_x(1, tid[dev], name, "op", s, e, args))
    for op, src, dst, s, e, nbytes in sim.transfers:
        if s >= cut:
            continue
        events.append(_x(1, tid[(src, dst)], op, "transfer", s, e, {"bytes": nbytes, "from": src, "to": dst}))
    for dev, timeline in sim.memory_timeline.items():
        limit = sim.memory_limit.get(dev)
        for t, used in timeline:
            if t >= cut:
                break  # the timeline is in time order
            args = {"used": used}
            if limit is not None and math.isfinite(limit):
                args["limit"] = limit
            events.append({"ph": "C", "pid": 1, "name": f"memory {dev}", "ts": t * _US, "args": args})
    if cut < math.inf:
        events.append(
            {
                "ph": "i",
                "pid": 1,
                "s": "g",
                "name": f"trace cut: later events left out ({what})",
                "ts": cut * _US,
                "args": {"max_ops": max_ops},
            }
        )
    if sim.oom is not None and sim.oom.device in tid and sim.oom.time_s < cut:
        o = sim.oom
        events.append(
            {
                "ph": "i",
                "pid": 1,
                "tid": tid[o.device],
                "s": "t",
                "name": f"OOM: {o.op}",
                "ts": o.time_s * _US,
                "args": o.to_dict(),
            }
        )
    return events


@pytest.mark.parametrize("seed,memory", [(1, None), (2, None), (3, 2e3)])
def test_predicted_events_equal_the_old_definition(seed, memory) -> None:
    g, cl, sim = _case(seed=seed, memory=memory)
    ran = sum(1 for s in sim.start if s == s)
    for max_ops in [None, 0, 1, 2, 5, ran // 3, ran // 2, ran - 1, ran, ran + 1]:
        for graph, cluster in ((g, cl), (None, None)):
            assert trace.predicted_events(sim, graph, cluster, max_ops) == old_predicted_events(
                sim, graph, cluster, max_ops
            ), max_ops


def test_ops_that_never_ran_are_left_out_as_before() -> None:
    g, cl, sim = _case(seed=4)
    sim = copy.copy(sim)
    sim.start, sim.end = list(sim.start), list(sim.end)
    for i in (0, 3, len(sim.start) - 1):
        sim.start[i] = sim.end[i] = math.nan
    sim.end[5] = math.nan  # started, end unknown
    ran = sum(1 for s in sim.start if s == s)
    for max_ops in [None, 3, ran // 2, ran]:
        assert trace.predicted_events(sim, g, cl, max_ops) == old_predicted_events(sim, g, cl, max_ops)
