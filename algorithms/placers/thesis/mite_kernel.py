"""MITE (thesis, seed 004, section 4.7) and DFS partitioning (4.8) compiled with numba (issue 22), for graphs
of 10^5-10^6 ops.

What it computes.  Exactly what `MITEPlacer` and `DFSPlacer` compute in Python (their docstrings state the
algorithms; `MiteScorer` the factors of eq. 4.6 to 4.16): the same units in the same order, the same feasible
devices, the same factors, the same device for every unit (the first minimum, as ``numpy.argmin``), or the
same `InfeasiblePlacement` (the unit, with the devices' memory at that moment).  It is a port of the Python
loops over arrays, which stay the reference and the code path for small graphs; `tests/test_mite_kernel.py`
compares the two.

How the state maps to arrays (V ops, U assignment units, D devices):

* Units: ``unit_of`` (op -> unit), each unit's members in index order (CSR), ``unit_size``, ``unit_type``
  (device type code, -1 for none), ``unit_exec[u, d]`` (`AssignState.exec_on`), ``unit_ops`` and the unit's
  importance (eq. 4.16, from the operations ranks computed here, `operations_rank`'s loops); devices:
  ``dev_type``, ``cap``, ``inv_cap`` (`MiteScorer.inv_cap`), ``speed``, the latency and rate tables.
* `MiteScorer.succ_devs` (the devices that hold a successor of an op, for ``cond_pred`` of eq. 4.8) is a
  V x D byte matrix.
* `MiteScorer.traffic_temp`'s dicts (a unit's assigned predecessors with their largest edge, in order of first
  sight; a member's successor devices with their largest edge, likewise) are lists with a stamp per op or
  device, so every transfer time is added to a device's total in the same order as the numpy rows are.
* The units themselves are built over arrays too (`build_units`, the same numbers as `common.build_units`);
  `Unit` objects are made only for an error message.
* Sums (a unit's size, load, ops, the ranks) are taken in the Python code's order, term for term (the Python
  code's ``sum`` adds left to right in Python 3.11; 3.12 compensates float sums, which could differ in the last
  bit).

Complexity: that of the Python code, O(V + E + U * D + (V + E) * D), without numpy's per-call overhead (the
Python code spends a few dozen small numpy calls per unit).  DFS's sorts (sources, and each op's consumers by
decreasing operations rank) are numpy's lexsorts, O(V log V + E log E).  The first call compiles the kernel
(seconds) and caches it on disk (numba ``cache=True``, under ``__pycache__``); later processes load it in well
under a second.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ...cluster import Cluster
from ...graph import OpGraph
from ...placement import Placement
from ...sim_kernel import index_arrays
from .common import AssignState, Unit

OK = 0
INFEASIBLE = 1  # the unit of the second result has no feasible device

MITE = 0  # heuristic of eq. 4.6: traffic x execution time x memory x importance speed boost
DFS = 1  # traffic x execution time (4.8)


@njit(cache=True)
def operations_rank(pred_ptr, pred_j, succ_ptr, succ_k, ops):
    """`common.operations_rank` over arrays (eq. 4.3 + 4.4): the same values."""
    n = ops.shape[0]
    src = np.zeros(n)
    for i in range(n):
        best = 0.0
        first = True
        for e in range(pred_ptr[i], pred_ptr[i + 1]):
            p = pred_j[e]
            v = src[p] + ops[p]
            if first or v > best:
                best = v
                first = False
        src[i] = best
    sink = np.zeros(n)
    for i in range(n - 1, -1, -1):
        best = 0.0
        first = True
        for e in range(succ_ptr[i], succ_ptr[i + 1]):
            v = sink[succ_k[e]]
            if first or v > best:
                best = v
                first = False
        sink[i] = best + ops[i]
    return src + sink


@njit(cache=True)
def _max(x, k):
    """``x[:k].max()`` as numpy computes it (NaN when any entry is NaN); k > 0."""
    m = x[0]
    if math.isnan(m):
        return m
    for e in range(1, k):
        v = x[e]
        if math.isnan(v):
            return v
        if v > m:
            m = v
    return m


@njit(cache=True)
def _argmin(x, k):
    """``np.argmin(x[:k])``: the first minimum, or the first NaN; k > 0."""
    best = 0
    for e in range(1, k):
        if math.isnan(x[best]):
            break
        if x[e] < x[best] or math.isnan(x[e]):
            best = e
    return best


@njit(cache=True)
def _choose(u, mode, zero_traffic, G, U, V, S, W):
    """The device MITE (mode `MITE`) or DFS (mode `DFS`) gives unit u: the feasible device of least heuristic
    (`MiteScorer.factors`), -1 when none is feasible.  G: the graph's arrays, U: the units', V: the devices',
    S: the assignment state, W: scratch space (`run_units`)."""
    pred_ptr, pred_j, pred_b, succ_ptr, succ_k, succ_b = G
    unit_of, mem_ptr, mem, unit_size, unit_type, unit_exec, unit_ops, unit_imp = U
    dev_type, cap, inv_cap, speed, lat, bw = V
    used, load, ops_on, dev_of, unit_dev, succ_dev = S
    scratch_i, scratch_f, pmark, dmark, stamps = W
    D = cap.shape[0]
    dv = scratch_i[0]
    plist = scratch_i[1]
    dorder = scratch_i[2]
    tot = scratch_f[0]
    heu = scratch_f[1]
    dbest = scratch_f[2]
    portion = scratch_f[3]
    pb = scratch_f[4]
    # feasible devices (`AssignState.feasible`)
    t = unit_type[u]
    size = unit_size[u]
    nf = 0
    for d in range(D):
        if (t < 0 or dev_type[d] == t) and used[d] + size <= cap[d]:
            dv[nf] = d
            nf += 1
    if nf == 0:
        return -1
    # traffic_temp for every device (`MiteScorer.traffic_temp`)
    for d in range(D):
        tot[d] = 0.0
    stamps[0] += 1
    ps = stamps[0]
    npred = 0
    for k in range(mem_ptr[u], mem_ptr[u + 1]):
        i = mem[k]
        for e in range(pred_ptr[i], pred_ptr[i + 1]):
            p = pred_j[e]
            if unit_of[p] == u or dev_of[p] < 0:
                continue
            b = pred_b[e]
            if pmark[p, 0] != ps:
                if b > -1.0:
                    pmark[p, 0] = ps
                    pmark[p, 1] = npred
                    plist[npred] = p
                    pb[npred] = b
                    npred += 1
            elif b > pb[pmark[p, 1]]:
                pb[pmark[p, 1]] = b
        stamps[1] += 1
        ds = stamps[1]
        ndest = 0
        for e in range(succ_ptr[i], succ_ptr[i + 1]):
            j = succ_k[e]
            dj = dev_of[j]
            if dj < 0 or unit_of[j] == u:
                continue
            b = succ_b[e]
            if dmark[dj] != ds:
                if b > -1.0:
                    dmark[dj] = ds
                    dorder[ndest] = dj
                    dbest[dj] = b
                    ndest += 1
            elif b > dbest[dj]:
                dbest[dj] = b
        for k2 in range(ndest):
            dj = dorder[k2]
            b = dbest[dj]
            for d in range(D):
                c = lat[d, dj] + b / bw[d, dj]
                if d == dj:
                    c = 0.0
                tot[d] += c
    for k in range(npred):
        p = plist[k]
        b = pb[k]
        s = dev_of[p]
        for d in range(D):
            r = lat[s, d] + b / bw[s, d]
            if d == s or succ_dev[p, d]:
                r = 0.0
            tot[d] += r
    # traffic, eq. 4.7 - 4.11 (kept in heu)
    for k in range(nf):
        heu[k] = tot[dv[k]]
    t_hat = _max(heu, nf)
    for k in range(nf):
        if t_hat == 0.0:
            heu[k] = 1.0
        elif heu[k] == 0.0:
            heu[k] = zero_traffic
        else:
            heu[k] = heu[k] / t_hat
    # execution time, eq. 4.12 - 4.13 (the temporary values in tot, no longer needed)
    for k in range(nf):
        d = dv[k]
        tot[k] = load[d] + unit_exec[u, d]
    e_hat = _max(tot, nf)
    for k in range(nf):
        heu[k] = heu[k] * (1.0 if e_hat == 0.0 else tot[k] / e_hat)
    if mode == MITE:
        # memory, eq. 4.14, over all devices
        m_min = 1.0
        found = False
        for d in range(D):
            portion[d] = used[d] * inv_cap[d]
            if portion[d] > 0 and (not found or portion[d] < m_min):
                m_min = portion[d]
                found = True
        for k in range(nf):
            d = dv[k]
            heu[k] = heu[k] * (m_min / 10.0 if portion[d] == 0.0 else portion[d])
        # importance speed boost, eq. 4.15 - 4.16
        for k in range(nf):
            tot[k] = speed[dv[k]]
        f_hat = _max(tot, nf)
        imp = unit_imp[u]
        for k in range(nf):
            heu[k] = heu[k] * (1.0 - imp * tot[k] / f_hat)
    return dv[_argmin(heu, nf)]


@njit(cache=True)
def _assign(u, d, G, U, S):
    """`MiteScorer.assign`: the unit's members to d, the device's memory, load and #ops, and d as a successor
    device of the members' inputs."""
    pred_ptr, pred_j = G[0], G[1]
    unit_of, mem_ptr, mem, unit_size, unit_type, unit_exec, unit_ops, unit_imp = U
    used, load, ops_on, dev_of, unit_dev, succ_dev = S
    unit_dev[u] = d
    for k in range(mem_ptr[u], mem_ptr[u + 1]):
        dev_of[mem[k]] = d
    used[d] += unit_size[u]
    load[d] += unit_exec[u, d]
    ops_on[d] += unit_ops[u]
    for k in range(mem_ptr[u], mem_ptr[u + 1]):
        i = mem[k]
        for e in range(pred_ptr[i], pred_ptr[i + 1]):
            succ_dev[pred_j[e], d] = 1


@njit(cache=True)
def run_units(
    mode,
    seq,
    walk,
    src_order,
    ssucc_ptr,
    ssucc,
    pred_ptr,
    pred_j,
    pred_b,
    succ_ptr,
    succ_k,
    succ_b,
    unit_of,
    mem_ptr,
    mem,
    unit_size,
    unit_type,
    unit_exec,
    unit_ops,
    orank,
    dev_type,
    cap,
    inv_cap,
    speed,
    lat,
    bw,
    zero_traffic,
):
    """MITE's loop over the units in the order `seq` (``walk`` false), or DFS's walk (``walk`` true) from the
    sources `src_order` over each op's consumers ``ssucc`` (sorted as `DFSPlacer` sorts them).  Returns
    (status, unit of the error or -1, unit_dev, dev_of, used, load, ops_on)."""
    n = unit_of.shape[0]
    nu = unit_size.shape[0]
    D = cap.shape[0]
    used = np.zeros(D)
    load = np.zeros(D)
    ops_on = np.zeros(D)
    dev_of = np.full(n, -1, np.int64)
    unit_dev = np.full(nu, -1, np.int64)
    succ_dev = np.zeros((n, D), np.uint8)
    # importance, eq. 4.16 (mean operations rank of the members over the largest)
    omax = 0.0
    for i in range(n):
        if i == 0 or orank[i] > omax:
            omax = orank[i]
    unit_imp = np.zeros(nu)
    if omax > 0:
        for u in range(nu):
            acc = 0.0
            for k in range(mem_ptr[u], mem_ptr[u + 1]):
                acc += orank[mem[k]]
            unit_imp[u] = acc / (omax * (mem_ptr[u + 1] - mem_ptr[u]))
    most = 1
    for i in range(n):
        most = max(most, pred_ptr[i + 1] - pred_ptr[i])
    for u in range(nu):
        k = 0
        for m in range(mem_ptr[u], mem_ptr[u + 1]):
            k += pred_ptr[mem[m] + 1] - pred_ptr[mem[m]]
        most = max(most, k)
    scratch_i = np.empty((3, max(D, most)), np.int64)
    scratch_f = np.empty((5, max(D, most)))
    pmark = np.zeros((n, 2), np.int64)
    dmark = np.zeros(D, np.int64)
    stamps = np.zeros(2, np.int64)
    G = (pred_ptr, pred_j, pred_b, succ_ptr, succ_k, succ_b)
    U = (unit_of, mem_ptr, mem, unit_size, unit_type, unit_exec, unit_ops, unit_imp)
    V = (dev_type, cap, inv_cap, speed, lat, bw)
    S = (used, load, ops_on, dev_of, unit_dev, succ_dev)
    W = (scratch_i, scratch_f, pmark, dmark, stamps)
    if not walk:
        for u in seq:
            d = _choose(u, mode, zero_traffic, G, U, V, S, W)
            if d < 0:
                return INFEASIBLE, u, unit_dev, dev_of, used, load, ops_on
            _assign(u, d, G, U, S)
        return OK, -1, unit_dev, dev_of, used, load, ops_on
    visited = np.zeros(n, np.bool_)
    stack = np.empty(ssucc.shape[0] + 1, np.int64)
    for src in src_order:
        stack[0] = src
        sp = 1
        while sp > 0:
            sp -= 1
            i = stack[sp]
            if visited[i]:
                continue
            visited[i] = True
            u = unit_of[i]
            if unit_dev[u] < 0:
                d = _choose(u, mode, zero_traffic, G, U, V, S, W)
                if d < 0:
                    return INFEASIBLE, u, unit_dev, dev_of, used, load, ops_on
                _assign(u, d, G, U, S)
            for e in range(ssucc_ptr[i + 1] - 1, ssucc_ptr[i] - 1, -1):
                j = ssucc[e]
                if not visited[j]:
                    stack[sp] = j
                    sp += 1
    return OK, -1, unit_dev, dev_of, used, load, ops_on


@njit(cache=True)
def build_units(group, pred_ptr, pred_b, persistent, temporary, output, compute_s, base_t, op_type):
    """`common.build_units` over arrays: (unit_of, first member, size, #ops, device type code, base time per
    cluster type (T x U)).  Units are numbered in order of their first member; a unit's size, #ops and base
    times add its members' values in index order from 0, its device type is its last typed member's, as
    `build_units` does.  O(V + E + V T)."""
    n = group.shape[0]
    ng = 0
    for i in range(n):
        if group[i] + 1 > ng:
            ng = group[i] + 1
    gunit = np.full(ng, -1, np.int64)
    unit_of = np.empty(n, np.int64)
    first = np.empty(n, np.int64)
    nu = 0
    for i in range(n):
        g = group[i]
        if g >= 0 and gunit[g] >= 0:
            unit_of[i] = gunit[g]
            continue
        unit_of[i] = nu
        first[nu] = i
        if g >= 0:
            gunit[g] = nu
        nu += 1
    T = base_t.shape[0]
    size = np.zeros(nu)
    ops = np.zeros(nu)
    utype = np.full(nu, -1, np.int64)
    base = np.zeros((T, nu))
    for i in range(n):
        u = unit_of[i]
        s = 0.0
        for e in range(pred_ptr[i], pred_ptr[i + 1]):
            s += pred_b[e]
        size[u] += persistent[i] + temporary[i] + output[i] + s  # `common.size_est`
        ops[u] += compute_s[i]
        if op_type[i] >= 0:
            utype[u] = op_type[i]
        for t in range(T):
            base[t, u] += base_t[t, i]
    return unit_of, first[:nu].copy(), size, ops, utype, base


def place(mode: int, graph: OpGraph, cluster: Cluster, zero_traffic: float, what: str) -> Placement:
    """MITE (`MITE`: the units groups first, each in topological order of its first member) or DFS's walk
    (`DFS`) by `run_units`, the units built by `build_units`: the placement `MITEPlacer._place_python` or
    `DFSPlacer._place_python` returns, or the error it raises (with `what` as its prefix).  O(V + E) in
    Python's numpy calls and dict building, the rest compiled."""
    idx = graph.index()
    n = idx.n
    a = index_arrays(idx)
    devs = cluster.devices
    nd = len(devs)
    types = sorted({d.type for d in devs})
    codes = {t: k for k, t in enumerate(types)}  # the cluster's types first, those it lacks after them
    op_type = np.fromiter((-1 if t is None else codes.setdefault(t, len(codes)) for t in idx.device_type), np.int64, n)
    gid: dict[str, int] = {}
    group = np.fromiter((-1 if g is None else gid.setdefault(g, len(gid)) for g in idx.colocation), np.int64, n)
    compute_s = np.asarray(idx.compute_s, np.float64)
    if any(idx.compute_by_type):
        base_t = np.empty((len(types), n))
        for k, t in enumerate(types):
            base_t[k] = np.fromiter(
                ((by.get(t, c) if by else c) for by, c in zip(idx.compute_by_type, idx.compute_s)), np.float64, n
            )
    else:
        base_t = np.tile(compute_s, (len(types), 1))
    unit_of, first, size, ops, utype, base = build_units(
        group,
        a["pred_ptr"],
        a["pred_b"],
        np.asarray(idx.persistent, np.float64),
        np.asarray(idx.temporary, np.float64),
        np.asarray(idx.output, np.float64),
        compute_s,
        base_t,
        op_type,
    )
    nu = len(size)
    names = {k: t for t, k in codes.items()}

    def unit(u: int) -> Unit:
        """Unit u as `common.build_units` makes it (for an error message)."""
        i = int(first[u])
        grp = idx.colocation[i]
        members = np.flatnonzero(unit_of == u).tolist()
        t = names[int(utype[u])] if utype[u] >= 0 else None
        by = {x: float(base[k, u]) for k, x in enumerate(types)}
        name = grp if grp is not None else idx.names[i]
        return Unit(u, name, members, t, float(size[u]), float(ops[u]), grp is not None, by)

    lacking = np.flatnonzero(utype >= len(types))
    if len(lacking):  # the error `AssignState` raises for the first unit whose type the cluster lacks
        AssignState(graph, cluster, [unit(int(lacking[0]))], [])
    speed = np.array([float(d.speed) for d in devs], np.float64)
    dev_type = np.array([codes[d.type] for d in devs], np.int64)
    unit_exec = np.empty((nu, nd))
    for d in range(nd):
        unit_exec[:, d] = base[dev_type[d]] / speed[d]  # `AssignState.exec_on`
    mem = np.argsort(unit_of, kind="stable")
    mem_ptr = np.zeros(nu + 1, np.int64)
    np.cumsum(np.bincount(unit_of, minlength=nu), out=mem_ptr[1:])
    cap = np.array([float(d.memory_bytes) for d in devs], np.float64)
    finite = np.isfinite(cap) & (cap > 0)  # as `MiteScorer.inv_cap`
    ops_rank = operations_rank(a["pred_ptr"], a["pred_j"], a["succ_ptr"], a["succ_k"], compute_s)
    empty = np.zeros(0, np.int64)
    if mode == MITE:
        is_group = group[first] >= 0
        seq = np.concatenate((np.flatnonzero(is_group), np.flatnonzero(~is_group)))
        walk, sources, ssucc_ptr, ssucc = False, empty, np.zeros(1, np.int64), empty
    else:
        # sources by decreasing operations rank, each op's consumers likewise (ties: index), as `DFSPlacer`
        seq, walk = empty, True
        sources = np.flatnonzero(np.diff(a["pred_ptr"]) == 0)
        sources = sources[np.lexsort((sources, -ops_rank[sources]))]
        ssucc_ptr = a["succ_ptr"]
        cons = a["succ_k"]
        owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(ssucc_ptr))
        ssucc = cons[np.lexsort((cons, -ops_rank[cons], owner))]
    status, err, unit_dev, dev_of, used, load, ops_on = run_units(
        mode,
        seq,
        walk,
        sources,
        ssucc_ptr,
        ssucc,
        a["pred_ptr"],
        a["pred_j"],
        a["pred_b"],
        a["succ_ptr"],
        a["succ_k"],
        a["succ_b"],
        unit_of,
        mem_ptr,
        mem,
        size,
        utype,
        unit_exec,
        ops,
        ops_rank,
        dev_type,
        cap,
        np.where(finite, 1.0 / np.where(finite, cap, 1.0), 0.0),
        speed,
        np.array(cluster.latency_table, np.float64).reshape(nd, nd),
        np.array(cluster.bandwidth_table, np.float64).reshape(nd, nd),
        float(zero_traffic),
    )
    if status == INFEASIBLE:
        bad = unit(int(err))
        st = AssignState(graph, cluster, [bad], [])
        st.used = used.tolist()
        raise st.infeasible(bad, what)
    dnames = [d.name for d in devs]
    assignment = dict(zip(idx.names, [dnames[k] for k in dev_of.tolist()]))
    return Placement(assignment, None, {"units": nu, "devices_used": len(np.unique(dev_of))})
