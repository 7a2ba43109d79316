"""Tessel's schedule search (Lin et al., "Tessel: Boosting Distributed Execution of Large DNN Models via Flexible
Schedule Search", sections IV-B, IV-C and V) and the time-optimal (TO) baseline it is compared with.

Search (Algorithm 1):

1. Lower bound (GetLowerBound): the largest per-device sum of one micro-batch's block times. In-flight limit
   (CalMaxInflight): floor(M / peak memory of one micro-batch) on the tightest device, capped by
   ``max_repetend_micro`` (default D + 2, the paper's schedules use up to 6 micro-batches on 4 devices).
2. For N_R = 1 .. limit, every index assignment n_0..n_{K-1} in [0, N_R) (equation 3) that
   - satisfies Property IV.2 (n_i >= n_j whenever B_i -> B_j inside a micro-batch),
   - is canonical under Property IV.1's micro-batch symmetry (smallest index 0) and new at this N_R (largest
     index N_R - 1; smaller ones were seen with a smaller N_R),
   - fits the memory at repetend entry: the warm-up executed before it (equation 5) leaves
     E_d = sum_i n_i m_i on device d, which must be <= M,
   is a candidate repetend. Candidates are ranked by a cheap dependency-only bound on their period (a longest
   path pass over the difference constraints below), and examined in that order while that bound is below the
   best t_R found so far.
3. RepetendSolver (Z3, section V): one ``z3.Int`` start s_i per block and one ``z3.Int`` period P; the
   repetend repeats every P with every micro-batch index one higher. Constraints: 0 <= s_i < P and some
   s_i = 0 (a rotation of the window that keeps the assignment); dependencies s_i + t_i <= s_j + (n_i - n_j) P
   (the same micro-batch sits n_i - n_j repetends earlier for B_i than for B_j); exclusive execution on every
   device modulo P (two blocks do not overlap, nor does either overlap the other's copy one period later —
   the compaction of Figure 6: a frontier block of the next repetend may use idle time at the end of this
   one); memory as a running sum with ``z3.If(s_a <= s_b, m_a, 0)`` from the entry level E_d (constraint 2).
   The minimal P is found by binary search with a plain ``z3.Solver`` (check at the lower bound first).
4. RepetendTime: t_R = max_d (E_R^d + W_R^d) (equation 4), computed from the solved repetend by compaction:
   the smallest shift at which copies of the repetend, each one micro-batch later, keep dependencies,
   exclusive execution and memory (checked on a few consecutive copies). E_R^d is the span of the repetend's
   blocks on d and W_R^d = t_R - E_R^d (negative when the next repetend starts inside this one's tail).
5. Schedule completion (IV-C): warm-up blocks {B_i^n : n < n_i} (eq. 5) and cool-down blocks
   {B_i^n : n_i < n < N_R} (eq. 6) are each scheduled time-optimally (Z3, binary search on the makespan,
   equation 1) under M, the cool-down starting from the memory the warm-up and repetend leave. With ``lazy``
   (section V's lazy search) only their satisfiability is checked while repetends are scanned, and the
   time-optimal searches run once, for the best repetend. Both phases get Property IV.1's symmetry constraints (same
   block, older micro-batch first; our addition, proven not to change the optimum in ``solve_time_optimal``):
   on NN it cut the cool-down search from over 60 s to 3 s and M's whole search from ~18 s to ~2.5 s. A phase
   whose optimality is not proven within ``check_timeout_s`` per check keeps its best schedule found and
   records ``optimal_completion`` False (NN's 34-block warm-up: makespan 27 found, 25 refuted, 26 undecided).
6. Early exit when t_R reaches the lower bound.

Concatenation and extension to N micro-batches: the warm-up, R = N - N_R + 1 copies of the repetend (copy r
holds B_i^{n_i + r}) and the cool-down (its micro-batch indices shifted by R - 1) are placed one after the
other, each phase shifted as early as its dependencies and the devices allow, with every device finishing a
phase before starting the next (so the memory level at each phase entry is exactly the one the search
assumed). For N < N_R the TO search is used on the N micro-batches instead. Every result is validated.

Choices where the paper is vague:

- The repetend's blocks start inside its window [0, P) and the Z3 objective is that window period with the
  wrap-around of step 3, i.e. compaction between neighbouring repetends is inside the encoding. RepetendTime
  then compacts the solved repetend once more: copies may interleave further than with the neighbour only
  (e.g. on the V shape the N_R = 1 repetend, solved with a long window, compacts to 1F1B's period). t_R is
  that compacted shift; so a candidate may end up better than its window period, and the ranking/pruning of
  candidates by the window bound is a heuristic order, not an exact bound on t_R.
- The window origin is fixed by requiring some block to start at 0.
- A Z3 check that times out counts as "not shown feasible": the search keeps the best proven schedule and
  records ``optimal_repetend``/``optimal_completion`` False and ``timed_out`` when the scan limit was hit.
- A spec whose micro-batch leaves memory behind on a device (net delta > 0) cannot be repeated indefinitely;
  the search then refuses N_R > 1.
- ``assignments``: "enumerate" is Algorithm 1 as written (every pruned assignment, one RepetendSolver call
  each); "smt" (our extension) folds the assignment into Z3 as integer variables with Property IV.2 as
  constraints, which finds the same best repetend per N_R without visiting candidates one by one; "auto" (the
  default) enumerates while an N_R has at most ``enumerate_limit`` candidates and uses "smt" above that,
  falling back to the enumeration for that N_R when a Z3 check over all assignments times out.
- Concatenation keeps phases apart per device (a device finishes its warm-up blocks before its first repetend
  block), so every phase starts from exactly the memory level the search assumed.

Complexity: the number of candidate repetends is at most C(K + N_R - 1, N_R - 1) per N_R (far fewer with
IV.2 on chains), each solved by O(log t) satisfiability checks of an SMT problem with K integer variables,
O(K^2) disjunctions and O(K^2) ``If`` terms; the completion solves O(log T) checks on N_R K variables.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import z3
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from ..errors import ConfigError, InvalidSchedule
from .baselines import ConfiguredPipelineScheduler, as_spec
from .blocks import MicroBatchSpec
from .schedule import PipelineSchedule, validate

log = logging.getLogger(__name__)

IItem = tuple[int, int]  # (block index, micro-batch)


# ------------------------------------------------------------------------------------------- time-optimal solver
@dataclass
class SolveResult:
    start: dict[IItem, int] | None
    makespan: int | None
    optimal: bool
    checks: int = 0
    time_s: float = 0.0


SOLVER_LOGIC: str | None = None  # None: z3.Solver(); e.g. "QF_LIA": z3.SolverFor(logic), also a plain solver


def _new_solver() -> z3.Solver:
    return z3.Solver() if SOLVER_LOGIC is None else z3.SolverFor(SOLVER_LOGIC)


def _remaining(deadline: float | None, per_check_s: float) -> int:
    """Milliseconds a Z3 check may use (at least 1)."""
    t = per_check_s
    if deadline is not None:
        t = min(t, deadline - time.perf_counter())
    return max(1, int(t * 1000))


def solve_time_optimal(
    spec: MicroBatchSpec,
    items: Sequence[IItem],
    memory: int | None,
    init_memory: dict[str, int] | None = None,
    *,
    symmetry: bool = False,
    sat_only: bool = False,
    check_timeout_s: float = 30.0,
    deadline: float | None = None,
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
    existence check). Returns the best schedule found (``optimal`` False if a check timed out).
    """
    t0 = time.perf_counter()
    items = list(items)
    if not items:
        return SolveResult({}, 0, True, 0, 0.0)
    init = init_memory or {}
    sset = set(items)
    s = {it: z3.Int(f"s_{spec.blocks[it[0]].name}_{it[1]}") for it in items}
    T = z3.Int("T")
    sol = _new_solver()
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

    def check(bound: int):
        nonlocal checks
        checks += 1
        sol.set("timeout", _remaining(deadline, check_timeout_s))
        sol.push()
        sol.add(T <= bound)
        r = sol.check()
        model = sol.model() if r == z3.sat else None
        sol.pop()
        return r, model

    def take(model):
        st = {it: model.eval(s[it], model_completion=True).as_long() for it in items}
        return st, max(st[it] + spec.blocks[it[0]].time for it in items)

    if sat_only:
        r, model = check(hi)
        if r == z3.sat:
            best, best_T = take(model)
            return SolveResult(best, best_T, False, checks, time.perf_counter() - t0)
        return SolveResult(None, None, r == z3.unsat, checks, time.perf_counter() - t0)
    r, model = check(lo)
    if r == z3.sat:
        best, best_T = take(model)
        return SolveResult(best, best_T, True, checks, time.perf_counter() - t0)
    if r == z3.unknown:
        optimal = False
    lo += 1
    while lo <= hi:
        if deadline is not None and time.perf_counter() >= deadline:
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


# --------------------------------------------------------------------------------------------- repetends
def iter_repetend_assignments(spec: MicroBatchSpec, n_r: int):
    """IterRepetendBlocks: index assignments for N_R micro-batches pruned by Properties IV.1 and IV.2.

    Blocks are visited in topological order; block j may take 0 .. min over its predecessors' indices
    (IV.2), roots 0 .. N_R - 1. Only assignments using both 0 and N_R - 1 are yielded (IV.1 symmetry, and the
    smaller N_R already covered the rest).
    """
    K = spec.K
    n = [0] * K

    def rec(j: int, hi_seen: int):
        if j == K:
            if hi_seen == n_r - 1 and min(n) == 0:
                yield tuple(n)
            return
        top = min((n[p] for p in spec.preds[j]), default=n_r - 1)
        for v in range(top, -1, -1):
            n[j] = v
            yield from rec(j + 1, max(hi_seen, v))

    yield from rec(0, -1)


def entry_memory(spec: MicroBatchSpec, n: Sequence[int]) -> dict[str, int]:
    """E_d: memory the warm-up (equation 5) leaves on each device at repetend entry."""
    out = {d: 0 for d in spec.devices}
    for i, b in enumerate(spec.blocks):
        for d in b.devices:
            out[d] += n[i] * b.memory
    return out


def dependency_period_ok(
    spec: MicroBatchSpec, n: Sequence[int], p: int, energetic: bool = True, pin_first: bool = False
) -> bool:
    """Necessary condition for a repetend with period ``p`` and starts in [0, p): O(K + E + sum_d K_d^3).

    Earliest starts by a longest-path pass over the periodic dependency constraints
    s_j >= s_i + t_i - (n_i - n_j) p, latest starts by the reverse pass from s <= p - 1; then, with
    ``energetic``, for every device and every window [a, b) between an earliest start and a latest end, the
    blocks that must run inside it have to fit (energetic reasoning; blocks of one device cannot overlap on the
    line either). Monotone in p, so a binary search finds the smallest p that passes.
    """
    K = spec.K
    est = [0] * K
    for j in range(K):
        for i in spec.preds[j]:
            v = est[i] + spec.blocks[i].time - (n[i] - n[j]) * p
            if v > est[j]:
                est[j] = v
        if est[j] > p - 1:
            return False
    if not energetic:
        return True
    lst = [p - 1] * K
    if pin_first:
        lst[0] = 0  # only valid when the solver also pins block 0 to the window start
    for i in reversed(range(K)):
        for j in spec.succs[i]:
            v = lst[j] - spec.blocks[i].time + (n[i] - n[j]) * p
            if v < lst[i]:
                lst[i] = v
        if lst[i] < est[i]:
            return False
    for d in spec.devices:
        idx = spec.on_device(d)
        if len(idx) < 2:
            continue
        lct = {i: lst[i] + spec.blocks[i].time for i in idx}
        for a in {est[i] for i in idx}:
            for b in {lct[i] for i in idx}:
                if b <= a:
                    continue
                need = sum(spec.blocks[i].time for i in idx if est[i] >= a and lct[i] <= b)
                if need > b - a:
                    return False
    return True


def dependency_period_bound(spec: MicroBatchSpec, n: Sequence[int], lo: int, hi: int) -> int | None:
    """Smallest p in [lo, hi] passing ``dependency_period_ok`` (monotone in p), None if none."""
    if not dependency_period_ok(spec, n, hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if dependency_period_ok(spec, n, mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _add_exclusive_modulo(
    sol: z3.Solver, spec: MicroBatchSpec, idx: Sequence[int], s: Sequence[Any], period: Any
) -> None:
    """Exclusive execution inside a repetend of length `period`: for every pair of blocks on one device, one
    ends before the other starts and, wrapped around by one period, still ends before the first restarts."""
    for x in range(len(idx)):
        for y in range(x + 1, len(idx)):
            a, c = idx[x], idx[y]
            ta, tc = spec.blocks[a].time, spec.blocks[c].time
            sol.add(
                z3.Or(
                    z3.And(s[a] + ta <= s[c], s[c] + tc <= s[a] + period),
                    z3.And(s[c] + tc <= s[a], s[a] + ta <= s[c] + period),
                )
            )


def solve_repetend(
    spec: MicroBatchSpec,
    n: Sequence[int],
    memory: int | None,
    lo: int,
    hi: int,
    *,
    check_timeout_s: float = 10.0,
    deadline: float | None = None,
) -> tuple[list[int] | None, int | None, int, bool]:
    """RepetendSolver: smallest period P in [lo, hi] with a repetend schedule (module docstring, step 3).

    Returns (starts, P, number of checks, proven optimal).
    """
    K = spec.K
    s = [z3.Int(f"r_{b.name}") for b in spec.blocks]
    P = z3.Int("P")
    sol = _new_solver()
    for i, b in enumerate(spec.blocks):
        sol.add(s[i] >= 0, s[i] <= P - 1)
    sol.add(z3.Or([si == 0 for si in s]))
    for j in range(K):
        for i in spec.preds[j]:
            sol.add(s[i] + spec.blocks[i].time <= s[j] + (n[i] - n[j]) * P)
    E = entry_memory(spec, n)
    for d in spec.devices:
        idx = spec.on_device(d)
        _add_exclusive_modulo(sol, spec, idx, s, P)
        if memory is not None:
            for b_ in idx:
                terms = [z3.If(s[a] <= s[b_], spec.blocks[a].memory, 0) for a in idx if spec.blocks[a].memory]
                if terms:
                    sol.add(E[d] + z3.Sum(terms) <= memory)
    checks = 0
    optimal = True
    best: list[int] | None = None
    best_p: int | None = None

    def check(bound: int):
        nonlocal checks
        checks += 1
        sol.set("timeout", _remaining(deadline, check_timeout_s))
        sol.push()
        sol.add(P <= bound)
        r = sol.check()
        res = None
        if r == z3.sat:
            m = sol.model()
            res = ([m.eval(x, model_completion=True).as_long() for x in s], m.eval(P, model_completion=True).as_long())
        sol.pop()
        return r, res

    # a candidate that cannot beat ``hi`` is rejected by one check; otherwise bisect below what was found
    r, res = check(hi)
    if r != z3.sat:
        return None, None, checks, r == z3.unsat
    best, best_p = res
    hi = best_p - 1
    while lo <= hi:
        if deadline is not None and time.perf_counter() >= deadline:
            optimal = False
            break
        mid = lo if lo == spec.lower_bound() and best_p > lo else (lo + hi) // 2
        r, res = check(mid)
        if r == z3.sat:
            best, best_p = res
            hi = best_p - 1
        else:
            if r == z3.unknown:
                optimal = False
            lo = mid + 1
    return best, best_p, checks, optimal


def _periodic_ok(spec: MicroBatchSpec, n: Sequence[int], starts: Sequence[int], delta: int, memory: int | None) -> bool:
    """Do copies of the repetend shifted by ``delta`` (indices +1 each) keep constraints 1-3?"""
    span = max(st + b.time for st, b in zip(starts, spec.blocks)) - min(starts)
    copies = 2 + span // delta + 2
    for j in range(spec.K):  # dependencies: B_i^{m} is in copy r_i = m - n_i
        for i in spec.preds[j]:
            if starts[i] + spec.blocks[i].time > starts[j] + (n[i] - n[j]) * delta:
                return False
    E = entry_memory(spec, n)
    for d in spec.devices:
        idx = spec.on_device(d)
        ev = sorted(
            (starts[i] + r * delta, spec.blocks[i].time, spec.blocks[i].memory) for r in range(copies) for i in idx
        )
        end = -(10**18)
        run = E[d]
        for st, t, m in ev:
            if st < end:
                return False
            end = st + t
            run += m
            if memory is not None and run > memory:
                return False
    return True


def repetend_time(
    spec: MicroBatchSpec, n: Sequence[int], starts: Sequence[int], memory: int | None, upper: int
) -> tuple[int, dict[str, int], dict[str, int]]:
    """RepetendTime: t_R = max_d (E_R^d + W_R^d) with compaction (equation 4, Figure 6).

    Returns (t_R, E_R per device, W_R per device). O(t_R x K^2 / t_min).
    """
    lb = spec.lower_bound()
    t_r = upper
    for delta in range(lb, upper + 1):
        if _periodic_ok(spec, n, starts, delta, memory):
            t_r = delta
            break
    E_R, W_R = {}, {}
    for d in spec.devices:
        idx = spec.on_device(d)
        if not idx:
            E_R[d], W_R[d] = 0, t_r
            continue
        E_R[d] = max(starts[i] + spec.blocks[i].time for i in idx) - min(starts[i] for i in idx)
        W_R[d] = t_r - E_R[d]
    return t_r, E_R, W_R


# --------------------------------------------------------------------------------------------- result and extension
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
    for (i, m), st in placed.items():
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


# --------------------------------------------------------------------------------------------- the schedulers
class TesselScheduler(ConfiguredPipelineScheduler):
    """Tessel: repetend construction + schedule completion with Z3 (Lin et al., sections IV-V)."""

    name = "tessel"

    def __init__(
        self,
        max_repetend_micro: int | None = None,
        lazy: bool = True,
        time_limit_s: float = 120.0,
        check_timeout_s: float = 10.0,
        completion_timeout_s: float = 60.0,
        fallback_time_limit_s: float = 60.0,
        assignments: str = "auto",
        enumerate_limit: int = 300,
        **case: Any,
    ):
        super().__init__(**case)
        if assignments not in ("auto", "enumerate", "smt"):
            raise ConfigError(f"tessel: assignments={assignments!r}; choose auto, enumerate or smt")
        self.assignments = assignments
        self.enumerate_limit = enumerate_limit
        self.max_repetend_micro = max_repetend_micro
        self.lazy = lazy
        self.time_limit_s = time_limit_s
        self.check_timeout_s = check_timeout_s
        self.completion_timeout_s = completion_timeout_s
        self.fallback_time_limit_s = fallback_time_limit_s
        self._cache: dict[tuple, TesselResult] = {}

    # ------------------------------------------------------------------ Algorithm 1
    def search(self, blocks: Any, memory: int | None = None, devices: Any = None) -> TesselResult:
        """Algorithm 1 with the lazy search of section V. Cached per (spec, memory)."""
        spec = as_spec(blocks, devices)
        ck = (spec.key(), memory, self.max_repetend_micro, self.lazy, self.assignments, self.enumerate_limit)
        if ck in self._cache:
            return self._cache[ck]
        t0 = time.perf_counter()
        deadline = t0 + self.time_limit_s
        D = len(spec.devices)
        lb = spec.lower_bound()
        optimal_t = sum(b.time for b in spec.blocks) + 1  # upper bound of Algorithm 1, line 1-4
        cap = self.max_repetend_micro or (D + 2)
        inflight = spec.max_inflight(memory, cap)
        if inflight < 1:
            raise ConfigError(
                f"pipeline.memory={memory} cannot hold even one micro-batch of {spec.name} "
                f"(peak per device {[spec.peak_memory_one(d) for d in spec.devices]})"
            )
        if any(spec.net_memory(d) > 0 for d in spec.devices):
            log.warning("tessel: a micro-batch of %s leaves memory behind; repetends limited to N_R = 1", spec.name)
            inflight = 1
        best: tuple | None = None  # (t_R, n, starts, N_R, warm, cool, cool_init, E_R, W_R)
        stats = {
            "candidates": 0,
            "z3_repetend_checks": 0,
            "repetends_solved": 0,
            "completion_checks": 0,
            "time_repetend_s": 0.0,
            "time_warmup_s": 0.0,
            "time_cooldown_s": 0.0,
            "early_exit": False,
            "timed_out": False,
            "optimal_repetend": True,
            "assignment_search": {},
        }
        state = {"best_t": optimal_t}
        done = False
        scan = tqdm(range(1, inflight + 1), desc="tessel: repetend scan (N_R)", unit="N_R", disable=None, leave=False)
        with scan, logging_redirect_tqdm():
            for n_r in scan:
                if done:
                    break
                mode = self.assignments
                if mode == "auto":
                    cnt = 0
                    for _ in iter_repetend_assignments(spec, n_r):
                        cnt += 1
                        if cnt > self.enumerate_limit:
                            break
                    mode = "enumerate" if cnt <= self.enumerate_limit else "smt"
                stats["assignment_search"][n_r] = mode
                source = (
                    self._enumerated(spec, n_r, memory, lb, state, deadline, stats)
                    if mode == "enumerate"
                    else self._smt_assignments(spec, n_r, memory, lb, state, deadline, stats)
                )
                while True:
                    tr0 = time.perf_counter()
                    try:
                        n, starts, p = next(source)
                    except StopIteration:
                        stats["time_repetend_s"] += time.perf_counter() - tr0
                        if mode == "smt" and stats.get("smt_unknown") == n_r and self.assignments == "auto":
                            # a Z3 check over all assignments timed out: fall back to visiting them one by one
                            log.info("tessel: N_R=%d assignment SMT undecided, enumerating instead", n_r)
                            mode = "enumerate"
                            stats["assignment_search"][n_r] = "smt+enumerate"
                            source = self._enumerated(spec, n_r, memory, lb, state, deadline, stats)
                            continue
                        break
                    t_r, E_R, W_R = repetend_time(spec, n, starts, memory, p)
                    stats["time_repetend_s"] += time.perf_counter() - tr0
                    if t_r >= state["best_t"]:
                        continue
                    warm_items = [(i, m) for i in range(spec.K) for m in range(n[i])]
                    cool_items = [(i, m) for i in range(spec.K) for m in range(n[i] + 1, n_r)]
                    cool_init = {
                        d: sum((n[i] + 1) * spec.blocks[i].memory for i in spec.on_device(d)) for d in spec.devices
                    }
                    tw = time.perf_counter()
                    w = solve_time_optimal(
                        spec,
                        warm_items,
                        memory,
                        None,
                        sat_only=self.lazy,
                        symmetry=True,
                        check_timeout_s=self.check_timeout_s,
                        deadline=deadline,
                    )
                    stats["time_warmup_s"] += time.perf_counter() - tw
                    tc = time.perf_counter()
                    c = solve_time_optimal(
                        spec,
                        cool_items,
                        memory,
                        cool_init,
                        sat_only=self.lazy,
                        symmetry=True,
                        check_timeout_s=self.check_timeout_s,
                        deadline=deadline,
                    )
                    stats["time_cooldown_s"] += time.perf_counter() - tc
                    stats["completion_checks"] += w.checks + c.checks
                    if w.start is None or c.start is None:
                        log.info("tessel: repetend %s (t_R=%d) has no feasible warm-up/cool-down", n, t_r)
                        continue
                    state["best_t"] = t_r
                    best = (t_r, n, starts, n_r, w.start, c.start, cool_init, E_R, W_R)
                    log.info("tessel: N_R=%d repetend %s t_R=%d (lower bound %d)", n_r, n, t_r, lb)
                    if t_r == lb:
                        stats["early_exit"] = True
                        done = True
                        break
                if time.perf_counter() >= deadline:
                    stats["timed_out"] = True
                    break
        if best is None:
            raise InvalidSchedule(
                f"tessel found no schedule for {spec.name} under memory {memory} within {self.time_limit_s}s"
            )
        t_r, n, starts, n_r, warm, cool, cool_init, E_R, W_R = best
        if self.lazy:  # time-optimal completion, once, for the best repetend
            comp_deadline = time.perf_counter() + self.completion_timeout_s
            tw = time.perf_counter()
            w = solve_time_optimal(
                spec,
                list(warm),
                memory,
                None,
                symmetry=True,
                check_timeout_s=self.check_timeout_s,
                deadline=comp_deadline,
            )
            stats["time_warmup_s"] += time.perf_counter() - tw
            tc = time.perf_counter()
            c = solve_time_optimal(
                spec,
                list(cool),
                memory,
                cool_init,
                symmetry=True,
                check_timeout_s=self.check_timeout_s,
                deadline=comp_deadline,
            )
            stats["time_cooldown_s"] += time.perf_counter() - tc
            stats["completion_checks"] += w.checks + c.checks
            stats["optimal_completion"] = bool(w.optimal and c.optimal)
            if w.start is not None:
                warm = w.start
            if c.start is not None:
                cool = c.start
        stats["search_time_s"] = time.perf_counter() - t0
        stats["E_R"] = E_R
        stats["W_R"] = W_R
        res = TesselResult(spec, memory, n_r, tuple(n), list(starts), t_r, dict(warm), dict(cool), lb, stats)
        log.info(
            "tessel: %s done in %.2fs: N_R=%d t_R=%d lb=%d (%d candidates, %d solved)",
            spec.name,
            stats["search_time_s"],
            n_r,
            t_r,
            lb,
            stats["candidates"],
            stats["repetends_solved"],
        )
        self._cache[ck] = res
        return res

    # ------------------------------------------------------------------ candidate sources
    def _enumerated(self, spec, n_r, memory, lb, state, deadline, stats):
        """IterRepetendBlocks + RepetendSolver per candidate (Algorithm 1, lines 7-10).

        Yields (n, starts, P) for every candidate that beats the best t_R so far. Candidates are ranked by
        ``dependency_period_bound`` and abandoned once that bound reaches the best t_R so far.
        """
        cands = []
        for n in iter_repetend_assignments(spec, n_r):
            E = entry_memory(spec, n)
            if memory is not None and max(E.values()) > memory:
                continue
            pb = dependency_period_bound(spec, n, lb, state["best_t"] - 1)
            if pb is None:
                continue
            cands.append((pb, sum(E.values()), n))
        cands.sort()
        stats["candidates"] += len(cands)
        log.info("tessel: N_R=%d, %d candidate repetends", n_r, len(cands))
        for pb, _, n in cands:
            if time.perf_counter() >= deadline:
                stats["timed_out"] = True
                return
            if pb >= state["best_t"]:
                return
            starts, p, checks, opt = solve_repetend(
                spec,
                n,
                memory,
                max(pb, lb),
                state["best_t"] - 1,
                check_timeout_s=self.check_timeout_s,
                deadline=deadline,
            )
            stats["z3_repetend_checks"] += checks
            stats["repetends_solved"] += 1
            stats["optimal_repetend"] &= opt
            if starts is not None:
                yield tuple(n), starts, p

    def _smt_assignments(self, spec, n_r, memory, lb, state, deadline, stats):
        """The same search with the index assignment folded into Z3 (our extension for large K x N_R).

        n_i become ``z3.Int`` variables in [0, N_R) with Property IV.2 (n_i >= n_j for B_i -> B_j) and the
        entry memory E_d = sum n_i m_i as a linear term; for a fixed period p all constraints of
        ``solve_repetend`` stay linear, so a binary search on p with a plain Solver finds the best repetend
        over all assignments at once. A rejected or yielded assignment is excluded by a blocking clause and the
        search resumes below the best t_R. Same result set as the enumeration, without visiting candidates one
        by one.
        """
        K = spec.K
        nv = [z3.Int(f"n_{b.name}") for b in spec.blocks]
        sv = [z3.Int(f"s_{b.name}") for b in spec.blocks]
        sol = _new_solver()
        for i in range(K):
            sol.add(nv[i] >= 0, nv[i] <= n_r - 1, sv[i] >= 0)
            for j in spec.succs[i]:
                sol.add(nv[i] >= nv[j])
        sol.add(z3.Or([x == 0 for x in nv]), z3.Or([x == n_r - 1 for x in nv]))
        sol.add(z3.Or([x == 0 for x in sv]))
        if memory is not None:
            for d in spec.devices:
                idx = spec.on_device(d)
                entry = z3.Sum([nv[i] * spec.blocks[i].memory for i in idx if spec.blocks[i].memory] or [z3.IntVal(0)])
                sol.add(entry <= memory)
                for b_ in idx:
                    terms = [z3.If(sv[a] <= sv[b_], spec.blocks[a].memory, 0) for a in idx if spec.blocks[a].memory]
                    if terms:
                        sol.add(entry + z3.Sum(terms) <= memory)

        def check(p: int):
            stats["z3_repetend_checks"] += 1
            sol.set("timeout", _remaining(deadline, self.check_timeout_s))
            sol.push()
            for i in range(K):
                sol.add(sv[i] <= p - 1)
                for j in spec.succs[i]:
                    sol.add(sv[i] + spec.blocks[i].time <= sv[j] + (nv[i] - nv[j]) * p)
            for d in spec.devices:
                _add_exclusive_modulo(sol, spec, spec.on_device(d), sv, p)
            r = sol.check()
            res = None
            if r == z3.sat:
                m = sol.model()
                res = (
                    tuple(m.eval(x, model_completion=True).as_long() for x in nv),
                    [m.eval(x, model_completion=True).as_long() for x in sv],
                )
            elif r == z3.unknown:
                stats["optimal_repetend"] = False
                stats["smt_unknown"] = n_r
            sol.pop()
            return res

        while time.perf_counter() < deadline:
            hi = state["best_t"] - 1
            if hi < lb:
                return
            found = check(hi)
            if found is None:
                return
            best_p = hi
            lo = lb
            hi = hi - 1
            while lo <= hi and time.perf_counter() < deadline:
                mid = lo if lo == lb else (lo + hi) // 2
                r = check(mid)
                if r is not None:
                    found, best_p = r, mid
                    hi = mid - 1
                else:
                    lo = mid + 1
            n, starts = found
            stats["candidates"] += 1
            stats["repetends_solved"] += 1
            yield n, starts, best_p
            sol.add(z3.Or([nv[i] != n[i] for i in range(K)]))
        stats["timed_out"] = True

    def schedule(
        self, blocks: Any, devices: Any = None, memory: int | None = None, n_micro: int = 8
    ) -> PipelineSchedule:
        spec = as_spec(blocks, devices)
        res = self.search(spec, memory)
        if n_micro >= res.n_r:
            sched = extend(res, n_micro)
            sched.info["search_time_s"] = res.stats["search_time_s"]
            return sched
        log.info("tessel: N=%d < N_R=%d, using the time-optimal search on all blocks", n_micro, res.n_r)
        sched = TimeOptimalScheduler(time_limit_s=self.fallback_time_limit_s).schedule(spec, None, memory, n_micro)
        sched.info.update(
            {
                "scheduler": "tessel",
                "fallback": "time_optimal",
                "search_time_s": res.stats["search_time_s"] + sched.info["search_time_s"],
            }
        )
        return sched


class TimeOptimalScheduler(ConfiguredPipelineScheduler):
    """TO: Z3 on all blocks of N micro-batches, minimising the makespan (Tessel sections II-B and VI-B)."""

    name = "to"

    def __init__(
        self, time_limit_s: float = 300.0, check_timeout_s: float = 300.0, symmetry: bool = False, **case: Any
    ):
        super().__init__(**{"n_micro": 4, **case})
        self.time_limit_s = time_limit_s
        self.check_timeout_s = check_timeout_s
        self.symmetry = symmetry

    def schedule(
        self, blocks: Any, devices: Any = None, memory: int | None = None, n_micro: int = 4
    ) -> PipelineSchedule:
        spec = as_spec(blocks, devices)
        t0 = time.perf_counter()
        items = [(i, m) for m in range(n_micro) for i in range(spec.K)]
        r = solve_time_optimal(
            spec,
            items,
            memory,
            None,
            symmetry=self.symmetry,
            check_timeout_s=self.check_timeout_s,
            deadline=t0 + self.time_limit_s,
        )
        dt = time.perf_counter() - t0
        if r.start is None:
            raise InvalidSchedule(
                f"TO found no schedule for {spec.name} with N={n_micro} under memory {memory} "
                f"within {self.time_limit_s}s"
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
            },
        )
        validate(sched, memory)
        return sched
