"""Tessel's schedule search (Lin et al., "Tessel: Boosting Distributed Execution of Large DNN Models via Flexible
Schedule Search", sections IV-B, IV-C and V): ``TesselScheduler``. docs/tessel.md has the overview and figures.

The search, given a micro-batch's blocks (``blocks.MicroBatchSpec``) and a per-device memory budget M:

1. Lower bound (GetLowerBound): the largest per-device sum of one micro-batch's block times. Bound on the
   repetend's micro-batches N_R: ``repetend.repetend_size_bound``, derived from the memory model and the
   dependencies (Algorithm 1's CalMaxInflight, floor(M / peak), is too tight when full-device blocks hold no
   memory); ``max_repetend_micro`` overrides it.
2. Repetend (``search``):
   - ``period`` (default, our reformulation): ``repetend_solver.find_repetend`` asks Z3, period by period from
     the lower bound up, for any assignment n_0..n_{K-1} with N_R <= the bound and any starts meeting the
     repetend constraints of section V (dependencies s_i + t_i <= s_j + (n_i - n_j) P, exclusive execution
     modulo P, memory from the entry level sum_i n_i m_i, equation 5); the first satisfiable period is the
     minimum; a bisection then shrinks N_R. Algorithm 1's scan proves, for each N_R, that no better repetend
     exists, which is where its time went on 6 and 8 devices.
   - ``scan``: Algorithm 1 as written: N_R = 1, 2, .. with every candidate assignment pruned by Properties IV.1
     and IV.2 (``repetend.iter_repetend_assignments``), ranked by a dependency bound, each solved by
     ``repetend_solver.solve_repetend`` (``assignments``: enumerate, smt, or auto by count), early exit at the
     lower bound.
3. RepetendTime: t_R = max_d (E_R^d + W_R^d) (equation 4) by compaction (``repetend_solver.repetend_time``).
4. Completion (IV-C): warm-up {B_i^n : n < n_i} (eq. 5) and cool-down {B_i^n : n_i < n < N_R} (eq. 6), each
   time-optimal (``time_optimal.solve_time_optimal``) within ``completion_rlimit``, starting from the phase cut
   out of the periodic schedule (``completion.periodic_phases``), so a budget that runs out still leaves a
   feasible phase. With ``lazy`` (section V) only feasibility is checked while repetends are examined; the
   time-optimal searches run once, for the best one. A repetend without a feasible completion is excluded.
5. ``completion.extend`` concatenates warm-up, N - N_R + 1 repetends and cool-down; every result is validated.
   For N < N_R the TO search runs on the N micro-batches instead.

Determinism: every Z3 check runs in a fresh context within Z3 resource units (``smt.Budget``: ``check_rlimit``
per check, ``rlimit_budget`` for the repetend search), never a wall-clock timeout, so the same input gives the
same schedule; ``time_limit_s`` is an optional wall-clock safety net (off by default; a search that hits it
records ``wall_clock_limit_hit``). A check that runs out counts as "not shown feasible": the search keeps the best
proven result and records ``optimal_repetend``/``optimal_completion`` False.

Choices where the paper is vague: the window origin is fixed by some s_i = 0; each weakly connected component
of the blocks has some n_i = 0 (relabelling, valid when it leaves no memory behind); a spec whose micro-batch
leaves memory behind on a device cannot repeat, so N_R = 1; concatenation keeps phases apart per device, so every
phase starts from exactly the memory level the search assumed.

Complexity: ``period`` makes O(t_R - LB + log N_R) checks of one SMT problem with 2K integer variables, O(K^2)
disjunctions and If terms per device; ``scan`` makes O(log t) checks per candidate, at most
C(K + N_R - 1, N_R - 1) candidates per N_R; the completion O(log T) checks on at most N_R K variables.
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
                    stats["window"] = p
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
