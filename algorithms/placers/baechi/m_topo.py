"""m-TOPO: memory-constrained topological-order placement (seed 001, Baechi, section 2.2)."""

from __future__ import annotations

import logging
import math
import time
from itertools import compress
from types import ModuleType
from typing import Any

import numpy as np

from ... import compiled_mode
from ...base import Placer
from ...cluster import Cluster
from ...errors import ConfigError, InfeasiblePlacement
from ...graph import GraphIndex, OpGraph, gc_paused
from ...memory import single_device_need
from ...placement import Placement
from ...simulator import simulate

log = logging.getLogger(__name__)

#: Graphs of at least this many ops are filled by the compiled loop (`topo_kernel`, numba installed): the same
#: placement, several times faster at 10^5-10^6 ops (docs/scale.md, "m-TOPO, MITE and DFS compiled"); smaller
#: ones by `MTOPOPlacer._fill`, which needs no compiled code loaded.  Set to None to always use the Python code.
COMPILED_MIN_OPS: int | None = 2000


def _kernel(idx: GraphIndex) -> ModuleType | None:
    """The `topo_kernel` module when it applies to this graph (`COMPILED_MIN_OPS`), else None."""
    if not compiled_mode.applies(idx.n, COMPILED_MIN_OPS):
        return None
    try:
        from . import topo_kernel
    except ImportError as exc:  # numba missing: the Python code gives the same placement, slower
        log.info("m-TOPO: compiled fill unavailable (%s); using the Python one", exc)
        return None
    return topo_kernel


class MTOPOPlacer(Placer):
    """m-TOPO: fill devices one after another in topological order up to a load-balancing cap.

    Baechi section 2.2.  The per-device cap is the total memory the model requires divided by the number of
    devices plus the largest op's memory (m_i = persistent + temporary + output bytes), capped further by
    each device's own memory.  Ops are taken in topological order and placed on the current device (devices
    in increasing index) until its memory use would pass the cap; then the next device becomes current.  The
    last device has nowhere to pass ops on to, so only its own memory limits it.
    Each device runs its ops in topological order (`Placement.order`).

    Memory during placement (Baechi 4.2) is tracked dynamically, the way the simulator charges it, with the
    ops run one after another in topological order (which is m-TOPO's execution order on every device):
    persistent bytes for the whole step; an op's temporary bytes while it runs; its output from its start
    until every consumer has run; a received copy (`GraphIndex.copy_bytes`) from the first consumer on the
    receiving device from the step after its producer ran (copies are pushed as soon as a value exists, as in
    the simulator and the runtime) until every consumer has run.  A device takes an op when its persistent
    bytes plus the peak of the rest stay within its memory; a copy that becomes known when its consumer is
    placed is charged back to its arrival (a per-device history of the transient bytes at every step).  The
    steps stand for time: a sequential estimate, not a bound of the simulator's peak (outputs sent to other
    devices are held until all consumers have run, longer than in the simulator).

    Choices where the paper is vague: "total required memory" is the model's single-device need under the
    same dynamic accounting (`single_device_need`, the peak of a one-device topological run), and a device's
    "memory usage" is its dynamic peak as above; with the static sum of op sizes instead (tensors never
    freed) the cap is several times the model's need on training graphs (6.2e8 against 9.0e7 bytes on the
    operator-level GNMT), never binds, and m-TOPO degenerates into filling each device to its memory.  A
    colocation group is placed whole when its first member comes up (3.1), with the whole group's
    persistent bytes reserved; its later members' transient bytes are charged when they come up, on the
    group's device, and a later member that then overfills it is counted in ``info["n_group_overflows"]``
    (of the returned round: 0 unless the simulator's replay, which frees earlier, still fits).

    Rounds (our addition, for Baechi's forced forward/backward co-placement under dynamic memory): the
    paper reserves a group's memory when its first member is placed, which static sizes allow; dynamically,
    the backward members' bytes arrive long after the forward fill has moved on, and the device that holds
    the early layers' activations overflows in the backward pass.  Every pass is checked twice: by its own
    step accounting above and by the simulator's replay of the round (`algorithms.simulator.simulate`, each
    device running its ops in topological order, in the cluster's communication mode), since the steps
    only stand for time.  When a pass leaves device p (not the last) above its memory by o bytes, the pass
    is repeated with p's cap lowered to (the largest use its checks let through) - o, so fewer groups start
    there; when only the last device overflows, the other caps are raised by its overflow shared among them
    (up to their memory).  After `max_rounds` passes (or when a pass leaves an op no room) one last pass
    fills each device up to its own memory (the load-balancing cap dropped: the degenerate m-TOPO that
    puts a model fitting on one device on that device).  The first pass that fits both checks is returned;
    if none does, m-TOPO raises `InfeasiblePlacement` naming the op and device of the closest round's
    overflow (a placement that overflows is never returned).  A pass costs one simulation more (none on
    devices of unlimited memory): with sufficient memory m-TOPO is the paper's single pass.  On Inception-V3
    at 85% of the need per device, the first pass overflows cpu0 by 13.7 MB (48.7 MB predicted) and the
    second fits (measured before the replay check was added).  An op or group
    restricted to a device type goes to the first device of that type, from the current one on, with room.
    An op that fits on no remaining device raises `InfeasiblePlacement` naming it.  `info` reports the cap
    and, per device, the cap used, the static bytes and the predicted peak (the larger of the two checks),
    and the number of rounds.  O(V + E) plus, per received copy, an element-wise numpy add over the steps it
    spans and range maxima in O(V / B + B) through block maxima (`_StepHistory`; O(V D) memory for the
    history), plus one simulation, O((V + E) log V), per round.

    Implementation (issue 22): on graphs of `COMPILED_MIN_OPS` ops or more each pass runs compiled with numba
    (`topo_kernel.fill`, the same loop and step history over arrays), smaller ones `_fill`; both give the same
    placement (tests/test_topo_kernel.py compares them).
    """

    name = "m_topo"

    def __init__(self, max_rounds: int = 8):
        if max_rounds < 1:
            raise ConfigError(f"placer.max_rounds: {max_rounds!r} must be at least 1")
        self.max_rounds = max_rounds

    @gc_paused()  # lists and dicts by the million, no cycles; the collector would walk the graph each time
    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        t0 = time.perf_counter()
        idx = graph.index()
        n = idx.n
        devs = cluster.devices
        D = len(devs)
        kernel = _kernel(idx)
        arrays = _fill_arrays(kernel, idx, devs) if kernel is not None else None
        if arrays is None:
            size = [idx.persistent[i] + idx.temporary[i] + idx.output[i] for i in range(n)]
            total = single_device_need(idx)
            biggest = max(size, default=0.0)
        else:  # the same numbers from arrays
            total = sum(idx.persistent) + float(arrays["peak"])
            biggest = float(arrays["size"].max())
        cap_all = total / D + biggest
        limit = [d.memory_bytes for d in devs]
        caps = [limit[p] if p == D - 1 else min(cap_all, limit[p]) for p in range(D)]
        rounds = 0
        fitted = None  # (round's caps, round's result, simulated peaks): the first round that fits
        fault: tuple[float, str] | None = None  # (largest overflow, what overflowed) over the rounds
        last_error: InfeasiblePlacement | None = None
        tried_full = False
        while fitted is None:
            rounds += 1
            full = all(caps[p] >= limit[p] for p in range(D))
            tried_full = tried_full or full
            try:
                if kernel is None or arrays is None:
                    result = self._fill(idx, devs, caps, cap_all)
                else:
                    result = _fill_compiled(kernel, arrays, idx, devs, caps, cap_all)
            except InfeasiblePlacement as exc:
                last_error = exc
                result = None
            if result is not None:
                dev, used, top, overflows, checked, first_over = result
                # the replay can only overflow a finite limit: with unlimited memory it is skipped
                if not all(map(math.isinf, limit)):
                    sim = self._simulate(graph, cluster, idx, dev)
                else:
                    sim = None
                peaks = [max(top[p], sim.peak_memory[d.name] if sim else 0.0) for p, d in enumerate(devs)]
                over = [peaks[p] - limit[p] for p in range(D)]
                if max(over) <= 0:
                    fitted = (list(caps), result, sim)
                    break
                if sim is not None and sim.oom is not None:
                    what = f"{sim.oom.message()} (simulated replay of round {rounds})"
                elif first_over[0] >= 0:
                    o, q = first_over
                    what = f"op {idx.names[o]!r} overfills device {devs[q].name!r} (round {rounds}'s own accounting)"
                else:
                    q = max(range(D), key=lambda k: over[k])
                    what = f"device {devs[q].name!r} overflows (round {rounds})"
                if fault is None or max(over) < fault[0]:
                    fault = (max(over), what)
            if result is None or rounds >= self.max_rounds:
                if tried_full:
                    break
                # last resort: the paper's fill without the load-balancing cap (each device up to its memory)
                caps = list(limit)
                continue
            # a device overfilled by later members of groups pinned to it: give it less room up front,
            # or, when the last device (which takes the rest) overflows, give the others more
            if any(o > 0 for o in over[:-1]):
                for p in range(D - 1):
                    if over[p] > 0:
                        # below what the checks let through, or the next pass places the same ops
                        caps[p] = max(min(caps[p], checked[p]) - over[p] * (1 + 1e-6), 0.0)
            else:
                room = [p for p in range(D - 1) if caps[p] < limit[p]]
                if not room:
                    caps = list(limit)
                    continue
                for p in room:
                    caps[p] = min(limit[p], caps[p] + over[-1] / len(room))
        if fitted is None:
            if fault is None:
                assert last_error is not None
                raise last_error
            raise InfeasiblePlacement(
                f"m-TOPO: no round of {rounds} fits the devices' memory; the closest overflows by {fault[0]:.6g} "
                f"bytes: {fault[1]}. Give the devices more memory or place fewer ops together."
            )
        caps, (dev, used, top, overflows, _, _), sim = fitted
        assign, order = _assignment(idx, devs, dev)
        info: dict[str, Any] = {
            "cap_bytes": cap_all,
            "algorithm_time_s": time.perf_counter() - t0,
            "n_ops": n,
            "n_group_overflows": overflows,
            "rounds": rounds,
        }
        for p, d in enumerate(devs):
            info[f"cap_bytes.{d.name}"] = caps[p]
            info[f"static_bytes.{d.name}"] = used[p]
            info[f"predicted_peak_bytes.{d.name}"] = max(top[p], sim.peak_memory[d.name] if sim else 0.0)
        log.info("m-TOPO placed %d ops in %d round(s); cap %.6g bytes per device", n, rounds, cap_all)
        return Placement(assign, order, info)

    @staticmethod
    def _simulate(graph: OpGraph, cluster: Cluster, idx, dev: list[int]):
        """The simulator's replay of a round (each device runs its ops in topological order)."""
        assign, order = _assignment(idx, cluster.devices, dev)
        return simulate(graph, cluster, assign, order, record_memory=False)

    @staticmethod
    def _fill(idx, devs, caps: list[float], cap_all: float):
        """One pass of 2.2 with per-device caps; returns (device per op, static bytes, predicted peak and
        number of overfilling group members)."""
        n = idx.n
        D = len(devs)
        size = [idx.persistent[i] + idx.temporary[i] + idx.output[i] for i in range(n)]
        limit = [d.memory_bytes for d in devs]
        groups: dict[str, list[int]] = {}
        for i, g in enumerate(idx.colocation):
            if g is not None:
                groups.setdefault(g, []).append(i)
        used = [0.0] * D  # static op sizes (the cap of 2.2)
        checked = [0.0] * D  # the largest memory use a cap check let through
        persist = [0.0] * D  # persistent bytes placed on each device
        dyn = [0.0] * D  # transient bytes live now (outputs, received copies)
        peak = [0.0] * D  # peak of the transient bytes so far
        hist = _StepHistory(D, n + 1)  # transient bytes per device during each step (op index)
        remaining = [len(idx.succ[i]) for i in range(n)]  # consumers not run yet
        copies: dict[int, set[int]] = {}  # producer -> devices holding a copy
        dev = [-1] * n
        overflows = 0
        first_over = (-1, -1)
        cur = 0

        def retro(p: int, new: list[tuple[int, float]], i: int) -> float:
            """Peak of device p over steps [first arrival, i) with copies `new` (arrival step, bytes) added."""
            if not new:
                return 0.0
            new.sort()
            best, add = 0.0, 0.0
            for k, (a, b) in enumerate(new):
                add += b
                hi = new[k + 1][0] if k + 1 < len(new) else i
                if hi > a:
                    m = hist.range_max(p, a, hi) + add
                    if m > best:
                        best = m
            return best

        for i in range(n):
            g = idx.colocation[i]
            srcs = sorted({j for j, _ in idx.pred[i]})
            if dev[i] < 0:
                members = groups[g] if g is not None else [i]
                base = sum(size[m] for m in members)
                p_new = sum(idx.persistent[m] for m in members)
                want = next((idx.device_type[m] for m in members if idx.device_type[m] is not None), None)
                chosen = -1
                for p in range(cur, D):
                    if want is not None and devs[p].type != want:
                        continue
                    new = [(j + 1, idx.copy_bytes[j]) for j in srcs if dev[j] != p and p not in copies.get(j, ())]
                    now = dyn[p] + sum(b for _, b in new) + idx.temporary[i] + idx.output[i]
                    top = max(peak[p], now, retro(p, new, i))
                    cap = caps[p]
                    if persist[p] + p_new + top <= cap:
                        chosen = p
                        checked[p] = max(checked[p], persist[p] + p_new + top)
                        break
                    # this device is full for the op: move on for good (2.2)
                    cur = p + 1
                if chosen < 0:
                    what = f"op {idx.names[i]!r}" + (f" (colocation group {g!r})" if g is not None else "")
                    raise InfeasiblePlacement(
                        f"m-TOPO: {what} needs {base:.6g} bytes but no device from {devs[min(cur, D - 1)].name!r} "
                        f"on has room under its cap ({cap_all:.6g} bytes) and its memory"
                    )
                used[chosen] += base
                persist[chosen] += p_new
                for m in members:
                    dev[m] = chosen
            # run op i on its device: copies held since their producer ran, temporary and output bytes
            q = dev[i]
            for j in srcs:
                if dev[j] != q and q not in copies.setdefault(j, set()):
                    copies[j].add(q)
                    b = idx.copy_bytes[j]
                    if j + 1 < i:
                        h = hist.add_max(q, j + 1, i, b)
                        if h > peak[q]:
                            peak[q] = h
                    dyn[q] += b
            dyn[q] += idx.temporary[i] + idx.output[i]
            if dyn[q] > peak[q]:
                peak[q] = dyn[q]
            if persist[q] + peak[q] > limit[q] * (1 + 1e-12):
                if not overflows:
                    first_over = (i, q)
                overflows += 1
            hist.set_step(i, dyn)
            dyn[q] -= idx.temporary[i]
            if not idx.succ[i]:
                dyn[q] -= idx.output[i]
            for j in srcs:
                remaining[j] -= 1
                if remaining[j] == 0:
                    dyn[dev[j]] -= idx.output[j]
                    for r in copies.pop(j, ()):
                        dyn[r] -= idx.copy_bytes[j]
        return dev, used, [persist[p] + peak[p] for p in range(D)], overflows, checked, first_over


def _assignment(idx: GraphIndex, devs, dev: list[int]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(op -> device name, device name -> its ops in topological order) of a fill's device per op."""
    names = [d.name for d in devs]
    assign = dict(zip(idx.names, [names[k] for k in dev]))
    where = np.asarray(dev, np.int64)
    order = {d.name: list(compress(idx.names, (where == p).tolist())) for p, d in enumerate(devs)}
    return assign, order


def _fill_arrays(kernel: ModuleType, idx: GraphIndex, devs) -> dict[str, Any]:
    """The graph and devices as `topo_kernel.fill`'s arrays (made once per placement; every pass reuses them),
    with the ops' sizes and the single-device need's transient peak (`memory.single_device_need`).  O(V + E)."""
    from ...sim_kernel import index_arrays

    a = index_arrays(idx)
    n = idx.n
    src_ptr, src_j = kernel.distinct_sorted(a["pred_ptr"], a["pred_j"], n)
    nsucc = np.diff(a["succ_ptr"])
    persistent = np.asarray(idx.persistent, np.float64)
    temporary = np.asarray(idx.temporary, np.float64)
    output = np.asarray(idx.output, np.float64)
    # colocation groups: an id per op in order of first member, members in index order
    gid: dict[str, int] = {}
    group = np.fromiter((-1 if g is None else gid.setdefault(g, len(gid)) for g in idx.colocation), np.int64, n)
    grouped = np.flatnonzero(group >= 0)
    grp_mem = grouped[np.argsort(group[grouped], kind="stable")]
    grp_ptr = np.zeros(len(gid) + 1, np.int64)
    np.cumsum(np.bincount(group[grouped], minlength=len(gid)), out=grp_ptr[1:])
    codes: dict[str, int] = {}
    for d in devs:
        codes.setdefault(d.type, len(codes))
    op_type = np.fromiter((-1 if t is None else codes.setdefault(t, len(codes)) for t in idx.device_type), np.int64, n)
    return dict(
        src_ptr=src_ptr,
        src_j=src_j,
        nsucc=nsucc,
        persistent=persistent,
        temporary=temporary,
        output=output,
        copy_bytes=np.asarray(idx.copy_bytes, np.float64),
        group=group,
        grp_ptr=grp_ptr,
        grp_mem=grp_mem,
        op_type=op_type,
        dev_type=np.array([codes[d.type] for d in devs], np.int64),
        size=persistent + temporary + output,
        peak=kernel.single_device_peak(a["pred_ptr"], a["pred_j"], nsucc, temporary, output),
    )


def _fill_compiled(kernel: ModuleType, a: dict[str, Any], idx: GraphIndex, devs, caps: list[float], cap_all: float):
    """`MTOPOPlacer._fill` by `topo_kernel.fill`: the same result (lists as the Python code returns them) or
    the same `InfeasiblePlacement`."""
    status, err, cur, dev, used, top, overflows, checked, fo_op, fo_dev = kernel.fill(
        a["src_ptr"],
        a["src_j"],
        a["nsucc"],
        a["persistent"],
        a["temporary"],
        a["output"],
        a["copy_bytes"],
        a["group"],
        a["grp_ptr"],
        a["grp_mem"],
        a["op_type"],
        a["dev_type"],
        np.asarray(caps, np.float64),
        np.array([d.memory_bytes for d in devs], np.float64),
    )
    if status == kernel.INFEASIBLE:
        i, D = int(err), len(devs)
        g = idx.colocation[i]
        members = [i] if g is None else np.flatnonzero(a["group"] == a["group"][i]).tolist()
        base = sum(idx.persistent[m] + idx.temporary[m] + idx.output[m] for m in members)
        what = f"op {idx.names[i]!r}" + (f" (colocation group {g!r})" if g is not None else "")
        raise InfeasiblePlacement(
            f"m-TOPO: {what} needs {base:.6g} bytes but no device from {devs[min(int(cur), D - 1)].name!r} "
            f"on has room under its cap ({cap_all:.6g} bytes) and its memory"
        )
    return dev.tolist(), used.tolist(), top.tolist(), int(overflows), checked.tolist(), (int(fo_op), int(fo_dev))


#: steps per block of `_StepHistory`'s block maxima
_B = 256


class _StepHistory:
    """Transient bytes per device and step of m-TOPO's fill (`MTOPOPlacer._fill`), with exact range maxima.

    ``val[p, i]`` is device p's transient memory while op i runs; steps are set in order (`set_step`), and a
    copy received from an earlier op adds its bytes over the steps between producer and consumer
    (`add_max`), whose maximum is asked at once; `range_max` answers a device's maximum over a step range.
    Issue 22: such ranges span O(V) steps on training graphs (a forward op's output read by its backward op),
    so each block of `_B` steps keeps its maximum once all its steps are set; a range maximum reads at most
    two partial blocks and the block maxima between, O(S / _B + _B) instead of O(S).  The adds themselves stay
    element-wise (numpy), so every value is the one the plain array held, and block maxima are exact: rounding
    is monotone, so a block's maximum plus b is bit for bit the maximum of its entries each plus b (the same
    argument as `device_memory.DeviceMemory`).
    """

    __slots__ = ("val", "bmax", "closed")

    def __init__(self, D: int, steps: int):
        self.val = np.zeros((D, steps))
        self.bmax = np.zeros((D, steps // _B + 1))
        self.closed = 0  # blocks 0 .. closed - 1 have every step set and an exact maximum in bmax

    def set_step(self, i: int, values: list[float]) -> None:
        self.val[:, i] = values
        if (i + 1) % _B == 0:
            b = i // _B
            self.bmax[:, b] = self.val[:, b * _B : (b + 1) * _B].max(axis=1)
            self.closed = b + 1

    def range_max(self, p: int, a: int, c: int) -> float:
        """``val[p, a:c].max()`` for a < c (steps below c set)."""
        row = self.val[p]
        ba, bc = -(-a // _B), c // _B  # the closed blocks wholly inside [a, c) are ba .. bc - 1
        if bc - ba < 2:
            return float(row[a:c].max())
        m = float(self.bmax[p, ba:bc].max())
        if a < ba * _B:
            h = float(row[a : ba * _B].max())
            if h > m:
                m = h
        if bc * _B < c:
            t = float(row[bc * _B : c].max())
            if t > m:
                m = t
        return m

    def add_max(self, p: int, a: int, c: int, b: float) -> float:
        """Add b to ``val[p, a:c]`` (a < c, steps below c set) and return the range's new maximum."""
        row = self.val[p]
        row[a:c] += b
        ba, bc = -(-a // _B), c // _B
        bm = self.bmax[p]
        if bc > ba:
            bm[ba:bc] += b
        # blocks cut by the range's ends: their maxima are recomputed (only for closed blocks)
        for blk in {a // _B, (c - 1) // _B}:
            if blk < self.closed and not ba <= blk < bc:
                bm[blk] = row[blk * _B : (blk + 1) * _B].max()
        return self.range_max(p, a, c)
