"""The time-optimal (TO) search: Z3 on a set of (block, micro-batch) items, minimising the makespan.

Tessel (Lin et al.) uses it twice: as the search-cost baseline of sections II-B and VI-B (all blocks of N
micro-batches, equation 1) and, in section IV-C, to complete a repetend with its warm-up and cool-down phases.

Encoding (equation 1): one ``z3.Int`` start per item and one makespan ``T``; dependencies inside a micro-batch;
exclusive execution (a disjunction per pair of items sharing a device); memory as a running sum with
``z3.If(s_a <= s_b, m_a, 0)`` from an initial level. The minimal ``T`` is found by binary search with a plain
solver, checking the lower bound first. Complexity: O(log T) checks of a problem with |items| integer
variables and O(|items|^2) disjunctions and ``If`` terms per device.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import z3

from ..errors import InvalidSchedule
from .baselines import ConfiguredPipelineScheduler, as_spec
from .blocks import MicroBatchSpec
from .schedule import PipelineSchedule, validate
from .smt import Budget, budget_from, new_solver

log = logging.getLogger(__name__)

IItem = tuple[int, int]  # (block index, micro-batch)


@dataclass
class SolveResult:
    start: dict[IItem, int] | None
    makespan: int | None
    optimal: bool
    checks: int = 0
    time_s: float = 0.0


def solve_time_optimal(
    spec: MicroBatchSpec,
    items: Sequence[IItem],
    memory: int | None,
    init_memory: dict[str, int] | None = None,
    *,
    symmetry: bool = False,
    sat_only: bool = False,
    budget: Budget | None = None,
    upper: dict[IItem, int] | None = None,
) -> SolveResult:
    """Minimise max(s_B + t_B) over ``items`` under constraints 1-3 of equation 1 (Z3, plain Solver).

    Binary search on the makespan bound T between max(device load, critical path) and the sequential sum of
    times (always enough: running the blocks one by one in the order of any feasible schedule keeps its
    per-device memory order). ``symmetry`` adds Property IV.1 (same block, older micro-batch first). It is valid
    (keeps the optimal makespan) for sets of whole micro-batches and for the warm-up and cool-down sets of
    equations 5 and 6: there block i holds an interval of micro-batch indices, [0, n_i) or (n_i, N_R), with
    n_p >= n_i for each dependency p -> i. Relabelling, block by block in topological order, the instances of
    block i so that the k-th earliest belongs to the k-th micro-batch of its interval changes no device's
    timeline (same time, devices and memory delta) and keeps every dependency: by induction the instances of
    p are already in order, and the k-th earliest instance of i starts after at least k + 1 (warm-up), or
    k + 1 - (n_p - n_i) (cool-down: the n_p - n_i oldest instances of i have their p done before the
    phase), instances of p have ended. ``sat_only`` stops at the first feasible schedule (the lazy search's
    existence check). ``upper``: a feasible schedule of the items (e.g. ``greedy_schedule``'s); the search then
    only looks below its makespan. Every item also gets the implied bounds head_i <= s_i and
    s_i + t_i + tail_i <= T (the longest chains of its micro-batch before and after it among the items).
    Checks run within ``budget`` (Z3 resource units, deterministic; unlimited when None). Returns the best
    schedule found (``optimal`` False if a check ran out of budget).
    """
    t0 = time.perf_counter()
    items = list(items)
    if not items:
        return SolveResult({}, 0, True, 0, 0.0)
    if sat_only and upper is not None:  # a feasible schedule is all that was asked for: no encoding needed
        mk = max(upper[it] + spec.blocks[it[0]].time for it in items)
        return SolveResult(dict(upper), mk, False, 0, time.perf_counter() - t0)
    init = init_memory or {}
    sset = set(items)
    ctx = z3.Context()  # a fresh context per call: Z3 answers do not depend on earlier calls
    sol = new_solver(ctx)
    s = {it: z3.Int(f"s_{spec.blocks[it[0]].name}_{it[1]}", ctx) for it in items}
    T = z3.Int("T", ctx)
    for it in items:
        b = spec.blocks[it[0]]
        sol.add(s[it] >= 0, s[it] + b.time <= T)
        for p in spec.preds[it[0]]:
            if (p, it[1]) in sset:
                sol.add(s[(p, it[1])] + spec.blocks[p].time <= s[it])
    on: dict[str, list[IItem]] = {d: [] for d in spec.devices}
    for it in items:
        for d in spec.blocks[it[0]].devices:
            on[d].append(it)
    pairs = set()
    for d, lst in on.items():
        for x in range(len(lst)):
            for y in range(x + 1, len(lst)):
                a, c = lst[x], lst[y]
                key = (a, c) if a < c else (c, a)
                if key in pairs:
                    continue
                pairs.add(key)
                ta, tc = spec.blocks[a[0]].time, spec.blocks[c[0]].time
                sol.add(z3.Or(s[a] + ta <= s[c], s[c] + tc <= s[a]))
        if memory is not None:
            for b_ in lst:
                terms = [
                    z3.If(s[a] <= s[b_], spec.blocks[a[0]].memory, 0) for a in lst if spec.blocks[a[0]].memory != 0
                ]
                if terms:
                    sol.add(init.get(d, 0) + z3.Sum(terms) <= memory)
    if symmetry:
        by_block: dict[int, list[int]] = {}
        for i, n in items:
            by_block.setdefault(i, []).append(n)
        for i, ns in by_block.items():
            ns.sort()
            for m, n in zip(ns, ns[1:]):
                sol.add(s[(i, m)] + spec.blocks[i].time <= s[(i, n)])
    head: dict[IItem, int] = {}
    for it in sorted(items, key=lambda x: (x[1], x[0])):  # block indices are topological
        head[it] = max(
            (head[(p, it[1])] + spec.blocks[p].time for p in spec.preds[it[0]] if (p, it[1]) in sset), default=0
        )
    tail: dict[IItem, int] = {}
    for it in sorted(items, key=lambda x: (x[1], -x[0])):
        tail[it] = max(
            (tail[(c, it[1])] + spec.blocks[c].time for c in spec.succs[it[0]] if (c, it[1]) in sset), default=0
        )
    for it in items:
        sol.add(s[it] >= head[it], s[it] + spec.blocks[it[0]].time + tail[it] <= T)
    loads = {d: sum(spec.blocks[i].time for i, _ in lst) for d, lst in on.items()}
    fin: dict[IItem, int] = {}
    for it in sorted(items, key=lambda x: (x[1], x[0])):
        fin[it] = (
            max((fin[(p, it[1])] for p in spec.preds[it[0]] if (p, it[1]) in sset), default=0) + spec.blocks[it[0]].time
        )
    lo = max(max(loads.values()), max(fin.values()))
    hi = sum(spec.blocks[i].time for i, _ in items)
    best: dict[IItem, int] | None = None
    best_T: int | None = None
    optimal = True
    checks = 0
    bud = budget if budget is not None else Budget()
    if upper is not None:
        best = dict(upper)
        best_T = max(best[it] + spec.blocks[it[0]].time for it in items)
        hi = best_T - 1

    def check(bound: int):
        nonlocal checks
        checks += 1
        sol.push()
        sol.add(T <= bound)
        r = bud.check(sol)
        model = sol.model() if r == z3.sat else None
        sol.pop()
        return r, model

    def take(model):
        st = {it: model.eval(s[it], model_completion=True).as_long() for it in items}
        return st, max(st[it] + spec.blocks[it[0]].time for it in items)

    if sat_only:
        if best is not None:
            return SolveResult(best, best_T, False, checks, time.perf_counter() - t0)
        r, model = check(hi)
        if r == z3.sat:
            best, best_T = take(model)
            return SolveResult(best, best_T, False, checks, time.perf_counter() - t0)
        return SolveResult(None, None, r == z3.unsat, checks, time.perf_counter() - t0)
    if best_T is not None and best_T <= lo:
        return SolveResult(best, best_T, True, checks, time.perf_counter() - t0)
    r, model = check(lo)
    if r == z3.sat:
        best, best_T = take(model)
        return SolveResult(best, best_T, True, checks, time.perf_counter() - t0)
    if r == z3.unknown:
        optimal = False
    lo += 1
    while lo <= hi:
        if bud.exhausted():
            optimal = False
            break
        mid = hi if best is None else (lo + hi) // 2
        r, model = check(mid)
        if r == z3.sat:
            best, best_T = take(model)
            hi = best_T - 1
        else:
            if r == z3.unknown:
                optimal = False
            if best is None:
                break
            lo = mid + 1
    return SolveResult(best, best_T, optimal, checks, time.perf_counter() - t0)


def greedy_schedule(
    spec: MicroBatchSpec, items: Sequence[IItem], memory: int | None, init_memory: dict[str, int] | None = None
) -> dict[IItem, int] | None:
    """A feasible schedule of ``items`` by list scheduling, or None when it gets stuck on memory.

    Time steps forward; at each step every free device set starts, in (micro-batch, block index) order, the
    ready items (predecessors among the items finished) whose memory delta fits on all their devices. Used as the
    first upper bound of the time-optimal searches (not optimal). O(T x |items|) for makespan T.
    """
    items = sorted(items, key=lambda x: (x[1], x[0]))
    if not items:
        return {}
    sset = set(items)
    mem = {d: (init_memory or {}).get(d, 0) for d in spec.devices}
    busy_until = {d: 0 for d in spec.devices}
    finish: dict[IItem, int] = {}
    start: dict[IItem, int] = {}
    todo = list(items)
    t = 0
    horizon = sum(spec.blocks[i].time for i, _ in items) + 1
    while todo:
        if t > horizon:
            return None
        rest = []
        for it in todo:
            b = spec.blocks[it[0]]
            ok = all(
                (p, it[1]) not in sset or ((p, it[1]) in finish and finish[(p, it[1])] <= t) for p in spec.preds[it[0]]
            )
            ok = ok and all(busy_until[d] <= t for d in b.devices)
            ok = ok and (memory is None or b.memory <= 0 or all(mem[d] + b.memory <= memory for d in b.devices))
            if ok:
                start[it] = t
                finish[it] = t + b.time
                for d in b.devices:
                    busy_until[d] = t + b.time
                    mem[d] += b.memory
            else:
                rest.append(it)
        todo = rest
        t += 1
    return start


class TimeOptimalScheduler(ConfiguredPipelineScheduler):
    """TO: Z3 on all blocks of N micro-batches, minimising the makespan (Tessel sections II-B and VI-B)."""

    name = "to"

    def __init__(
        self,
        check_rlimit: int = 0,
        rlimit_budget: int | None = 400_000_000,
        time_limit_s: float | None = None,
        symmetry: bool = True,
        **case: Any,
    ):
        super().__init__(**{"n_micro": 4, **case})
        self.check_rlimit = int(check_rlimit)
        self.rlimit_budget = rlimit_budget
        self.time_limit_s = time_limit_s
        self.symmetry = symmetry

    def schedule(
        self, blocks: Any, devices: Any = None, memory: int | None = None, n_micro: int = 4
    ) -> PipelineSchedule:
        spec = as_spec(blocks, devices)
        t0 = time.perf_counter()
        items = [(i, m) for m in range(n_micro) for i in range(spec.K)]
        budget = budget_from(self.check_rlimit, self.rlimit_budget, self.time_limit_s)
        r = solve_time_optimal(
            spec,
            items,
            memory,
            None,
            symmetry=self.symmetry,
            budget=budget,
            upper=greedy_schedule(spec, items, memory),
        )
        dt = time.perf_counter() - t0
        if r.start is None:
            raise InvalidSchedule(
                f"TO found no schedule for {spec.name} with N={n_micro} under memory {memory} "
                f"within a budget of {self.rlimit_budget} Z3 resource units"
            )
        start = {(spec.blocks[i].name, m): st for (i, m), st in r.start.items()}
        sched = PipelineSchedule(
            spec,
            n_micro,
            start,
            memory,
            None,
            {
                "scheduler": "to",
                "search_time_s": dt,
                "optimal": r.optimal,
                "timed_out": not r.optimal,
                "z3_checks": r.checks,
                "z3_rlimit_used": budget.used,
                "wall_clock_limit_hit": budget.wall_clock_hit,
            },
        )
        validate(sched, memory)
        return sched
