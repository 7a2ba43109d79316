"""A Tessel search result and its concatenation to N micro-batches (Lin et al., section IV-C).

The warm-up, R = N - N_R + 1 copies of the repetend (copy r holds B_i^{n_i + r}) and the cool-down (its
micro-batch indices shifted by R - 1) are placed one after the other, each phase shifted as early as its
dependencies and the devices allow, with every device finishing a phase before starting the next (so the
memory level at each phase entry is exactly the one the search assumed). Then (our addition; the paper
concatenates only) every block is moved as early as its device's order and its inputs allow (``left_shift``):
device orders, hence memory sequences, are unchanged and the makespan can only shrink, closing the gaps the
rigid phase boundaries leave. Every result is validated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from .blocks import MicroBatchSpec
from .schedule import PipelineSchedule, validate

IItem = tuple[int, int]  # (block index, micro-batch)


@dataclass
class TesselResult:
    """What the search found: the repetend (indices, starts, period) and the completion phases."""

    spec: MicroBatchSpec
    memory: int | None
    n_r: int
    assignment: tuple[int, ...]
    starts: list[int]
    period: int
    warmup: dict[IItem, int]
    cooldown: dict[IItem, int]  # cool-down of the N_R-micro-batch schedule (indices n_i < n < N_R)
    lower_bound: int
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def repetend_bubble_rate(self) -> float:
        """Idle share of the devices inside the repetend: 1 - sum of loads / (D x t_R)."""
        busy = sum(self.spec.device_load(d) for d in self.spec.devices)
        return 1.0 - busy / (len(self.spec.devices) * self.period)


def _place_after(spec: MicroBatchSpec, placed: dict[IItem, int], phase: dict[IItem, int]) -> int:
    """Smallest offset >= 0 so ``phase`` (relative starts) follows ``placed`` per device and per dependency."""
    if not phase:
        return 0
    dev_end: dict[str, int] = {}
    for (i, _m), st in placed.items():
        for d in spec.blocks[i].devices:
            dev_end[d] = max(dev_end.get(d, 0), st + spec.blocks[i].time)
    off = 0
    for (i, m), st in phase.items():
        for d in spec.blocks[i].devices:
            off = max(off, dev_end.get(d, 0) - st)
        for p in spec.preds[i]:
            if (p, m) in placed:
                off = max(off, placed[(p, m)] + spec.blocks[p].time - st)
    return off


def extend(result: TesselResult, n_micro: int) -> PipelineSchedule:
    """The schedule for ``n_micro`` >= N_R micro-batches: warm-up, N - N_R + 1 repetends, cool-down. Validated.

    O(N K) plus validation.
    """
    spec, n_r = result.spec, result.n_r
    if n_micro < n_r:
        raise ConfigError(f"extend: n_micro={n_micro} is smaller than the repetend's N_R={n_r}")
    R = n_micro - n_r + 1
    placed: dict[IItem, int] = dict(result.warmup)
    rep = {(i, result.assignment[i] + r): result.starts[i] + r * result.period for r in range(R) for i in range(spec.K)}
    off_r = _place_after(spec, placed, rep)
    for it, st in rep.items():
        placed[it] = st + off_r
    cool = {(i, m + R - 1): st for (i, m), st in result.cooldown.items()}
    off_c = _place_after(spec, placed, cool)
    for it, st in cool.items():
        placed[it] = st + off_c
    mid = R // 2
    window = (off_r + mid * result.period, off_r + (mid + 1) * result.period)
    # compaction (our addition to IV-C): the phases were placed as rigid wholes; moving every block as early as
    # its device order and inputs allow closes the gaps at the phase boundaries without changing any device's
    # order, hence its memory sequence (V on 8 devices, N = 128: 542 -> 540 units, the optimum 4N + 28)
    compact = left_shift(spec, placed)
    anchor = min(((i, result.assignment[i] + mid) for i in range(spec.K)), key=lambda it: placed[it])
    shift = placed[anchor] - compact[anchor]
    window = (window[0] - shift, window[1] - shift)
    placed = compact
    start = {(spec.blocks[i].name, m): st for (i, m), st in placed.items()}
    sched = PipelineSchedule(
        spec,
        n_micro,
        start,
        result.memory,
        window,
        {
            "scheduler": "tessel",
            "n_r": n_r,
            "t_r": result.period,
            "repetend_assignment": list(result.assignment),
            "repetend_bubble_rate": result.repetend_bubble_rate,
            "lower_bound": result.lower_bound,
            **result.stats,
        },
    )
    validate(sched, result.memory)
    return sched


def periodic_phases(
    spec: MicroBatchSpec, n: Sequence[int], starts: Sequence[int], period: int, n_r: int
) -> tuple[dict[IItem, int], dict[IItem, int]]:
    """Warm-up and cool-down cut out of the periodic schedule itself (our completion heuristic).

    Copy r of the repetend (r = -1, -2, .. before it, 1, 2, .. after it) runs B_i^{n_i + r} at s_i + r P. The
    warm-up blocks of equation 5 (m < n_i) are exactly the copies r < 0 cut to m >= 0, the cool-down blocks of
    equation 6 (n_i < m < N_R) the copies r > 0 cut to m < N_R. Both keep the repetend's dependencies and
    exclusive execution, and only lose blocks, i.e. whole micro-batches outside [0, N_R), so their memory stays
    below the steady state's; ``phase_ok`` checks them against the completion's exact constraints before use.
    Returned left-shifted (``left_shift``: same per-device orders, every block as early as possible).
    O(K N_R log(K N_R)).
    """
    warm = {(i, m): starts[i] + (m - n[i]) * period for i in range(spec.K) for m in range(n[i])}
    cool = {(i, m): starts[i] + (m - n[i]) * period for i in range(spec.K) for m in range(n[i] + 1, n_r)}
    return left_shift(spec, warm), left_shift(spec, cool)


def phase_ok(
    spec: MicroBatchSpec, start: dict[IItem, int], memory: int | None, init: dict[str, int] | None = None
) -> bool:
    """Do the items of one phase keep dependencies (within the phase), exclusive execution and memory from
    ``init``? The constraints of equation 1 as the completion's Z3 encoding states them. O(B log B)."""
    for (i, m), st in start.items():
        for p in spec.preds[i]:
            if (p, m) in start and start[(p, m)] + spec.blocks[p].time > st:
                return False
    for d in spec.devices:
        ev = sorted(
            (st, spec.blocks[i].time, spec.blocks[i].memory)
            for (i, _m), st in start.items()
            if d in spec.blocks[i].devices
        )
        end = -(10**18)
        level = (init or {}).get(d, 0)
        for st, t, mem in ev:
            if st < end:
                return False
            end = st + t
            level += mem
            if memory is not None and level > memory:
                return False
    return True


def left_shift(spec: MicroBatchSpec, start: dict[IItem, int]) -> dict[IItem, int]:
    """Every item as early as its predecessors and the previous items on its devices allow, in the order of
    ``start``. Keeps each device's order, hence its memory sequence (the running sum depends on the order
    only), dependencies and exclusive execution: a feasible phase stays feasible and never gets longer.
    O(B log B)."""
    free = {d: 0 for d in spec.devices}
    out: dict[IItem, int] = {}
    for (i, m), _st in sorted(start.items(), key=lambda kv: (kv[1], kv[0][0], kv[0][1])):
        b = spec.blocks[i]
        t = max(
            [free[d] for d in b.devices] + [out[(p, m)] + spec.blocks[p].time for p in spec.preds[i] if (p, m) in out]
        )
        out[(i, m)] = t
        for d in b.devices:
            free[d] = t + b.time
    return out
