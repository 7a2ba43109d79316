"""The SCT linear program of m-SCT (seed 001, Baechi, section 2.4; Hanen & Munier 1995): which child of each
op is its favourite, from the LP relaxation of the favourite-child ILP and its rounding."""

from __future__ import annotations

import logging
import math
import time
from types import ModuleType
from typing import Any

import numpy as np
from tqdm import tqdm

from ... import compiled_mode
from ...cluster import Cluster
from ...graph import GraphIndex, OpGraph

log = logging.getLogger(__name__)


LP_METHODS = ("highs-ipm", "highs-ds", "highs")


def implied_edges_kept(succ, pred, p, c, budget: int = 16) -> np.ndarray:
    """Mask of the edges whose SCT-LP precedence row is not implied by another path (exact reduction).

    Edge e = i -> j (edges numbered in the order of ``succ`` flattened, ops in topological order) is implied
    when some other path i -> k_1 -> ... -> k_m -> j (m >= 1) has p_(k_1) + ... + p_(k_m) >= c_e: then
    s_j >= s_i + p_i + sum p_k >= s_i + p_i + c_e x_e for every x_e in [0, 1] (the path's own x terms are
    >= 0), and x_e appears elsewhere only on the loose side of the favorite rows, so x_e = 1 is optimal and
    the edge needs neither a variable nor a row.  For each op i, a longest-path pass over the ops reachable
    from i with an index below i's farthest successor gives the longest intermediate sum into every
    predecessor of i's successors; the pass stops after `budget` ops (the sums found so far are lower bounds,
    so a stopped pass only keeps edges that could have been dropped: the reduction stays exact).
    O(V budget d log budget).
    """
    import heapq

    E = sum(len(s) for s in succ)
    keep = np.ones(E, dtype=bool)
    pl = p.tolist()
    cl = c.tolist()
    e0 = 0
    for i, out in enumerate(succ):
        if len(out) < 1:
            continue
        hi = max(j for j, _ in out)
        d: dict[int, float] = {}
        heap = []
        for j, _ in out:
            if j < hi:
                d[j] = pl[j]
                heap.append(j)
        heapq.heapify(heap)
        pops = 0
        while heap and pops < budget:
            k = heapq.heappop(heap)
            pops += 1
            dk = d[k]
            for m, _ in succ[k]:
                if m < hi:
                    nd = dk + pl[m]
                    old = d.get(m)
                    if old is None:
                        d[m] = nd
                        heapq.heappush(heap, m)
                    elif nd > old:
                        d[m] = nd
        if d:
            for t, (j, _) in enumerate(out):
                ce = cl[e0 + t]
                for m, _ in pred[j]:
                    if m != i and d.get(m, -1.0) >= ce:
                        keep[e0 + t] = False
                        break
        e0 += len(out)
    return keep


#: LPs of at least this many ops (a window counts its graph's ops) prepare their reductions with the compiled
#: functions of `sct_kernel` (numba installed): the same LP, faster; smaller ones with the Python functions here,
#: which need no compiled code loaded.  None: always the Python ones.
COMPILED_MIN_OPS: int | None = 2000


def _kernel(n: int) -> ModuleType | None:
    """The `sct_kernel` module for an LP of n ops (`COMPILED_MIN_OPS`), else None."""
    if not compiled_mode.applies(n, COMPILED_MIN_OPS):
        return None
    try:
        from . import sct_kernel
    except ImportError as exc:  # numba missing: the Python functions give the same LP, slower
        log.info("SCT LP: compiled preparation unavailable (%s); using the Python one", exc)
        return None
    return sct_kernel


def _implied_kept(src: np.ndarray, dst: np.ndarray, p: np.ndarray, c: np.ndarray, n: int, size: int) -> np.ndarray:
    """`implied_edges_kept` for the edges (src, dst) of ops 0..n-1 (sources ascending: ``succ`` order), compiled
    (`sct_kernel.implied_kept`) when the LP's graph has `size` >= `COMPILED_MIN_OPS` ops."""
    kernel = _kernel(size)
    if kernel is not None:
        sptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=sptr[1:])
        pptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=n), out=pptr[1:])
        psrc = src[np.argsort(dst, kind="stable")]
        return kernel.implied_kept(sptr, dst, pptr, psrc, np.asarray(p, dtype=float), np.asarray(c, dtype=float), 16)
    succ: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    pred: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for i, j in zip(src.tolist(), dst.tolist()):
        succ[i].append((j, 0.0))
        pred[j].append((i, 0.0))
    return implied_edges_kept(succ, pred, p, c)


def _heads_tails(
    src: np.ndarray,
    dst: np.ndarray,
    p: np.ndarray,
    c: np.ndarray,
    n: int,
    release: np.ndarray | None = None,
    tail: np.ndarray | None = None,
    size: int = 0,
):
    """Longest-path heads without (h0) and with every communication (h1), and tails with every communication
        including the op itself (t1); edges sorted by source in topological order.  `release` (earliest starts)
        and `tail` (time still to run after an op, beyond its successors here) are those of a window of a larger
        graph (`sct_lp_windowed`); zero by default.  Compiled (`sct_kernel.heads_tails`) when the LP's graph has `size`
    >= `COMPILED_MIN_OPS` ops.  O(V + E)."""
    h0 = np.zeros(n) if release is None else np.array(release, dtype=float)
    h1 = h0.copy()
    t1 = p.copy() if tail is None else p + tail
    kernel = _kernel(size)
    if kernel is not None:
        kernel.heads_tails(src, dst, np.asarray(p, dtype=float), np.asarray(c, dtype=float), h0, h1, t1)
        return h0, h1, t1
    sl, dl, pl, cl = src.tolist(), dst.tolist(), p.tolist(), c.tolist()
    h0l, h1l, t1l = h0.tolist(), h1.tolist(), t1.tolist()
    for e in range(len(sl)):
        i, j = sl[e], dl[e]
        a = h0l[i] + pl[i]
        if a > h0l[j]:
            h0l[j] = a
        a = h1l[i] + pl[i] + cl[e]
        if a > h1l[j]:
            h1l[j] = a
    for e in range(len(sl) - 1, -1, -1):
        i, j = sl[e], dl[e]
        a = pl[i] + cl[e] + t1l[j]
        if a > t1l[i]:
            t1l[i] = a
    return np.array(h0l), np.array(h1l), np.array(t1l)


#: Longest x-term list an eliminated op's start may carry (`_eliminate_single_parents`); past it the op keeps
#: its own variable, so that rows stay short.
ELIMINATION_TERMS = 8


def _eliminate_single_parents(
    ks: np.ndarray, kd: np.ndarray, p: np.ndarray, c: np.ndarray, n: int, max_terms: int = ELIMINATION_TERMS
):
    """Fourier-Motzkin elimination of the start time of every op with exactly one precedence row into it.

    Such an op v (one kept edge e = u -> v) has s_v on the lower side of a single row, s_v >= s_u + p_u +
    c_e x_e, so s_v can be replaced by that expression in every row where it is an upper bound (its out-edge
    rows and its sink row): the eliminated LP's feasible (x, w) are exactly those of the LP with s_v free
    of its h-bounds, whose optimum is the LP's (those bounds only cut off non-left-justified solutions).
    Applied in topological order, chains collapse: s_v = s_a + offset_v + sum of c_t x_t over the chain's
    edges t from the anchor a, an op that keeps its variable.  An op whose chain would carry more than
    `max_terms` x terms keeps its variable.  On the benchmark graph this removes 5,645 rows and columns
    (LP 18.1 s -> 14.2 s) for 5% fewer nonzeros.

    ks, kd: kept edges (sources ascending, ops in topological order), c their communication costs.  Returns
    (anchor, offset, terms, gone): per op its anchor op, the constant and the tuple of kept-edge indices
    whose x terms stand for its start, and whether it was eliminated.  O(V + E max_terms).
    """
    indeg = np.bincount(kd, minlength=n)
    in_edge = np.full(n, -1, dtype=np.int64)
    single = indeg[kd] == 1
    in_edge[kd[single]] = np.flatnonzero(single)
    anchor = list(range(n))
    offset = [0.0] * n
    terms: list[tuple[int, ...]] = [()] * n
    gone = np.zeros(n, dtype=bool)
    pl = p.tolist()
    for v in np.flatnonzero(in_edge >= 0).tolist():
        t = int(in_edge[v])
        u = int(ks[t])
        if len(terms[u]) + 1 > max_terms:
            continue
        anchor[v] = anchor[u]
        offset[v] = offset[u] + pl[u]
        terms[v] = terms[u] + (t,)
        gone[v] = True
    return np.array(anchor, dtype=np.int64), np.array(offset), terms, gone


def _eliminate(ks: np.ndarray, kd: np.ndarray, p: np.ndarray, n: int, size: int):
    """`_eliminate_single_parents` with its terms as a matrix: (anchor, offset, terms, nterms, gone), op v's
    x terms ``terms[v, :nterms[v]]`` (-1 beyond).  Compiled (`sct_kernel.eliminate`) when the LP's graph has
    `size` >= `COMPILED_MIN_OPS` ops.  O(V ELIMINATION_TERMS + E)."""
    kernel = _kernel(size)
    if kernel is not None:
        return kernel.eliminate(ks, kd, np.asarray(p, dtype=float), n, ELIMINATION_TERMS)
    anchor, offset, tl, gone = _eliminate_single_parents(ks, kd, p, np.zeros(len(ks)), n)
    terms = np.full((n, ELIMINATION_TERMS), -1, dtype=np.int64)
    nterms = np.zeros(n, dtype=np.int64)
    for v, tv in enumerate(tl):
        if tv:
            terms[v, : len(tv)] = tv
            nterms[v] = len(tv)
    return anchor, offset, terms, nterms, gone


def _lp_rows(sinks, last, anchor, offset, terms, nterms, gone, ks, kd, ck, p, U: int, X: int):
    """The sink, makespan-chain and precedence rows of `_solve_sct` as COO arrays (rows, cols, vals) and
    their right-hand sides, numbered from 0 in that order (rows of one sink, one chain link, one kept edge into
    an op that was not eliminated, in sink and kept-edge order): the entries `_lp_rows_loop` builds, from
    whole-array operations.  O(rows ELIMINATION_TERMS)."""
    k = len(sinks)
    # sink m: s_anchor - u_m + terms <= -(offset + p + tail)
    sa = anchor[sinks]
    s_terms = terms[sinks]
    s_has = s_terms >= 0
    s_rows = np.arange(k, dtype=np.int64)
    # chain link m (1 <= m < k): u_(m-1) - u_m <= 0, rows k .. 2k - 2
    nc = max(k - 1, 0)
    c_rows = k + np.arange(nc, dtype=np.int64)
    # kept edge t = i -> j with j not eliminated: s_anchor(i) - s_j + c_t x_t + terms(i) <= -(offset_i + p_i)
    tsel = np.flatnonzero(~gone[kd])
    pi = ks[tsel]
    p_terms = terms[pi]
    p_has = p_terms >= 0
    p_rows = k + nc + np.arange(len(tsel), dtype=np.int64)
    rows = np.concatenate(
        [
            s_rows,
            s_rows,
            np.broadcast_to(s_rows[:, None], s_terms.shape)[s_has],
            c_rows,
            c_rows,
            p_rows,
            p_rows,
            p_rows,
            np.broadcast_to(p_rows[:, None], p_terms.shape)[p_has],
        ]
    )
    cols = np.concatenate(
        [
            sa,
            U + s_rows,
            X + s_terms[s_has],
            U + np.arange(nc, dtype=np.int64),
            U + 1 + np.arange(nc, dtype=np.int64),
            anchor[pi],
            kd[tsel],
            X + tsel,
            X + p_terms[p_has],
        ]
    )
    vals = np.concatenate(
        [
            np.ones(k),
            -np.ones(k),
            ck[s_terms[s_has]],
            np.ones(nc),
            -np.ones(nc),
            np.ones(len(tsel)),
            -np.ones(len(tsel)),
            ck[tsel],
            ck[p_terms[p_has]],
        ]
    )
    rhs = np.concatenate([-(offset[sinks] + last[sinks]), np.zeros(nc), -(offset[pi] + p[pi])])
    return rows.astype(np.int64), cols.astype(np.int64), vals.astype(float), rhs.astype(float), k + nc + len(tsel)


def _lp_rows_loop(sinks, last, anchor, offset, terms, gone, ks, kd, ck, p, U: int, X: int):
    """`_lp_rows` row by row, with `_eliminate_single_parents`' tuples of terms: the code of `_solve_sct`
    before issue 22's vectorisation, kept as the reference of `_lp_rows` (tests/test_sct_lp_build.py)."""
    rl, cl, vl, bl = [], [], [], []
    r = 0
    for m_, i in enumerate(sinks.tolist()):
        a = int(anchor[i])
        rl += [r] * (2 + len(terms[i]))
        cl += [a, U + m_] + [X + t for t in terms[i]]
        vl += [1.0, -1.0] + [float(ck[t]) for t in terms[i]]
        bl.append(-(offset[i] + last[i]))
        r += 1
    k = len(sinks)
    if k > 1:
        for m_ in range(1, k):
            rl += [r, r]
            cl += [U + m_ - 1, U + m_]
            vl += [1.0, -1.0]
            bl.append(0.0)
            r += 1
    pl, ol, cll = p.tolist(), offset.tolist(), ck.tolist()
    for t, (i, j) in enumerate(zip(ks.tolist(), kd.tolist())):
        if gone[j]:
            continue
        ti = terms[i]
        rl += [r] * (3 + len(ti))
        cl += [int(anchor[i]), j, X + t] + [X + q for q in ti]
        vl += [1.0, -1.0, cll[t]] + [cll[q] for q in ti]
        bl.append(-(ol[i] + pl[i]))
        r += 1
    return (
        np.array(rl, dtype=np.int64),
        np.array(cl, dtype=np.int64),
        np.array(vl, dtype=float),
        np.array(bl, dtype=float),
        r,
    )


#: HiGHS options given to the interior point by default: IPX on the dual LP, which HiGHS solves faster
#: here (LP 20.9 s -> 17.7 s on the 20,308-op benchmark graph), stopped at a relative optimality gap of
#: 1e-6 without crossover to a vertex (14.9 s -> 12.7 s with the single-parent elimination).  The favorite
#: children are read with a threshold of 0.1 on x, far above the gap, and an interior optimum is what
#: Baechi's interior-point solver hands to its rounding; crossover would only move x to a vertex of the
#: optimal face.
DEFAULT_LP_OPTIONS: dict[str, Any] = {
    "ipx_dualize_strategy": 1,
    "run_crossover": "off",
    "ipm_optimality_tolerance": 1e-6,
}


#: How `_solve` reaches HiGHS: "auto" calls it through the `highspy` package when that is installed (the public
#: bindings of the HiGHS library SciPy bundles; pyproject.toml pins the release whose HiGHS is SciPy 1.17's,
#: 1.12), else through `scipy.optimize.linprog`; "linprog" always through SciPy (the reference of
#: tests/test_sct_highs.py).  The same HiGHS with the same options and model gives the same x, bit for bit.
LP_BACKEND = "auto"

#: SciPy's `linprog` status for each HiGHS model status (`scipy.optimize._linprog_highs`), so that
#: ``facts["lp_status"]`` means the same through either backend: 0 optimal, 1 time or iteration limit,
#: 2 infeasible, 3 unbounded, 4 anything else (HiGHS' "Unknown" among them).
_SCIPY_STATUS = {
    "kOptimal": 0,
    "kTimeLimit": 1,
    "kIterationLimit": 1,
    "kInfeasible": 2,
    "kModelError": 2,
    "kUnbounded": 3,
}

#: Use the interior point of an LP that HiGHS calls "Unknown" when it meets the tolerance asked for
#: (`_usable_unknown`).  HiGHS 1.12 stops IPX at ``ipm_optimality_tolerance`` (1e-6 in `DEFAULT_LP_OPTIONS`),
#: then checks the postsolved point against its own ``kkt_tolerance`` (1e-7) and calls the model "Unknown" when
#: the relative primal-dual objective error lies between the two (and beyond a small grace factor): 38 of the
#: 2,067 windows of the 1M-op benchmark graph, one of 63 at 30K ops, the windows being of a few rows.  `linprog`
#: returns no x then, so those LPs gave no favourite child; their points are feasible and within the gap asked
#: for, the interior optimum m-SCT rounds.  False restores linprog's reading.
USE_UNKNOWN_IPM_POINT = True

#: `linprog`'s check of a solution HiGHS calls optimal (`scipy.optimize._linprog_util._check_result`): a bound
#: or row violated by more than this makes the status 4 (the x is still returned and used).
_CHECK_TOL = math.sqrt(1e-9) * 10


def _highspy() -> ModuleType | None:
    """The `highspy` module when `LP_BACKEND` lets `_solve` use it and it is installed, else None."""
    if LP_BACKEND != "auto":
        return None
    try:
        import highspy
    except ImportError:
        return None
    return highspy


def _highs_options(h, hs: ModuleType, method: str, options: dict[str, Any]) -> None:
    """Set on the `highspy.Highs` h the options `linprog(method=...)` gives HiGHS (presolve on, quiet, dual
    simplex strategy, the method's solver), then `options` (IPX ones only for the interior point, as before).
    A bool for an option HiGHS types as a string is written "on"/"off" (YAML reads ``off`` as False) and an
    int for a float option as a float; an unknown option or a value HiGHS refuses is a `ConfigError`."""
    from ...errors import ConfigError

    base: dict[str, Any] = {
        "output_flag": False,
        "log_to_console": False,
        "presolve": "on",
        "highs_debug_level": 0,
        "simplex_strategy": 1,  # dual
    }
    solver = {"highs-ipm": "ipm", "highs-ds": "simplex"}.get(method)
    if solver is not None:
        base["solver"] = solver
    extra = dict(options) if method == "highs-ipm" else {k: v for k, v in options.items() if not k.startswith("ipx")}
    for key, val in {**base, **extra}.items():
        st, kind = h.getOptionType(key)
        if st == hs.HighsStatus.kError:
            raise ConfigError(f"placer.lp_options: HiGHS has no option {key!r}")
        if kind == hs.HighsOptionType.kString and isinstance(val, bool):
            val = "on" if val else "off"
        elif kind == hs.HighsOptionType.kDouble and isinstance(val, int) and not isinstance(val, bool):
            val = float(val)
        if h.setOptionValue(key, val) == hs.HighsStatus.kError:
            raise ConfigError(f"placer.lp_options: HiGHS refused {key}={val!r}")


def _solve_highspy(hs: ModuleType, obj, A, b, lb, ub, method: str, options: dict[str, Any]):
    """Minimise obj @ x subject to A x <= b (A a SciPy CSR matrix), lb <= x <= ub, with HiGHS through `highspy`:
    the model `linprog` hands HiGHS (A column-wise, rows unbounded below), the same options, and the same reading
    of the result, but for an "Unknown" model whose interior point is usable (`USE_UNKNOWN_IPM_POINT`).  Returns
    (x or None, SciPy's status code, message, whether x is such a point).  Without SciPy's wrapper, which spends
    3-9 ms a call on its checks and on a Python loop over every column's basis status (bound multipliers that
    m-SCT never reads).  O(nnz) around the solver."""
    h = hs.Highs()
    _highs_options(h, hs, method, options)
    C = A.tocsc()
    nr, nc = A.shape
    # the arrays straight to HiGHS' passModel(num_col, num_row, num_nz, format, sense, offset, costs, bounds,
    # row bounds, matrix, integrality): the model a `HighsLp` with these fields gives (the same x, bit for bit,
    # tests/test_sct_highs.py), without pybind's element-by-element copy of each array into the `HighsLp`
    # (0.64 -> 0.09 ms for a 500-op window of the 1M graph, about 2 s CPU at 10^6 ops)
    status = h.passModel(
        nc,
        nr,
        int(C.nnz),
        int(hs.MatrixFormat.kColwise),
        int(hs.ObjSense.kMinimize),
        0.0,
        np.ascontiguousarray(obj, dtype=np.float64),
        np.ascontiguousarray(lb, dtype=np.float64),
        np.ascontiguousarray(ub, dtype=np.float64),
        np.full(nr, -np.inf),
        np.ascontiguousarray(b, dtype=np.float64),
        np.ascontiguousarray(C.indptr, dtype=np.int32),
        np.ascontiguousarray(C.indices, dtype=np.int32),
        np.ascontiguousarray(C.data, dtype=np.float64),
        np.zeros(nc, dtype=np.int32),  # every column continuous (HiGHS reads num_col entries)
    )
    if status == hs.HighsStatus.kError:
        return None, 2, "HiGHS refused the model", False
    h.run()
    ms = h.getModelStatus()
    info = h.getInfo()
    message = f"HiGHS model status {h.modelStatusToString(ms)}"
    unknown = False
    if ms != hs.HighsModelStatus.kOptimal:
        usable = _usable_unknown(h, hs, info) if ms == hs.HighsModelStatus.kUnknown else None
        if usable is None:
            return None, _SCIPY_STATUS.get(ms.name, 4), message, False
        unknown = True
        message += f"; its interior point used ({usable})"
    sol = h.getSolution()
    x = np.array(sol.col_value)
    slack = b - np.array(sol.row_value)
    if np.isnan(x).any() or np.isnan(slack).any() or math.isnan(info.objective_function_value):
        return x, 4, message + "; NaN in the solution", unknown
    if not ((x >= lb - _CHECK_TOL) & (x <= ub + _CHECK_TOL)).all() or (slack < -_CHECK_TOL).any():
        return x, 4, message + f"; the solution violates a bound or row by more than {_CHECK_TOL:.2e}", unknown
    return x, 0, message, unknown


def _usable_unknown(h, hs: ModuleType, info) -> str | None:
    """Why the point of an LP HiGHS calls "Unknown" may be used (`USE_UNKNOWN_IPM_POINT`), else None: the
    interior point ran without crossover, HiGHS calls its primal solution feasible, and its relative
    primal-dual objective error is within ``ipm_optimality_tolerance``, the gap IPX was asked to reach."""
    if not USE_UNKNOWN_IPM_POINT:
        return None
    if h.getOptionValue("solver")[1] != "ipm" or h.getOptionValue("run_crossover")[1] != "off":
        return None
    if info.primal_solution_status != hs.SolutionStatus.kSolutionStatusFeasible:
        return None
    err = float(info.primal_dual_objective_error)
    tol = float(h.getOptionValue("ipm_optimality_tolerance")[1])
    if not err <= tol:
        return None
    return f"primal feasible, relative primal-dual objective error {err:.2e} <= ipm_optimality_tolerance {tol:g}"


def _solve(obj, A, b, lb, ub, method: str, options: dict[str, Any]):
    """Solve the LP min obj @ x, A x <= b, lb <= x <= ub with HiGHS (`LP_BACKEND`): (x or None, status in
    SciPy's codes, message, whether x is the interior point of an "Unknown" model).  x is None when HiGHS found
    no optimum (through `linprog`, also for every "Unknown" model); it is returned with status 4 when the
    optimum fails `linprog`'s feasibility check (as `linprog` does)."""
    hs = _highspy()
    if hs is not None:
        return _solve_highspy(hs, obj, A, b, lb, ub, method, options)
    import warnings

    from scipy.optimize import OptimizeWarning, linprog  # SciPy is imported when an LP is solved (`_solve_sct`)

    bounds = np.column_stack([lb, ub])
    extra = dict(options) if method == "highs-ipm" else {k: v for k, v in options.items() if not k.startswith("ipx")}
    res = None
    if extra:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", OptimizeWarning)
                res = linprog(obj, A_ub=A, b_ub=b, bounds=bounds, method=method, options=extra)
        except (TypeError, ValueError) as exc:
            log.warning("SciPy refused the HiGHS options %s (%s); solving without them", extra, exc)
    if res is None:
        res = linprog(obj, A_ub=A, b_ub=b, bounds=bounds, method=method)
    return res.x, int(res.status), str(res.message), False


def sct_lp(
    graph: OpGraph,
    cluster: Cluster,
    compute: list[float] | np.ndarray | None = None,
    method: str = "highs-ipm",
    reduce: bool = True,
    options: dict[str, Any] | None = None,
) -> tuple[np.ndarray, dict]:
    """Solve the LP relaxation of SCT's favorite-child ILP, Baechi equation (2) (Hanen & Munier 1995, 3.2).

    Variables: a start time s_i >= 0 per op, the makespan w, and x_ij in [0, 1] per edge i -> j, where
    x_ij = 0 means "j is i's favorite child" (no communication delay).  Minimise w subject to

        s_i + p_i <= w                          for every op (kept only for sinks: the others are implied),
        s_i + p_i + c_ij x_ij <= s_j             for every edge,
        sum_j x_ij >= outdeg(i) - 1              (at most one favorite child; rows with outdeg <= 1 dropped),
        sum_i x_ij >= indeg(j) - 1               (at most one favorite parent; rows with indeg <= 1 dropped).

    Equation (2) in the paper's text has lost symbols; these are the ILP's constraints of [17] that it
    transcribes.  p_i is the op's execution time averaged over the devices, c_ij the transfer time of the
    edge's bytes averaged over ordered pairs of distinct devices (latency + bytes / bandwidth).  Times are
    divided by their largest value before solving, to keep the LP well scaled.  Solved with HiGHS'
    interior-point method (the model and options of `linprog(method="highs-ipm")`, handed to HiGHS through
    `highspy`, `_solve`; as Baechi 4.2 uses an interior-point solver) on sparse constraint matrices; `method`
    may name HiGHS' dual simplex ("highs-ds") or its default choice ("highs") instead.  An LP without an
    optimum gets x = 1 on every edge (no favourite child), logged and reported as ``lp_unsolved``.
    `reduce=False` solves the LP as written, without the reductions below.

    Exact reductions (same optimal makespan; the returned x is an optimal solution of the full LP, though
    not necessarily the one an interior-point method would reach on it):

    - implied edges (`implied_edges_kept`): an edge whose row follows from another path between its ends
      gets x = 1 and no variable or row;
    - slack edges: with LB0 the longest path without communication (a lower bound on the optimum) and
      through_e the longest source-to-sink path through edge e with every communication paid, an edge with
      through_e < LB0 can never lie on a path longer than the optimum, so it gets x = 1 and no row; the same
      for a sink whose longest path with every communication is below LB0.  (From an optimum of the reduced
      LP, x = 1 on those edges and left-justified starts give a solution of the full LP with the same
      makespan; the no-communication critical path is kept, so the reduced optimum is >= LB0.)
    - bounds: a left-justified optimal solution has h0_i <= s_i <= h1_i (heads without / with every
      communication), and the makespan lies in [LB0, longest path with every communication]; these bounds are
      given to the solver;
    - single-parent ops: an op with one kept edge into it loses its start variable and that edge's row
      (`_eliminate_single_parents`, Fourier-Motzkin along chains);
    - the makespan is the last of a chain u_1 <= ... <= u_k over the k sinks instead of one variable in every
      sink's row: one dense column makes the interior point's normal equations dense (k^2 fill-in; with
      5,000 sinks that cost minutes).

    On the 20,308-op, 85,747-edge benchmark graph these take the LP from 135.7 s to about 15 s with
    HiGHS' defaults, 12.7 s with `DEFAULT_LP_OPTIONS`.

    Returns x (one value per edge, in the order of ``graph.index().succ`` flattened) and facts (status,
    time, sizes).  O(V + E) preparation (plus `implied_edges_kept`), then the interior point on at most
    V + E variables and rows.
    """
    idx = graph.index()
    src, dst, p, c = _edge_costs(graph, cluster, compute)
    return _solve_sct(src, dst, p, c, method, reduce, options, size=idx.n)


def _edges(idx: GraphIndex) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sources, destinations and bytes of the edges in the order of ``idx.succ`` flattened; from the index's
    shared arrays (`sim_kernel.index_arrays`, which the compiled list scheduling reads too) when the graph has
    `COMPILED_MIN_OPS` ops or more.  O(V + E)."""
    n = idx.n
    if _kernel(n) is not None:
        from ...sim_kernel import index_arrays

        ia = index_arrays(idx)
        return np.repeat(np.arange(n, dtype=np.int64), np.diff(ia["succ_ptr"])), ia["succ_k"], ia["succ_b"]
    src = np.fromiter((i for i in range(n) for _ in idx.succ[i]), dtype=np.int64)
    dst = np.fromiter((j for i in range(n) for j, _ in idx.succ[i]), dtype=np.int64)
    byt = np.fromiter((b for i in range(n) for _, b in idx.succ[i]), dtype=float)
    return src, dst, byt


def _edge_costs(graph: OpGraph, cluster: Cluster, compute: list[float] | np.ndarray | None):
    """Edges (sources, destinations, in the order of ``graph.index().succ`` flattened), p (execution time
    per op averaged over the devices, or `compute`) and c (the edges' transfer time averaged over ordered
    pairs of distinct devices), as `sct_lp` defines them.  O(V + E)."""
    idx = graph.index()
    devs = cluster.devices
    D = len(devs)
    src, dst, byt = _edges(idx)
    E = len(src)
    if compute is None:
        inv = np.mean([1.0 / d.speed for d in devs])
        p = np.asarray(idx.compute_s, dtype=float) * inv
    else:
        p = np.asarray(compute, dtype=float)
    if D > 1:
        lat = np.array(cluster.latency_table, dtype=float)
        ibw = 1.0 / np.array(cluster.bandwidth_table, dtype=float)
        off = ~np.eye(D, dtype=bool)
        # a coarse op's edge pays one latency per tensor it carries (`GraphIndex.copy_tensors`)
        c = lat[off].mean() * np.asarray(idx.copy_tensors, dtype=float)[src] + byt * ibw[off].mean()
    else:
        c = np.zeros(E)
    return src, dst, p, c


def _solve_sct(
    src: np.ndarray,
    dst: np.ndarray,
    p: np.ndarray,
    c: np.ndarray,
    method: str,
    reduce: bool,
    options: dict[str, Any] | None,
    release: np.ndarray | None = None,
    tail: np.ndarray | None = None,
    size: int = 0,
) -> tuple[np.ndarray, dict]:
    """The SCT LP of `sct_lp` on ops 0..n-1 in topological order (`src`, `dst` the edges in ``succ`` order of
    `GraphIndex`: sources ascending, `p`, `c` the times), with the reductions described there; x per edge
    and facts.  `release[i]` is a lower bound on op i's start and `tail[i]` the time that must still follow
    op i's end (an op with a tail has a makespan row even when it has successors): the window LPs of
    `sct_lp_windowed`; None (the whole graph) leaves the LP as `sct_lp` documents it.  `size`: the ops of the
    whole graph (compiled preparation from `COMPILED_MIN_OPS`)."""
    n = len(p)
    E = len(src)
    facts: dict[str, Any] = {"lp_vars": n + 1 + E}
    if E == 0:
        facts.update(lp_status=0, lp_time_s=0.0, lp_rows=0)
        return np.ones(0), facts
    scale = max(float(p.max(initial=0.0)), float(c.max(initial=0.0)))
    # times of at most a subnormal second (1 / scale overflows, and with it a window's release or tail): as
    # no time at all, which is what they are to the LP's solver
    if scale <= 0 or not math.isfinite(1.0 / scale):
        facts.update(lp_status=0, lp_time_s=0.0, lp_rows=0)
        return np.ones(E), facts
    p = p / scale
    c = c / scale
    with np.errstate(over="ignore"):
        if release is not None:
            release = release / scale
        if tail is not None:
            tail = tail / scale
    if (release is not None and not np.isfinite(release).all()) or (tail is not None and not np.isfinite(tail).all()):
        facts.update(lp_status=0, lp_time_s=0.0, lp_rows=0)  # a window's bounds beyond what the solver takes
        return np.ones(E), facts
    keep = _implied_kept(src, dst, p, c, n, size) if reduce else np.ones(E, dtype=bool)
    facts["lp_edges_implied"] = int(E - keep.sum())
    h0, h1, t1 = _heads_tails(src, dst, p, c, n, release, tail, size)
    lb0 = float((h0 + p).max()) if tail is None else float((h0 + p + tail).max())
    slack = h1[src] + p[src] + c + t1[dst] < lb0 if reduce else np.zeros(E, dtype=bool)
    facts["lp_edges_slack"] = int((slack & keep).sum())
    keep &= ~slack
    kept = np.flatnonzero(keep)
    K = len(kept)
    outdeg = np.bincount(src, minlength=n)
    indeg = np.bincount(dst, minlength=n)
    if tail is None:
        sinks = np.flatnonzero((outdeg == 0) & ((h1 + p >= lb0) | (not reduce)))
        last = p
    else:  # an op with time still to run after it closes a path of the window like a sink
        last = p + tail
        sinks = np.flatnonzero(((outdeg == 0) | (tail > 0)) & ((h1 + last >= lb0) | (not reduce)))
    k = len(sinks)
    # Variable layout: s (n), then the makespan chain u (k), then x (K).  The makespan is u_k, with
    # u_m >= u_(m-1) and u_m >= s_(sink m) + p: a chain instead of one w column touching every sink,
    # because a dense column makes the interior-point normal equations dense (k^2 fill; 5,000 sinks in a
    # 20,000-op training graph cost 2 minutes instead of seconds).  Same optimum.
    U = n
    W = n + k - 1
    X = n + k
    nv = X + K
    facts["lp_vars"] = nv
    ks, kd = src[kept], dst[kept]
    x_ids = np.arange(K)
    ck = c[kept]
    if reduce:
        anchor, offset, terms, nterms, gone = _eliminate(ks, kd, p, n, size)
    else:
        anchor, offset = np.arange(n), np.zeros(n)
        terms, nterms, gone = np.full((n, 0), -1, dtype=np.int64), np.zeros(n, np.int64), np.zeros(n, dtype=bool)
    facts["lp_ops_eliminated"] = int(gone.sum())
    # sinks: s_i - u_m <= -p_i, with s_i written through its anchor when i was eliminated; the makespan chain
    # u_(m-1) - u_m <= 0; precedence: s_i - s_j + c_e x_e <= -p_i for every kept edge into an op that was
    # not eliminated (`_lp_rows`)
    r0, c0, v0, b0, r = _lp_rows(sinks, last, anchor, offset, terms, nterms, gone, ks, kd, ck, p, U, X)
    rows, cols, vals, rhs = [r0], [c0], [v0], [b0]
    # at most one favorite child / parent: sum of the free x >= degree - 1 - (x fixed to 1)
    for kends, deg in ((ks, outdeg), (kd, indeg)):
        fixed = deg - np.bincount(kends, minlength=n)
        need = deg - 1 - fixed
        many = np.flatnonzero(need >= 1)
        if len(many):
            row_of = np.full(n, -1, dtype=np.int64)
            row_of[many] = np.arange(r, r + len(many))
            sel = row_of[kends] >= 0
            rows.append(row_of[kends][sel])
            cols.append(X + x_ids[sel])
            vals.append(-np.ones(int(sel.sum())))
            rhs.append(-need[many].astype(float))
            r += len(many)
    import scipy.sparse as sp  # here, not at import: a run without m-SCT needs no SciPy (27 MB, issue 22)

    A = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r, nv))
    b = np.concatenate(rhs)
    obj = np.zeros(nv)
    obj[W] = 1.0
    lb = np.zeros(nv)
    ub = np.full(nv, np.inf)
    ub[X:] = 1.0
    if reduce:
        lb[:n] = h0
        ub[:n] = h1
        lb[U:X] = lb0
        ub[U:X] = float((h1 + last).max())
    elif release is not None:
        lb[:n] = release
    t0 = time.perf_counter()
    # one solver call: the bar is a phase message (what is being solved), closed with its elapsed time; none for
    # a window (`sct_lp_windowed` has its own bar over the windows; a bar per window cost 0.1 ms, 4,000 at 1M)
    with tqdm(
        total=1,
        desc=f"m-SCT: solving the SCT LP ({nv} variables, {r} rows, {method})",
        unit="LP",
        disable=True if release is not None else None,
        leave=False,
    ) as bar:
        sol, status, message, unknown = _solve(obj, A, b, lb, ub, method, options or {})
        bar.update()
    facts.update(lp_time_s=time.perf_counter() - t0, lp_status=status, lp_rows=r)
    if sol is None:  # no optimum: every edge of this LP gets x = 1, no favourite child (documented in `sct_lp`)
        log.warning("SCT LP did not solve (status %s: %s); no favorite children", status, message)
        facts["lp_unsolved"] = True
        return np.ones(E), facts
    if unknown:
        log.info("SCT LP: %s", message)
        facts["lp_unknown_used"] = True
    facts["lp_makespan_s"] = float(sol[W]) * scale
    x = np.ones(E)
    x[kept] = np.clip(sol[X:], 0.0, 1.0)
    return x, facts


#: Ops per window of `sct_lp_windowed`.  Measured on the benchmark's random graphs (docs/scale.md, "m-SCT's
#: windowed SCT LP"): HiGHS' time per window grows faster than linearly with its size, so smaller windows are
#: faster (100K ops, LP and rounding: 35 s CPU at 4,000 ops, 17 s at 500, 14 s at 250, where the solver's fixed
#: cost per call takes over) and m-SCT's simulated makespans stayed within 1.5e-4 of the whole LP's (1e-4 at
#: 500) for every window tried (250-8,000 ops) at 10K, 30K and 100K ops.
WINDOW_OPS = 500

#: The window of graphs of at least `LARGE_WINDOW_FROM_OPS` ops (`window_ops`, m-SCT's default): HiGHS' time per
#: op falls as the window shrinks (IPX's per-iteration cost grows faster than the LP), and at 10^6 ops the LP is
#: most of m-SCT's run.  Measured at 1,033,312 ops, two runs of windows (docs/scale.md, "m-SCT at 1M, session
#: 17"): HiGHS 47.0 -> 35.0 s CPU, the LP 30.0 -> 23.5 s wall; m-SCT's makespan within 1e-5 relative of the
#: 500-op windows' at 300K and 1M.  200 ops saved 1-2 s more CPU but no measurable wall time of the whole
#: run, and moves the LP's own makespan further (+0.14% against +0.10%), so 250.  Below `LARGE_WINDOW_FROM_OPS`
#: the windows stay at `WINDOW_OPS`, so that the placements of smaller graphs are those of earlier sessions,
#: bit for bit (tests pin them).  A choice of this implementation: Baechi solves one LP.
LARGE_WINDOW_OPS = 250

#: Graphs of at least this many ops get `LARGE_WINDOW_OPS` (None: never); the same size as `STREAMS_ABOVE_OPS`,
#: from which the windows' favourite children already differ from one run of windows.
LARGE_WINDOW_FROM_OPS: int | None = 250000


def window_ops(n: int) -> int:
    """The ops per window of `sct_lp_windowed` that m-SCT uses by default on a graph of n ops: `WINDOW_OPS`,
    or `LARGE_WINDOW_OPS` from `LARGE_WINDOW_FROM_OPS` ops on."""
    if LARGE_WINDOW_FROM_OPS is not None and n >= LARGE_WINDOW_FROM_OPS:
        return LARGE_WINDOW_OPS
    return WINDOW_OPS


#: `lp_formulation="auto"` (m-SCT's default) solves the whole LP up to this many ops and the windowed one
#: above: the test fixtures (600-1,300 ops) and the captured models (GNMT, Inception: a few thousand ops)
#: keep the whole LP, whose favourite children are the paper's.
WINDOW_ABOVE_OPS = 20000

LP_FORMULATIONS = ("auto", "full", "windowed")

#: `sct_lp_windowed` with `streams` > 1: how many windows a later run of windows solves before its own first
#: window, to carry its starts in from approximate ones (their x are not used).
STREAM_LEAD_WINDOWS = 4

#: `MSCTPlacer`'s default: the windowed LP of a graph of at least this many ops is solved as two runs of windows
#: (`sct_lp_windowed`'s `streams`) on two threads; below it (or None: always), as one run.  The cut changes some
#: favourite children after it (docs/scale.md, "m-SCT at 1M on two cores": at 308,272 ops 25,794 favourites
#: instead of 25,723, predicted makespan +0.0002%), so it is kept to graphs where one run takes over about 15 s.
STREAMS_ABOVE_OPS: int | None = 250000


def _run_cuts(src, dst, p, c, n: int, window: int, n_win: int, k: int) -> list[int]:
    """The first window of each of `k` runs of windows (`sct_lp_windowed`'s `streams`), chosen so that the runs
    hold about the same solver work: a window's LP time follows the rows left after the slack-edge reduction
    (correlation 0.98 on the 100K benchmark graph; its windows of update ops have one row each and solve in
    1 ms, its forward and backward windows in 25-70 ms), so each window is weighed by its in-edges that the
    whole graph's slack test keeps (heads and tails with every communication against the longest path without
    any, `_heads_tails`), to the power 1.5, plus one.  The power (session 17): HiGHS' time grows faster than the
    LP, so the windows dense in kept edges cost more per edge; on the 308,272-op graph with 250-op windows
    the measured halfway point of the solver time is window 338 of 1,234, the cut at the power 1 falls at 354
    (at 1M the second run then took 2 s longer than the first), at the power 1.5 at 340 (correlation with
    the window's time 0.955 and 0.960).  Depends on the graph only, never on timing: the same x on any
    machine.  O(V + E)."""
    if k == 1:
        return [0]
    h0, h1, t1 = _heads_tails(src, dst, p, c, n, size=n)
    lb0 = float((h0 + p).max())
    keep = h1[src] + p[src] + c + t1[dst] >= lb0
    per = np.bincount(dst[keep] // window, minlength=n_win)[:n_win] ** 1.5 + 1.0
    cum = np.cumsum(per)
    cuts = [0]
    for r in range(1, k):
        w = int(np.searchsorted(cum, cum[-1] * r / k, side="right"))
        cuts.append(min(max(w, cuts[-1] + 1), n_win - (k - r)))
    return cuts


def comm_free_tails_python(succ: Any, p: Any) -> list[float]:
    """Each op's tail without communication: the longest path of op times after its end (op i's successors
    ``succ[i]`` as (op, edge) pairs, ops in topological order). The Python code path of graphs below
    `COMPILED_MIN_OPS` and the oracle of `sct_kernel.comm_free_tails`. O(V + E)."""
    n = len(succ)
    t0 = [0.0] * n
    for i in range(n - 1, -1, -1):
        best = 0.0
        for j, _ in succ[i]:
            a = p[j] + t0[j]
            if a > best:
                best = a
        t0[i] = best
    return t0


def sct_lp_windowed(
    graph: OpGraph,
    cluster: Cluster,
    compute: list[float] | np.ndarray | None = None,
    method: str = "highs-ipm",
    reduce: bool = True,
    options: dict[str, Any] | None = None,
    window: int = WINDOW_OPS,
    streams: int = 1,
    parallel: bool = True,
) -> tuple[np.ndarray, dict]:
    """The SCT LP solved window by window along the topological order: a smaller formulation whose time
    grows linearly with the ops (issue 22), rounded by the same rule (`favorite_children`).

    Why: HiGHS' interior point on the whole LP (`sct_lp`) grows as ops^1.62 on the benchmark's random
    training graphs (17.6 s at 31K ops, about 120 s at 100K, over an hour at 1M; docs/scale.md), and no solver
    option helps.  Contracting linear chains, the first idea, does not shrink it: in those graphs no edge
    joins an op of out-degree 1 to one of in-degree 1 (none of 34,077 edges at 10K ops), and Baechi's fusion
    rule (3.3: out-degree <= 1 *or* in-degree <= 1) merges only 28% of the ops, about 0.6x the time at the
    1.62 exponent.  Baechi itself solves the LP on a graph its optimizations (3.2-3.3) made smaller; this
    function makes it small by cutting it instead.

    How: the ops (numbered in the index's topological order) are cut into windows of `window` consecutive
    ops, solved in order.  The LP of a window is `sct_lp`'s (same variables, rows and exact reductions, see
    there) on the window's ops and edges into them, plus one *ghost* op per earlier op with an edge into the
    window: its execution time, its start fixed from below at the start that op got (the `release`), and
    its edges into the window with their x variables, so that every edge's x is decided once, in the window
    of its destination, together with the in-degree row of that destination.  An op with successors in
    later windows gets the longest path after it without communication (a lower bound of the rest of the
    step) as its *tail*: a makespan row s_i + p_i + tail_i <= w.  After a window is solved, its ops get
    left-justified starts from its x (s_j = max over in-edges of s_i + p_i + c_ij x_ij), which the next
    windows read for their ghosts.

    What changes against the whole LP: (1) an op's out-degree row is split across the windows of its
    children, so it may get a favourite child per window; `favorite_children`'s repair keeps the one of
    smallest x, as for the whole LP; (2) each window minimises its own makespan with optimistic tails, so
    the ops whose x the interior point pushes to 0 (the favourites) are those on the window's critical path
    rather than the step's; (3) the interior point of each window differs.  The rounding rule (x < 0.1,
    Baechi 4.3) and the m-SCT list scheduling are unchanged.  m-SCT's predicted makespans with the two
    formulations, measured on the benchmark graphs, are in docs/scale.md ("m-SCT's windowed SCT LP"); `MSCTPlacer`'s
    ``lp_formulation="auto"`` keeps the whole LP up to `WINDOW_ABOVE_OPS` ops.

    Two runs of windows (`streams` > 1, issue 22, session 16): the windows are otherwise a chain (each
    window's ghosts read the starts that the windows before it produced), so one core solves them all.  With
    `streams` = k the windows are cut into k runs of consecutive windows of about equal solver work
    (`_run_cuts`), independent of one another: run r > 0
    first solves the `STREAM_LEAD_WINDOWS` windows before its own (a lead-in whose x is discarded), starting
    from the heads without communication (every x = 0) of the ops before the lead-in, then its own windows as
    above.  The runs are solved on k threads when `parallel` (HiGHS releases the GIL while it solves, most of a
    window's time), one after the other otherwise: the same x either way, and each run writes only its own
    windows' edges.  What changes against one run: the windows after a cut see their ghosts' starts as the
    lead-in computed them, not as the windows before computed them, so their interior points, and some
    favourite children, differ; measured in docs/scale.md ("m-SCT at 1M on two cores").  ``lp_makespan_s``
    is then recomputed from the final x over the whole graph.  `streams` = 1 is the chain, unchanged.

    Returns x (one value per edge, in the order of ``graph.index().succ`` flattened) and facts (summed
    solver time, variables and rows over the windows, the worst status, the number of windows, and the
    makespan of the left-justified schedule under the fractional x as ``lp_makespan_s``).  O(V + E)
    preparation, then V / window interior points of O(window + its ghosts) variables each (plus
    (streams - 1) `STREAM_LEAD_WINDOWS` lead-in windows).
    """
    if window < 1:
        raise ValueError(f"window must be >= 1 op, got {window!r}")
    if streams < 1:
        raise ValueError(f"streams must be >= 1, got {streams!r}")
    idx = graph.index()
    n = idx.n
    src, dst, p, c = _edge_costs(graph, cluster, compute)
    E = len(src)
    first = np.zeros(n + 1, dtype=np.int64)  # edge number of op i's first out-edge
    np.cumsum(np.fromiter(map(len, idx.succ), np.int64, n), out=first[1:])
    kernel = _kernel(n)
    # longest path after each op's end, without communication (the tails)
    pl = p.tolist() if kernel is None else []
    if kernel is not None:
        t0a = kernel.comm_free_tails(first, dst, np.asarray(p, dtype=float))
    else:
        t0a = np.array(comm_free_tails_python(idx.succ, pl))
    by_dst = np.argsort(dst, kind="stable")  # edges by destination
    dptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=dptr[1:])
    x = np.ones(E)
    cl = c.tolist() if kernel is None else []

    def left_starts(ev: np.ndarray, xe: np.ndarray, start: np.ndarray) -> None:
        """start[j] = max(start[j], start[i] + p_i + c_e x_e) over the edges `ev` (ascending: sources in
        topological order) with their x values `xe`: left-justified starts."""
        if kernel is not None:
            kernel.left_starts(np.arange(len(ev)), src[ev], dst[ev], p, c[ev], xe, start)
            return
        for e, xv in zip(ev.tolist(), xe.tolist()):
            i, j = int(src[e]), int(dst[e])
            a = start[i] + pl[i] + cl[e] * xv
            if a > start[j]:
                start[j] = a

    def solve_windows(lo: int, own: int, hi: int, start: np.ndarray, bar) -> dict[str, Any]:
        """Solve the windows of ops lo..hi-1 in order, reading and updating the starts `start`; the x of the
        windows from op `own` on are written into x (those before it only lead the starts in).  Facts summed
        over the written windows; solver time and unsolved windows over all."""
        f_run: dict[str, Any] = {"lp_windows": 0, "lp_vars": 0, "lp_rows": 0, "lp_time_s": 0.0, "lp_status": 0}
        for key in (
            "lp_ghost_ops",
            "lp_windows_unsolved",
            "lp_windows_unknown_used",
            "lp_edges_implied",
            "lp_edges_slack",
        ):
            f_run[key] = 0
        f_run["lp_ops_eliminated"] = 0
        f_run["lp_warmup_windows"] = 0
        for w0 in range(lo, hi, window):
            w1 = min(hi, w0 + window)
            # the edges into the window, in edge order: the ghosts' (sources below w0), then the window's own
            ev = np.sort(by_dst[dptr[w0] : dptr[w1]])
            es = src[ev]
            from_ghost = es < w0
            ghosts = np.unique(es[from_ghost])
            m = len(ghosts)
            lsrc = np.where(from_ghost, np.searchsorted(ghosts, es), m + es - w0)
            ldst = m + dst[ev] - w0
            gv = np.concatenate([ghosts, np.arange(w0, w1)])
            # tails: the longest path after the window's ops through their edges out of the window
            tail = np.zeros(m + w1 - w0)
            out = np.arange(first[w0], first[w1])
            out = out[dst[out] >= w1]
            np.maximum.at(tail, m + src[out] - w0, p[dst[out]] + t0a[dst[out]])
            release = np.concatenate([start[ghosts], np.zeros(w1 - w0)]) if m else np.zeros(w1 - w0)
            lx, f = _solve_sct(lsrc, ldst, p[gv], c[ev], method, reduce, options, release, tail, n)
            f_run["lp_time_s"] += float(f.get("lp_time_s", 0.0))
            if f.get("lp_unsolved"):
                f_run["lp_windows_unsolved"] += 1
            if f.get("lp_unknown_used"):
                f_run["lp_windows_unknown_used"] += 1
            # left-justified starts of the window's ops under its x
            left_starts(ev, lx, start)
            if bar is not None:
                bar.update()
            if w0 < own:
                f_run["lp_warmup_windows"] += 1
                continue
            if len(ev):
                x[ev] = lx
            f_run["lp_windows"] += 1
            f_run["lp_ghost_ops"] += m
            f_run["lp_vars"] += int(f.get("lp_vars", 0))
            f_run["lp_rows"] += int(f.get("lp_rows", 0))
            if int(f.get("lp_status", 0)) != 0:
                f_run["lp_status"] = int(f["lp_status"])
            for key in ("lp_edges_implied", "lp_edges_slack", "lp_ops_eliminated"):
                f_run[key] += int(f.get(key, 0))
        return f_run

    # the runs of windows: [(first op of its lead-in, first op it writes, end)], `streams` of them
    n_win = -(-n // window) if n else 0
    k = max(1, min(int(streams), n_win))
    cuts = [w * window for w in _run_cuts(src, dst, p, c, n, window, n_win, k)] + [n]
    runs = [(max(0, cuts[r] - STREAM_LEAD_WINDOWS * window) if r else 0, cuts[r], cuts[r + 1]) for r in range(k)]
    starts = [np.zeros(n) for _ in runs]
    if k > 1:
        # a later run's lead-in reads its ghosts' starts from the heads without communication (x = 0)
        ev_all = np.arange(E)
        for (lo, _, _), st in zip(runs[1:], starts[1:]):
            ev = ev_all[dst < lo]
            left_starts(ev, np.zeros(len(ev)), st)
    with tqdm(total=n_win, desc="m-SCT: SCT LP by windows", unit="window", disable=None, leave=False) as bar:
        if k == 1 or not parallel:
            parts = [solve_windows(lo, own, hi, st, bar) for (lo, own, hi), st in zip(runs, starts)]
        else:
            from concurrent.futures import ThreadPoolExecutor

            # HiGHS releases the GIL while it solves (most of a window's time): the runs overlap on the cores
            with ThreadPoolExecutor(max_workers=k, thread_name_prefix="sct-lp") as pool:
                futures = [pool.submit(solve_windows, lo, own, hi, st, bar) for (lo, own, hi), st in zip(runs, starts)]
                parts = [f.result() for f in futures]
    facts: dict[str, Any] = {"lp_formulation": "windowed", "lp_window_ops": int(window), "lp_streams": k}
    for f_run in parts:
        for key, val in f_run.items():
            if key == "lp_status":
                facts[key] = val or facts.get(key, 0)
            else:
                facts[key] = facts.get(key, 0) + val
    if k == 1:
        start = starts[0]
    else:  # the left-justified starts under the final x (the runs' own starts began from approximate ones)
        start = np.zeros(n)
        left_starts(np.arange(E), x, start)
    facts["lp_makespan_s"] = float((start + p).max()) if n else 0.0
    return x, facts


def favorite_children(graph: OpGraph, x: np.ndarray, threshold: float = 0.1) -> list[int]:
    """Round the LP solution into favorite children (Baechi 2.4 and 4.3) and return favorite_parent[j].

    j is i's favorite child when x_ij < `threshold` (x = 0 means favorite; Baechi lowered the rounding
    threshold from 0.5 to 0.1 to avoid multiple favorites).  Repair: edges are taken by increasing x (then
    edge order), keeping an edge only if its source has no favorite child and its destination no favorite
    parent yet, so that each op has at most one of each. O(E log E).
    """
    idx = graph.index()
    src, dst, _ = _edges(idx)
    fav_parent = [-1] * idx.n
    has_child = [False] * idx.n
    cand = np.flatnonzero(x < threshold)
    cand = cand[np.argsort(x[cand], kind="stable")]
    for i, j in zip(src[cand].tolist(), dst[cand].tolist()):
        if not has_child[i] and fav_parent[j] < 0:
            has_child[i] = True
            fav_parent[j] = i
    return fav_parent
