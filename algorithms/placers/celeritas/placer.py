"""The Celeritas placers (seed 002, section 5): Optimal Operation Fusion, then Adjusting Placement
(`CeleritasPlacer`) or Order-Place (`OrderPlacePlacer`), end to end on the graph they are given.

Pipeline (Figure 2 of the paper):

1. costs: w_i and c_ij averaged over the cluster's devices and links (`common`); CCR before fusion (eq. 1);
2. CPD-TOPO of the graph (Algorithm 1, CPD_Topo), the breakpoint program with exploration range R and
   per-cluster memory limit M = `memory_fraction` x the smallest device memory (Optimal_BP, eqs. 4 to 6), the
   coarse graph (Lemma 2); CCR after fusion (Table 2);
3. CPD-TOPO of the coarse graph (Algorithm 2, line 3) and Adjusting Placement (Algorithm 2; `compare` chooses
   whether eq. 9 compares start or finish times, the same on identical devices) or Order-Place;
4. the coarse assignment is expanded to the ops of the graph given to `place` (the paper's "mapping between
   V' and V"), with the colocation rule of `CoarseState`; `Placement.order` holds every device's ops in the
   order of the planned start times (Adjusting) or of the CPD-TOPO sequence (Order-Place).

`fuse`: True fuses, False places the graph as it is (each op a node), "auto" (default) fuses unless every op
of the graph is already a cluster made by the `CelerFusion` pass (optimizer=celeritas), so that the graph is
never fused twice.

`Placement.info`: n_ops, n_coarse_ops, ccr_before, ccr_after, cut_communication_s (S of eq. 6; these three are null
where undefined: an unprofiled graph's CCR, an unfused graph's cut), R, memory_limit_bytes (M), best_effort (0/1:
some node found every allowed device full), best_effort_nodes,
best_effort_ops (names, at most 1000), colocation_overflow_nodes (nodes whose colocated members' received copies
pushed another device over its limit), memory_overflow_bytes (static bytes above the limits in all),
fusion_time_s, adjust_time_s (or place_time_s), planned_makespan_s (Adjusting's own plan: the op-level
`timeline` with ``plan="ops"``, the node-level EST of eq. 7 with ``plan="coarse"``), plan, congestion (0/1),
memory_scale (the relaxation of the static accounting that fitted, 1 without),
persistent_budget (the smallest share of a device's true memory its persistent bytes could take after a repair, 1
without), n_retimed (sequential
re-timings of the op-level plan, `timeline`), simulated_makespan_s, moves
(eq. 9 moves), memory_moves (moves forced by a full or forbidden d_k).

Complexity: O(V + E log dmax + E * R) for fusion, O((V' + E') * D + V' * D log V') for Adjusting Placement,
O(V + E) for the expansion.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

from ...base import Placer
from ...cluster import Cluster
from ...errors import ConfigError, InfeasiblePlacement, OutOfMemory
from ...graph import GraphIndex, OpGraph
from ...memory import single_device_need, single_device_placement
from ...placement import Placement
from ...simulator import simulate
from .adjusting import adjusting_placement
from .ccr import ccr_of
from .common import CoarseState, CommModel, EdgeCosts, effective_types, mean_compute, node_memory
from .fusion import fuse as fuse_graph
from .order_place import order_place
from .timeline import Timeline
from .topo import cpd_topo

log = logging.getLogger(__name__)

#: Op type of the nodes the fusion builds.
CLUSTER_TYPE = "CeleritasCluster"
MAX_LISTED = 1000


@dataclass
class Prepared:
    idx: GraphIndex
    coarse: OpGraph
    cidx: GraphIndex
    state: CoarseState
    seq: list[int]
    info: dict[str, Any]


def auto_ranges(n_ops: int, n_devices: int) -> list[int]:
    """The exploration ranges `R="auto"` tries on a graph of `n_ops` ops and `n_devices` devices: the paper's
    200 (chosen for graphs of thousands of ops, 6.1) and ranges scaled to the graph, about n / (2 D), n / (8 D)
    and n / (32 D) ops per coarse node at most, so that a graph of a few hundred ops still yields several
    coarse nodes per device (with R = 200 a 300-op graph fuses into 2 or 3), and 1 (no fusion).  Distinct
    values >= 1, the paper's first."""
    D = max(1, n_devices)
    out = [200]
    for k in (2, 8, 32, n_ops + 1):
        r = max(1, math.ceil(n_ops / (k * D)))
        if r not in out:
            out.append(r)
    return out


def memory_scales(graph: OpGraph, cluster: Cluster, steps: int = 3) -> list[float]:
    """Relaxations of the static memory accounting tried when no placement fits (`place`).

    Celeritas charges every op its persistent + temporary + output bytes for the whole step (Algorithm 2's
    Memory[v], `common.node_memory`); the simulator, like a runtime, frees a temporary when its op ends and an
    output after its last consumer. The static total then exceeds the single-device need
    (`algorithms.memory.single_device_need`) by a ratio r (2 to 6 on the fuzzed training graphs), and at tight
    memory the accounting calls devices full that are not: the nodes go best effort and the replay runs out of
    memory where m-SCT, which accounts dynamically, fits. The scales are r^(k / steps) for k = 1 .. steps
    (none when r <= 1): the limits the accounting works with grow geometrically up to r times the device's,
    where the static charges sum to about the dynamic need. Our choice; the paper has no such step (its
    best effort, 6.3, keeps an overflowing placement). O(V)."""
    need = single_device_need(graph)
    static = sum(node_memory(graph.index()))
    r = static / need if need > 0 else 1.0
    if not r > 1.0 + 1e-9:
        return []
    return [r ** (k / steps) for k in range(1, steps + 1)]


#: The accounting scale of every device (one number for all); the share of each device's true memory persistent
#: bytes may take (None: all of it). See `_recover`.
Scale = float | list[float]
Persist = list[float] | None

#: Sequential mode: about how many re-timings of the op-level plan a placement may cost (`timeline.Timeline`).
RETIMES = 32

#: Largest factor applied to the accounting scale of a device that overflowed, per repair round (`_recover`:
#: limit / peak when smaller).
REPAIR_FACTOR = 0.9
#: How many of the candidate ranges (the first ones: the paper's 200 and about n / (2 D) under R="auto") the
#: relaxed accounting and the repair try: each try places and replays the whole graph (seconds on 5,000 ops).
RECOVERY_RANGES = 2


def _worst_ratio(peaks: dict[str, float], cluster: Cluster) -> float:
    """The largest peak / limit over the devices (inf without peaks)."""
    if not peaks:
        return math.inf
    return max(peaks.get(d.name, 0.0) / d.memory_bytes for d in cluster.devices if d.memory_bytes > 0)


class _CeleritasBase(Placer):
    def __init__(
        self,
        R: int | str = 200,
        memory_fraction: float = 0.25,
        fuse: bool | str = "auto",
        check_memory: bool = True,
        repair_rounds: int = 8,
    ):
        self.check_memory = bool(check_memory)
        if not isinstance(repair_rounds, int) or repair_rounds < 0:
            raise ConfigError(f"repair_rounds must be an integer >= 0, got {repair_rounds!r}")
        self.repair_rounds = repair_rounds
        self.auto_R = R == "auto"
        if self.auto_R:
            R = 200
        if not isinstance(R, int) or R < 1:
            raise ConfigError(f"R (exploration range) must be an integer >= 1 or 'auto', got {R!r}")
        if not memory_fraction > 0:
            raise ConfigError(f"memory_fraction must be > 0, got {memory_fraction!r}")
        if fuse not in (True, False, "auto"):
            raise ConfigError(f"fuse must be true, false or 'auto', got {fuse!r}")
        self.R = int(R)
        self.memory_fraction = float(memory_fraction)
        self.fuse = fuse

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        """Place with `R`, or with `R="auto"` with each of `auto_ranges`, and keep the placement with the
        smallest simulated makespan among those that fit (the paper's R = 200 wins ties); ``info["R"]`` is the
        range used, ``info["R_tried"]`` the candidates.

        Memory (with `check_memory`): each of the first `RECOVERY_RANGES` candidates (the paper's 200 and about n /
        (2 D) under R="auto") whose placement does not fit in the simulator's replay is placed again with the static
        accounting relaxed step by step (`memory_scales`: the device limits the accounting works with are multiplied
        by s, ``info["memory_scale"]``; the first scale that fits is kept), then with up to `repair_rounds` repairs
        starting from the relaxed scale that came closest to fitting: the scale of each device whose peak exceeded
        its limit, and its share of true memory for persistent bytes, are multiplied by limit / peak (at most
        `REPAIR_FACTOR`, 0.9) and the graph placed again, so that Adjusting Placement moves work off those devices
        (as Baechi's placers here place again with a margin on an overflowing device; `_recover`). A candidate among
        those first ranges that fits but placed nodes best effort (the static accounting called every device full,
        which a replay that fits refutes) is placed again with each relaxed scale as well (Celeritas Table 3's
        Transformer at 75% of the need, issue 21: 0.0025 s at R = 22 without, 0.0016 s at R = 200 relaxed 3x). Every
        result is still checked by the replay against the true limits, and the best of all candidates that fit is
        kept. The recovery runs for those ranges even when a finer candidate fits as it is: the static accounting
        (every tensor held for the whole step) is most pessimistic for coarse nodes, whose charge sums their
        members', so without it R="auto" would compare the fused candidates, refused by that pessimism alone,
        against an unfused one (R = 1) and keep no fusion at all (Celeritas Table 3's Transformer at 75% of the
        need, issue 21: R = 1 0.067 s; R = 200 repaired 0.033 s). Then the one-device placement
        (`algorithms.memory.single_device_placement`, ``info["fallback"]``); then `InfeasiblePlacement` with the
        first candidate's error, which names the op and device that ran out of memory. Cost: up to
        len(memory_scales) + repair_rounds extra placements, and as many replays without limits, per recovered
        range."""
        cands = auto_ranges(graph.index().n, len(cluster.devices)) if self.auto_R else [self.R]
        nd = len(cluster.devices)
        fitted: list[Placement] = []
        failed: list[int] = []
        first_error: InfeasiblePlacement | None = None
        crowded: list[int] = []  # ranges that fitted only with nodes placed best effort
        for R in cands:
            try:
                pl = self._place_R(graph, cluster, R, 1.0)
            except InfeasiblePlacement as exc:
                first_error = first_error or exc
                failed.append(R)
                continue
            fitted.append(pl)
            if pl.info.get("best_effort_nodes"):
                crowded.append(R)
        if self.check_memory:
            for R in [r for r in cands[:RECOVERY_RANGES] if r in failed]:
                rec = self._recover(graph, cluster, R, nd)
                if rec is not None:
                    fitted.append(rec)
            for R in [r for r in cands[:RECOVERY_RANGES] if r in crowded]:
                for scale in memory_scales(graph, cluster):
                    try:
                        fitted.append(self._place_R(graph, cluster, R, [scale] * nd))
                    except InfeasiblePlacement:
                        continue
        best: Placement | None = None
        for pl in fitted:  # candidates' order: the paper's R = 200 first, so it wins ties
            if best is None or pl.info["simulated_makespan_s"] < best.info["simulated_makespan_s"] * (1 - 1e-9):
                best = pl
        if best is None:
            assert first_error is not None
            one = single_device_placement(graph, cluster, {"fallback_from": str(first_error)})
            if one is not None:
                log.info("%s: %s; the model fits on one device: placed there", self.name, first_error)
                one.info["simulated_makespan_s"] = one.info["predicted_makespan_s"]
                return one
            raise first_error
        if self.auto_R:
            best.info["R_tried"] = ",".join(str(r) for r in cands)
            log.info("%s: R=auto chose R=%s of %s", self.name, best.info["R"], cands)
        return best

    def _recover(self, graph: OpGraph, cluster: Cluster, R: int, nd: int) -> Placement | None:
        """Range R placed with the relaxed accounting, then repaired (`place`); None when nothing fits.

        Each relaxed scale that does not fit is kept with the replay's per-device peaks (``OutOfMemory.peaks``, from
        the replay without limits `_checked` runs); the repair starts from the scale whose worst device came closest
        to its limit and, each round, shrinks the accounting scale of every device whose peak exceeded its limit by
        limit / peak (at most `REPAIR_FACTOR`), so that one round moves work off all overflowing devices at once and
        by about as much as they overflowed. The same factor shrinks the share of the device's true memory that
        persistent bytes may take (`CoarseState.persist_left`, never relaxed): on a model whose parameters and
        optimizer state are most of the need (the paper-size Transformer profiled on an H100: 5.7 of 7.9 GB), the
        devices otherwise fill with persistent bytes to their limit and the activations overflow them by a fraction
        of a percent, round after round."""
        scales = memory_scales(graph, cluster)
        limits = [d.memory_bytes for d in cluster.devices]
        tried: list[tuple[float, list[float], dict[str, float]]] = []
        for scale in scales:
            per = [scale] * nd
            try:
                pl = self._place_R(graph, cluster, R, per)
            except OutOfMemory as exc:
                peaks = exc.peaks or {}
                tried.append((_worst_ratio(peaks, cluster), per, peaks))
                continue
            except InfeasiblePlacement:
                continue
            log.info("%s: R=%d fits with the static accounting relaxed %.3gx", self.name, R, scale)
            return pl
        if tried:
            _, per, peaks = min(tried, key=lambda t: t[0])
        else:
            per, peaks = [scales[-1] if scales else 1.0] * nd, {}
        per = list(per)
        persist = [1.0] * nd
        for _ in range(self.repair_rounds):
            for k, d in enumerate(cluster.devices):
                p = peaks.get(d.name, 0.0)
                if p > limits[k]:  # an unknown peak (inf) shrinks by REPAIR_FACTOR
                    f = min(REPAIR_FACTOR, limits[k] / p) if math.isfinite(p) else REPAIR_FACTOR
                    per[k] *= f
                    persist[k] *= f
            try:
                pl = self._place_R(graph, cluster, R, list(per), list(persist))
            except OutOfMemory as exc:
                peaks = exc.peaks or {str(exc.device): math.inf}
                continue
            except InfeasiblePlacement:
                return None
            log.info("%s: R=%d fits with per-device accounting scales %s", self.name, R, [f"{x:.3g}" for x in per])
            return pl
        return None

    def _place_R(
        self, graph: OpGraph, cluster: Cluster, R: int, scale: Scale = 1.0, persist: Persist = None
    ) -> Placement:
        raise NotImplementedError

    def _prepare(
        self, graph: OpGraph, cluster: Cluster, R: int, scale: Scale = 1.0, persist: Persist = None
    ) -> Prepared:
        t0 = time.perf_counter()
        idx = graph.index()
        types = effective_types(idx)
        comm = CommModel.of_cluster(cluster)
        w = mean_compute(idx, cluster, types)
        ec = EdgeCosts(idx, comm)
        ccr_before = ccr_of(idx, w, ec)
        do_fuse = self.fuse
        if do_fuse == "auto":
            do_fuse = not (idx.n and all(graph.op(n).get("type") == CLUSTER_TYPE for n in idx.names))
        mem_min = min(d.memory_bytes for d in cluster.devices)
        M = self.memory_fraction * mem_min if not math.isinf(mem_min) else math.inf
        cut = math.nan
        if do_fuse:
            seq0 = cpd_topo(idx, w, ec)
            fu = fuse_graph(graph, w, ec, R=R, M=M, seq=seq0)
            coarse, cut = fu.coarse, fu.cut_cost
            cidx = coarse.index()
            clusters: list[list[int]] = [[] for _ in range(cidx.n)]
            for c, members in enumerate(fu.clusters):
                clusters[cidx.pos[f"celer{c}"]] = members
        else:
            coarse, cidx = graph, idx
            clusters = [[i] for i in range(idx.n)]
        wc = mean_compute(cidx, cluster) if do_fuse else w
        ecc = EdgeCosts(cidx, comm) if do_fuse else ec
        ccr_after = ccr_of(cidx, wc, ecc)
        seq = cpd_topo(cidx, wc, ecc)
        state = CoarseState(idx, cluster, clusters, types)
        per = scale if isinstance(scale, list) else [scale] * len(state.avail)
        state.avail = [a * k for a, k in zip(state.avail, per)]
        if persist is not None:  # the repair's share of each device's true memory left to persistent bytes
            state.persist_left = [a * k for a, k in zip(state.persist_left, persist)]
        info = {
            "n_ops": idx.n,
            "n_coarse_ops": cidx.n,
            # null where undefined: an unprofiled graph (no compute time) has an infinite CCR, an unfused one no cut
            "ccr_before": ccr_before if math.isfinite(ccr_before) else None,
            "ccr_after": ccr_after if math.isfinite(ccr_after) else None,
            "cut_communication_s": cut if math.isfinite(cut) else None,
            "R": R,
            "memory_limit_bytes": M,
            "memory_scale": max(per),
            "persistent_budget": min(persist) if persist is not None else 1.0,
            "fused": int(bool(do_fuse)),
            "fusion_time_s": time.perf_counter() - t0,
        }
        log.info("celeritas: %d ops -> %d coarse nodes; CCR %.4g -> %.4g", idx.n, cidx.n, ccr_before, ccr_after)
        return Prepared(idx, coarse, cidx, state, seq, info)

    def _checked(self, graph: OpGraph, cluster: Cluster, pl: Placement) -> Placement:
        """Replay the placement in the simulator (each device in the placement's order, the cluster's
        communication mode): ``info["simulated_makespan_s"]``; with `check_memory`, a replay that runs out of
        memory raises `InfeasiblePlacement` naming the op and device instead of returning the best-effort
        placement (6.3's best effort becomes an error that says what does not fit; `place` then tries a
        relaxed accounting and the one-device placement)."""
        res = simulate(graph, cluster, pl.assignment, pl.order, record_memory=False)
        pl.info["simulated_makespan_s"] = res.makespan
        if res.oom is not None and self.check_memory:
            o = res.oom
            # every device's peak in a replay without limits, for the repair (`_recover`)
            free = simulate(graph, cluster.with_memory(math.inf), pl.assignment, pl.order, record_memory=False)
            raise OutOfMemory(
                f"{self.name}: the placement runs out of memory when simulated: {res.oom.message()} "
                f"({pl.info.get('best_effort_ops_count', 0)} ops were placed best effort). Give the devices more "
                f"memory, or set placer.check_memory=false to keep the best-effort placement.",
                op=o.op,
                device=o.device,
                time_s=o.time_s,
                used_bytes=o.used_bytes,
                limit_bytes=o.limit_bytes,
                peaks=dict(free.peak_memory),
            )
        return pl

    @staticmethod
    def _best_effort_info(state: CoarseState, info: dict[str, Any]) -> None:
        ops = state.best_effort_ops()
        info["best_effort"] = int(bool(state.best_effort_nodes))
        info["best_effort_nodes"] = len(state.best_effort_nodes)
        info["colocation_overflow_nodes"] = len(state.overflow_nodes)
        info["memory_overflow_bytes"] = state.overflow_bytes()
        info["best_effort_ops_count"] = len(ops)
        info["best_effort_ops"] = ops[:MAX_LISTED]
        if ops:
            log.warning(
                "celeritas: %d ops (%d coarse nodes) placed best effort: every allowed device was full",
                len(ops),
                len(state.best_effort_nodes),
            )
        if state.overflow_nodes:
            log.warning(
                "celeritas: copies received by colocated ops pushed %d device(s) %.4g bytes over their "
                "static memory limit",
                len(state.overflow_nodes),
                state.overflow_bytes(),
            )


class CeleritasPlacer(_CeleritasBase):
    """Celeritas: CPD-TOPO operation fusion, then Adjusting Placement (seed 002, sections 5.1 and 5.2).

    Hyper-parameters: `R` exploration range (200, the paper's; "auto": the best of `auto_ranges` by simulated
    makespan, since the paper chose 200 for graphs of thousands of ops and warns that too large a range makes
    the coarse graph too coarse: on 300-op random graphs on 4 devices R = 200 gives 0.150-0.164 s, "auto"
    0.052-0.056 s, m-ETF 0.047-0.051 s), `memory_fraction` per-cluster memory limit as a fraction of
    the smallest device memory (0.25), `fuse` (True, False, "auto"), `compare` ("finish" or "start": what eq. 9
    compares on devices of different speeds; identical on identical devices, see `adjusting`), `check_memory`
    (True: a placement whose simulated replay runs out of memory raises `InfeasiblePlacement` naming the op
    and device; False: the best-effort placement of 6.3 is returned), `plan` ("ops": plan on the simulator's
    op-level model, `timeline`; "coarse": the paper's node-level EST), `congestion` (Section 6.1: transfers are
    tasks on the sending and receiving devices' channels; "auto": `congestion_for`), `repair_rounds` (see
    `place`). See the module docstring.
    """

    name = "celeritas"

    def __init__(
        self,
        R: int | str = 200,
        memory_fraction: float = 0.25,
        fuse: bool | str = "auto",
        compare: str = "finish",
        check_memory: bool = True,
        plan: str = "ops",
        congestion: bool | str = "auto",
        repair_rounds: int = 8,
    ):
        super().__init__(R, memory_fraction, fuse, check_memory, repair_rounds)
        if compare not in ("start", "finish"):
            raise ConfigError(f"compare must be 'start' or 'finish', got {compare!r}")
        if plan not in ("ops", "coarse"):
            raise ConfigError(f"plan must be 'ops' or 'coarse', got {plan!r}")
        if congestion not in (True, False, "auto"):
            raise ConfigError(f"congestion must be true, false or 'auto', got {congestion!r}")
        if congestion is True and plan == "coarse":
            raise ConfigError("congestion needs plan='ops' (transfers are tasks of the op-level plan)")
        self.compare = compare
        self.plan = plan
        self.congestion = congestion

    def congestion_for(self, cluster: Cluster) -> bool:
        """Whether transfers queue in the plan: `congestion` itself, or with "auto" whether the cluster's
        transfers queue (``cluster.mode == "sequential"``, the simulator's queues and Baechi's and the paper's
        TensorFlow runtimes); in parallel mode the simulator lets every transfer start at once, and queueing
        them in the plan would plan on another model than the one the placement is judged by."""
        if self.plan == "coarse":
            return False
        if self.congestion == "auto":
            return cluster.mode == "sequential"
        return bool(self.congestion)

    def _place_R(
        self, graph: OpGraph, cluster: Cluster, R: int, scale: Scale = 1.0, persist: Persist = None
    ) -> Placement:
        prep = self._prepare(graph, cluster, R, scale, persist)
        t0 = time.perf_counter()
        congestion = self.congestion_for(cluster)
        if self.plan == "ops":
            tl = Timeline(prep.idx, cluster, congestion, retime_gap=-(-prep.cidx.n // RETIMES))
            res = adjusting_placement(prep.cidx, prep.state, prep.seq, self.compare, timeline=tl)
            assign, order = prep.state.expand_ops([tl.order_key(i) for i in range(prep.idx.n)])
        else:
            res = adjusting_placement(prep.cidx, prep.state, prep.seq, self.compare)
            assign, order = prep.state.expand(res.order_key)
        info = dict(prep.info)
        info.update(
            {
                "adjust_time_s": time.perf_counter() - t0,
                "planned_makespan_s": res.makespan,
                "plan": self.plan,
                "congestion": int(congestion),
                "n_retimed": tl.n_retimed if self.plan == "ops" else 0,
                "moves": res.moves,
                "memory_moves": res.memory_moves,
            }
        )
        self._best_effort_info(prep.state, info)
        return self._checked(graph, cluster, Placement(assign, order, info))


class OrderPlacePlacer(_CeleritasBase):
    """Order-Place: Celeritas' fusion, then coarse nodes in CPD-TOPO order filling one device after another
    (seed 002, sections 5.2 and 6.2.2).

    Hyper-parameters as `CeleritasPlacer`.
    """

    name = "order_place"

    def _place_R(
        self, graph: OpGraph, cluster: Cluster, R: int, scale: Scale = 1.0, persist: Persist = None
    ) -> Placement:
        prep = self._prepare(graph, cluster, R, scale, persist)
        t0 = time.perf_counter()
        order_place(prep.state, prep.seq)
        seqpos = {c: k for k, c in enumerate(prep.seq)}
        assign, order = prep.state.expand([(seqpos[c],) for c in range(prep.cidx.n)])
        info = dict(prep.info)
        info["place_time_s"] = time.perf_counter() - t0
        self._best_effort_info(prep.state, info)
        return self._checked(graph, cluster, Placement(assign, order, info))
