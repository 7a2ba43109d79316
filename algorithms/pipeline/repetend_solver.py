"""RepetendSolver and RepetendTime of Tessel's Algorithm 1 (Lin et al., sections IV-B and V).

``solve_repetend``: for one index assignment, one ``z3.Int`` start s_i per block and a period P; the repetend
repeats every P with every micro-batch index one higher. Constraints: 0 <= s_i < P and some s_i = 0 (a rotation
of the window that keeps the assignment); dependencies s_i + t_i <= s_j + (n_i - n_j) P; exclusive execution on
every device modulo P (``add_exclusive_modulo``: the compaction of Figure 6, a frontier block of the next
repetend may use idle time at the end of this one); memory as a running sum of ``z3.If`` terms from the entry
level E_d. The minimal P is found by binary search.

``repetend_time``: t_R = max_d (E_R^d + W_R^d) (equation 4), the smallest shift at which consecutive copies of
the solved repetend keep dependencies, exclusive execution and memory (checked on a few copies).

``iter_smt_repetends`` is our extension for large K x N_R: the assignment itself becomes Z3 variables, so one
binary search covers every assignment of an N_R at once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import z3

from .blocks import MicroBatchSpec
from .repetend import components, entry_memory
from .smt import Budget, new_solver

log = logging.getLogger(__name__)


def add_exclusive_modulo(
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
    budget: Budget | None = None,
) -> tuple[list[int] | None, int | None, int, bool]:
    """RepetendSolver: smallest period P in [lo, hi] with a repetend schedule (module docstring, step 3).

    Returns (starts, P, number of checks, proven optimal).
    """
    K = spec.K
    ctx = z3.Context()  # a fresh context per call: Z3 answers do not depend on earlier calls
    sol = new_solver(ctx)
    s = [z3.Int(f"r_{b.name}", ctx) for b in spec.blocks]
    P = z3.Int("P", ctx)
    for i in range(K):
        sol.add(s[i] >= 0, s[i] <= P - 1)
    sol.add(z3.Or([si == 0 for si in s]))
    for j in range(K):
        for i in spec.preds[j]:
            sol.add(s[i] + spec.blocks[i].time <= s[j] + (n[i] - n[j]) * P)
    E = entry_memory(spec, n)
    for d in spec.devices:
        idx = spec.on_device(d)
        add_exclusive_modulo(sol, spec, idx, s, P)
        if memory is not None:
            for b_ in idx:
                terms = [z3.If(s[a] <= s[b_], spec.blocks[a].memory, 0) for a in idx if spec.blocks[a].memory]
                if terms:
                    sol.add(E[d] + z3.Sum(terms) <= memory)
    checks = 0
    optimal = True
    best: list[int] | None = None
    best_p: int | None = None

    bud = budget if budget is not None else Budget()

    def check(bound: int):
        nonlocal checks
        checks += 1
        sol.push()
        sol.add(P <= bound)
        r = bud.check(sol)
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
        if bud.exhausted():
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


def iter_smt_repetends(
    spec: MicroBatchSpec,
    n_r: int,
    memory: int | None,
    lb: int,
    state: dict[str, Any],
    budget: Budget,
    stats: dict[str, Any],
):
    """The same search with the index assignment folded into Z3 (our extension for large K x N_R).

    n_i become ``z3.Int`` variables in [0, N_R) with Property IV.2 (n_i >= n_j for B_i -> B_j) and the
    entry memory E_d = sum n_i m_i as a linear term; for a fixed period p all constraints of
    ``solve_repetend`` stay linear, so a binary search on p with a plain Solver finds the best repetend
    over all assignments at once. A rejected or yielded assignment is excluded by a blocking clause and the
    search resumes below the best t_R. Same result set as the enumeration, without visiting candidates one
    by one.
    """
    K = spec.K
    ctx = z3.Context()  # a fresh context per call: Z3 answers do not depend on earlier calls
    sol = new_solver(ctx)
    nv = [z3.Int(f"n_{b.name}", ctx) for b in spec.blocks]
    sv = [z3.Int(f"s_{b.name}", ctx) for b in spec.blocks]
    for i in range(K):
        sol.add(nv[i] >= 0, nv[i] <= n_r - 1, sv[i] >= 0)
        for j in spec.succs[i]:
            sol.add(nv[i] >= nv[j])
    sol.add(z3.Or([x == 0 for x in nv]), z3.Or([x == n_r - 1 for x in nv]))
    sol.add(z3.Or([x == 0 for x in sv]))
    if memory is not None:
        for d in spec.devices:
            idx = spec.on_device(d)
            entry = z3.Sum([nv[i] * spec.blocks[i].memory for i in idx if spec.blocks[i].memory] or [z3.IntVal(0, ctx)])
            sol.add(entry <= memory)
            for b_ in idx:
                terms = [z3.If(sv[a] <= sv[b_], spec.blocks[a].memory, 0) for a in idx if spec.blocks[a].memory]
                if terms:
                    sol.add(entry + z3.Sum(terms) <= memory)

    def check(p: int):
        stats["z3_repetend_checks"] += 1
        sol.push()
        for i in range(K):
            sol.add(sv[i] <= p - 1)
            for j in spec.succs[i]:
                sol.add(sv[i] + spec.blocks[i].time <= sv[j] + (nv[i] - nv[j]) * p)
        for d in spec.devices:
            add_exclusive_modulo(sol, spec, spec.on_device(d), sv, p)
        r = budget.check(sol)
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

    while not budget.exhausted():
        hi = state["best_t"] - 1
        if hi < lb:
            return
        found = check(hi)
        if found is None:
            return
        best_p = hi
        lo = lb
        hi = hi - 1
        while lo <= hi and not budget.exhausted():
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


def find_repetend(
    spec: MicroBatchSpec,
    memory: int | None,
    cap: int,
    lo: int,
    hi: int,
    budget: Budget,
    *,
    minimise_budget: Budget | None = None,
    exclude: Sequence[Sequence[int]] = (),
) -> tuple[tuple[int, ...], list[int], int, bool] | None:
    """Period-first repetend search (our reformulation of Algorithm 1's loop; same constraints as
    ``solve_repetend``): the smallest window period P in [lo, hi], over every index assignment with
    N_R <= ``cap`` at once, then the smallest N_R at that P.

    The assignment n_i and the starts s_i are Z3 variables; for a fixed P every constraint is linear. Periods are
    probed from ``lo`` up by doubling steps, then bisected below the first satisfiable one, so the result is the
    minimum when every check below it was refuted (a check that runs out of budget counts as refuted and the
    result is marked not proven). At that P a bisection on N_R (the cap
    n_i <= k - 1) finds the smallest repetend (shorter warm-up and cool-down, as the paper's increasing scan
    would). Symmetry breaking: the window starts at some s_i = 0 and each weakly connected component of the
    blocks has some n_i = 0 (``repetend.components``). ``exclude``: assignments ruled out (blocking clauses).

    Returns (n, starts, P, proven) or None when no P up to ``hi`` is shown feasible. Unlike scanning N_R = 1, 2, ..
    it proves no per-N_R infeasibility, which is where the scan spends its time on 6 and 8 devices.
    """
    K = spec.K
    ctx = z3.Context()  # a fresh context per call: Z3 answers do not depend on earlier calls
    sol = new_solver(ctx)
    nv = [z3.Int(f"n_{b.name}", ctx) for b in spec.blocks]
    sv = [z3.Int(f"s_{b.name}", ctx) for b in spec.blocks]
    for i in range(K):
        sol.add(nv[i] >= 0, nv[i] <= cap - 1, sv[i] >= 0)
        for j in spec.succs[i]:
            sol.add(nv[i] >= nv[j])
    for comp in components(spec):
        sol.add(z3.Or([nv[i] == 0 for i in comp]))
    sol.add(z3.Or([x == 0 for x in sv]))
    for n in exclude:
        sol.add(z3.Or([nv[i] != n[i] for i in range(K)]))
    if memory is not None:
        for d in spec.devices:
            idx = spec.on_device(d)
            entry = z3.Sum([nv[i] * spec.blocks[i].memory for i in idx if spec.blocks[i].memory] or [z3.IntVal(0, ctx)])
            sol.add(entry <= memory)
            for b_ in idx:
                terms = [z3.If(sv[a] <= sv[b_], spec.blocks[a].memory, 0) for a in idx if spec.blocks[a].memory]
                if terms:
                    sol.add(entry + z3.Sum(terms) <= memory)

    def model() -> tuple[tuple[int, ...], list[int]]:
        m = sol.model()
        return (
            tuple(m.eval(x, model_completion=True).as_long() for x in nv),
            [m.eval(x, model_completion=True).as_long() for x in sv],
        )

    def at_period(p: int, extra: Sequence[Any] = ()) -> Any:
        sol.push()
        for i in range(K):
            sol.add(sv[i] <= p - 1)
            for j in spec.succs[i]:
                sol.add(sv[i] + spec.blocks[i].time <= sv[j] + (nv[i] - nv[j]) * p)
        for d in spec.devices:
            add_exclusive_modulo(sol, spec, spec.on_device(d), sv, p)
        sol.add(*extra)
        return sol

    proven = True
    # gallop up from the lower bound (lo, lo + 1, lo + 2, lo + 4, ..; hi last), then bisect below the first
    # satisfiable period: far-off periods are easy to satisfy, and only the ones near the optimum are hard
    probes = [lo]
    step = 1
    while probes[-1] < hi:
        probes.append(min(hi, lo + step))
        step *= 2
    best: tuple[tuple[int, ...], list[int], int] | None = None
    failed = lo - 1
    for p in probes:
        if budget.exhausted():
            break
        used = budget.used
        r = budget.check(at_period(p))
        log.info("tessel: period %d, N_R <= %d: %s (%d Z3 units)", p, cap, r, budget.used - used)
        if r == z3.sat:
            best = (*model(), p)
            sol.pop()
            break
        proven &= r == z3.unsat
        failed = p
        sol.pop()
    if best is None:
        return None
    while failed + 1 < best[2] and not budget.exhausted():
        mid = (failed + 1 + best[2]) // 2
        r = budget.check(at_period(mid))
        log.info("tessel: period %d, N_R <= %d: %s", mid, cap, r)
        if r == z3.sat:
            best = (*model(), mid)
        else:
            proven &= r == z3.unsat
            failed = mid
        sol.pop()
    if failed + 1 < best[2]:
        proven = False
    n, starts, p = best
    mb = minimise_budget if minimise_budget is not None else budget
    k_lo, k_hi = 1, max(n)  # N_R = max(n) + 1 now; try the caps N_R <= k below it
    while k_lo <= k_hi and not mb.exhausted():
        mid = (k_lo + k_hi) // 2
        r2 = mb.check(at_period(p, [x <= mid - 1 for x in nv]))
        log.info("tessel: period %d, N_R <= %d: %s", p, mid, r2)
        if r2 == z3.sat:
            n, starts = model()
            k_hi = max(n)
        else:
            k_lo = mid + 1
        sol.pop()
    return n, starts, p, proven
