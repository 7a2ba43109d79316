"""What one simulated training step did: `SimResult` (per-op times, device memory, transfers, the order run, an
out-of-memory event if any), its per-op timeline, and its JSON-ready form for caches and artifacts.

Produced by `algorithms.simulator.simulate`; see there for the model behind the figures.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from .placement import Schedule


class MemoryTimeline(Sequence[tuple[float, float]]):
    """One device's memory timeline, its (time, bytes in use) points in time order, kept as two float64 arrays
    (`t`, `v`).  The compiled simulator returns its timelines in this form (issue 22: as a list of tuples a point
    takes about 112 bytes, 115 MB for the 1.06 M points of the 300,000-op chain; here 16 bytes).  It reads as the
    list of tuples it stands for: ``len``, indexing (a tuple of Python floats; a slice gives a list of them),
    iteration, and ``==`` with any sequence of pairs (a list of tuples equal point by point is equal)."""

    __slots__ = ("t", "v")

    def __init__(self, t: Any, v: Any):
        self.t = np.ascontiguousarray(t, np.float64)
        self.v = np.ascontiguousarray(v, np.float64)
        if self.t.shape != self.v.shape or self.t.ndim != 1:
            raise ValueError(f"MemoryTimeline: times {self.t.shape} and values {self.v.shape} differ")

    def __len__(self) -> int:
        return len(self.t)

    @overload
    def __getitem__(self, k: int) -> tuple[float, float]: ...

    @overload
    def __getitem__(self, k: slice) -> list[tuple[float, float]]: ...

    def __getitem__(self, k: int | slice) -> tuple[float, float] | list[tuple[float, float]]:
        if isinstance(k, slice):
            return list(zip(self.t[k].tolist(), self.v[k].tolist()))
        return (self.t.item(k), self.v.item(k))

    def __iter__(self) -> Iterator[tuple[float, float]]:
        for k in range(0, len(self.t), 65536):  # 65,536 points at a time: no list of every point
            yield from zip(self.t[k : k + 65536].tolist(), self.v[k : k + 65536].tolist())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]  # mutable arrays, like the list it stands for

    def __repr__(self) -> str:
        return repr(list(self))


@dataclass
class OOMEvent:
    op: str
    device: str
    time_s: float
    used_bytes: float
    limit_bytes: float

    def message(self) -> str:
        return (
            f"out of memory on device {self.device!r} at t={self.time_s:.6g}s while allocating for op "
            f"{self.op!r}: {self.used_bytes:.6g} bytes needed, limit {self.limit_bytes:.6g}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "device": self.device,
            "time_s": self.time_s,
            "used_bytes": self.used_bytes,
            "limit_bytes": self.limit_bytes,
        }


@dataclass
class SimResult:
    """What one simulated training step did."""

    names: list[str]
    devices: list[str]
    start: list[float]
    end: list[float]
    device_of: list[int]
    order: Schedule
    makespan: float
    busy_s: dict[str, float]
    peak_memory: dict[str, float]
    memory_limit: dict[str, float]
    #: per device, (time, bytes in use) in time order: a list of tuples, or from the compiled simulator a
    #: `MemoryTimeline` that reads the same
    memory_timeline: dict[str, Sequence[tuple[float, float]]]
    traffic_bytes: float
    cut_edge_bytes: float
    transfers: list[tuple[str, str, str, float, float, float]]
    oom: OOMEvent | None = None
    decisions: list[tuple[float, str, int]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.oom is None

    def timeline(
        self, coarse_map: Mapping[str, list[str]] | None = None, weights: Mapping[str, float] | None = None
    ) -> list[dict[str, Any]]:
        """Per-op [start, end] records ordered by (start, device) (`iter_timeline`'s, as a list)."""
        return list(self.iter_timeline(coarse_map, weights))

    def iter_timeline(
        self, coarse_map: Mapping[str, list[str]] | None = None, weights: Mapping[str, float] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Per-op [start, end] records ordered by (start, device), ties in the order of `names`, one at a
        time (issue 22: timeline.json of 10^6 ops is written without the whole list in memory). With a coarse
        map, each coarse op's span is shared out among its original members one after another, in proportion
        to `weights` (e.g. their compute times; equal shares where all weights are zero); those records are
        built as a list and sorted. O(V log V)."""
        if coarse_map is None:
            rank = {d: r for r, d in enumerate(sorted(self.devices))}
            dev_rank = np.fromiter((rank[self.devices[k]] for k in self.device_of), np.int64, len(self.names))
            order = np.lexsort((dev_rank, np.asarray(self.start, dtype=np.float64)))  # stable: ties by index
            names, devices, device_of, start, end = self.names, self.devices, self.device_of, self.start, self.end
            for i in order.tolist():  # (issue 22: 10^6 records; the lists bound once, not looked up per record)
                yield {"op": names[i], "device": devices[device_of[i]], "start_s": start[i], "end_s": end[i]}
            return
        out = []
        for i, name in enumerate(self.names):
            dev = self.devices[self.device_of[i]]
            s, e = self.start[i], self.end[i]
            members = coarse_map[name]
            ws = [float(weights.get(m, 0.0)) if weights else 0.0 for m in members]
            tot = sum(ws)
            if tot <= 0:
                ws, tot = [1.0] * len(members), float(len(members))
            t = s
            for m, w in zip(members, ws):
                nxt = t + (e - s) * w / tot
                out.append({"op": m, "device": dev, "start_s": t, "end_s": nxt})
                t = nxt
        out.sort(key=lambda r: (r["start_s"], r["device"]))
        yield from out

    def utilization(self) -> dict[str, float]:
        if self.makespan <= 0:
            return {d: 0.0 for d in self.devices}
        return {d: self.busy_s[d] / self.makespan for d in self.devices}


def sim_result_to_dict(r: SimResult) -> dict[str, Any]:
    """JSON-ready form of a SimResult (for caches and artifacts)."""
    return {
        "names": r.names,
        "devices": r.devices,
        "start": r.start,
        "end": r.end,
        "device_of": r.device_of,
        "order": r.order,
        "makespan": r.makespan,
        "busy_s": r.busy_s,
        "peak_memory": r.peak_memory,
        "memory_limit": {k: (None if math.isinf(v) else v) for k, v in r.memory_limit.items()},
        "memory_timeline": {d: [list(p) for p in v] for d, v in r.memory_timeline.items()},
        "traffic_bytes": r.traffic_bytes,
        "cut_edge_bytes": r.cut_edge_bytes,
        "transfers": [list(t) for t in r.transfers],
        "oom": r.oom.to_dict() if r.oom else None,
        "decisions": [list(d) for d in r.decisions],
    }


def sim_result_from_dict(d: Mapping[str, Any]) -> SimResult:
    return SimResult(
        names=list(d["names"]),
        devices=list(d["devices"]),
        start=list(d["start"]),
        end=list(d["end"]),
        device_of=list(d["device_of"]),
        order={k: list(v) for k, v in d["order"].items()},
        makespan=d["makespan"],
        busy_s=dict(d["busy_s"]),
        peak_memory=dict(d["peak_memory"]),
        memory_limit={k: (math.inf if v is None else v) for k, v in d["memory_limit"].items()},
        memory_timeline={k: [tuple(p) for p in v] for k, v in d["memory_timeline"].items()},
        traffic_bytes=d["traffic_bytes"],
        cut_edge_bytes=d["cut_edge_bytes"],
        transfers=[tuple(t) for t in d["transfers"]],
        oom=OOMEvent(**d["oom"]) if d["oom"] else None,
        decisions=[tuple(x) for x in d["decisions"]],
    )
