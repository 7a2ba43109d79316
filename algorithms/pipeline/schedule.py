"""A pipeline schedule as data: a start time for every block of N micro-batches (Tessel, section III-A).

``PipelineSchedule`` holds the spec, N, the start times, the memory cap it was made for and, when the schedule
was built from a repetend, the time span of one repetend instance. ``validate`` checks any schedule, however it
was produced, against equation 1's constraints:

1. exclusive execution: two blocks sharing a device never overlap in time;
2. memory: on every device the running sum of the deltas of the blocks started so far (counted at their start,
   as 𝔹_τ^d of constraint 2 does) never exceeds M;
3. data dependencies: a block starts no earlier than the end of every block of its micro-batch it waits for.

Violations raise ``ScheduleViolation`` (an ``algorithms.errors.InvalidSchedule``) naming the block,
micro-batch and device at fault. Serialisation follows docs/design.md's ``pipeline_schedule.json`` exactly.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidSchedule
from ..graph import atomic_write_json
from .blocks import Block, MicroBatchSpec

Item = tuple[str, int]


class ScheduleViolation(InvalidSchedule):
    """A constraint of equation 1 is broken; ``kind`` is missing|dependency|exclusive|memory."""

    def __init__(
        self, message: str, *, kind: str, block: str | None = None, micro: int | None = None, device: str | None = None
    ):
        super().__init__(message)
        self.kind = kind
        self.block = block
        self.micro = micro
        self.device = device


@dataclass
class PipelineSchedule:
    """Start times of every (block, micro-batch) of N micro-batches, plus what the scheduler learned."""

    spec: MicroBatchSpec
    n_micro: int
    start: dict[Item, int]
    memory_limit: int | None = None
    repetend: tuple[int, int] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ derived figures
    def end(self, block: str, micro: int) -> int:
        return self.start[(block, micro)] + self.spec.block(block).time

    @property
    def makespan(self) -> int:
        """max over blocks of s_B + t_B (the objective of equation 1)."""
        return max((s + self.spec.block(b).time for (b, _), s in self.start.items()), default=0)

    def busy(self) -> int:
        """Busy time summed over devices (a block on k devices counts k times)."""
        return sum(self.spec.block(b).time * len(self.spec.block(b).devices) for (b, _) in self.start)

    @property
    def bubble_rate(self) -> float:
        """1 - busy / (devices x makespan) (docs/design.md)."""
        ms = self.makespan
        if ms == 0:
            return 0.0
        return 1.0 - self.busy() / (len(self.spec.devices) * ms)

    def device_orders(self) -> dict[str, list[Item]]:
        """Per device, the (block, micro) pairs in start-time order."""
        out: dict[str, list[Item]] = {d: [] for d in self.spec.devices}
        for it, _s in sorted(self.start.items(), key=lambda kv: (kv[1], self.spec.index[kv[0][0]], kv[0][1])):
            for d in self.spec.block(it[0]).devices:
                out[d].append(it)
        return out

    def peak_memory(self) -> dict[str, int]:
        """Per device, the peak of the running sum of deltas (constraint 2), starting from 0."""
        peaks = {}
        for d, items in self.device_orders().items():
            run = peak = 0
            for b, _ in items:
                run += self.spec.block(b).memory
                peak = max(peak, run)
            peaks[d] = peak
        return peaks

    def validate(self, memory_limit: int | None | str = "own") -> PipelineSchedule:
        """Check exclusive execution, dependencies and the memory cap; raise ScheduleViolation. O(B log B)."""
        validate(self, self.memory_limit if isinstance(memory_limit, str) else memory_limit)
        return self

    def summary(self) -> dict[str, Any]:
        return {
            "n_micro": self.n_micro,
            "makespan": self.makespan,
            "bubble_rate": self.bubble_rate,
            "repetend": self.repetend,
            "peak_memory": self.peak_memory(),
            **self.info,
        }

    # ------------------------------------------------------------------ JSON (docs/design.md)
    def to_json(self) -> dict[str, Any]:
        blocks = []
        for (b, n), s in sorted(self.start.items(), key=lambda kv: (kv[1], self.spec.index[kv[0][0]], kv[0][1])):
            blk = self.spec.block(b)
            blocks.append(
                {
                    "name": b,
                    "micro": n,
                    "devices": list(blk.devices),
                    "start": int(s),
                    "span": int(blk.time),
                    "memory": int(blk.memory),
                    "after": [[p, n] for p in blk.deps],
                }
            )
        return {
            "devices": list(self.spec.devices),
            "n_micro": int(self.n_micro),
            "memory_limit": self.memory_limit,
            "blocks": blocks,
            "repetend": ({"start": int(self.repetend[0]), "end": int(self.repetend[1])} if self.repetend else None),
            "makespan": int(self.makespan),
            "bubble_rate": float(self.bubble_rate),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> PipelineSchedule:
        """Read the pipeline_schedule.json format back (kind: backward when the memory delta is negative)."""
        doc: Mapping[str, Any] = json.loads(data) if isinstance(data, str) else data
        spec_blocks: dict[str, Block] = {}
        start: dict[Item, int] = {}
        for e in doc["blocks"]:
            name, n = e["name"], int(e["micro"])
            if name not in spec_blocks:
                deps = tuple(p for p, m in e.get("after", []) if int(m) == n)
                spec_blocks[name] = Block(
                    name,
                    int(e["span"]),
                    int(e["memory"]),
                    tuple(e["devices"]),
                    deps,
                    "backward" if int(e["memory"]) < 0 else "forward",
                )
            if (name, n) in start:
                raise InvalidSchedule(f"block {name!r} micro-batch {n} appears twice in the schedule file")
            start[(name, n)] = int(e["start"])
        spec = MicroBatchSpec(list(spec_blocks.values()), list(doc["devices"]), name="from_json")
        rep = doc.get("repetend")
        return cls(
            spec,
            int(doc["n_micro"]),
            start,
            doc.get("memory_limit"),
            (int(rep["start"]), int(rep["end"])) if rep else None,
            {},
        )

    def save(self, path: str | os.PathLike) -> None:
        """Write pipeline_schedule.json atomically (temporary file + rename)."""
        atomic_write_json(path, self.to_json(), indent=1)

    @classmethod
    def load(cls, path: str | os.PathLike) -> PipelineSchedule:
        with open(path) as f:
            return cls.from_json(json.load(f))


def validate(schedule: PipelineSchedule, memory_limit: int | None = None) -> None:
    """The validator of equation 1 (see the module docstring). O(B log B) for B = K x N blocks."""
    spec, N = schedule.spec, schedule.n_micro
    start = schedule.start
    for n in range(N):
        for b in spec.blocks:
            s = start.get((b.name, n))
            if s is None:
                raise ScheduleViolation(
                    f"block {b.name!r} of micro-batch {n} (device {b.devices[0]}) has no start time",
                    kind="missing",
                    block=b.name,
                    micro=n,
                    device=b.devices[0],
                )
            if int(s) != s or s < 0:
                raise ScheduleViolation(
                    f"block {b.name!r} of micro-batch {n} starts at {s!r}; starts must be non-negative integers",
                    kind="missing",
                    block=b.name,
                    micro=n,
                    device=b.devices[0],
                )
    extra = [it for it in start if it[0] not in spec.index or not 0 <= it[1] < N]
    if extra:
        xname, xn = extra[0]
        raise ScheduleViolation(
            f"block {xname!r} micro-batch {xn} is not part of a {N}-micro-batch schedule of {spec.name}",
            kind="missing",
            block=xname,
            micro=xn,
        )
    # 3. data dependencies
    for n in range(N):
        for b in spec.blocks:
            s = start[(b.name, n)]
            for p in b.deps:
                e = start[(p, n)] + spec.block(p).time
                if e > s:
                    raise ScheduleViolation(
                        f"dependency broken: block {b.name!r} of micro-batch {n} on device {b.devices[0]} starts "
                        f"at {s} but its input {p!r} (micro-batch {n}) ends at {e}",
                        kind="dependency",
                        block=b.name,
                        micro=n,
                        device=b.devices[0],
                    )
    # 1. exclusive execution and 2. memory
    for d, items in schedule.device_orders().items():
        prev_end, prev = -1, None
        run = 0
        for bname, n in items:
            blk = spec.block(bname)
            s = start[(bname, n)]
            if prev is not None and s < prev_end:
                raise ScheduleViolation(
                    f"exclusive execution broken on device {d}: block {bname!r} of micro-batch {n} starts at {s} "
                    f"while block {prev[0]!r} of micro-batch {prev[1]} runs until {prev_end}",
                    kind="exclusive",
                    block=bname,
                    micro=n,
                    device=d,
                )
            if s + blk.time > prev_end:
                prev_end, prev = s + blk.time, (bname, n)
            run += blk.memory
            if memory_limit is not None and run > memory_limit:
                raise ScheduleViolation(
                    f"memory cap broken on device {d}: after block {bname!r} of micro-batch {n} starts at {s} the "
                    f"device holds {run} > M = {memory_limit}",
                    kind="memory",
                    block=bname,
                    micro=n,
                    device=d,
                )


def timeline_from_orders(spec: MicroBatchSpec, n_micro: int, orders: Mapping[str, list[Item]]) -> dict[Item, int]:
    """ASAP start times for fixed per-device orders (used by the generator baselines).

    A block starts when all its devices have finished their previous blocks and its inputs are done; a block
    on several devices must be next in line on all of them. Raises InvalidSchedule on a deadlock (orders that
    contradict the dependencies). O(B x D).
    """
    pos = {d: 0 for d in spec.devices}
    free = {d: 0 for d in spec.devices}
    start: dict[Item, int] = {}
    total = sum(len(v) for v in orders.values())
    placed = 0
    expected = {(b.name, n): len(b.devices) for b in spec.blocks for n in range(n_micro)}
    progress = True
    while placed < total and progress:
        progress = False
        for d in spec.devices:
            while pos[d] < len(orders[d]):
                it = orders[d][pos[d]]
                b = spec.block(it[0])
                if it in start:  # multi-device block already started via another device
                    pos[d] += 1
                    placed += 1
                    progress = True
                    continue
                heads_ok = all(pos[e] < len(orders[e]) and orders[e][pos[e]] == it for e in b.devices)
                deps_ok = all((p, it[1]) in start for p in b.deps)
                if not (heads_ok and deps_ok):
                    break
                s = max([free[e] for e in b.devices] + [start[(p, it[1])] + spec.block(p).time for p in b.deps])
                start[it] = s
                for e in b.devices:
                    free[e] = s + b.time
                pos[d] += 1
                placed += 1
                progress = True
    if placed < total:
        stuck = {d: orders[d][pos[d]] for d in spec.devices if pos[d] < len(orders[d])}
        raise InvalidSchedule(
            f"per-device orders deadlock: next blocks {stuck} wait on each other or on "
            f"inputs that come later in some order"
        )
    missing = [it for it in expected if it not in start]
    if missing:
        raise InvalidSchedule(f"per-device orders miss block {missing[0][0]!r} of micro-batch {missing[0][1]}")
    return start
