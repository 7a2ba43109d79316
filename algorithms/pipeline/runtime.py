"""Runtime instantiation of a pipeline schedule (Tessel section IV-D): per-device action lists and Chrome traces.

``build_actions`` turns a schedule into one list of actions per device:

- ``compute(block, micro)`` on every device of the block;
- ``send`` / ``recv`` pairs for every tensor that crosses devices: the output of block B^n is needed on every
  device of a successor block that B does not run on. A tensor produced by a multi-device block is sent by the
  first of its devices (the others hold a replica). One tensor is sent per (producer, micro-batch, receiving
  device), however many blocks there consume it.

Ordering (the topological sort of IV-D): every (block, micro) is put into one global sequence sorted by start
time, blocks of the same start time consecutively in topological (then micro-batch) order, which agrees with
every device's own order. Each device's list is this sequence restricted to it, and each send/recv pair is
inserted right after the block that produces the tensor. Because every device follows one global sequence and a
pair sits at the same place of it on both sides, executing the sequence one action at a time (a send and its
receive together) is a valid run: matching sends and receives can never be mis-ordered, so blocking
(rendezvous) communication cannot deadlock either. ``check_deadlock_free`` verifies it by interpretation.

Communication semantics (``non-blocking``, the default, as in Figure 7b): a ``send`` is posted and returns at
once; a ``recv`` is posted and returns at once; a ``compute`` waits, before it starts, until every tensor it
consumes has arrived (the paper's message manager). Blocking (Figure 7a): a ``send`` and its ``recv`` complete
together, both devices waiting for each other.

Complexity: O(B log B + B x S) for B blocks with S successors each.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidSchedule
from ..graph import atomic_write_json
from .schedule import PipelineSchedule

Tag = tuple[str, int, str]  # (producer block, micro-batch, receiving device)


@dataclass(frozen=True)
class Action:
    """One step of a device's program: compute a block, or send / receive one tensor."""

    kind: str  # "compute" | "send" | "recv"
    block: str
    micro: int
    device: str
    peer: str | None = None  # the other device of a send / recv
    tag: Tag | None = None  # the tensor a send / recv moves

    def link(self) -> tuple[str, Tag]:
        """(peer, tag) of a send or receive (a compute action has none: InvalidSchedule)."""
        if self.peer is None or self.tag is None:
            raise InvalidSchedule(f"action {self.kind} {self.block}#{self.micro} on {self.device} has no peer/tag")
        return self.peer, self.tag

    def __str__(self) -> str:
        if self.kind == "compute":
            return f"{self.block}#{self.micro}"
        arrow = "->" if self.kind == "send" else "<-"
        return f"{self.kind}({self.block}#{self.micro} {arrow} {self.peer})"


def global_sequence(schedule: PipelineSchedule) -> list[tuple[str, int]]:
    """The topological sort of IV-D: (block, micro) by start time, then topological position, then micro."""
    spec = schedule.spec
    return sorted(schedule.start, key=lambda it: (schedule.start[it], spec.index[it[0]], it[1]))


def build_actions(schedule: PipelineSchedule) -> dict[str, list[Action]]:
    """Per-device action lists with explicit send/recv (see the module docstring)."""
    spec = schedule.spec
    acts: dict[str, list[Action]] = {d: [] for d in spec.devices}
    for b, n in global_sequence(schedule):
        blk = spec.block(b)
        for d in blk.devices:
            acts[d].append(Action("compute", b, n, d))
        src = blk.devices[0]
        sent: set[str] = set()
        for j in spec.succs[spec.index[b]]:
            for e in spec.blocks[j].devices:
                if e in blk.devices or e in sent:
                    continue
                sent.add(e)
                tag = (b, n, e)
                acts[src].append(Action("send", b, n, src, e, tag))
                acts[e].append(Action("recv", b, n, e, src, tag))
    return acts


def _needs(schedule: PipelineSchedule, a: Action) -> list[Tag]:
    """Tags a compute action must have received on its device before it starts."""
    spec = schedule.spec
    blk = spec.block(a.block)
    out = []
    for p in blk.deps:
        if a.device not in spec.block(p).devices:
            out.append((p, a.micro, a.device))
    return out


def check_deadlock_free(
    schedule: PipelineSchedule, actions: Mapping[str, Sequence[Action]] | None = None, blocking: bool = True
) -> None:
    """Interpret the action lists; raise InvalidSchedule naming the stuck devices if they deadlock.

    Blocking: a send and its recv advance together. Non-blocking: sends and recvs are posted at once and a
    compute waits for its inputs to have been sent. A multi-device compute advances on all its devices
    together (a collective). O(A x D) for A actions.
    """
    acts = actions if actions is not None else build_actions(schedule)
    spec = schedule.spec
    pos = {d: 0 for d in acts}
    sent: set[Tag] = set()
    posted: set[Tag] = set()
    received: set[Tag] = set()
    done: set[tuple[str, int]] = set()

    def head(d: str) -> Action | None:
        return acts[d][pos[d]] if pos[d] < len(acts[d]) else None

    def has_inputs(a: Action) -> bool:
        for t in _needs(schedule, a):
            if blocking and t not in received:
                return False
            if not blocking and not (t in posted and t in sent):
                return False
        return all((p, a.micro) in done for p in spec.block(a.block).deps)

    while any(head(d) is not None for d in acts):
        moved = False
        for d in acts:
            a = head(d)
            if a is None:
                continue
            if a.kind == "compute":
                devs = spec.block(a.block).devices
                group = [head(e) for e in devs]
                if all(
                    g is not None and g.kind == "compute" and (g.block, g.micro) == (a.block, a.micro) and has_inputs(g)
                    for g in group
                ):
                    done.add((a.block, a.micro))
                    for e in devs:
                        pos[e] += 1
                    moved = True
            elif blocking:
                if a.kind != "send" or (a.block, a.micro) not in done:
                    continue
                peer, tag = a.link()
                other = head(peer)
                if other is not None and other.kind == "recv" and other.tag == tag:
                    received.add(tag)
                    pos[d] += 1
                    pos[peer] += 1
                    moved = True
            else:
                if a.kind == "send":
                    if (a.block, a.micro) not in done:
                        continue
                    sent.add(a.link()[1])
                else:
                    posted.add(a.link()[1])
                pos[d] += 1
                moved = True
        if not moved:
            stuck = {d: str(head(d)) for d in acts if head(d) is not None}
            raise InvalidSchedule(
                f"action lists deadlock ({'blocking' if blocking else 'non-blocking'}): devices wait at {stuck}"
            )


def simulate_actions(
    schedule: PipelineSchedule,
    actions: Mapping[str, Sequence[Action]] | None = None,
    comm_time: float = 0.0,
    blocking: bool = False,
) -> dict[tuple[str, int], float]:
    """Predicted start time of every block when the action lists run as fast as they can.

    Compute takes the block's time; a tensor arrives ``comm_time`` after its send is posted; with blocking
    communication the sender is also busy until then. Walks the global sequence, which is consistent with
    every list. Returns start per (block, micro). O(A).
    """
    acts = actions if actions is not None else build_actions(schedule)
    spec = schedule.spec
    clock = {d: 0.0 for d in spec.devices}
    arrive: dict[Tag, float] = {}
    start: dict[tuple[str, int], float] = {}
    end: dict[tuple[str, int], float] = {}
    pos = {d: 0 for d in acts}
    for b, n in global_sequence(schedule):
        blk = spec.block(b)
        t = max(clock[d] for d in blk.devices)
        for d in blk.devices:
            for tag in _needs(schedule, Action("compute", b, n, d)):
                t = max(t, arrive[tag])
            for p in blk.deps:
                if d in spec.block(p).devices:
                    t = max(t, end[(p, n)])
        start[(b, n)] = t
        end[(b, n)] = t + blk.time
        for d in blk.devices:
            clock[d] = t + blk.time
            while pos[d] < len(acts[d]) and not (
                acts[d][pos[d]].kind == "compute" and (acts[d][pos[d]].block, acts[d][pos[d]].micro) == (b, n)
            ):
                pos[d] += 1
            pos[d] += 1
            while pos[d] < len(acts[d]) and acts[d][pos[d]].kind != "compute":
                a = acts[d][pos[d]]
                if a.kind == "send":
                    peer, tag = a.link()
                    arrive[tag] = clock[d] + comm_time
                    if blocking:
                        clock[d] += comm_time
                        clock[peer] = max(clock[peer], clock[d])
                pos[d] += 1
    return start


# ------------------------------------------------------------------------------------------------- Chrome trace
def chrome_trace(
    schedule: PipelineSchedule,
    time_unit_us: float = 1000.0,
    actions: Mapping[str, Sequence[Action]] | None = None,
    measured: Iterable[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The schedule as a chrome://tracing (Trace Event Format) JSON object.

    One process "schedule" with a thread per device (complete events "X" per block, instant events for
    send/recv at the end of their producer, the repetend as a span on its own row). ``measured`` rows
    ({"device", "name", "start_s", "end_s", ...}) from a real run go into a second process "measured".
    """
    spec = schedule.spec
    ev: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "schedule"}}]
    for k, d in enumerate(spec.devices):
        ev.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": k, "args": {"name": d}})
    for (b, n), s in sorted(schedule.start.items(), key=lambda kv: kv[1]):
        blk = spec.block(b)
        for d in blk.devices:
            ev.append(
                {
                    "name": f"{b} #{n}",
                    "cat": blk.kind,
                    "ph": "X",
                    "pid": 0,
                    "tid": spec.devices.index(d),
                    "ts": s * time_unit_us,
                    "dur": blk.time * time_unit_us,
                    "args": {"block": b, "micro": n, "memory": blk.memory, "devices": list(blk.devices)},
                }
            )
    acts = actions if actions is not None else build_actions(schedule)
    for d, lst in acts.items():
        for a in lst:
            if a.kind == "compute":
                continue
            t = schedule.end(a.block, a.micro)
            ev.append(
                {
                    "name": str(a),
                    "cat": a.kind,
                    "ph": "i",
                    "s": "t",
                    "pid": 0,
                    "tid": spec.devices.index(d),
                    "ts": t * time_unit_us,
                }
            )
    if schedule.repetend:
        rid = len(spec.devices)
        ev.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": rid, "args": {"name": "repetend"}})
        r0, r1 = schedule.repetend
        ev.append(
            {
                "name": "repetend",
                "cat": "repetend",
                "ph": "X",
                "pid": 0,
                "tid": rid,
                "ts": r0 * time_unit_us,
                "dur": (r1 - r0) * time_unit_us,
            }
        )
    if measured is not None:
        ev.append({"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "measured"}})
        names: dict[str, int] = {}
        for r in measured:
            dev = r["device"]
            if dev not in names:
                names[dev] = len(names)
                ev.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": names[dev], "args": {"name": dev}})
            ev.append(
                {
                    "name": r.get("name", "?"),
                    "cat": r.get("kind", "measured"),
                    "ph": "X",
                    "pid": 1,
                    "tid": names[dev],
                    "ts": r["start_s"] * 1e6,
                    "dur": (r["end_s"] - r["start_s"]) * 1e6,
                    "args": {k: v for k, v in r.items() if k not in ("start_s", "end_s")},
                }
            )
    return {
        "traceEvents": ev,
        "displayTimeUnit": "ms",
        "otherData": {"makespan": schedule.makespan, "bubble_rate": schedule.bubble_rate, "time_unit_us": time_unit_us},
    }


def save_chrome_trace(path: str | os.PathLike, trace: Mapping[str, Any]) -> None:
    """Write a trace atomically (temporary file + rename)."""
    atomic_write_json(path, trace)
