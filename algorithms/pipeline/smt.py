"""How a Z3 check is run here: the solver every Tessel/TO encoding uses and the budget of one check.

Tessel (Lin et al., section V) encodes each scheduling question as integer linear constraints with ``z3.Int``
start times and ``z3.If`` memory terms, and answers "is there a schedule with objective <= T" with one check;
the optimisers around it bisect on T. All of them build their solver with ``new_solver`` and give each check
the budget ``check_ms`` returns.
"""

from __future__ import annotations

import time

import z3

SOLVER_LOGIC: str | None = None  # None: z3.Solver(); e.g. "QF_LIA": z3.SolverFor(logic), also a plain solver


def new_solver() -> z3.Solver:
    """A plain Z3 solver (or one for ``SOLVER_LOGIC``)."""
    return z3.Solver() if SOLVER_LOGIC is None else z3.SolverFor(SOLVER_LOGIC)


def check_ms(deadline: float | None, per_check_s: float) -> int:
    """Milliseconds a Z3 check may use (at least 1): ``per_check_s``, cut at ``deadline`` (perf_counter)."""
    t = per_check_s
    if deadline is not None:
        t = min(t, deadline - time.perf_counter())
    return max(1, int(t * 1000))
