"""The simulator's event loop compiled with numba (issue 22), for a static per-device order or a readiness order.

`simulate_static` computes exactly what `algorithms.simulator.simulate` computes for a static schedule
(``schedule`` given, no ``policy``), and `simulate_ready` what it computes without one, with first-in first-out
(`dispatch.FifoPolicy`, the default) or a `dispatch.RankPolicy` (each device runs its executable op of smallest
(rank, order in which the ops became executable)): both without shared host cores, per-message overheads or
recorded decisions: the same start and end times, transfers, memory timeline, peaks, traffic and first
out-of-memory event, bit for bit.  It is a port of that function's loop; the model (transfers once per
(producer, device), parallel or sequential communication, dynamic memory, the event order: every event at a
time before the devices decide) is described in `algorithms.simulator`, which stays the reference and the only
implementation of the other modes.  `tests/test_sim_kernel.py` (static orders) and
`tests/test_sim_ready_kernel.py` (readiness orders) compare the two.

The events are kept in one binary heap keyed (time, kind, op, device) like the Python loop's tuples; those
keys are unique, so any heap pops them in the same order; so are a device's ready ops' keys (rank, sequence
number), kept in one heap per device (a slice of three arrays).  Sums (traffic, busy time, cut-edge bytes, memory
levels) are taken in the loop's order.

Complexity: O((V + E) log V), at well under a microsecond per event; the first call compiles the loop
(seconds) and caches it on disk (``cache=True``).
"""

from __future__ import annotations

import weakref
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

if TYPE_CHECKING:
    from .cluster import Cluster
    from .graph import GraphIndex
    from .sim_result import SimResult

OK, NAN_TIME, DEADLOCK = 0, 1, 2

#: (weak reference to a GraphIndex, its arrays): the arrays of the last index asked for (`index_arrays`)
_last: tuple[weakref.ref, dict[str, np.ndarray]] | None = None


def _csr(lists: list, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pointer, neighbour, bytes) arrays of per-op lists of (neighbour, bytes) pairs, in list order."""
    deg = np.fromiter(map(len, lists), np.int64, n)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(deg, out=ptr[1:])
    m = int(ptr[-1])
    flat = np.fromiter(chain.from_iterable(chain.from_iterable(lists)), np.float64, 2 * m)
    return ptr, flat[0::2].astype(np.int64), np.ascontiguousarray(flat[1::2])


def index_arrays(idx: GraphIndex) -> dict[str, np.ndarray]:
    """The adjacency of a `GraphIndex` as arrays (``pred_ptr``, ``pred_j``, ``pred_b``, ``succ_ptr``,
    ``succ_k``, ``succ_b``: each op's inputs and consumers in the index's list order).  Kept for the last index
    asked about (a placer and the simulator after it share them; an index is read-only).  O(V + E)."""
    global _last
    if _last is not None and _last[0]() is idx:
        return _last[1]
    n = idx.n
    pp, pj, pb = _csr(idx.pred, n)
    sp, sk, sb = _csr(idx.succ, n)
    arrays = dict(pred_ptr=pp, pred_j=pj, pred_b=pb, succ_ptr=sp, succ_k=sk, succ_b=sb)
    _last = (weakref.ref(idx), arrays)
    return arrays


@njit(cache=True)
def _lt(t0, k0, a0, b0, t1, k1, a1, b1):
    if t0 != t1:
        return t0 < t1
    if k0 != k1:
        return k0 < k1
    if a0 != a1:
        return a0 < a1
    return b0 < b1


@njit(cache=True)
def _push(et, ek, ea, eb, ne, t, k, a, b):
    pos = ne
    while pos > 0:
        par = (pos - 1) >> 1
        if _lt(t, k, a, b, et[par], ek[par], ea[par], eb[par]):
            et[pos], ek[pos], ea[pos], eb[pos] = et[par], ek[par], ea[par], eb[par]
            pos = par
        else:
            break
    et[pos], ek[pos], ea[pos], eb[pos] = t, k, a, b
    return ne + 1


@njit(cache=True)
def _pop(et, ek, ea, eb, ne):
    """Remove the root of a heap of `ne` entries; returns the new size."""
    last = ne - 1
    t, k, a, b = et[last], ek[last], ea[last], eb[last]
    pos = 0
    child = 1
    while child < last:
        right = child + 1
        if right < last and _lt(et[right], ek[right], ea[right], eb[right], et[child], ek[child], ea[child], eb[child]):
            child = right
        if _lt(et[child], ek[child], ea[child], eb[child], t, k, a, b):
            et[pos], ek[pos], ea[pos], eb[pos] = et[child], ek[child], ea[child], eb[child]
            pos = child
            child = 2 * pos + 1
        else:
            break
    if last > 0:
        et[pos], ek[pos], ea[pos], eb[pos] = t, k, a, b
    return last


@njit(cache=True)
def _rlt(r0, s0, r1, s1):
    return r0 < r1 or (r0 == r1 and s0 < s1)


@njit(cache=True)
def _rpush(hr, hs, hj, base, size, d, r, s, j):
    """Push (rank r, sequence number s, op j) onto device d's ready heap: the slice ``base[d]:`` of ``hr``,
    ``hs``, ``hj``, ``size[d]`` entries, smallest (rank, sequence number) at the root."""
    b = base[d]
    pos = size[d]
    while pos > 0:
        par = (pos - 1) >> 1
        if _rlt(r, s, hr[b + par], hs[b + par]):
            hr[b + pos], hs[b + pos], hj[b + pos] = hr[b + par], hs[b + par], hj[b + par]
            pos = par
        else:
            break
    hr[b + pos], hs[b + pos], hj[b + pos] = r, s, j
    size[d] += 1


@njit(cache=True)
def _rpop(hr, hs, hj, base, size, d):
    """Remove and return the op at the root of device d's ready heap (`_rpush`)."""
    b = base[d]
    top = hj[b]
    last = size[d] - 1
    r, s, j = hr[b + last], hs[b + last], hj[b + last]
    pos = 0
    child = 1
    while child < last:
        right = child + 1
        if right < last and _rlt(hr[b + right], hs[b + right], hr[b + child], hs[b + child]):
            child = right
        if _rlt(hr[b + child], hs[b + child], r, s):
            hr[b + pos], hs[b + pos], hj[b + pos] = hr[b + child], hs[b + child], hj[b + child]
            pos = child
            child = 2 * pos + 1
        else:
            break
    if last > 0:
        hr[b + pos], hs[b + pos], hj[b + pos] = r, s, j
    size[d] = last
    return top


@njit(cache=True)
def _mem(d, delta, t, op, cur, peak, limit, mt_t, mt_v, mt_d, nm, oom, alloc):
    """alloc (peak and out-of-memory check) or free (`alloc` False) of `delta` bytes on device d at t."""
    m = cur[d] + delta
    cur[d] = m
    if alloc:
        if m > peak[d]:
            peak[d] = m
    k = nm[0]
    if k < mt_t.shape[0]:
        mt_t[k] = t
        mt_v[k] = m
        mt_d[k] = d
    nm[0] = k + 1
    if alloc and m > limit[d] and oom[0] < 0:
        oom[0] = op
        oom[1] = d
        oom[2] = t
        oom[3] = m


@njit(cache=True)
def sim_run(
    dev_of,
    dur,
    pred_ptr,
    pred_j,
    succ_ptr,
    succ_k,
    succ_b,
    persist,
    temp,
    outb,
    copyb,
    ntens,
    lat,
    bw,
    limit,
    seq_ptr,
    seq_ops,
    by_ready,
    rank,
    sequential,
    up_front,
    # outputs
    start,
    end,
    order,
    tr,
    tr_t,
    mt_t,
    mt_v,
    mt_d,
    peak,
    busy_s,
    res,
    oom,
):
    """The loop of `simulate` for a static order (``seq_ptr``, ``seq_ops``: each device's ops in its order) or,
    with ``by_ready``, for a policy that keys each op when it becomes executable (`dispatch.FifoPolicy`,
    `dispatch.RankPolicy`): a device runs its executable op of smallest (``rank[op]``, sequence number), the
    sequence number counting the ops made executable so far (module docstring).  ``order[k]`` the k-th op
    started, ``tr``
    (op, src, dst) and ``tr_t`` (start, arrival, bytes) the transfers in the order they are made, ``mt_*`` the
    memory timeline changes (time, level, device) in order; ``res``: status, ops done, traffic, cut-edge bytes,
    number of transfers, of timeline changes, and (NaN status) the two times."""
    n = dur.shape[0]
    nd = limit.shape[0]
    # remote consumers grouped per (producer, device), devices in the order of their first consumer
    rem_ptr = np.zeros(n + 1, np.int64)
    rem_dev = np.empty(succ_k.shape[0], np.int64)
    rem_b = np.empty(succ_k.shape[0], np.float64)
    rem_nc = np.zeros(succ_k.shape[0], np.int64)
    local_cons = np.zeros(n, np.int64)
    cut = 0.0
    nr = 0
    for i in range(n):
        di = dev_of[i]
        r0 = nr
        for e in range(succ_ptr[i], succ_ptr[i + 1]):
            dj = dev_of[succ_k[e]]
            b = succ_b[e]
            if dj == di:
                local_cons[i] += 1
            else:
                cut += b
                f = -1
                for r in range(r0, nr):
                    if rem_dev[r] == dj:
                        f = r
                        break
                if f < 0:
                    rem_dev[nr] = dj
                    rem_b[nr] = b
                    rem_nc[nr] = 1
                    nr += 1
                else:
                    if b > rem_b[f]:
                        rem_b[f] = b
                    rem_nc[f] += 1
        rem_ptr[i + 1] = nr
    missing = np.empty(n, np.int64)
    for i in range(n):
        missing[i] = pred_ptr[i + 1] - pred_ptr[i]
    is_ready = missing == 0
    # ready heaps (by_ready): device d's in the slice of hr/hs/hj from base[d], as long as its op count
    base = np.zeros(nd + 1, np.int64)
    size = np.zeros(nd, np.int64)
    nh = n if by_ready else 0
    hr = np.empty(nh, np.float64)
    hs = np.empty(nh, np.int64)
    hj = np.empty(nh, np.int64)
    if by_ready:
        for i in range(n):
            base[dev_of[i] + 1] += 1
        for d in range(nd):
            base[d + 1] += base[d]
    seqno = 0
    cur = np.zeros(nd, np.float64)
    nm = np.zeros(1, np.int64)
    for i in range(n):
        if persist[i]:
            _mem(dev_of[i], persist[i], 0.0, i, cur, peak, limit, mt_t, mt_v, mt_d, nm, oom, True)
    if up_front:
        for i in range(n):
            for r in range(rem_ptr[i], rem_ptr[i + 1]):
                _mem(rem_dev[r], copyb[i], 0.0, i, cur, peak, limit, mt_t, mt_v, mt_d, nm, oom, True)
    home_ref = np.empty(n, np.int64)
    for i in range(n):
        home_ref[i] = local_cons[i] + rem_ptr[i + 1] - rem_ptr[i]
    recv_ref = np.zeros(nr, np.int64)  # per (producer, device) entry of the remote table
    busy_until = np.zeros(nd, np.float64)
    running = np.zeros(nd, np.bool_)
    ptr = np.zeros(nd, np.int64)
    send_free = np.zeros(nd, np.float64)
    recv_free = np.zeros(nd, np.float64)
    cap = n + nr + 1
    et = np.empty(cap, np.float64)
    ek = np.empty(cap, np.int64)
    ea = np.empty(cap, np.int64)
    eb = np.empty(cap, np.int64)
    ne = 0
    no = 0
    ntr = 0
    traffic = 0.0
    done = 0
    t = 0.0
    t_last = 0.0
    if by_ready:  # the ops without inputs are executable at the start, in index order
        for i in range(n):
            if missing[i] == 0:
                seqno += 1
                _rpush(hr, hs, hj, base, size, dev_of[i], rank[i], seqno, i)
    while True:
        # dispatch(t)
        for d in range(nd):
            if running[d] or busy_until[d] > t:
                continue
            if by_ready:
                if size[d] == 0:
                    continue
                i = _rpop(hr, hs, hj, base, size, d)
            else:
                p = ptr[d]
                if p >= seq_ptr[d + 1] - seq_ptr[d]:
                    continue
                i = seq_ops[seq_ptr[d] + p]
                if not is_ready[i]:
                    continue
                ptr[d] = p + 1
            start[i] = t
            e = t + dur[i]
            end[i] = e
            busy_until[d] = e
            busy_s[d] += dur[i]
            running[d] = True
            order[no] = i
            no += 1
            if temp[i] or outb[i]:
                _mem(d, temp[i] + outb[i], t, i, cur, peak, limit, mt_t, mt_v, mt_d, nm, oom, True)
            ne = _push(et, ek, ea, eb, ne, e, 0, i, 0)
        if ne == 0:
            break
        t = et[0]
        if not t >= t_last:
            res[0] = NAN_TIME
            res[6] = t
            res[7] = t_last
            return
        t_last = t
        while ne > 0 and et[0] == t:
            kind, a, b = ek[0], ea[0], eb[0]
            ne = _pop(et, ek, ea, eb, ne)
            if kind == 0:  # an op finishes
                i = a
                d = dev_of[i]
                running[d] = False
                done += 1
                if temp[i]:
                    _mem(d, -temp[i], t, i, cur, peak, limit, mt_t, mt_v, mt_d, nm, oom, False)
                for e in range(pred_ptr[i], pred_ptr[i + 1]):
                    j = pred_j[e]
                    dj = dev_of[j]
                    if dj == d:
                        home_ref[j] -= 1
                        if home_ref[j] == 0 and outb[j]:
                            _mem(d, -outb[j], t, j, cur, peak, limit, mt_t, mt_v, mt_d, nm, oom, False)
                    else:
                        for r in range(rem_ptr[j], rem_ptr[j + 1]):
                            if rem_dev[r] == d:
                                recv_ref[r] -= 1
                                if recv_ref[r] == 0 and copyb[j]:
                                    _mem(d, -copyb[j], t, j, cur, peak, limit, mt_t, mt_v, mt_d, nm, oom, False)
                                break
                if home_ref[i] == 0 and outb[i]:
                    _mem(d, -outb[i], t, i, cur, peak, limit, mt_t, mt_v, mt_d, nm, oom, False)
                for e in range(succ_ptr[i], succ_ptr[i + 1]):
                    j = succ_k[e]
                    if dev_of[j] == d:
                        missing[j] -= 1
                        if missing[j] == 0:
                            is_ready[j] = True
                            if by_ready:
                                seqno += 1
                                _rpush(hr, hs, hj, base, size, d, rank[j], seqno, j)
                for r in range(rem_ptr[i], rem_ptr[i + 1]):
                    dj = rem_dev[r]
                    nbytes = rem_b[r]
                    dt = lat[d, dj] * ntens[i] + nbytes / bw[d, dj]
                    s0 = t
                    if sequential:
                        if send_free[d] > s0:
                            s0 = send_free[d]
                        if recv_free[dj] > s0:
                            s0 = recv_free[dj]
                        send_free[d] = s0 + dt
                        recv_free[dj] = s0 + dt
                    traffic += nbytes
                    tr[ntr, 0], tr[ntr, 1], tr[ntr, 2] = i, d, dj
                    tr_t[ntr, 0], tr_t[ntr, 1], tr_t[ntr, 2] = s0, s0 + dt, nbytes
                    ntr += 1
                    ne = _push(et, ek, ea, eb, ne, s0 + dt, 1, i, dj)
            else:  # a transfer arrives: a = producer, b = device
                i, dj = a, b
                r = rem_ptr[i]
                while rem_dev[r] != dj:
                    r += 1
                recv_ref[r] = rem_nc[r]
                if not up_front:
                    _mem(dj, copyb[i], t, i, cur, peak, limit, mt_t, mt_v, mt_d, nm, oom, True)
                home_ref[i] -= 1
                if home_ref[i] == 0 and outb[i]:
                    _mem(dev_of[i], -outb[i], t, i, cur, peak, limit, mt_t, mt_v, mt_d, nm, oom, False)
                for e in range(succ_ptr[i], succ_ptr[i + 1]):
                    j = succ_k[e]
                    if dev_of[j] == dj:
                        missing[j] -= 1
                        if missing[j] == 0:
                            is_ready[j] = True
                            if by_ready:
                                seqno += 1
                                _rpush(hr, hs, hj, base, size, dj, rank[j], seqno, j)
    res[0] = OK if done == n else DEADLOCK
    res[1] = done
    res[2] = traffic
    res[3] = cut
    res[4] = ntr
    res[5] = nm[0]
    for d in range(nd):
        res[8 + d] = ptr[d]


def simulate_static(
    idx: GraphIndex,
    cluster: Cluster,
    dev_of: list[int],
    dur: list[float],
    seq_of: list[list[int]],
    *,
    record_memory: bool,
    up_front: bool,
) -> SimResult:
    """`simulate(graph, cluster, placement, schedule)` through `sim_run` (module docstring): the same
    `SimResult`, or the same `InvalidSchedule` / `SimulationError`."""
    return _simulate(idx, cluster, dev_of, dur, seq_of, None, record_memory=record_memory, up_front=up_front)


def simulate_ready(
    idx: GraphIndex,
    cluster: Cluster,
    dev_of: list[int],
    dur: list[float],
    rank: np.ndarray | list[float],
    *,
    record_memory: bool,
    up_front: bool,
) -> SimResult:
    """`simulate(graph, cluster, placement, policy=...)` for a policy that keys each op by (``rank[op]``,
    the order in which ops became executable) when it becomes executable (`dispatch.FifoPolicy`: every rank
    0; `dispatch.RankPolicy`: its ranks, none NaN) through `sim_run`: the same `SimResult`, without the
    decision log, or the same `SimulationError`.  (The readiness order has no static order to deadlock on.)"""
    return _simulate(idx, cluster, dev_of, dur, None, rank, record_memory=record_memory, up_front=up_front)


def _simulate(
    idx: GraphIndex,
    cluster: Cluster,
    dev_of: list[int],
    dur: list[float],
    seq_of: list[list[int]] | None,
    rank: np.ndarray | list[float] | None,
    *,
    record_memory: bool,
    up_front: bool,
) -> SimResult:
    """`simulate_static` (`seq_of` given) or `simulate_ready` (`rank` given)."""
    from .errors import SimulationError
    from .sim_result import MemoryTimeline, OOMEvent, SimResult
    from .simulator import _raise_deadlock

    n = idx.n
    devs = cluster.devices
    nd = len(devs)
    names = idx.names
    f8 = np.float64
    ia = index_arrays(idx)
    pred_ptr, pred_j, succ_ptr, succ_k, succ_b = (ia[k] for k in ("pred_ptr", "pred_j", "succ_ptr", "succ_k", "succ_b"))
    n_e = len(succ_k)
    seq_ptr = np.zeros(nd + 1, np.int64)
    if seq_of is not None:
        np.cumsum([len(s) for s in seq_of], out=seq_ptr[1:])
        seq_ops = np.fromiter((i for s in seq_of for i in s), np.int64, int(seq_ptr[-1]))
    else:
        seq_ops = np.zeros(0, np.int64)
    by_ready = rank is not None
    rank_arr = np.ascontiguousarray(rank, f8) if rank is not None else np.zeros(0, f8)
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    order = np.zeros(n, np.int64)
    tr = np.zeros((n_e, 3), np.int64)
    tr_t = np.zeros((n_e, 3), f8)
    n_mt = 4 * n + 3 * n_e + 1 if record_memory else 0
    mt_t, mt_v, mt_d = np.zeros(n_mt, f8), np.zeros(n_mt, f8), np.zeros(n_mt, np.int64)
    peak = np.zeros(nd, f8)
    busy_s = np.zeros(nd, f8)
    res = np.zeros(8 + nd, f8)
    oom = np.full(4, -1.0)
    limit = np.array([d.memory_bytes for d in devs], f8)
    dev_arr = np.array(dev_of, np.int64)
    sim_run(
        dev_arr,
        np.array(dur, f8),
        pred_ptr,
        pred_j,
        succ_ptr,
        succ_k,
        succ_b,
        np.array(idx.persistent, f8),
        np.array(idx.temporary, f8),
        np.array(idx.output, f8),
        np.array(idx.copy_bytes, f8),
        np.array(idx.copy_tensors, f8),
        np.array(cluster.latency_table, f8).reshape(nd, nd),
        np.array(cluster.bandwidth_table, f8).reshape(nd, nd),
        limit,
        seq_ptr,
        seq_ops,
        by_ready,
        rank_arr,
        cluster.mode == "sequential",
        up_front,
        start,
        end,
        order,
        tr,
        tr_t,
        mt_t,
        mt_v,
        mt_d,
        peak,
        busy_s,
        res,
        oom,
    )
    status = int(res[0])
    if status == NAN_TIME:
        raise SimulationError(
            f"simulator: event time {res[6]!r} after {res[7]!r}; is a cost, latency or bandwidth NaN?"
        )
    if status == DEADLOCK:
        missing = [0] * n  # _raise_deadlock only reads which inputs never started
        ptr = [int(x) for x in res[8 : 8 + nd]]
        _raise_deadlock(names, devs, dev_of, idx.pred, missing, start.tolist(), not by_ready, seq_of, ptr)
    # issue 22: each table is turned into the result's form and freed before the next one is built, and the
    # memory timelines stay arrays (`MemoryTimeline`: a point takes 16 bytes instead of about 112 as a tuple)
    mtl: list[MemoryTimeline] = []
    k = int(res[5]) if record_memory else 0
    mt_t, mt_v, mt_d = mt_t[:k], mt_v[:k], mt_d[:k]
    for d in range(nd):
        sel = mt_d == d
        mtl.append(MemoryTimeline(np.concatenate(([0.0], mt_t[sel])), np.concatenate(([0.0], mt_v[sel]))))
    del mt_t, mt_v, mt_d
    ntr = int(res[4])
    dname = [d.name for d in devs]
    transfers = [
        (names[i], dname[a], dname[b], s0, s1, nb)
        for (i, a, b), (s0, s1, nb) in zip(tr[:ntr].tolist(), tr_t[:ntr].tolist())
    ]
    tr_end = float(tr_t[:ntr, 1].max()) if ntr else 0.0
    del tr, tr_t
    start_l = start.tolist()
    started = order[: int(res[1])]
    order_out = [[names[i] for i in started[dev_arr[started] == d].tolist()] for d in range(nd)]
    end_l = end.tolist()
    makespan = max(end_l, default=0.0)
    if ntr:
        makespan = max(makespan, tr_end)
    oom_ev = None
    if oom[0] >= 0:
        d = int(oom[1])
        oom_ev = OOMEvent(names[int(oom[0])], dname[d], float(oom[2]), float(oom[3]), devs[d].memory_bytes)
    return SimResult(
        names=list(names),
        devices=dname,
        start=start_l,
        end=end_l,
        device_of=dev_of,
        order={dname[d]: order_out[d] for d in range(nd)},
        makespan=makespan if n else 0.0,
        busy_s={dname[d]: float(busy_s[d]) for d in range(nd)},
        peak_memory={dname[d]: float(peak[d]) for d in range(nd)},
        memory_limit={dname[d]: devs[d].memory_bytes for d in range(nd)},
        memory_timeline={dname[d]: mtl[d] for d in range(nd)},
        traffic_bytes=float(res[2]),
        cut_edge_bytes=float(res[3]),
        transfers=transfers,
        oom=oom_ev,
        decisions=[],
    )
