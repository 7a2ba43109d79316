"""Export a pipeline schedule to the per-rank action lists that ``torch.distributed.pipelining`` loads.

Target format (torch 2.13, ``torch/distributed/pipelining/schedules.py``): a schedule is, per rank, a list of
compute actions ``_Action(stage_index, computation_type, microbatch_index)`` written as strings
``"<stage><type><micro>"``, e.g. ``"0F0"`` (forward of stage 0 on micro-batch 0), ``"3B5"`` (full backward of
stage 3 on micro-batch 5); ``I``/``W`` (backward split into input and weight gradients) also exist but Tessel's
blocks are whole backwards, so only ``F`` and ``B`` are written. ``_PipelineScheduleRuntime._load_csv(path,
"compute_only")`` reads one CSV row per rank (row k = rank k, one action string per cell), infers which rank
holds each stage (a stage on exactly one rank; ``_validate_schedule``) and inserts the send/receive actions
itself (``_add_send_recv``). ``to_csv`` writes exactly that file.

torch's model of a pipeline is one chain of stages 0 .. S-1; stage s gets its input from stage s-1 and its
output gradient from stage s+1, and each action runs one stage on one rank. A block schedule maps onto it when
its block dependency graph is a single path c_0 -> c_1 -> ... -> c_{2S-1} whose second half mirrors the first:
c_k and c_{2S-1-k} run on the same devices (forward and backward of stage k). V, M and NN (and
``blocks_from_placement`` of a contiguous stage placement) have that form; X (two independent pipelines, two
model replicas) and K (two branches joined by ``cross``) do not, and raise ``NotExportable``. The path is found
from the dependencies alone, not from the block kinds, because pipeline_schedule.json does not store the kind
(a memory-free backward block such as M's ``emb_b`` reads back as a forward block).

Multi-device blocks (Tessel's tensor-parallel blocks, e.g. M's embedding on all devices) have no counterpart in
torch's one-rank-per-stage model. With ``multi_device="collapse"`` (the default) such a stage is put on one of
its devices, the device of the previous stage in the chain (else of the next one), so the activation passes
locally where it can; the other devices simply skip that block. This changes the timing (the block's span is
no longer shared), so ``projected_schedule`` rebuilds the schedule as torch would run it (same per-rank orders,
every block as soon as possible) for an honest prediction. ``multi_device="error"`` refuses instead.

Per-rank order: the schedule's own order on that device (start time, then topological position, then
micro-batch), the collapsed blocks only on their chosen rank. ``check_executable`` interprets the lists with
torch's rules (a forward needs the previous stage's forward of the same micro-batch, a backward its own forward
and the next stage's backward) and raises ``NotExportable`` on a deadlock. Pure Python, no torch import.
Complexity: O(B log B) for B = K x N blocks (sorting); ``check_executable`` O(A x R) for A actions, R ranks.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidSchedule
from ..graph import atomic_write_json
from .blocks import Block, MicroBatchSpec
from .schedule import PipelineSchedule, timeline_from_orders

FORMAT = "torch.distributed.pipelining compute_only (_PipelineScheduleRuntime._load_csv)"


class NotExportable(InvalidSchedule):
    """The schedule's blocks do not form torch's single chain of one-rank stages (names the block at fault)."""


@dataclass(frozen=True)
class TorchStage:
    """One torch stage: the forward and backward block it runs, on which rank (= device index)."""

    index: int
    forward: str
    backward: str
    device: str
    rank: int
    collapsed_from: tuple[str, ...] | None = None  # the block's devices when it was a multi-device block


@dataclass
class TorchExport:
    """Per-rank compute action strings plus the stage map; ``ranks[k]`` is rank k's list, in order."""

    devices: list[str]
    n_micro: int
    stages: list[TorchStage]
    ranks: dict[int, list[str]]
    notes: list[str] = field(default_factory=list)

    @property
    def n_stages(self) -> int:
        return len(self.stages)

    def stage_of_block(self) -> dict[str, tuple[int, str]]:
        """block name -> (stage index, "F" or "B")."""
        out: dict[str, tuple[int, str]] = {}
        for st in self.stages:
            out[st.forward] = (st.index, "F")
            out[st.backward] = (st.index, "B")
        return out

    def stages_on_rank(self, rank: int) -> list[int]:
        return [st.index for st in self.stages if st.rank == rank]

    def csv_text(self) -> str:
        """The CSV torch's ``_load_csv`` reads: one row per rank, in rank order."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        for r in range(len(self.devices)):
            w.writerow(self.ranks[r])
        return buf.getvalue()

    def to_csv(self, path: str | os.PathLike) -> None:
        """Write the CSV atomically (temporary file + rename)."""
        path = os.fspath(path)
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w", newline="") as f:
            f.write(self.csv_text())
        os.replace(tmp, path)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "exportable": True,
            "devices": list(self.devices),
            "n_micro": int(self.n_micro),
            "n_stages": self.n_stages,
            "stages": [
                {
                    "stage": st.index,
                    "forward": st.forward,
                    "backward": st.backward,
                    "device": st.device,
                    "rank": st.rank,
                    "collapsed_from": list(st.collapsed_from) if st.collapsed_from else None,
                }
                for st in self.stages
            ],
            "ranks": {str(r): list(a) for r, a in sorted(self.ranks.items())},
            "notes": list(self.notes),
        }

    def save(self, csv_path: str | os.PathLike, json_path: str | os.PathLike | None = None) -> None:
        self.to_csv(csv_path)
        if json_path is not None:
            atomic_write_json(json_path, self.to_json(), indent=1)


def write_export(schedule: PipelineSchedule, out_dir: str | os.PathLike) -> dict[str, str]:
    """Write ``pipeline_actions.csv`` (torch's file) and ``pipeline_actions.json`` (the stage map) into
    ``out_dir``; for a schedule that does not map, only the JSON, with ``exportable: false`` and the reason.
    Returns {"pipeline_actions_csv"?: path, "pipeline_actions_json": path}."""
    out_dir = os.fspath(out_dir)
    jpath = os.path.join(out_dir, "pipeline_actions.json")
    try:
        exp = export_actions(schedule)
    except NotExportable as e:
        atomic_write_json(jpath, {"format": FORMAT, "exportable": False, "reason": str(e)}, indent=1)
        return {"pipeline_actions_json": jpath}
    cpath = os.path.join(out_dir, "pipeline_actions.csv")
    exp.save(cpath, jpath)
    return {"pipeline_actions_csv": cpath, "pipeline_actions_json": jpath}


def block_chain(spec: MicroBatchSpec) -> list[str]:
    """The blocks as one dependency path c_0 -> .. -> c_{K-1}; NotExportable when the graph is not a path. O(K)."""
    if spec.K == 0:
        raise NotExportable(f"spec {spec.name!r} has no blocks")
    sources = [b.name for i, b in enumerate(spec.blocks) if not spec.preds[i]]
    if len(sources) != 1:
        raise NotExportable(
            f"spec {spec.name!r} starts with {len(sources)} blocks {sources}: torch's pipeline runtime runs one chain "
            f"of stages (independent pipelines, as in Chimera's X shape, or parallel branches, as in the K shape, "
            f"do not map)"
        )
    chain = [sources[0]]
    while True:
        i = spec.index[chain[-1]]
        succ = spec.succs[i]
        if not succ:
            break
        if len(succ) > 1:
            names = [spec.blocks[j].name for j in succ]
            raise NotExportable(
                f"block {chain[-1]!r} feeds {len(succ)} blocks {names}: torch's pipeline runtime needs a single chain"
            )
        j = succ[0]
        if len(spec.preds[j]) > 1:
            names = [spec.blocks[k].name for k in spec.preds[j]]
            raise NotExportable(
                f"block {spec.blocks[j].name!r} waits for {len(names)} blocks {names}: torch's pipeline runtime "
                f"needs a single chain (branches joined by one block, as in the K shape, do not map)"
            )
        chain.append(spec.blocks[j].name)
    if len(chain) != spec.K:
        rest = sorted(set(spec.index) - set(chain))
        raise NotExportable(f"blocks {rest} are not on the chain from {chain[0]!r}: torch needs a single chain")
    return chain


def torch_stages(spec: MicroBatchSpec, multi_device: str = "collapse") -> list[TorchStage]:
    """Pair the chain's halves into stages (see the module docstring). O(K)."""
    if multi_device not in ("collapse", "error"):
        raise NotExportable(f"multi_device must be 'collapse' or 'error', got {multi_device!r}")
    chain = block_chain(spec)
    K = len(chain)
    if K % 2:
        raise NotExportable(
            f"spec {spec.name!r} has {K} blocks in its chain; a training pipeline needs a forward and a backward "
            f"block per stage (an even count)"
        )
    S = K // 2
    pairs: list[tuple[Block, Block]] = []
    for k in range(S):
        f, b = spec.block(chain[k]), spec.block(chain[K - 1 - k])
        if set(f.devices) != set(b.devices):
            raise NotExportable(
                f"block {f.name!r} (devices {list(f.devices)}) and its mirror {b.name!r} (devices {list(b.devices)}) "
                f"run on different devices: stage {k}'s forward and backward must share a rank"
            )
        if f.kind == "backward":
            raise NotExportable(f"block {f.name!r} / {b.name!r}: the chain's first half must be the forward pass")
        pairs.append((f, b))
    out: list[TorchStage] = []
    for k, (f, b) in enumerate(pairs):
        if len(f.devices) == 1:
            dev, collapsed = f.devices[0], None
        else:
            if multi_device == "error":
                raise NotExportable(
                    f"block {f.name!r} runs on {len(f.devices)} devices {list(f.devices)} (tensor parallel); torch's "
                    f"pipeline runtime runs each stage on one rank (use multi_device='collapse')"
                )
            near = [pairs[j][0] for j in (k - 1, k + 1) if 0 <= j < S and len(pairs[j][0].devices) == 1]
            dev = near[0].devices[0] if near else f.devices[0]
            if dev not in f.devices:
                dev = f.devices[0]
            collapsed = tuple(f.devices)
        out.append(TorchStage(k, f.name, b.name, dev, spec.devices.index(dev), collapsed))
    return out


def export_actions(schedule: PipelineSchedule, multi_device: str = "collapse") -> TorchExport:
    """The schedule as torch's per-rank compute action lists (module docstring). O(B log B)."""
    spec = schedule.spec
    stages = torch_stages(spec, multi_device)
    of = {st.forward: (st.index, "F", st.device) for st in stages}
    of.update({st.backward: (st.index, "B", st.device) for st in stages})
    ranks: dict[int, list[str]] = {r: [] for r in range(len(spec.devices))}
    for d, items in schedule.device_orders().items():
        r = spec.devices.index(d)
        for b, n in items:
            s, t, dev = of[b]
            if dev == d:
                ranks[r].append(f"{s}{t}{n}")
    notes = []
    for st in stages:
        if st.collapsed_from:
            notes.append(
                f"stage {st.index} ({st.forward}/{st.backward}) runs on devices {list(st.collapsed_from)} in the "
                f"schedule (tensor parallel); exported on {st.device} (rank {st.rank}) only"
            )
    exp = TorchExport(list(spec.devices), schedule.n_micro, stages, ranks, notes)
    check_executable(exp)
    return exp


def parse_action(text: str) -> tuple[int, str, int]:
    """(stage, type, micro) of an ``F``/``B`` action string such as ``"2B13"``; NotExportable otherwise."""
    s = text.strip()
    for t in ("F", "B"):
        if t in s:
            a, _, c = s.partition(t)
            if a.isdigit() and c.isdigit():
                return int(a), t, int(c)
    raise NotExportable(f"action {text!r} is not '<stage>F<micro>' or '<stage>B<micro>'")


def check_executable(exp: TorchExport) -> None:
    """Interpret the lists with torch's dependency rules; raise NotExportable on a missing action or a deadlock.

    Mirrors torch's ``_validate_schedule`` (every stage F and B exactly once per micro-batch, a stage on one rank)
    and the progress loop of ``_add_send_recv``. O(A x R).
    """
    S, N = exp.n_stages, exp.n_micro
    rank_of: dict[int, int] = {}
    seen: set[tuple[int, str, int]] = set()
    lists = {r: [parse_action(a) for a in acts] for r, acts in exp.ranks.items()}
    for r, acts in lists.items():
        for s, t, n in acts:
            if not (0 <= s < S and 0 <= n < N):
                raise NotExportable(f"rank {r}: action {s}{t}{n} is outside {S} stages x {N} micro-batches")
            if rank_of.setdefault(s, r) != r:
                raise NotExportable(f"stage {s} has actions on ranks {rank_of[s]} and {r}")
            if (s, t, n) in seen:
                raise NotExportable(f"action {s}{t}{n} appears twice")
            seen.add((s, t, n))
    if len(seen) != 2 * S * N:
        missing = [(s, t, n) for s in range(S) for t in "FB" for n in range(N) if (s, t, n) not in seen]
        raise NotExportable(f"{len(missing)} actions missing, e.g. {missing[0]}")
    done: set[tuple[int, str, int]] = set()
    pos = {r: 0 for r in lists}

    def ready(s: int, t: str, n: int) -> bool:
        if t == "F":
            return s == 0 or (s - 1, "F", n) in done
        return (s, "F", n) in done and (s == S - 1 or (s + 1, "B", n) in done)

    while any(pos[r] < len(lists[r]) for r in lists):
        moved = False
        for r, acts in lists.items():
            while pos[r] < len(acts) and ready(*acts[pos[r]]):
                done.add(acts[pos[r]])
                pos[r] += 1
                moved = True
        if not moved:
            stuck = {r: "{}{}{}".format(*lists[r][pos[r]]) for r in lists if pos[r] < len(lists[r])}
            raise NotExportable(f"the exported action lists deadlock: ranks wait at {stuck}")


def projected_schedule(schedule: PipelineSchedule, exp: TorchExport | None = None) -> PipelineSchedule:
    """The schedule as torch executes the export: collapsed blocks on their one rank, the same per-rank orders,
    every block as soon as its rank and inputs allow (``timeline_from_orders``). In the schedule's time units;
    no communication time. O(B x D)."""
    exp = exp or export_actions(schedule)
    spec = schedule.spec
    dev_of = {st.forward: st.device for st in exp.stages}
    dev_of.update({st.backward: st.device for st in exp.stages})
    blocks = [Block(b.name, b.time, b.memory, (dev_of[b.name],), b.deps, b.kind) for b in spec.blocks]
    spec2 = MicroBatchSpec(blocks, list(spec.devices), name=f"{spec.name} (torch export)")
    orders: dict[str, list[tuple[str, int]]] = {d: [] for d in spec.devices}
    for d, items in schedule.device_orders().items():
        orders[d] = [(b, n) for b, n in items if dev_of[b] == d]
    start = timeline_from_orders(spec2, schedule.n_micro, orders)
    return PipelineSchedule(spec2, schedule.n_micro, start, schedule.memory_limit, None, {"projected_from": spec.name})


def _parse_for_replay(text: str) -> list[tuple[int, str, int]]:
    """Compute actions of one cell: ``"<stage><F|B|I|W><micro>"`` or torch's ``"(a;b)OVERLAP_F_B"`` (its
    sub-actions in order)."""
    s = text.strip()
    if s.startswith("("):
        inner, _, kind = s[1:].partition(")")
        if kind != "OVERLAP_F_B":
            raise NotExportable(f"action {text!r}: unknown compound action")
        return [a for part in inner.split(";") if part.strip() for a in _parse_for_replay(part)]
    for t in ("F", "B", "I", "W"):
        a, sep, c = s.partition(t)
        if sep and a.isdigit() and c.isdigit():
            return [(int(a), t, int(c))]
    raise NotExportable(f"action {text!r} is not a compute action '<stage><F|B|I|W><micro>'")


def replay(
    ranks: Mapping[int, Sequence[str]], duration: Mapping[tuple[int, str], float], n_stages: int
) -> tuple[float, dict[int, float]]:
    """Predicted step of per-rank compute action lists with given per-(stage, type) durations, no comm time.

    Types F, B (full backward), I (input gradient) and W (weight gradient), and torch's OVERLAP_F_B (its
    sub-actions one after the other). Each action starts when its rank is free and its inputs are done:
    F(s) after F(s-1); B or I(s) after F(s) and B or I(s+1); W(s) after I(s). Returns (makespan, busy seconds
    per rank). Used to predict a measured run from its own per-stage times. O(A x R).
    """
    lists = {r: [a for cell in acts for a in _parse_for_replay(cell)] for r, acts in ranks.items()}
    end: dict[tuple[str, int, int], float] = {}  # ("F" | "G" (input gradient) | "W", stage, micro)
    free = {r: 0.0 for r in lists}
    busy = {r: 0.0 for r in lists}
    pos = {r: 0 for r in lists}

    def deps(s: int, t: str, n: int) -> list[tuple[str, int, int]]:
        if t == "F":
            return [("F", s - 1, n)] if s > 0 else []
        if t == "W":
            return [("G", s, n)]
        return [("F", s, n)] + ([("G", s + 1, n)] if s < n_stages - 1 else [])

    while any(pos[r] < len(lists[r]) for r in lists):
        moved = False
        for r, acts in lists.items():
            while pos[r] < len(acts):
                s, t, n = acts[pos[r]]
                ds = deps(s, t, n)
                if not all(x in end for x in ds):
                    break
                t0 = max([free[r]] + [end[x] for x in ds])
                dt = float(duration[(s, t)])
                key = "F" if t == "F" else ("W" if t == "W" else "G")
                end[(key, s, n)] = t0 + dt
                free[r] = t0 + dt
                busy[r] += dt
                pos[r] += 1
                moved = True
        if not moved:
            raise NotExportable("replay: the action lists deadlock")
    return max(free.values(), default=0.0), busy
