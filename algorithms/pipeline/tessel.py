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
from typing import Any

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from ..errors import ConfigError, InvalidSchedule
from .baselines import ConfiguredPipelineScheduler, as_spec
from .blocks import MicroBatchSpec
from .completion import TesselResult, extend, periodic_phases, phase_ok
from .repetend import dependency_period_bound, entry_memory, iter_repetend_assignments, repetend_size_bound
from .repetend_solver import find_repetend, iter_smt_repetends, repetend_time, solve_repetend
from .schedule import PipelineSchedule
from .smt import Budget, budget_from
from .time_optimal import SolveResult, TimeOptimalScheduler, greedy_schedule, solve_time_optimal

__all__ = ["TesselScheduler", "TimeOptimalScheduler"]  # TO re-exported: configs name it by this module too

log = logging.getLogger(__name__)


class TesselScheduler(ConfiguredPipelineScheduler):
    """Tessel: repetend construction + schedule completion with Z3 (Lin et al., sections IV-V)."""

    name = "tessel"

    def __init__(
        self,
        search: str = "period",
        max_repetend_micro: int | None = None,
        lazy: bool = True,
        check_rlimit: int = 20_000_000,
        rlimit_budget: int = 300_000_000,
        completion_rlimit: int = 5_000_000,
        fallback_rlimit: int = 100_000_000,
        completion_max_items: int = 100,
        time_limit_s: float | None = None,
        assignments: str = "auto",
        enumerate_limit: int = 300,
        **case: Any,
    ):
        super().__init__(**case)
        if search not in ("period", "scan"):
            raise ConfigError(f"tessel: search={search!r}; choose period or scan")
        if assignments not in ("auto", "enumerate", "smt"):
            raise ConfigError(f"tessel: assignments={assignments!r}; choose auto, enumerate or smt")
        self.search_mode = search
        self.assignments = assignments
        self.enumerate_limit = enumerate_limit
        self.max_repetend_micro = max_repetend_micro
        self.lazy = lazy
        self.check_rlimit = int(check_rlimit)
        self.rlimit_budget = int(rlimit_budget)
        self.completion_rlimit = int(completion_rlimit)
        self.fallback_rlimit = int(fallback_rlimit)
        self.completion_max_items = int(completion_max_items)
        self.time_limit_s = time_limit_s
        self._cache: dict[tuple, TesselResult] = {}

    def _completion(
        self,
        spec: MicroBatchSpec,
        n: Sequence[int],
        n_r: int,
        memory: int | None,
        budget: Budget,
        *,
        sat_only: bool,
        stats: dict[str, Any],
        periodic: tuple[Sequence[int], int] | None = None,
    ) -> tuple[SolveResult, SolveResult, dict[str, int]]:
        """Warm-up (eq. 5) and cool-down (eq. 6) of a repetend, each time-optimal within ``budget`` (IV-C).

        Each phase starts from a feasible schedule, so that a budget that runs out still leaves one: the phase
        cut out of the periodic schedule (``periodic_phases``, given the repetend's starts and period) when it
        passes ``phase_ok``, else a list schedule. A phase of more than ``completion_max_items`` blocks keeps
        that seed (building its O(B^2) encoding alone would take longer than the rest of the search).
        """
        warm = [(i, m) for i in range(spec.K) for m in range(n[i])]
        cool = [(i, m) for i in range(spec.K) for m in range(n[i] + 1, n_r)]
        cool_init = {d: sum((n[i] + 1) * spec.blocks[i].memory for i in spec.on_device(d)) for d in spec.devices}
        big = max(len(warm), len(cool)) > self.completion_max_items
        seeds: list[dict | None] = [None, None]
        if periodic is not None:
            pw, pc = periodic_phases(spec, n, periodic[0], periodic[1], n_r)
            seeds = [pw if phase_ok(spec, pw, memory) else None, pc if phase_ok(spec, pc, memory, cool_init) else None]
        tw = time.perf_counter()
        w = solve_time_optimal(
            spec,
            warm,
            memory,
            None,
            symmetry=True,
            sat_only=sat_only or (big and seeds[0] is not None),
            budget=budget,
            upper=seeds[0] if seeds[0] is not None else greedy_schedule(spec, warm, memory),
        )
        stats["time_warmup_s"] += time.perf_counter() - tw
        tc = time.perf_counter()
        c = solve_time_optimal(
            spec,
            cool,
            memory,
            cool_init,
            symmetry=True,
            sat_only=sat_only or (big and seeds[1] is not None),
            budget=budget,
            upper=seeds[1] if seeds[1] is not None else greedy_schedule(spec, cool, memory, cool_init),
        )
        stats["time_cooldown_s"] += time.perf_counter() - tc
        stats["completion_checks"] += w.checks + c.checks
        return w, c, cool_init

    # ------------------------------------------------------------------ Algorithm 1
    def search(self, blocks: Any, memory: int | None = None, devices: Any = None) -> TesselResult:
        """The repetend search (``period`` or Algorithm 1's ``scan``) and the completion. Cached per case.

        Deterministic: every Z3 check runs within resource units (``check_rlimit`` each, ``rlimit_budget`` for
        the repetend search, ``completion_rlimit`` for the completion), never a wall-clock timeout, unless the
        optional ``time_limit_s`` safety net is set and hit (``stats["wall_clock_limit_hit"]``).
        """
        spec = as_spec(blocks, devices)
        ck = (
            spec.key(),
            memory,
            self.search_mode,
            self.max_repetend_micro,
            self.lazy,
            self.assignments,
            self.enumerate_limit,
            self.check_rlimit,
            self.rlimit_budget,
            self.completion_rlimit,
        )
        if ck in self._cache:
            return self._cache[ck]
        t0 = time.perf_counter()
        budget = budget_from(self.check_rlimit, self.rlimit_budget, self.time_limit_s)
        lb = spec.lower_bound()
        optimal_t = sum(b.time for b in spec.blocks) + 1  # upper bound of Algorithm 1, line 1-4
        if memory is not None and any(spec.peak_memory_one(d) > memory for d in spec.devices):
            raise ConfigError(
                f"pipeline.memory={memory} cannot hold even one micro-batch of {spec.name} "
                f"(peak per device {[spec.peak_memory_one(d) for d in spec.devices]})"
            )
        inflight = self.max_repetend_micro or repetend_size_bound(spec, memory, lb)
        if any(spec.net_memory(d) > 0 for d in spec.devices):
            log.warning("tessel: a micro-batch of %s leaves memory behind; repetends limited to N_R = 1", spec.name)
            inflight = 1
        best: tuple | None = None  # (t_R, n, starts, N_R, warm, cool, cool_init, E_R, W_R)
        stats: dict[str, Any] = {
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
            "search": self.search_mode,
            "max_n_r": inflight,
        }
        if self.search_mode == "period":
            best = self._period(spec, memory, inflight, lb, optimal_t, budget, stats)
        else:
            best = self._scan(spec, memory, inflight, lb, optimal_t, budget, stats)
        if best is None:
            raise InvalidSchedule(
                f"tessel found no schedule for {spec.name} under memory {memory} within {self.rlimit_budget} Z3 "
                f"resource units (rlimit_budget)"
            )
        t_r, n, starts, n_r, warm, cool, cool_init, E_R, W_R = best
        if self.lazy:  # time-optimal completion, once, for the best repetend
            cbud = budget_from(self.check_rlimit, self.completion_rlimit, self.time_limit_s)
            w, c, _ = self._completion(
                spec, n, n_r, memory, cbud, sat_only=False, stats=stats, periodic=(starts, stats.get("window", t_r))
            )
            stats["optimal_completion"] = bool(w.optimal and c.optimal)
            stats["completion_rlimit_used"] = cbud.used
            stats["wall_clock_limit_hit"] = budget.wall_clock_hit or cbud.wall_clock_hit
            if w.start is not None:
                warm = w.start
            if c.start is not None:
                cool = c.start
        stats["z3_rlimit_used"] = budget.used
        stats["timed_out"] = stats["timed_out"] or budget.exhausted()
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

    # ------------------------------------------------------------------ repetend searches
    def _period(self, spec, memory, inflight, lb, optimal_t, budget, stats) -> tuple | None:
        """Period-first search (``find_repetend``): smallest period over all assignments with N_R <= the
        derived bound, then the smallest N_R; an assignment whose completion is infeasible is excluded."""
        excluded: list[tuple[int, ...]] = []
        mini = budget_from(self.check_rlimit // 10, self.check_rlimit // 4, self.time_limit_s)
        while True:
            tr0 = time.perf_counter()
            found = find_repetend(
                spec, memory, inflight, lb, optimal_t - 1, budget, minimise_budget=mini, exclude=excluded
            )
            stats["time_repetend_s"] += time.perf_counter() - tr0
            if found is None:
                return None
            n, starts, p, proven = found
            n_r = max(n) + 1
            stats["candidates"] += 1
            stats["repetends_solved"] += 1
            stats["optimal_repetend"] = proven
            stats["assignment_search"][n_r] = "period"
            t_r, E_R, W_R = repetend_time(spec, n, starts, memory, p)
            stats["window"] = p
            w, c, cool_init = self._completion(
                spec, n, n_r, memory, budget, sat_only=self.lazy, stats=stats, periodic=(starts, p)
            )
            if w.start is None or c.start is None:
                log.info("tessel: repetend %s (t_R=%d) has no feasible warm-up/cool-down; excluded", n, t_r)
                excluded.append(n)
                continue
            stats["early_exit"] = t_r == lb
            log.info("tessel: N_R=%d repetend %s t_R=%d (lower bound %d)", n_r, n, t_r, lb)
            return (t_r, n, starts, n_r, w.start, c.start, cool_init, E_R, W_R)

    def _scan(self, spec, memory, inflight, lb, optimal_t, budget, stats) -> tuple | None:
        """Algorithm 1 as written: N_R = 1, 2, .. with every candidate assignment (or ``assignments: smt``)."""
        best: tuple | None = None
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
                    self._enumerated(spec, n_r, memory, lb, state, budget, stats)
                    if mode == "enumerate"
                    else iter_smt_repetends(spec, n_r, memory, lb, state, budget, stats)
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
                            source = self._enumerated(spec, n_r, memory, lb, state, budget, stats)
                            continue
                        break
                    t_r, E_R, W_R = repetend_time(spec, n, starts, memory, p)
                    stats["time_repetend_s"] += time.perf_counter() - tr0
                    if t_r >= state["best_t"]:
                        continue
                    w, c, cool_init = self._completion(spec, n, n_r, memory, budget, sat_only=self.lazy, stats=stats)
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
                if budget.exhausted():
                    stats["timed_out"] = True
                    break
        return best

    # ------------------------------------------------------------------ candidate sources
    def _enumerated(self, spec, n_r, memory, lb, state, budget, stats):
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
            if budget.exhausted():
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
                budget=budget,
            )
            stats["z3_repetend_checks"] += checks
            stats["repetends_solved"] += 1
            stats["optimal_repetend"] &= opt
            if starts is not None:
                yield tuple(n), starts, p

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
        sched = TimeOptimalScheduler(rlimit_budget=self.fallback_rlimit, time_limit_s=self.time_limit_s).schedule(
            spec, None, memory, n_micro
        )
        sched.info.update(
            {
                "scheduler": "tessel",
                "fallback": "time_optimal",
                "search_time_s": res.stats["search_time_s"] + sched.info["search_time_s"],
            }
        )
        return sched
