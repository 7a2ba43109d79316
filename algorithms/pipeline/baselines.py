"""Pre-defined pipeline schedules as generators: GPipe, 1F1B, Chimera (direct concatenation) and 1F1B+.

Each generator fixes a per-device order of (block, micro-batch) pairs and gets start times from
``timeline_from_orders`` (every block as soon as its devices are free and its inputs are done), so a schedule is
valid by construction except for the memory cap, which ``schedule`` checks with the validator.

- GPipe (Huang et al. 2019): every forward block of every micro-batch, then every backward block (micro-batch
  order 0..N-1 in both phases, as torch.distributed.pipelining's ScheduleGPipe does).
- 1F1B (PipeDream-flush / DAPPLE, Tessel ref. [8]): device at stage s (of S) runs min(S-1-s, N) warm-up
  forwards, then alternates one forward and one backward, then drains the backwards.
- Chimera-direct (Li and Hoefler 2021, Tessel VI-A): on the X shape; a unit of D/2 X micro-batches (D real
  micro-batches, one half per direction) is list-scheduled with 1F1B's priority (whenever a device is free it
  starts its ready block that is a backward before a forward, older micro-batch first, then the one that is
  deeper in the micro-batch); units are concatenated directly (the next unit's blocks come after the previous
  unit's on every device), which keeps each unit's bubbles. On 4 devices this unit is time-optimal: the TO
  search (Z3) on one unit gives the same makespan, 16 without recompute (the 16-step Chimera-direct unit the
  paper's authors draw for 4 stages in their nnScaler code, 25% bubble) and 22 with recompute (27% bubble).
  An earlier merge of the two directions' separate 1F1B timelines gave 17 and 23. Table II reports 20% for
  Chimera-direct with recompute: no directly concatenated unit can reach it here, since 22 is the proven
  optimum of a unit (16 units of work per device, so >= 6/22 = 27% idle); 20% would need 4 idle units per
  20, i.e. consecutive units overlapping, which "direct concatenation" excludes. We keep 27% and say so.
- 1F1B+ (Tessel VI-A): 1F1B adapted to a placement with distributed (multi-device) blocks by "inserting the
  distributed operators closely to their neighboring operators within the 1F1B schedule". The paper says no
  more; the authors' released runtime (nnScaler's predefined ``sched_1f1b_plus``, which the public Tessel code
  calls) builds it in global *steps*, and that is what we do where the placement allows it
  (`one_f_one_b_plus_step_orders`): the single-device stages run 1F1B in lock-step steps (stage s starts at
  step s, forward and backward alternate, stage s's backwards run S - 1 - s micro-batches behind its
  forwards), then for each micro-batch and each distributed forward block a step of its own is
  inserted right before the step that holds the next forward block of that micro-batch, and its backward a
  step right after the step that holds that next block's backward; an inserted step delays every later step on
  every device. Each device runs its blocks in step order, timed as early as dependencies allow. With recompute
  on 4 devices this gives Table II's 1F1B+ column exactly: 25% on M (GPT) and 20% on NN (mT5), steady state.
  It needs the forward blocks in one chain, one single-device forward and one backward block per device, no
  distributed block last or two in a row; otherwise (the K shape, which the paper marks as not adaptable, and
  graphs of other shapes) an earlier reading of ours is used, recorded as ``insertion: order`` in the
  schedule's info (``step`` otherwise): the single-device blocks scheduled by a 1F1B list-scheduling policy
  (backward first, oldest micro-batch first, at most S-s micro-batches in flight at stage s), each distributed
  block placed in every device's order right after its nearest predecessor (or, for a block with none, right
  before its successor), the orders re-timed. That reading gave 25% on M too but 27% on NN (session 17).

All generators are O(B log B + B x D) for B = K x N blocks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..base import PipelineScheduler
from ..errors import ConfigError
from .blocks import Block, MicroBatchSpec
from .schedule import Item, PipelineSchedule, timeline_from_orders

log = logging.getLogger(__name__)


class ConfiguredPipelineScheduler(PipelineScheduler):
    """A PipelineScheduler that also carries its case (docs/design.md's ``pipeline.*`` keys).

    The case keys ``shape`` (v, x, m, nn, k, .., from_placement), ``n_devices``, ``n_micro``, ``memory``
    (per-device cap in block memory units; null = unbounded; ``reference`` = the Tessel authors' budget for a
    built-in shape, ``blocks.reference_memory``) and ``recompute`` are accepted by every constructor, so the
    YAML with its ``_target_`` can be instantiated as is; ``run(graph, placement)`` builds the blocks from them
    and calls ``schedule``.
    """

    def __init__(
        self,
        shape: str = "v",
        n_devices: int = 4,
        n_micro: int = 8,
        memory: int | str | None = None,
        recompute: bool = False,
        name: str | None = None,
        steady_bubble: bool = False,
    ):
        # a run's option, not the case's: the run also reports the steady-state bubble rate (api.run_scheduler)
        self.steady_bubble = bool(steady_bubble)
        if isinstance(memory, str):
            if memory != "reference":
                raise ConfigError(f"pipeline.memory={memory!r}: an integer, null or 'reference'")
            from .blocks import reference_memory

            memory = reference_memory(shape, int(n_devices))
        self.case: dict[str, Any] = {
            "shape": shape,
            "n_devices": int(n_devices),
            "n_micro": int(n_micro),
            "memory": None if memory is None else int(memory),
            "recompute": bool(recompute),
        }
        if name is not None:
            self.name = name

    def spec(self, graph: Any = None, placement: Any = None) -> MicroBatchSpec:
        from .blocks import spec_from_config

        return spec_from_config(
            self.case["shape"], self.case["n_devices"], self.case["recompute"], graph=graph, placement=placement
        )

    def run(self, graph: Any = None, placement: Any = None) -> PipelineSchedule:
        """Schedule the configured case: blocks from the case keys (or from graph + placement)."""
        spec = self.spec(graph, placement)
        return self.schedule(spec, spec.devices, self.case["memory"], self.case["n_micro"])


def as_spec(blocks: Any, devices: Sequence[str] | None = None) -> MicroBatchSpec:
    """Accept a MicroBatchSpec, or a list of Blocks plus the device names."""
    if isinstance(blocks, MicroBatchSpec):
        return blocks
    blocks = list(blocks)
    if devices is None:
        devices = list(dict.fromkeys(d for b in blocks for d in b.devices))
    return MicroBatchSpec(blocks, list(devices))


def _stages(spec: MicroBatchSpec, blocks: Sequence[int] | None = None) -> dict[str, int]:
    """Stage index of each device: rank by the topological position of its first single-device forward block."""
    first: dict[str, int] = {}
    for i, b in enumerate(spec.blocks):
        if blocks is not None and i not in blocks:
            continue
        if b.kind == "forward" and len(b.devices) == 1 and b.devices[0] not in first:
            first[b.devices[0]] = i
    ranked = sorted(first, key=lambda d: first[d])
    st = {d: r for r, d in enumerate(ranked)}
    for d in spec.devices:
        st.setdefault(d, len(ranked) - 1 if ranked else 0)
    return st


def _finish(
    name: str, spec: MicroBatchSpec, n_micro: int, start: dict[Item, int], memory: int | None, t0: float, **info: Any
) -> PipelineSchedule:
    sched = PipelineSchedule(
        spec, n_micro, start, memory, None, {"scheduler": name, "search_time_s": time.perf_counter() - t0, **info}
    )
    sched.validate()
    log.info("%s: %s N=%d makespan %d bubble %.3f", name, spec.name, n_micro, sched.makespan, sched.bubble_rate)
    return sched


# ---------------------------------------------------------------------------------------------------- GPipe
def gpipe_orders(spec: MicroBatchSpec, n_micro: int) -> dict[str, list[Item]]:
    orders: dict[str, list[Item]] = {}
    for d in spec.devices:
        idx = spec.on_device(d)
        fw = [(spec.blocks[i].name, m) for m in range(n_micro) for i in idx if spec.blocks[i].kind != "backward"]
        bw = [(spec.blocks[i].name, m) for m in range(n_micro) for i in idx if spec.blocks[i].kind == "backward"]
        orders[d] = fw + bw
    return orders


class GPipeScheduler(ConfiguredPipelineScheduler):
    """GPipe: all forward blocks of all micro-batches, then all backward blocks (Huang et al. 2019)."""

    name = "gpipe"

    def schedule(
        self, blocks: Any, devices: Any = None, memory: int | None = None, n_micro: int = 4
    ) -> PipelineSchedule:
        t0 = time.perf_counter()
        spec = as_spec(blocks, devices)
        start = timeline_from_orders(spec, n_micro, gpipe_orders(spec, n_micro))
        return _finish(self.name, spec, n_micro, start, memory, t0)


# ---------------------------------------------------------------------------------------------------- 1F1B
def one_f_one_b_orders(
    spec: MicroBatchSpec,
    n_micro: int,
    micro_ids: Sequence[int] | None = None,
    stages: Mapping[str, int] | None = None,
    only: Sequence[int] | None = None,
) -> dict[str, list[Item]]:
    """Textbook 1F1B per-device orders: warm-up forwards, one-forward-one-backward, drain.

    ``micro_ids`` renames the micro-batches (Chimera uses it), ``only`` restricts to some block indices.
    """
    ids = list(micro_ids) if micro_ids is not None else list(range(n_micro))
    st = stages if stages is not None else _stages(spec, only)
    S = max(st.values()) + 1 if st else 1
    orders: dict[str, list[Item]] = {}
    for d in spec.devices:
        idx = [i for i in spec.on_device(d) if only is None or i in only]
        fwd = [spec.blocks[i].name for i in idx if spec.blocks[i].kind != "backward"]
        bwd = [spec.blocks[i].name for i in idx if spec.blocks[i].kind == "backward"]
        w = min(S - 1 - st[d], len(ids))
        out: list[Item] = []
        for m in range(w):
            out += [(b, ids[m]) for b in fwd]
        for m in range(len(ids)):
            if m + w < len(ids):
                out += [(b, ids[m + w]) for b in fwd]
            out += [(b, ids[m]) for b in bwd]
        orders[d] = out
    return orders


class OneFOneBScheduler(ConfiguredPipelineScheduler):
    """1F1B: warm-up forwards, then one forward / one backward per device (PipeDream-flush, DAPPLE)."""

    name = "1f1b"

    def schedule(
        self, blocks: Any, devices: Any = None, memory: int | None = None, n_micro: int = 4
    ) -> PipelineSchedule:
        t0 = time.perf_counter()
        spec = as_spec(blocks, devices)
        multi = [b.name for b in spec.blocks if len(b.devices) > 1]
        per_dev = {d: sum(spec.blocks[i].kind != "backward" for i in spec.on_device(d)) for d in spec.devices}
        if multi or any(v > 1 for v in per_dev.values()):
            raise ConfigError(
                f"1F1B is defined for one stage per device (the V shape); {spec.name} has "
                + (f"distributed blocks {multi}" if multi else f"forward blocks per device {per_dev}")
                + ". Use pipeline=1f1b_plus (or tessel) for this placement"
            )
        start = timeline_from_orders(spec, n_micro, one_f_one_b_orders(spec, n_micro))
        return _finish(self.name, spec, n_micro, start, memory, t0)


# ---------------------------------------------------------------------------------------------------- Chimera
class ChimeraScheduler(ConfiguredPipelineScheduler):
    """Chimera with direct concatenation of its D-micro-batch units, on the X shape (Li and Hoefler 2021)."""

    name = "chimera"

    def __init__(self, unit: int | None = None, **case: Any):
        super().__init__(**{"shape": "x", **case})
        self.unit = unit

    def schedule(
        self, blocks: Any, devices: Any = None, memory: int | None = None, n_micro: int = 4
    ) -> PipelineSchedule:
        t0 = time.perf_counter()
        spec = as_spec(blocks, devices)
        D = len(spec.devices)
        unit = self.unit or max(1, D // 2)
        # the two directions: connected components of the block dependency graph
        comp = list(range(spec.K))

        def find(x):
            while comp[x] != x:
                comp[x] = comp[comp[x]]
                x = comp[x]
            return x

        for j, ps in enumerate(spec.preds):
            for i in ps:
                comp[find(i)] = find(j)
        groups: dict[int, list[int]] = {}
        for i in range(spec.K):
            groups.setdefault(find(i), []).append(i)
        pipes = sorted(groups.values(), key=min)
        multi = [b.name for b in spec.blocks if len(b.devices) > 1]
        if len(pipes) != 2 or multi:
            raise ConfigError(
                f"Chimera needs two independent pipelines in opposite directions of single-device "
                f"blocks (the X shape); {spec.name} has {len(pipes)} pipeline(s)"
                + (f" and distributed blocks {multi}" if multi else "")
            )
        orders: dict[str, list[Item]] = {d: [] for d in spec.devices}
        for u0 in range(0, n_micro, unit):
            ids = list(range(u0, min(n_micro, u0 + unit)))
            tl = _priority_list_schedule(spec, ids)
            for d in spec.devices:
                orders[d] += sorted((it for it in tl if d in spec.block(it[0]).devices), key=lambda it: tl[it])
        start = timeline_from_orders(spec, n_micro, orders)
        return _finish(self.name, spec, n_micro, start, memory, t0, unit=unit)


def _priority_list_schedule(spec: MicroBatchSpec, ids: Sequence[int]) -> dict[Item, int]:
    """Non-delay list schedule of the micro-batches ``ids`` with 1F1B's priority (Chimera's unit): at each step
    the ready block that can start earliest, ties broken backward first, older micro-batch first, deeper block
    first. O(B^2) for B = K x len(ids) blocks."""
    end: dict[Item, int] = {}
    start: dict[Item, int] = {}
    free = {d: 0 for d in spec.devices}
    todo = [(b.name, m) for m in ids for b in spec.blocks]
    while todo:
        best = None
        for it in todo:
            b = spec.block(it[0])
            if not all((p, it[1]) in end for p in b.deps):
                continue
            t = max([free[d] for d in b.devices] + [end[(p, it[1])] for p in b.deps])
            k = (t, b.kind != "backward", it[1], -spec.index[it[0]])
            if best is None or k < best[0]:
                best = (k, it)
        assert best is not None  # the loop runs while items are left, and the earliest one is always chosen
        (t, *_), it = best
        b = spec.block(it[0])
        start[it] = t
        end[it] = t + b.time
        for d in b.devices:
            free[d] = t + b.time
        todo.remove(it)
    return start


# ---------------------------------------------------------------------------------------------------- 1F1B+
def contract_distributed(spec: MicroBatchSpec) -> MicroBatchSpec:
    """The single-device blocks only; dependencies through removed multi-device blocks are bridged."""
    single = [i for i, b in enumerate(spec.blocks) if len(b.devices) == 1]
    keep = set(single)
    anc: list[set[int]] = []
    for j in range(spec.K):  # nearest kept ancestors, in topological order
        s: set[int] = set()
        for i in spec.preds[j]:
            s |= {i} if i in keep else anc[i]
        anc.append(s)
    bl = [
        Block(
            spec.blocks[j].name,
            spec.blocks[j].time,
            spec.blocks[j].memory,
            spec.blocks[j].devices,
            tuple(spec.blocks[i].name for i in sorted(anc[j])),
            spec.blocks[j].kind,
        )
        for j in single
    ]
    return MicroBatchSpec(bl, list(spec.devices), name=spec.name + "-single")


def one_f_one_b_list_schedule(spec: MicroBatchSpec, n_micro: int) -> dict[Item, int]:
    """1F1B as a list-scheduling policy for single-device blocks of any shape.

    Whenever a device is free it starts the ready block of highest priority: backward before forward, older
    micro-batch first; a micro-batch not yet in flight on the device is admitted only while fewer than S - s
    are in flight there (s: the device's stage, S: number of stages). O(B^2).
    """
    st = _stages(spec)
    S = max(st.values()) + 1 if st else 1
    limit = {d: max(1, S - st[d]) for d in spec.devices}
    on = {d: [i for i in spec.on_device(d)] for d in spec.devices}
    left_on = {d: {m: len(on[d]) for m in range(n_micro)} for d in spec.devices}
    inflight: dict[str, set[int]] = {d: set() for d in spec.devices}
    free = {d: 0 for d in spec.devices}
    start: dict[Item, int] = {}
    end: dict[Item, int] = {}
    todo = {d: [(spec.blocks[i].name, m) for m in range(n_micro) for i in on[d]] for d in spec.devices}
    while any(todo.values()):
        best = None
        for d in spec.devices:
            cands = []
            for it in todo[d]:
                b = spec.block(it[0])
                if not all((p, it[1]) in end for p in b.deps):
                    continue
                if it[1] not in inflight[d] and len(inflight[d]) >= limit[d]:
                    continue
                ready = max([end[(p, it[1])] for p in b.deps], default=0)
                cands.append((max(free[d], ready), it))
            if not cands:
                continue
            t = min(c[0] for c in cands)
            pick = min(
                (c for c in cands if c[0] <= t),
                key=lambda c: (spec.block(c[1][0]).kind != "backward", c[1][1], spec.index[c[1][0]]),
            )
            if best is None or (t, spec.devices.index(d)) < best[0]:
                best = ((t, spec.devices.index(d)), d, pick[1])
        if best is None:
            raise ConfigError(f"1F1B policy deadlocked on {spec.name}: in-flight limits too small")
        (t, _), d, it = best
        b = spec.block(it[0])
        start[it] = t
        end[it] = t + b.time
        free[d] = t + b.time
        todo[d].remove(it)
        inflight[d].add(it[1])
        left_on[d][it[1]] -= 1
        if left_on[d][it[1]] == 0:
            inflight[d].discard(it[1])
    return start


def one_f_one_b_plus_orders(spec: MicroBatchSpec, n_micro: int) -> dict[str, list[Item]]:
    """Per-device orders of 1F1B+ (see the module docstring)."""
    core = contract_distributed(spec)
    tl = one_f_one_b_list_schedule(core, n_micro)
    key: dict[Item, tuple] = {}
    roots = {j for j, b in enumerate(spec.blocks) if len(b.devices) > 1 and not b.deps}
    for m in range(n_micro):
        T: dict[int, int] = {}
        for j, b in enumerate(spec.blocks):  # after every non-root predecessor
            if j in roots:
                continue
            after = [T[i] + spec.blocks[i].time for i in spec.preds[j] if i not in roots]
            own = [tl[(b.name, m)]] if len(b.devices) == 1 else []
            T[j] = max(own + after, default=0)
        rank = {}
        for j in sorted(roots, reverse=True):  # distributed roots: right before their first successor
            T[j] = min((T[s] for s in spec.succs[j]), default=0)
            rank[j] = -2
        for j, b in enumerate(spec.blocks):
            key[(b.name, m)] = (T[j], rank.get(j, 0 if len(b.devices) == 1 else -1), j)
    orders: dict[str, list[Item]] = {}
    for d in spec.devices:
        items = [(spec.blocks[i].name, m) for m in range(n_micro) for i in spec.on_device(d)]
        orders[d] = sorted(items, key=lambda it: (key[it], it[1]))
    return orders


def _step_plan_chain(spec: MicroBatchSpec) -> tuple[list[int], dict[int, int]] | None:
    """The forward chain and each forward block's backward block, where the step-based 1F1B+ applies, else None.

    Applies when the forward blocks form one dependency chain, no distributed block is last in it or follows
    another, the single-device forward blocks sit on distinct devices, and the backward blocks mirror the chain:
    the k-th single-device forward block's backward is the one backward block on its device, the k-th
    distributed forward block's the k-th distributed backward block from the end (none in a forward-only
    spec). O(K)."""
    fwd = [i for i, b in enumerate(spec.blocks) if b.kind != "backward"]
    bwd = [i for i, b in enumerate(spec.blocks) if b.kind == "backward"]
    in_fwd = set(fwd)
    for a, b in zip(fwd, fwd[1:]):
        if [j for j in spec.succs[a] if j in in_fwd] != [b] or [j for j in spec.preds[b] if j in in_fwd] != [a]:
            return None
    dist = [i for i in fwd if len(spec.blocks[i].devices) > 1]
    single = [i for i in fwd if len(spec.blocks[i].devices) == 1]
    if not single or (dist and dist[-1] == fwd[-1]) or any(fwd[fwd.index(i) + 1] in dist for i in dist[:-1]):
        return None
    if len({spec.blocks[i].devices[0] for i in single}) != len(single):
        return None
    mirror: dict[int, int] = {}
    if bwd:
        dist_b = [i for i in bwd if len(spec.blocks[i].devices) > 1]
        if len(dist_b) != len(dist):
            return None
        for k, i in enumerate(dist):
            mirror[i] = dist_b[len(dist_b) - 1 - k]
        for i in single:
            on = [j for j in bwd if spec.blocks[j].devices == spec.blocks[i].devices]
            if len(on) != 1:
                return None
            mirror[i] = on[0]
        if len(set(mirror.values())) != len(bwd):
            return None
    return fwd, mirror


def one_f_one_b_plus_step_orders(spec: MicroBatchSpec, n_micro: int) -> dict[str, list[Item]] | None:
    """Per-device orders of 1F1B+ built in global steps (module docstring), or None where it does not apply.

    O(N x T x (S + steps)) for T distributed forward blocks and S stages: every insertion scans the steps."""
    plan = _step_plan_chain(spec)
    if plan is None:
        return None
    fwd, mirror = plan
    stages = [i for i in fwd if len(spec.blocks[i].devices) == 1]
    S, N = len(stages), n_micro
    name = [b.name for b in spec.blocks]
    steps: list[list[Item]] = []
    for t in range(2 * N + 2 * (S - 1)):
        cur: list[Item] = []
        for s, i in enumerate(stages):
            if t < s:
                continue
            k, odd = divmod(t - s, 2)
            if not odd:
                cur.append((name[i], k))
            elif i in mirror and 0 <= k - (S - 1 - s):
                cur.append((name[mirror[i]], k - (S - 1 - s)))
        steps.append([it for it in cur if it[1] < N])
    for m in range(N):
        for i in fwd:
            if len(spec.blocks[i].devices) == 1:
                continue
            nxt = fwd[fwd.index(i) + 1]
            want_f, want_b = (name[nxt], m), (name[mirror[nxt]], m) if i in mirror else None
            done_f, done_b = False, want_b is None
            for t in range(len(steps) - 1, -1, -1):  # insertions at or above t leave the steps below in place
                if want_f in steps[t]:
                    steps.insert(t, [(name[i], m)])
                    done_f = True
                if want_b is not None and want_b in steps[t]:
                    steps.insert(t + 1, [(name[mirror[i]], m)])
                    done_b = True
                if done_f and done_b:
                    break
            if not (done_f and done_b):
                return None
    orders: dict[str, list[Item]] = {d: [] for d in spec.devices}
    for cur in steps:
        for it in cur:
            for d in spec.block(it[0]).devices:
                orders[d].append(it)
    return orders


class OneFOneBPlusScheduler(ConfiguredPipelineScheduler):
    """1F1B+: 1F1B with distributed blocks inserted next to their neighbours (Tessel section VI-A): in global
    steps as the authors' runtime builds it where the placement allows, else our earlier order-based reading
    (module docstring; ``info["insertion"]`` says which)."""

    name = "1f1b_plus"

    def schedule(
        self, blocks: Any, devices: Any = None, memory: int | None = None, n_micro: int = 4
    ) -> PipelineSchedule:
        t0 = time.perf_counter()
        spec = as_spec(blocks, devices)
        orders = one_f_one_b_plus_step_orders(spec, n_micro)
        insertion = "step"
        if orders is None:
            orders, insertion = one_f_one_b_plus_orders(spec, n_micro), "order"
        start = timeline_from_orders(spec, n_micro, orders)
        return _finish(self.name, spec, n_micro, start, memory, t0, insertion=insertion)
