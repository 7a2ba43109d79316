"""m-SCT: memory-constrained Small Communication Time placement (seed 001, Baechi, section 2.4)."""
from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog
from tqdm import tqdm

from ...base import Placer
from ...cluster import Cluster
from ...errors import ConfigError
from ...graph import OpGraph
from ...placement import Placement
from .common import ExecModel, PairQueue

log = logging.getLogger(__name__)


LP_METHODS = ("highs-ipm", "highs-ds", "highs")


def sct_lp(graph: OpGraph, cluster: Cluster, compute: list[float] | None = None,
           method: str = "highs-ipm") -> tuple[np.ndarray, dict]:
    """Solve the LP relaxation of SCT's favorite-child ILP, Baechi equation (2) (Hanen & Munier 1995, 3.2).

    Variables: a start time s_i >= 0 per op, the makespan w, and x_ij in [0, 1] per edge i -> j, where
    x_ij = 0 means "j is i's favorite child" (no communication delay).  Minimise w subject to

        s_i + p_i <= w                          for every op (kept only for sinks: the others are implied),
        s_i + p_i + c_ij x_ij <= s_j             for every edge,
        sum_j x_ij >= outdeg(i) - 1              (at most one favorite child; rows with outdeg <= 1 dropped),
        sum_i x_ij >= indeg(j) - 1               (at most one favorite parent; rows with indeg <= 1 dropped).

    Equation (2) in the paper's text has lost symbols; these are the ILP's constraints of [17] that it
    transcribes.  Exact reduction: an edge i -> j with an intermediate k (i -> k -> j) such that
    p_k >= c_ij has its precedence row implied (s_j >= s_k + p_k >= s_i + p_i + c_ij x_ij), and its x_ij
    appears otherwise only on the loose side of the favorite rows, so x_ij = 1 is optimal: the edge gets no
    variable and no row (it can never be a favorite edge).  p_i is the op's execution time averaged over the devices, c_ij the transfer time of the
    edge's bytes averaged over ordered pairs of distinct devices (latency + bytes / bandwidth).  Times are
    divided by their largest value before solving, to keep the LP well scaled.  Solved with HiGHS'
    interior-point method (`linprog(method="highs-ipm")`, as Baechi 4.2 uses an interior-point solver) on
    sparse constraint matrices; `method` may name HiGHS' dual simplex ("highs-ds") or its default choice
    ("highs") instead, which are several times faster on these LPs.

    Returns x (one value per edge, in the order of ``graph.index().succ`` flattened) and facts (status,
    time, sizes).  O(interior point on V + E variables and about V + E rows).
    """
    idx = graph.index()
    n = idx.n
    devs = cluster.devices
    D = len(devs)
    src = np.fromiter((i for i in range(n) for _ in idx.succ[i]), dtype=np.int64)
    dst = np.fromiter((j for i in range(n) for j, _ in idx.succ[i]), dtype=np.int64)
    byt = np.fromiter((b for i in range(n) for _, b in idx.succ[i]), dtype=float)
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
        c = lat[off].mean() + byt * ibw[off].mean()
    else:
        c = np.zeros(E)
    facts: dict[str, Any] = {"lp_vars": n + 1 + E}
    if E == 0:
        facts.update(lp_status=0, lp_time_s=0.0, lp_rows=0)
        return np.ones(0), facts
    scale = max(float(p.max(initial=0.0)), float(c.max(initial=0.0)))
    if scale <= 0:
        facts.update(lp_status=0, lp_time_s=0.0, lp_rows=0)
        return np.ones(E), facts
    p = p / scale
    c = c / scale
    # An edge i -> j whose constraint is implied through an intermediate k (i -> k -> j with p_k >= c_ij)
    # gets x_ij = 1: its row is redundant and x_ij only appears on the loose side of the favorite rows.
    succ_sets = [set(j for j, _ in idx.succ[i]) for i in range(n)]
    pred_sets = [set(i for i, _ in idx.pred[j]) for j in range(n)]
    keep = np.ones(E, dtype=bool)
    for e in range(E):
        i, j = int(src[e]), int(dst[e])
        a, b_ = succ_sets[i], pred_sets[j]
        if len(a) > len(b_):
            a, b_ = b_, a
        ce = c[e]
        for k in a:
            if k in b_ and p[k] >= ce:
                keep[e] = False
                break
    kept = np.flatnonzero(keep)
    K = len(kept)
    facts["lp_vars"] = n + 1 + K
    facts["lp_edges_implied"] = int(E - K)
    W = n
    X = n + 1
    rows, cols, vals, rhs = [], [], [], []
    r = 0
    outdeg = np.bincount(src, minlength=n)
    indeg = np.bincount(dst, minlength=n)
    # sinks: s_i - w <= -p_i
    sinks = np.flatnonzero(outdeg == 0)
    k = len(sinks)
    rr = np.arange(r, r + k)
    rows += [rr, rr]
    cols += [sinks, np.full(k, W)]
    vals += [np.ones(k), -np.ones(k)]
    rhs.append(-p[sinks])
    r += k
    # precedence: s_i - s_j + c_e x_e <= -p_i
    ks, kd = src[kept], dst[kept]
    rr = np.arange(r, r + K)
    x_ids = np.arange(K)
    rows += [rr, rr, rr]
    cols += [ks, kd, X + x_ids]
    vals += [np.ones(K), -np.ones(K), c[kept]]
    rhs.append(-p[ks])
    r += K
    # at most one favorite child / parent: sum of the free x >= degree - 1 - (x fixed to 1)
    for ends, kends, deg in ((src, ks, outdeg), (dst, kd, indeg)):
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
    A = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(r, n + 1 + K))
    b = np.concatenate(rhs)
    obj = np.zeros(n + 1 + K)
    obj[W] = 1.0
    lb = np.zeros(n + 1 + K)
    ub = np.full(n + 1 + K, np.inf)
    ub[X:] = 1.0
    t0 = time.perf_counter()
    # one solver call: the bar is a phase message (what is being solved), closed with its elapsed time
    with tqdm(total=1, desc=f"m-SCT: solving the SCT LP ({n + 1 + K} variables, {r} rows, {method})",
              unit="LP", disable=None, leave=False) as bar:
        res = linprog(obj, A_ub=A, b_ub=b, bounds=np.column_stack([lb, ub]), method=method)
        bar.update()
    facts.update(lp_time_s=time.perf_counter() - t0, lp_status=int(res.status), lp_rows=r)
    if res.x is None:
        log.warning("SCT LP did not solve (status %s: %s); no favorite children", res.status, res.message)
        return np.ones(E), facts
    facts["lp_makespan_s"] = float(res.x[W]) * scale
    x = np.ones(E)
    x[kept] = np.clip(res.x[X:], 0.0, 1.0)
    return x, facts


def favorite_children(graph: OpGraph, x: np.ndarray, threshold: float = 0.1) -> list[int]:
    """Round the LP solution into favorite children (Baechi 2.4 and 4.3) and return favorite_parent[j].

    j is i's favorite child when x_ij < `threshold` (x = 0 means favorite; Baechi lowered the rounding
    threshold from 0.5 to 0.1 to avoid multiple favorites).  Repair: edges are taken by increasing x (then
    edge order), keeping an edge only if its source has no favorite child and its destination no favorite
    parent yet, so that each op has at most one of each. O(E log E).
    """
    idx = graph.index()
    edges = [(i, j) for i in range(idx.n) for j, _ in idx.succ[i]]
    fav_parent = [-1] * idx.n
    has_child = [False] * idx.n
    cand = np.flatnonzero(x < threshold)
    cand = cand[np.argsort(x[cand], kind="stable")]
    for e in cand.tolist():
        i, j = edges[e]
        if not has_child[i] and fav_parent[j] < 0:
            has_child[i] = True
            fav_parent[j] = i
    return fav_parent


class MSCTPlacer(Placer):
    """m-SCT: SCT's favorite-child list scheduling with memory limits; full devices are excluded.

    Baechi section 2.4.  (1) Solve the LP relaxation of the favorite-child ILP, equation (2), with HiGHS'
    interior-point method (`sct_lp`); (2) round it with `threshold` (0.1 as in 4.3) and repair so that every
    op has at most one favorite child and one favorite parent (`favorite_children`); (3) schedule like ETF
    on the finite devices (the same pair queue, execution model, dynamic memory and co-adjusted colocation
    as m-ETF, see `common`), but: a favorite child is placed on its favorite parent's device unless that
    device cannot take it, and among pairs that could start at the same time the favorite child on its
    parent's device goes first, then urgent ops (ops whose inputs could be on any device by then), then the
    rest; (4) when a device cannot hold the op chosen for it, the device is excluded from further placement
    (`exclude_full`, the paper's rule; ops of a colocation group already pinned there still go there).  A
    colocation group that does not fit only drops that pair (3.1: the algorithm's next device choice).

    Choices where the paper is vague: the finite-device rules of [17] are rendered as the tie classes above
    and as "the favorite child waits for its parent's device" (its pairs on other devices are considered
    only once that device cannot take it); urgency ignores communication queues.
    `memory_aware=False` gives classical SCT (memory tracked, never refused), which can overflow a device
    (Figure 1); `group_reserve` as in m-ETF; `lp_method` picks the LP solver (`sct_lp`).

    `info` holds lp_time_s, lp_status, n_favorite_children, n_excluded_devices, the predicted makespan and
    the predicted peak bytes per device.  An op that fits nowhere raises `InfeasiblePlacement`.

    Complexity: the LP (interior point on V + E variables) plus m-ETF's O((V D + R)(log(V D) + d)).
    """

    name = "m_sct"

    def __init__(self, threshold: float = 0.1, exclude_full: bool = True, memory_aware: bool = True,
                 group_reserve: str = "persistent", lp_method: str = "highs-ipm"):
        if lp_method not in LP_METHODS:
            raise ConfigError(f"placer.lp_method: {lp_method!r} is not one of {LP_METHODS}")
        self.lp_method = lp_method
        self.group_reserve = group_reserve
        if not 0 < threshold <= 1:
            raise ConfigError(f"placer.threshold must lie in (0, 1], got {threshold!r}")
        self.threshold = float(threshold)
        self.exclude_full = bool(exclude_full)
        self.memory_aware = bool(memory_aware)

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        t0 = time.perf_counter()
        model = ExecModel(graph, cluster, memory_aware=self.memory_aware, group_reserve=self.group_reserve)
        D = model.D
        compute = [sum(row) / D for row in model.dur]
        x, facts = sct_lp(graph, cluster, compute, self.lp_method)
        fav = favorite_children(graph, x, self.threshold)
        queue = PairQueue(model, favorite_parent=fav, exclude_full=self.exclude_full and self.memory_aware)
        queue.run()
        info = dict(facts)
        info.update(n_favorite_children=sum(1 for f in fav if f >= 0),
                    n_excluded_devices=sum(queue.excluded), n_dropped_pairs=queue.n_dropped,
                    n_reestimated=queue.n_reestimated, algorithm_time_s=time.perf_counter() - t0)
        pl = model.placement(info)
        log.info("m-SCT placed %d ops (%d favorite children) on %d devices; predicted makespan %.6g s; "
                 "LP %.3f s, total %.3f s", model.n, info["n_favorite_children"], D,
                 pl.info["predicted_makespan_s"], info.get("lp_time_s", 0.0), info["algorithm_time_s"])
        return pl
