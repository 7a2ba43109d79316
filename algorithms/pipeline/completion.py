"""A Tessel search result and its concatenation to N micro-batches (Lin et al., section IV-C).

The warm-up, R = N - N_R + 1 copies of the repetend (copy r holds B_i^{n_i + r}) and the cool-down (its
micro-batch indices shifted by R - 1) are placed one after the other, each phase shifted as early as its
dependencies and the devices allow, with every device finishing a phase before starting the next (so the
memory level at each phase entry is exactly the one the search assumed). Every result is validated.
"""

from __future__ import annotations

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
