"""trace.json: a simulated (and, when the model ran, measured) training step in Chrome's trace-event format.

The format (DESIGN.md, docs/formats.md) is the JSON object form of the Trace Event Format that Perfetto
(https://ui.perfetto.dev) and `chrome://tracing` open: ``{"traceEvents": [...], "displayTimeUnit": "ms"}``.

* One process per source: pid 1 "predicted (simulator)", pid 2 "measured" when per-op timings are given.
* One track (thread) per device, named after it, in cluster order, then one per link that carried a transfer,
  named `src -> dst`; metadata events ("ph": "M": process_name, thread_name, thread_sort_index) name them.
* Each executed op is a complete event ("ph": "X") on its device's track, each transfer one on its link's
  track; "ts" and "dur" are in microseconds from the start of the step. An op's args give its device (and,
  with the graph, its compute time and output bytes); a transfer's give the tensor's producer and bytes.
* Memory in use on each device is a counter ("ph": "C") named `memory <device>`, one event per change of the
  simulator's memory timeline, with the device's limit as a second series where it is finite.
* An out-of-memory event of the simulator is an instant event ("ph": "i") on the device's track.
* "otherData" (the format's metadata object) says what each process is: `predicted` the simulator's step, and
  `measured` either what pid 2 holds (the ops of the median measured step as the runtime timed them, the
  runtime's name and its clock) or why there is no measured part (`measured_part`): the model did not run, or
  its runtime returns no per-op times (`RunResult.extra["op_timeline"]`: the PyTorch thread and process-per-device
  runtimes return them, TensorFlow's do not yet).

Size (issue 22).  A step of more than `MAX_OPS` ops (100,000 by default; ``max_ops=None`` keeps everything)
would give a trace too large for the viewers (hundreds of MB at 10^6 ops).  The predicted part is then cut in
time, never sampled: it holds every op, transfer, memory change and OOM of the step up to the start of the
(MAX_OPS + 1)-th op in start order, and nothing after.  The cut is stated in the trace itself: the process is
named ``predicted (simulator), first N of M ops (up to t = ... s of ... s)`` and an instant event
``trace cut: ...`` marks the time; it is logged too.  The measured part is never cut.

Pure function of its inputs; writes through a temporary file (never a half-written trace), the events
encoded a chunk at a time (`iter_predicted_events`, `graph.atomic_write_json_with_list`: the bytes of the whole
object, without its list of events in memory). Cost: O(ops + transfers + memory changes), O(ops log ops) when
cut.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from algorithms.graph import atomic_write_json_with_list, gc_paused

PREDICTED_PID = 1
MEASURED_PID = 2
_US = 1e6
#: ops of the predicted step above which the trace is cut in time (module docstring)
MAX_OPS = 100_000

log = logging.getLogger(__name__)


def _meta(pid: int, tid: int | None, name: str, value: Any) -> dict[str, Any]:
    """A metadata event: process_name / thread_name take {"name": ...}, *_sort_index {"sort_index": ...}."""
    key = "sort_index" if name.endswith("sort_index") else "name"
    ev: dict[str, Any] = {"ph": "M", "pid": pid, "name": name, "args": {key: value}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _tracks(pid: int, label: str, devices: list[str], links: list[tuple[str, str]]) -> tuple[list[dict], dict]:
    """Metadata naming the process and its tracks; returns (events, {device or (src, dst): tid})."""
    events = [_meta(pid, None, "process_name", label), _meta(pid, None, "process_sort_index", pid)]
    tid: dict[Any, int] = {}
    for k, d in enumerate(devices):
        tid[d] = k + 1
    for k, link in enumerate(links):
        tid[link] = len(devices) + k + 1
    for key, t in tid.items():
        name = key if isinstance(key, str) else f"{key[0]} -> {key[1]}"
        events.append(_meta(pid, t, "thread_name", name))
        events.append(_meta(pid, t, "thread_sort_index", t))
    return events, tid


def _x(pid: int, tid: int, name: str, cat: str, start_s: float, end_s: float, args: dict) -> dict[str, Any]:
    return {
        "ph": "X",
        "pid": pid,
        "tid": tid,
        "name": name,
        "cat": cat,
        "ts": start_s * _US,
        "dur": max(0.0, end_s - start_s) * _US,
        "args": args,
    }


def _cut_time(sim: Any, max_ops: int | None) -> float:
    """The start time of the (max_ops + 1)-th op that ran, in start order; infinity when no cut is needed.
    O(ops) (a partial sort)."""
    if max_ops is None:
        return math.inf
    starts = np.asarray(sim.start, dtype=float)
    starts = starts[starts == starts]
    if len(starts) <= max_ops:
        return math.inf
    return float(np.partition(starts, max_ops)[max_ops])


def predicted_events(
    sim: Any, graph: Any = None, cluster: Any = None, max_ops: int | None = MAX_OPS
) -> list[dict[str, Any]]:
    """The events of a `SimResult` (pid 1). `graph` (an OpGraph) adds each op's compute time and output bytes
    to its args; `cluster` orders the device tracks as the cluster does (default: the result's order).  Above
    `max_ops` ops that ran, only the events before the start of the next op in start order are kept (module
    docstring)."""
    return list(iter_predicted_events(sim, graph, cluster, max_ops))


def iter_predicted_events(
    sim: Any, graph: Any = None, cluster: Any = None, max_ops: int | None = MAX_OPS
) -> Iterator[dict[str, Any]]:
    """`predicted_events` one event at a time, in the same order (`write_trace` streams them)."""
    devices = list(cluster.names) if cluster is not None else list(sim.devices)
    devices += [d for d in sim.devices if d not in devices]
    cut = _cut_time(sim, max_ops)
    start = np.asarray(sim.start, dtype=float)
    end = np.asarray(sim.end, dtype=float)
    # ops shown: ran (start and end not NaN: after an OOM the simulator still reports the rest) before the cut
    shown_ops = np.flatnonzero((start < cut) & (end == end)).tolist()
    label = "predicted (simulator)"
    what = ""
    if cut < math.inf:
        ran = int(np.count_nonzero(start == start))
        shown = int(np.count_nonzero(start < cut))
        what = f"first {shown} of {ran} ops (up to t = {cut:.6g} s of {sim.makespan:.6g} s)"
        label += f", {what}"
        log.warning("trace.json: %s ops ran, more than %s: the trace holds the %s", ran, max_ops, what)
    # the transfers shown, found in one pass (issue 22: at 10^6 ops a cut trace shows a tenth of 1.3 M transfers)
    transfers = sim.transfers if cut == math.inf else [t for t in sim.transfers if not t[3] >= cut]
    links = sorted({(t[1], t[2]) for t in transfers if t[3] < cut})
    head, tid = _tracks(PREDICTED_PID, label, devices, links)
    yield from head
    names, starts, ends, device_of, sim_devices = sim.names, sim.start, sim.end, sim.device_of, sim.devices
    attrs_of = graph.nx._node if graph is not None else None  # networkx's node dict, without NodeView's calls
    keys = ("type", "compute_s", "output_bytes", "phase")
    for i in shown_ops:
        name = names[i]
        s, e = starts[i], ends[i]
        dev = sim_devices[device_of[i]]
        args: dict[str, Any] = {"device": dev}
        attrs = attrs_of.get(name) if attrs_of is not None else None
        if attrs is not None:
            for k in keys:
                v = attrs.get(k)
                if v is not None:
                    args[k] = v
        yield (
            {
                "ph": "X",
                "pid": PREDICTED_PID,
                "tid": tid[dev],
                "name": name,
                "cat": "op",
                "ts": s * _US,
                "dur": max(0.0, e - s) * _US,
                "args": args,
            }
        )
    for op, src, dst, s, e, nbytes in transfers:
        yield (_x(PREDICTED_PID, tid[(src, dst)], op, "transfer", s, e, {"bytes": nbytes, "from": src, "to": dst}))
    for dev, timeline in sim.memory_timeline.items():
        limit = sim.memory_limit.get(dev)
        finite_limit = limit is not None and math.isfinite(limit)
        counter = f"memory {dev}"
        for t, used in timeline:
            if t >= cut:
                break  # the timeline is in time order
            args = {"used": used, "limit": limit} if finite_limit else {"used": used}
            yield ({"ph": "C", "pid": PREDICTED_PID, "name": counter, "ts": t * _US, "args": args})
    if cut < math.inf:
        yield (
            {
                "ph": "i",
                "pid": PREDICTED_PID,
                "s": "g",
                "name": f"trace cut: later events left out ({what})",
                "ts": cut * _US,
                "args": {"max_ops": max_ops},
            }
        )
    if sim.oom is not None and sim.oom.device in tid and sim.oom.time_s < cut:
        o = sim.oom
        yield (
            {
                "ph": "i",
                "pid": PREDICTED_PID,
                "tid": tid[o.device],
                "s": "t",
                "name": f"OOM: {o.op}",
                "ts": o.time_s * _US,
                "args": o.to_dict(),
            }
        )


def measured_events(
    timeline: Iterable[Mapping[str, Any]],
    devices: list[str] | None = None,
    transfers: Iterable[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """The events of a measured step (pid 2): `timeline` holds {"op", "device", "start_s", "end_s"} records (the
    shape of timeline.json), `transfers` {"op", "src", "dst", "start_s", "end_s", "bytes"} records, both in
    seconds from the start of the measured step."""
    recs = list(timeline)
    trs = list(transfers)
    devs = list(devices or [])
    devs += sorted({r["device"] for r in recs} - set(devs))
    links = sorted({(t["src"], t["dst"]) for t in trs})
    events, tid = _tracks(MEASURED_PID, "measured", devs, links)
    for r in recs:
        events.append(
            _x(MEASURED_PID, tid[r["device"]], r["op"], "op", r["start_s"], r["end_s"], {"device": r["device"]})
        )
    for t in trs:
        args = {"bytes": t.get("bytes"), "from": t["src"], "to": t["dst"]}
        events.append(_x(MEASURED_PID, tid[(t["src"], t["dst"])], t["op"], "transfer", t["start_s"], t["end_s"], args))
    return events


def trace(
    sim: Any,
    graph: Any = None,
    cluster: Any = None,
    measured: Iterable[Mapping[str, Any]] | None = None,
    measured_transfers: Iterable[Mapping[str, Any]] = (),
    other: Mapping[str, Any] | None = None,
    max_ops: int | None = MAX_OPS,
) -> dict[str, Any]:
    """The trace object: predicted events (cut above `max_ops` ops, module docstring), then measured ones when
    `measured` per-op timings are given; `other` becomes its "otherData" metadata (what each part is, see
    `measured_part`)."""
    events = predicted_events(sim, graph, cluster, max_ops)
    if measured is not None:
        devices = list(cluster.names) if cluster is not None else list(sim.devices)
        events += measured_events(measured, devices, measured_transfers)
    obj: dict[str, Any] = {"traceEvents": events, "displayTimeUnit": "ms"}
    if other:
        obj["otherData"] = dict(other)
    return obj


def write_trace(
    path: str | Path,
    sim: Any,
    graph: Any = None,
    cluster: Any = None,
    measured: Iterable[Mapping[str, Any]] | None = None,
    measured_transfers: Iterable[Mapping[str, Any]] = (),
    other: Mapping[str, Any] | None = None,
    max_ops: int | None = MAX_OPS,
) -> Path:
    """Write trace.json (see the module docstring); returns its path.  The cyclic GC is paused meanwhile
    (`algorithms.graph.gc_paused`): the events are a few hundred thousand small dicts, none in a cycle, and
    every collection their allocation triggers would walk the graph's millions of objects."""

    def events() -> Iterator[dict[str, Any]]:
        yield from iter_predicted_events(sim, graph, cluster, max_ops)
        if measured is not None:
            devices = list(cluster.names) if cluster is not None else list(sim.devices)
            yield from measured_events(measured, devices, measured_transfers)

    rest: dict[str, Any] = {"displayTimeUnit": "ms"}
    if other:
        rest["otherData"] = dict(other)
    with gc_paused():
        # the bytes of atomic_write_json(path, trace(...)), the events encoded a chunk at a time: at 3 x 10^5
        # ops the list of 528K event dicts took 227 MB and its text 72 MB more (docs/scale.md)
        atomic_write_json_with_list(path, "traceEvents", events, rest)
    return Path(path)


def measured_part(run: Any = None, runtime: str | None = None) -> tuple[list[dict[str, Any]] | None, dict[str, str]]:
    """(the measured per-op timeline or None, trace.json's "otherData") for a run's `RunResult` (None: the model
    did not run) of the runtime named `runtime`. The timeline is `run.extra["op_timeline"]`: the ops of the
    median measured step, {"op", "device", "start_s", "end_s"} from the step's start, where the runtime times
    them."""
    other = {"predicted": f"pid {PREDICTED_PID}: the simulator's step (timeline.json)"}
    extra = getattr(run, "extra", None) or {}
    timeline = extra.get("op_timeline")
    if run is None:
        why = "runtime=none" if runtime in (None, "none") else "the simulator predicted out of memory, or it failed"
        other["measured"] = f"none: the model did not run ({why})"
        return None, other
    if not timeline:
        other["measured"] = f"none: runtime {runtime or '?'} returns no per-op times (only the step time)"
        return None, other
    clock = extra.get("op_timeline_clock")
    other["measured"] = (
        f"pid {MEASURED_PID}: the ops of the median measured step as runtime {runtime or '?'} timed them"
        + (f" ({clock})" if clock else "")
        + "; copies between devices are not timed"
    )
    return list(timeline), other
