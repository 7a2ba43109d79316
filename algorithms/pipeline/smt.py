"""How a Z3 check is run here: the solver every Tessel/TO encoding uses and the deterministic budget of checks.

Tessel (Lin et al., section V) encodes each scheduling question as integer linear constraints with ``z3.Int``
start times and ``z3.If`` memory terms, and answers "is there a schedule with objective <= T" with one check;
the optimisers around it bisect on T. All of them build their solver with ``new_solver`` and run every check
through a ``Budget``.

Determinism: each search uses a fresh ``z3.Context``, and a budget counts Z3's resource units (the ``rlimit``
parameter and the ``rlimit count`` statistic), not seconds, so the same input on the same Z3 version gives the
same answers, hence the same schedule, on any machine and under any load. On this machine one million units
take roughly 0.2 to 0.5 s. A wall-clock ``deadline`` can be added as a safety net; it is off by default, and a
search that hits it says so (``Budget.wall_clock_hit``), since its result may then differ from run to run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import z3

SOLVER_LOGIC: str | None = None  # None: z3.Solver(); e.g. "QF_LIA": z3.SolverFor(logic), also a plain solver


def new_solver(ctx: z3.Context | None = None) -> z3.Solver:
    """A plain Z3 solver (or one for ``SOLVER_LOGIC``) in ``ctx``.

    Every search builds its terms in a fresh ``z3.Context``: Z3's internal term numbering, and with it some of
    its choices, depends on what the context saw before, so a shared context would make a search's answer
    depend on the searches run earlier in the same process."""
    return z3.Solver(ctx=ctx) if SOLVER_LOGIC is None else z3.SolverFor(SOLVER_LOGIC, ctx=ctx)


def _rlimit_count(sol: z3.Solver) -> int:
    st = sol.statistics()
    try:
        return int(st.get_key_value("rlimit count"))
    except z3.Z3Exception:
        return 0


@dataclass
class Budget:
    """Resource budget of a search: ``per_check`` Z3 resource units per check (0: none) and ``total`` over all
    checks (None: none); ``deadline`` an optional ``time.perf_counter()`` limit (not deterministic).

    ``check`` runs one check within what is left and records the units it used; a check that runs out returns
    ``z3.unknown``, which the callers read as "not shown feasible" (the search keeps its best proven result).
    """

    per_check: int = 0
    total: int | None = None
    deadline: float | None = None
    used: int = 0
    checks: int = 0
    unknown: int = 0
    wall_clock_hit: bool = False

    def exhausted(self) -> bool:
        if self.total is not None and self.used >= self.total:
            return True
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            self.wall_clock_hit = True
            return True
        return False

    def check(self, sol: z3.Solver) -> z3.CheckSatResult:
        """``sol.check()`` within the budget (``z3.unknown`` when none is left or the check runs out)."""
        if self.exhausted():
            self.unknown += 1
            return z3.unknown
        limit = self.per_check
        if self.total is not None:
            left = self.total - self.used
            limit = left if limit <= 0 else min(limit, left)
        sol.set("rlimit", max(0, limit))
        if self.deadline is not None:
            sol.set("timeout", max(1, int((self.deadline - time.perf_counter()) * 1000)))
        before = _rlimit_count(sol)
        r = sol.check()
        self.used += max(0, _rlimit_count(sol) - before)
        self.checks += 1
        if r == z3.unknown:
            self.unknown += 1
            if self.deadline is not None and time.perf_counter() >= self.deadline:
                self.wall_clock_hit = True
        return r


def budget_from(per_check: int, total: int | None = None, time_limit_s: float | None = None) -> Budget:
    """A fresh budget; ``time_limit_s`` (seconds from now) adds the optional wall-clock safety net."""
    return Budget(
        per_check=int(per_check),
        total=None if total is None else int(total),
        deadline=None if time_limit_s is None else time.perf_counter() + float(time_limit_s),
    )
