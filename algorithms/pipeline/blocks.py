"""The block model of one micro-batch (Tessel, section III-A) and the placement shapes of its Figure 8.

A micro-batch is executed as K blocks B_i. Each block has an integer execution time t_B > 0, an integer memory
delta m_B (positive: the block allocates, e.g. stashed activations of a forward block; negative: it frees, e.g. a
backward block), the device or devices it occupies (several devices = tensor parallelism: the block occupies all
of them for its whole span and its memory delta applies to each), and the blocks of the same micro-batch it
waits for. Blocks of different micro-batches never depend on each other (equation 2).

Built-in shapes on D devices ``d0 .. d{D-1}``, as the Tessel authors define them in their public code
(``examples/simulator/cases_tessel.py`` of zhiqi-0/Tessel, class ``Placement``) and the paper's Figures 1 and 8:
forward time 1; the backward of a transformer stage 3 with ``recompute`` (the paper's training setting,
section VI-B), 2 without; a stage's forward +1 memory, its backward -1. docs/tessel.md tabulates them.

- ``V`` (1F1B's placement, Figure 1a): f0..f{D-1} on d0..d{D-1}, then b{D-1}..b0 back.
- ``X`` (Chimera, Figure 1b): two V pipelines in opposite directions; one X micro-batch holds one micro-batch
  of each direction (down: fd_i on d_i; up: fu_i on d_{D-1-i}), so K = 4D.
- ``M`` (GPT with a large embedding over all devices, Figure 1c / 8a): ``emb`` (all devices) -> the stages
  down -> back up -> ``emb_b`` (all devices). The full-device blocks take 1 unit both ways and hold no memory
  (the reference's ``mshape``).
- ``NN`` (mT5, Figure 8d): ``emb_enc`` (all) -> encoder stages on the first floor(D/2) devices -> ``emb_dec``
  (all) -> decoder stages on the others, then the mirror image in backward (``dec.._b`` up, ``emb_dec_b``,
  ``enc.._b`` up, ``emb_enc_b``); full-device blocks as in M (the reference's ``nnshape``).
- ``K`` (Flava, Figure 1d / 8g): text stages on the first floor(D/2) devices and vision stages on the others,
  both down the device order, joined by ``cross`` on all devices (1 unit, +1) and ``cross_b`` (1 unit, -1);
  then each branch's backward (the reference's ``kshape``).

Our earlier readings are kept under their own names: ``m_emb`` and ``nn_emb`` (the embedding blocks keep
activations, +1/-1, and their backward takes 2 units: lower bounds 7 and 10 on 4 devices instead of 6 and 8) and
``k_mid`` (text on the first ceil(D/2) devices, vision from the last device towards the middle, ``cross_b`` a
stage's backward time: lower bound 8 instead of 6).

``blocks_from_placement`` derives a stage-block model from any placer's op -> device assignment.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, InvalidPlacement

log = logging.getLogger(__name__)

SHAPES = ("v", "x", "m", "nn", "k", "m_emb", "nn_emb", "k_mid")


@dataclass(frozen=True)
class Block:
    """One execution block of a micro-batch: name, integer time, memory delta, device(s), dependencies.

    ``deps`` names blocks of the same micro-batch that must finish before this one starts (constraint 3).
    ``kind`` is "forward" or "backward" (for pictures and for the runtime); it does not enter the search.
    """

    name: str
    time: int
    memory: int
    devices: tuple[str, ...]
    deps: tuple[str, ...] = ()
    kind: str = "forward"

    def __post_init__(self):
        if int(self.time) != self.time or self.time <= 0:
            raise ConfigError(f"block {self.name!r}: time must be a positive integer, got {self.time!r}")
        if int(self.memory) != self.memory:
            raise ConfigError(f"block {self.name!r}: memory must be an integer, got {self.memory!r}")
        if not self.devices:
            raise ConfigError(f"block {self.name!r} runs on no device")
        object.__setattr__(self, "devices", tuple(self.devices))
        object.__setattr__(self, "deps", tuple(self.deps))


@dataclass
class MicroBatchSpec:
    """The K blocks of one micro-batch and the devices they use (the input of every pipeline scheduler).

    Blocks are kept in a topological order of their dependencies. ``base_memory`` is the per-device memory that
    is resident whatever the schedule (weights), in the same unit as the block deltas; schedulers ignore it, the
    caller subtracts it from the device capacity. Construction checks names, devices and acyclicity: O(K + E).
    """

    blocks: list[Block]
    devices: list[str]
    name: str = "spec"
    base_memory: dict[str, int] = field(default_factory=dict)
    time_unit_s: float | None = None
    memory_unit_bytes: float | None = None

    def __post_init__(self):
        names = [b.name for b in self.blocks]
        if len(set(names)) != len(names):
            raise ConfigError(f"spec {self.name!r}: duplicate block names")
        known = set(names)
        devs = set(self.devices)
        for b in self.blocks:
            for d in b.devices:
                if d not in devs:
                    raise ConfigError(f"block {b.name!r} runs on unknown device {d!r}; devices: {self.devices}")
            for p in b.deps:
                if p not in known:
                    raise ConfigError(f"block {b.name!r} depends on unknown block {p!r}")
        # topological order (Kahn), stable w.r.t. the given order
        pos = {n: i for i, n in enumerate(names)}
        indeg = {b.name: len(set(b.deps)) for b in self.blocks}
        succ: dict[str, list[str]] = {n: [] for n in names}
        for b in self.blocks:
            for p in set(b.deps):
                succ[p].append(b.name)
        ready = sorted((n for n, k in indeg.items() if k == 0), key=lambda n: pos[n])
        order: list[str] = []
        import heapq

        heap = [(pos[n], n) for n in ready]
        heapq.heapify(heap)
        while heap:
            _, n = heapq.heappop(heap)
            order.append(n)
            for s in succ[n]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    heapq.heappush(heap, (pos[s], s))
        if len(order) != len(names):
            cyc = sorted(set(names) - set(order))
            raise ConfigError(f"spec {self.name!r}: cyclic block dependencies among {cyc}")
        by = {b.name: b for b in self.blocks}
        self.blocks = [by[n] for n in order]
        self.index = {b.name: i for i, b in enumerate(self.blocks)}
        self.preds = [[self.index[p] for p in dict.fromkeys(b.deps)] for b in self.blocks]
        self.succs: list[list[int]] = [[] for _ in self.blocks]
        for j, ps in enumerate(self.preds):
            for i in ps:
                self.succs[i].append(j)

    # ------------------------------------------------------------------ queries
    @property
    def K(self) -> int:
        return len(self.blocks)

    def block(self, name: str) -> Block:
        return self.blocks[self.index[name]]

    def on_device(self, device: str) -> list[int]:
        """Indices of the blocks that occupy ``device``."""
        return [i for i, b in enumerate(self.blocks) if device in b.devices]

    def device_load(self, device: str) -> int:
        """Sum of block times on one device for one micro-batch."""
        return sum(self.blocks[i].time for i in self.on_device(device))

    def lower_bound(self) -> int:
        """GetLowerBound of Algorithm 1: max over devices of one micro-batch's block times there."""
        return max(self.device_load(d) for d in self.devices)

    def critical_path(self) -> int:
        """Longest dependency chain of one micro-batch (sum of times)."""
        fin = [0] * self.K
        for j, b in enumerate(self.blocks):
            fin[j] = max((fin[i] for i in self.preds[j]), default=0) + b.time
        return max(fin, default=0)

    def net_memory(self, device: str) -> int:
        """Memory one whole micro-batch leaves behind on ``device`` (0 for training shapes)."""
        return sum(self.blocks[i].memory for i in self.on_device(device))

    def peak_memory_one(self, device: str) -> int:
        """Peak running sum of one micro-batch's deltas on ``device`` in topological order (at least 0)."""
        run = peak = 0
        for i in self.on_device(device):
            run += self.blocks[i].memory
            peak = max(peak, run)
        return peak

    def max_inflight(self, memory: int | None, cap: int) -> int:
        """CalMaxInflight of Algorithm 1: how many micro-batches' forward memory fit at once (at most ``cap``).

        min over devices of floor(M / peak of one micro-batch there); ``cap`` when memory is unbounded.
        """
        if memory is None:
            return cap
        best = cap
        for d in self.devices:
            p = self.peak_memory_one(d)
            if p > 0:
                best = min(best, memory // p)
        return max(best, 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "devices": list(self.devices),
            "blocks": [
                {
                    "name": b.name,
                    "time": b.time,
                    "memory": b.memory,
                    "devices": list(b.devices),
                    "deps": list(b.deps),
                    "kind": b.kind,
                }
                for b in self.blocks
            ],
        }

    def key(self) -> tuple:
        """Hashable identity (for caching searched schedules)."""
        return (
            tuple(self.devices),
            tuple((b.name, b.time, b.memory, b.devices, tuple(sorted(b.deps))) for b in self.blocks),
        )


# ---------------------------------------------------------------------------------------------- built-in shapes
def _devs(n_devices: int) -> list[str]:
    if n_devices < 1:
        raise ConfigError(f"pipeline.n_devices must be >= 1, got {n_devices}")
    return [f"d{i}" for i in range(n_devices)]


def _chain(blocks: list[Block]) -> list[Block]:
    """Make each block depend on the previous one (keeps explicit deps too)."""
    out = []
    prev = None
    for b in blocks:
        deps = tuple(dict.fromkeys(b.deps + ((prev,) if prev else ())))
        out.append(Block(b.name, b.time, b.memory, b.devices, deps, b.kind))
        prev = b.name
    return out


def reference_memory(shape: str, n_devices: int) -> int:
    """The per-device memory budget (in block memory units) the Tessel authors use for a built-in shape.

    At 4 devices, the budgets of their released search script (``evaluation/search_tessel.sh`` in
    zhiqi-0/Tessel): V 4, X 4, M 6, NN 6, K 6. At other device counts, those of their scaling scripts
    (``evaluation/simu_lazy_scale.sh``, ``simu_fast_scale.sh``): V gets memory = D, M, NN and K get 20. The
    authors do not scale X; we give it D like V (our choice). The ``*_emb`` / ``k_mid`` variants get the budget
    of the shape they vary. O(1).
    """
    s = str(shape).lower()
    base = s.split("_")[0]
    if base not in ("v", "x", "m", "nn", "k"):
        raise ConfigError(f"pipeline.memory=reference: no reference budget for shape {shape!r}")
    D = int(n_devices)
    if base in ("v", "x"):
        return D
    return 6 if D == 4 else 20


def make_shape(
    shape: str, n_devices: int = 4, recompute: bool = False, forward_time: int = 1, memory_per_block: int = 1
) -> MicroBatchSpec:
    """The built-in placement shapes (see the module docstring and docs/tessel.md). O(D)."""
    s = str(shape).lower()
    D = n_devices
    devs = _devs(D)
    tf = int(forward_time)
    tb_layer = (3 if recompute else 2) * tf  # recomputed transformer layers (section VI-B)
    tb_plain = 2 * tf  # embeddings / heads are not recomputed (the *_emb variants)
    mem = int(memory_per_block)
    all_d = tuple(devs)
    suffix = "r" if recompute else ""

    def F(name, devices, m=mem, t=tf):
        return Block(name, t, m, tuple(devices), (), "forward")

    def Bk(name, devices, t, m=mem):
        return Block(name, t, -m, tuple(devices), (), "backward")

    if s == "v":
        fw = [F(f"f{i}", [devs[i]]) for i in range(D)]
        bw = [Bk(f"b{i}", [devs[i]], tb_layer) for i in reversed(range(D))]
        return MicroBatchSpec(_chain(fw + bw), devs, name=f"V{D}{suffix}")
    if s == "x":
        down = _chain(
            [F(f"fd{i}", [devs[i]]) for i in range(D)] + [Bk(f"bd{i}", [devs[i]], tb_layer) for i in reversed(range(D))]
        )
        up = _chain(
            [F(f"fu{i}", [devs[D - 1 - i]]) for i in range(D)]
            + [Bk(f"bu{i}", [devs[D - 1 - i]], tb_layer) for i in reversed(range(D))]
        )
        return MicroBatchSpec(down + up, devs, name=f"X{D}{suffix}")
    if s in ("m", "m_emb"):
        emb = s == "m"  # the reference: the embedding is a span-1, memory-free block both ways
        seq = (
            [F("emb", all_d, 0 if emb else mem)]
            + [F(f"f{i}", [devs[i]]) for i in range(D)]
            + [Bk(f"b{i}", [devs[i]], tb_layer) for i in reversed(range(D))]
            + [Bk("emb_b", all_d, tf if emb else tb_plain, 0 if emb else mem)]
        )
        return MicroBatchSpec(_chain(seq), devs, name=f"{s.upper()}{D}{suffix}")
    if s in ("nn", "nn_emb"):
        if D < 2:
            raise ConfigError(f"the {s.upper()} shape needs at least 2 devices (encoder and decoder stages)")
        ref = s == "nn"
        me, tbe = (0, tf) if ref else (mem, tb_plain)
        h = D // 2  # encoder on d0..d{h-1}, decoder on d{h}..d{D-1}
        seq = (
            [F("emb_enc", all_d, me)]
            + [F(f"enc{i}", [devs[i]]) for i in range(h)]
            + [F("emb_dec", all_d, me)]
            + [F(f"dec{i}", [devs[i]]) for i in range(h, D)]
            + [Bk(f"dec{i}_b", [devs[i]], tb_layer) for i in reversed(range(h, D))]
            + [Bk("emb_dec_b", all_d, tbe, me)]
            + [Bk(f"enc{i}_b", [devs[i]], tb_layer) for i in reversed(range(h))]
            + [Bk("emb_enc_b", all_d, tbe, me)]
        )
        return MicroBatchSpec(_chain(seq), devs, name=f"{s.upper()}{D}{suffix}")
    if s in ("k", "k_mid"):
        if D < 2:
            raise ConfigError(f"the {s.upper()} shape needs at least 2 devices (one per branch)")
        ref = s == "k"
        if ref:  # text on the first floor(D/2) devices, vision on the rest, both down the device order
            nt = D // 2
            text, vision = devs[:nt], devs[nt:]
        else:  # text on the first ceil(D/2) devices, vision from the last device back towards the middle
            nt = math.ceil(D / 2)
            text, vision = devs[:nt], list(reversed(devs[nt:]))
        tf_ = _chain([F(f"t{i}", [d]) for i, d in enumerate(text)])
        vf_ = _chain([F(f"v{i}", [d]) for i, d in enumerate(vision)])
        cross = Block("cross", tf, mem, all_d, (tf_[-1].name, vf_[-1].name), "forward")
        cross_b = Block("cross_b", tf if ref else tb_layer, -mem, all_d, ("cross",), "backward")
        tb_ = _chain([Bk(f"t{i}_b", [text[i]], tb_layer) for i in reversed(range(len(text)))])
        vb_ = _chain([Bk(f"v{i}_b", [vision[i]], tb_layer) for i in reversed(range(len(vision)))])
        tb_[0] = Block(tb_[0].name, tb_[0].time, tb_[0].memory, tb_[0].devices, ("cross_b",), "backward")
        vb_[0] = Block(vb_[0].name, vb_[0].time, vb_[0].memory, vb_[0].devices, ("cross_b",), "backward")
        return MicroBatchSpec(tf_ + vf_ + [cross, cross_b] + tb_ + vb_, devs, name=f"{s.upper()}{D}{suffix}")
    raise ConfigError(f"pipeline.shape={shape!r} is unknown; choose one of {list(SHAPES)} or from_placement")


def inference_spec(spec: MicroBatchSpec) -> MicroBatchSpec:
    """The forward-only (inference) version of a spec: backward blocks dropped, memory deltas set to 0."""
    keep = {b.name for b in spec.blocks if b.kind != "backward"}
    blocks = [
        Block(b.name, b.time, 0, b.devices, tuple(d for d in b.deps if d in keep), b.kind)
        for b in spec.blocks
        if b.name in keep
    ]
    return MicroBatchSpec(blocks, list(spec.devices), name=spec.name + "-inf")


# ---------------------------------------------------------------------------------------- from a real placement
def blocks_from_placement(
    graph: Any,
    placement: Any,
    devices: Sequence[str] | None = None,
    *,
    time_resolution: int = 8,
    memory_resolution: int = 4,
    name: str | None = None,
) -> MicroBatchSpec:
    """Stage blocks of one micro-batch from any placer's op -> device assignment.

    Per device d that holds forward ops: a forward block ``F_d`` (the forward-phase and "other" ops on d) and,
    when d holds backward ops, a backward block ``B_d`` (backward and update ops on d). Times are the summed
    ``compute_s`` scaled to integers so that the longest block is ``time_resolution`` units (every block at
    least 1). Memory deltas: ``F_d`` allocates the ``output_bytes`` of its forward ops (the activations kept for
    backward) and ``B_d`` frees them, scaled so that the largest delta is ``memory_resolution`` units (rounded
    up, so the model never under-estimates). Persistent bytes go to ``base_memory``. Dependencies: an edge from
    an op of block X to an op of block Y gives X -> Y; each ``B_d`` also waits for ``F_d``.

    Raises InvalidPlacement when the blocks would depend on each other cyclically (the placement is not a
    pipeline of stages; e.g. a device holding layers 1 and 3 while another holds layer 2). O(V + E).
    """
    assign = placement.assignment if hasattr(placement, "assignment") else dict(placement)
    g = graph.nx if hasattr(graph, "nx") else graph
    order = list(graph.topological_order()) if hasattr(graph, "topological_order") else list(g.nodes)
    block_of: dict[str, str] = {}
    time_s: dict[str, float] = {}
    mem_b: dict[str, float] = {}
    base: dict[str, float] = {}
    dev_order: list[str] = []
    for op in order:
        a = g.nodes[op]
        d = assign.get(op)
        if d is None:
            raise InvalidPlacement(f"op {op!r} is not placed; a pipeline needs every op on a device")
        phase = a.get("phase", "forward")
        if phase in ("backward", "update"):
            bname = f"B_{d}"
        else:
            bname = f"F_{d}"
            if d not in dev_order:
                dev_order.append(d)
        block_of[op] = bname
        time_s[bname] = time_s.get(bname, 0.0) + float(a.get("compute_s", 0.0) or 0.0)
        if bname.startswith("F_"):
            mem_b[bname] = mem_b.get(bname, 0.0) + float(a.get("output_bytes", 0) or 0)
        base[d] = base.get(d, 0.0) + float(a.get("persistent_bytes", 0) or 0)
    for op in order:
        d = assign[op]
        if d not in dev_order:
            dev_order.append(d)
    if devices is None:
        devices = dev_order
    deps: dict[str, set[str]] = {b: set() for b in time_s}
    for u, v in g.edges():
        bu, bv = block_of[u], block_of[v]
        if bu != bv:
            deps[bv].add(bu)
    for b in list(time_s):
        if b.startswith("B_") and f"F_{b[2:]}" in time_s:
            deps[b].add(f"F_{b[2:]}")
    tmax = max(time_s.values(), default=0.0)
    t_unit = tmax / time_resolution if tmax > 0 else 1.0
    mmax = max(mem_b.values(), default=0.0)
    m_unit = mmax / memory_resolution if mmax > 0 else 1.0
    blocks = []
    for b, t in time_s.items():
        d = b[2:]
        units = max(1, int(round(t / t_unit)))
        fwd = b.startswith("F_")
        m = int(math.ceil(mem_b.get(f"F_{d}", 0.0) / m_unit - 1e-9))
        blocks.append(
            Block(
                b,
                units,
                m if fwd else (-m if f"F_{d}" in time_s else 0),
                (d,),
                tuple(sorted(deps[b])),
                "forward" if fwd else "backward",
            )
        )
    try:
        spec = MicroBatchSpec(
            blocks,
            list(devices),
            name=name or f"{getattr(graph, 'name', 'graph')}-stages",
            base_memory={d: int(math.ceil(base.get(d, 0.0) / m_unit)) for d in devices},
            time_unit_s=t_unit,
            memory_unit_bytes=m_unit,
        )
    except ConfigError as e:
        raise InvalidPlacement(
            f"the placement does not form a pipeline of stages: {e}. Use a placer that "
            f"assigns contiguous stages to devices"
        ) from e
    log.info(
        "blocks_from_placement: %d blocks on %d devices (time unit %.3g s, memory unit %.3g B)",
        spec.K,
        len(devices),
        t_unit,
        m_unit,
    )
    return spec


def spec_from_config(
    shape: str, n_devices: int = 4, recompute: bool = False, *, graph: Any = None, placement: Any = None
) -> MicroBatchSpec:
    """The spec that the keys ``pipeline.shape``/``n_devices``/``recompute`` select (docs/design.md)."""
    if str(shape).lower() == "from_placement":
        if graph is None or placement is None:
            raise ConfigError(
                "pipeline.shape=from_placement needs the graph and a placement (a model and a placer other than none)"
            )
        return blocks_from_placement(graph, placement)
    return make_shape(shape, n_devices, recompute)


def iter_items(spec: MicroBatchSpec, n_micro: int) -> Iterable[tuple[int, int]]:
    """All (block index, micro-batch) pairs of N micro-batches."""
    for n in range(n_micro):
        for i in range(spec.K):
            yield i, n


def by_device(spec: MicroBatchSpec) -> Mapping[str, list[int]]:
    return {d: spec.on_device(d) for d in spec.devices}
