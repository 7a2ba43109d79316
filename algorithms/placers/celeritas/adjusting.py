"""Adjusting Placement (Celeritas section 5.2, Algorithm 2; equations 7 to 9) with the best-effort rule for
devices that are all full.

The coarse nodes are visited in CPD-TOPO order v_1 .. v_n. For v_i and each device d:

    pre_t(v_i, d) = max over preds v_p of Fin_t[v_p] + I(d_p != d) * c_{p,i}(d_p -> d)                   (eq. 7)
    EST(d)        = max(pre_t(v_i, d), d_ava[d])

where d_ava[d] is the start of the earliest idle slot of d, at or after pre_t, long enough to hold v_i
(insertion into idle slots, as the paper asks: "checks the load on d_k to see if there is a time slot to insert
v_i after pre_t"). A device that may not run v_i (device type, a pinned colocation group) or whose available
memory is below v_i's need gets EST = +inf. Let d_k be the device of v_{i-1} and d_1 the device of least EST;

    back_cost = max over succs v_s of c_{i,s}(d_1 -> d_k)                                                 (eq. 8)
    place v_i on d_1 if EST(d_k) - EST(d_1) > back_cost, else on d_k if EST(d_k) < inf                    (eq. 9)
    otherwise (every device full) on the allowed device with the most memory left (best effort, 6.3).

Op-level times (`timeline.Timeline`, the placers' default ``plan="ops"``): EST(d) and the finish time of v_i on d
come from scheduling v_i's ops on the simulator's model (each op on its own device, a tensor sent once per
destination device, transfers queued on send/receive channels with congestion, Celeritas 6.1), so that the
planned makespan is the simulator's (`_adjusting_on_ops`); the rule of eqs. 8 and 9 is unchanged. Without a
timeline the node-level model below (the paper's eq. 7) is used.

Choices where the paper is vague:

* costs: the exact execution time of the node on each device (`GraphIndex.exec_time`) and the exact transfer
  time of each pair (`Cluster.transfer_time`); back_cost uses the pair (d_1 -> d_k), the transfer that sending
  the results "back to d_k" would cost (Algorithm 2 computes it before the device loop; with uniform links the
  two are equal). A node without successors has back_cost 0;
* the first node has no predecessor in the sequence: d_k is then the first device (where Order-Place starts);
* ties in EST go to d_k, then to the lower device index;
* on devices of different speeds eq. 9 compares finish times EST + w_i(d) by default (`compare="finish"`),
  which is eq. 9 itself on identical devices; `compare="start"` keeps the literal EST comparison;
* "lowest memory usage" for best effort is read as the most available memory (the algorithm's
  ``argmin Ava_m`` contradicts the text; the text is followed);
* the communication of an edge is charged per edge, as eq. 7 does (the simulator sends a tensor once per
  destination device; an edge of the coarse graph already aggregates its producers' tensors).

The per-device order returned sorts nodes by (planned start, nonzero duration, sequence position): a linear
extension of the graph (along an edge u -> v the start does not decrease, and equal starts mean u takes no
time), so it never deadlocks, and replaying it lets no node start later than planned (zero-length nodes are
kept as points in the busy lists, so no node is inserted across one).
Complexity: O((V' + E') * D + V' * D * log V') for V' nodes, E' edges, D devices (the insertion scan is
amortised over the idle slots of a device).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...errors import ConfigError
from ...graph import GraphIndex
from .common import CoarseState
from .timeline import Timeline, earliest_slot, insert

log = logging.getLogger(__name__)


@dataclass
class AdjustResult:
    device: list[int]  # device index per coarse node
    start: list[float]  # planned start (EST) per coarse node
    finish: list[float]  # planned finish per coarse node
    makespan: float
    moves: int = 0  # nodes placed on d_1 instead of a feasible d_k (eq. 9 fired)
    memory_moves: int = 0  # nodes moved because d_k was full or not allowed
    best_effort: list[int] = field(default_factory=list)
    order_key: list[tuple] = field(default_factory=list)  # per-device order key per coarse node


def _eq9_device(key: list[float], est: list[float], dk: int, d1: int, back_cost: float, res: AdjustResult) -> int:
    """Eq. 9's choice: the best device `d1` by `key` replaces the CPD-TOPO device `dk` only when it gains more than
    the transfer back (`back_cost`); an infinite key on `dk` (no room) always loses. Counts the move in `res`."""
    if key[dk] - key[d1] > back_cost:  # inf - finite > back_cost: dk full
        if math.isinf(est[dk]):
            res.memory_moves += 1
        elif d1 != dk:
            res.moves += 1
        return d1
    return dk


def adjusting_placement(
    cidx: GraphIndex,
    state: CoarseState,
    seq: Sequence[int],
    compare: str = "finish",
    timeline: Timeline | None = None,
) -> AdjustResult:
    """Algorithm 2 on the coarse graph `cidx` (node c of `cidx` is cluster c of `state`), visiting `seq`.

    `compare`: "start" applies eq. 9 to the EST literally; "finish" (default) applies it to EST + the node's
    execution time on each device. On identical devices (the paper's four V100s) the two are the same rule;
    on devices of different speeds the paper's proof (t_adjust < EST(d_m) + back_cost + w_i < EST(d_k) + w_i)
    only holds with a device-independent w_i, and comparing start times moves nodes to slow devices that
    start them earlier but finish them later.
    """
    if compare not in ("start", "finish"):
        raise ConfigError(f"compare must be 'start' or 'finish', got {compare!r}")
    if timeline is not None:
        return _adjusting_on_ops(cidx, state, seq, compare == "finish", timeline)
    use_finish = compare == "finish"
    cluster = state.cluster
    devs = cluster.devices
    nd = len(devs)
    n = cidx.n
    fin = [0.0] * n
    start = [0.0] * n
    busy_s: list[list[float]] = [[] for _ in range(nd)]
    busy_e: list[list[float]] = [[] for _ in range(nd)]
    tt = cluster.transfer_time
    res = AdjustResult(device=[-1] * n, start=start, finish=fin, makespan=0.0)
    prev_dev = 0
    dur_cache = [[cidx.exec_time(c, d.type, d.speed) for d in devs] for c in range(n)] if n else []

    def comp_est(c: int, d: int) -> float:
        pre_t = 0.0
        for p, b in cidx.pred[c]:
            dp = res.device[p]
            x = fin[p] if dp == d else fin[p] + tt(dp, d, b)
            if x > pre_t:
                pre_t = x
        return earliest_slot(busy_s[d], busy_e[d], pre_t, dur_cache[c][d])

    for c in seq:
        allowed = set(state.allowed(c))
        est = [math.inf] * nd
        for d in range(nd):
            if d in allowed and state.fits(c, d):
                est[d] = comp_est(c, d)
        dk = prev_dev
        key = [e + dur_cache[c][d] for d, e in enumerate(est)] if use_finish else est
        d1 = min(range(nd), key=lambda d: (key[d], d != dk, d))
        if math.isinf(est[d1]):  # every device full: best effort
            d = state.best_effort_device(c)
            s = comp_est(c, d)
            res.best_effort.append(c)
            state.best_effort_nodes.append(c)
            log.debug(
                "adjusting placement: no device has room for coarse node %d (%.3g bytes); best effort on %s",
                c,
                state.need(c),
                devs[d].name,
            )
        else:
            back_cost = max((tt(d1, dk, b) for _, b in cidx.succ[c]), default=0.0)
            d = _eq9_device(key, est, dk, d1, back_cost, res)
            s = est[d]
        state.commit(c, d)
        res.device[c] = d
        start[c] = s
        fin[c] = s + dur_cache[c][d]
        insert(busy_s[d], busy_e[d], s, fin[c])
        prev_dev = d
    res.makespan = max(fin, default=0.0)
    pos = {c: k for k, c in enumerate(seq)}
    res.order_key = [(start[c], fin[c] > start[c], pos[c]) for c in range(n)]
    return res


def _adjusting_on_ops(
    cidx: GraphIndex, state: CoarseState, seq: Sequence[int], use_finish: bool, tl: Timeline
) -> AdjustResult:
    """Algorithm 2 with the times of the op-level `Timeline` (the simulator's model): EST(d) is the earliest
    planned start and the finish the latest planned finish of the node's ops when the node goes to d (members
    of a colocation group pinned elsewhere run on their group's device); eq. 8's back_cost and eq. 9 as in
    `adjusting_placement`. ``AdjustResult.order_key`` is empty: the per-op order comes from `tl.order_key`."""
    devs = state.cluster.devices
    nd = len(devs)
    n = cidx.n
    idx = state.idx
    tt = state.cluster.transfer_time
    res = AdjustResult(device=[-1] * n, start=[0.0] * n, finish=[0.0] * n, makespan=0.0)
    members_sorted = [sorted(m) for m in state.clusters]
    prev_dev = 0

    def members_on(c: int, d: int) -> list[tuple[int, int]]:
        out = []
        for i in members_sorted[c]:
            g = idx.colocation[i]
            out.append((i, state.group_dev[g] if g is not None and g in state.group_dev else d))
        return out

    for c in seq:
        allowed = set(state.allowed(c))
        est = [math.inf] * nd
        fin = [math.inf] * nd
        for d in range(nd):
            if d in allowed and state.fits(c, d):
                est[d], fin[d] = tl.try_place(members_on(c, d))
                tl.undo()
        dk = prev_dev
        key = fin if use_finish else est
        d1 = min(range(nd), key=lambda d: (key[d], d != dk, d))
        if math.isinf(est[d1]):  # every device full: best effort
            d = state.best_effort_device(c)
            res.best_effort.append(c)
            state.best_effort_nodes.append(c)
            log.debug("adjusting placement: no device has room for coarse node %d; best effort on %s", c, devs[d].name)
        else:
            back_cost = max((tt(d1, dk, b) for _, b in cidx.succ[c]), default=0.0)
            d = _eq9_device(key, est, dk, d1, back_cost, res)
        res.start[c], res.finish[c] = tl.try_place(members_on(c, d))
        tl.commit()
        state.commit(c, d)
        res.device[c] = d
        prev_dev = d
    res.makespan = tl.makespan()
    return res
