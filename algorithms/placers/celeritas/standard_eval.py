"""The framework-free parts of Celeritas' Standard Evaluation (seed 002, section 4.2; Table 5, Figure 5).

Step 1, rough estimation (4.2.1): the model is profiled at several batch sizes small enough for one device;
for every op a linear model ``y = a + b * batch`` of each cost is fitted by least squares and evaluated at the
target batch size. The paper fits memory this way and notes that the same fit gives compute time only roughly;
we fit every cost of the graph format (compute_s, each `compute_s_by_type` entry, persistent, temporary and
output bytes) and every edge's bytes, so that the predicted graph is complete. Predictions are clamped at 0
(a line fitted on small batches can extrapolate below zero). `fit_linear_profiles` and
`LinearProfile.predict`. O(V + E) per profile.

Step 2 (4.2.1, 4.2.2): the large-batch model is placed with the memory-constrained sequential DFS-TOPO
placement (`SequentialDfsTopoPlacer`: ops in DFS-TOPO order, each device filled to its memory limit before
the next, best effort on the least-used device when all are full, 6.3), run for a few steps, and its measured
per-op figures replace the estimates. Running it is the backend's job.

Accuracy (6.5.1): for each op, the relative deviation |d_e - d_a| / d_a of the estimate from the
measurement, its mean (Table 5) and its CDF (Figure 5): `relative_deviation`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...base import Placer
from ...cluster import Cluster
from ...errors import ConfigError, InfeasiblePlacement, InvalidGraph
from ...graph import COST_KEYS, OpGraph
from ...placement import Placement
from .common import effective_types, node_memory
from .topo import dfs_topo

log = logging.getLogger(__name__)


def _fit(x: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares intercepts and slopes of each row of Y (n x k) against x (k,). Exact for a linear law."""
    xm = x.mean()
    dx = x - xm
    var = float((dx * dx).sum())
    ym = Y.mean(axis=1)
    slope = ((Y - ym[:, None]) * dx[None, :]).sum(axis=1) / var
    return ym - slope * xm, slope


@dataclass
class LinearProfile:
    """Per-op (and per-edge) linear laws ``value = intercept + slope * batch`` fitted on several profiles."""

    batch_sizes: list[float]
    template: OpGraph  # structure (and non-cost attributes) of the prediction
    ops: list[str]
    keys: list[str]  # cost keys fitted (COST_KEYS + "compute_s_by_type:T")
    intercept: np.ndarray  # (n_ops, n_keys)
    slope: np.ndarray
    edges: list[tuple[str, str]] = field(default_factory=list)
    edge_intercept: np.ndarray | None = None
    edge_slope: np.ndarray | None = None

    def law(self, op: str, key: str = "compute_s") -> tuple[float, float]:
        """(intercept, slope) of one op's cost."""
        i, k = self.ops.index(op), self.keys.index(key)
        return float(self.intercept[i, k]), float(self.slope[i, k])

    def predict(self, batch_size: float, name: str | None = None) -> OpGraph:
        """The graph at `batch_size`: every fitted cost evaluated (clamped at 0), other attributes copied."""
        g = self.template.copy(name or f"{self.template.name}-b{batch_size:g}")
        vals = np.maximum(self.intercept + self.slope * float(batch_size), 0.0)
        for i, op in enumerate(self.ops):
            a = g.op(op)
            by = dict(a.get("compute_s_by_type") or {})
            for k, key in enumerate(self.keys):
                if key.startswith("compute_s_by_type:"):
                    by[key.split(":", 1)[1]] = float(vals[i, k])
                else:
                    a[key] = float(vals[i, k])
            if by:
                a["compute_s_by_type"] = by
        if self.edges and self.edge_intercept is not None and self.edge_slope is not None:
            ev = np.maximum(self.edge_intercept + self.edge_slope * float(batch_size), 0.0)
            for (u, v), b in zip(self.edges, ev):
                d = g.nx.edges[u, v]
                if not d.get("control"):
                    d["bytes"] = float(b)
        g.invalidate()
        return g


def fit_linear_profiles(profiles: Mapping[float, OpGraph] | Iterable[tuple[float, OpGraph]]) -> LinearProfile:
    """Fit, per op and per edge, a least-squares line of each cost against the batch size (step 1 of 4.2.1).

    `profiles` maps batch size -> profiled graph (the same ops in each). Needs at least two distinct batch
    sizes. Ops or edges missing from some profile raise InvalidGraph (the model's graph must not depend on the
    batch size). The predicted graph takes its structure from the profile of the largest batch.
    O(k * (V + E)) for k profiles.
    """
    items = sorted((float(b), g) for b, g in (profiles.items() if isinstance(profiles, Mapping) else profiles))
    if len({b for b, _ in items}) < 2:
        raise ConfigError("the Standard Evaluation's linear fit needs profiles at two or more distinct batch sizes")
    x = np.array([b for b, _ in items])
    template = items[-1][1]
    ops = list(template.ops)
    for b, g in items:
        extra = [op for op in g.ops if op not in template]
        if extra:
            raise InvalidGraph(
                f"op {extra[0]!r} of the profile at batch size {b:g} is missing from the profile "
                f"at batch size {items[-1][0]:g}"
            )
    typed = sorted({t for _, g in items for op in g.ops for t in (g.op(op).get("compute_s_by_type") or {})})
    keys = list(COST_KEYS) + [f"compute_s_by_type:{t}" for t in typed]
    Y = np.zeros((len(ops), len(keys), len(items)))
    for c, (b, g) in enumerate(items):
        for i, op in enumerate(ops):
            if op not in g:
                raise InvalidGraph(f"op {op!r} is missing from the profile at batch size {b:g}")
            a = g.op(op)
            by = a.get("compute_s_by_type") or {}
            for k, key in enumerate(keys):
                if key.startswith("compute_s_by_type:"):
                    Y[i, k, c] = float(by.get(key.split(":", 1)[1], a["compute_s"]))
                else:
                    Y[i, k, c] = float(a[key])
    inter, slope = _fit(x, Y.reshape(len(ops) * len(keys), len(items)))
    edges = [(u, v) for u, v, _ in template.edges()]
    E = np.zeros((len(edges), len(items)))
    for c, (b, g) in enumerate(items):
        for e, (u, v) in enumerate(edges):
            if not g.nx.has_edge(u, v):
                raise InvalidGraph(f"edge {u!r} -> {v!r} is missing from the profile at batch size {b:g}")
            E[e, c] = float(g.nx.edges[u, v].get("bytes", 0.0))
    ei, es = _fit(x, E) if edges else (np.zeros(0), np.zeros(0))
    return LinearProfile(
        [b for b, _ in items],
        template,
        ops,
        keys,
        inter.reshape(len(ops), len(keys)),
        slope.reshape(len(ops), len(keys)),
        edges,
        ei,
        es,
    )


class SequentialDfsTopoPlacer(Placer):
    """DFS-TOPO sequential placement: ops in DFS-TOPO order fill one device to its memory limit, then the next
    (Celeritas 4.2.1 step 2 and 4.2.2; the placement of the Standard Evaluation's measuring run).

    `memory_fraction` scales the memory each device may be filled to (1.0: the device's memory). An op goes to
    the device being filled if it fits there, else to the next device (in the cluster's order) where it fits;
    the devices are never revisited except by ops pinned to an earlier device (colocation, device type).
    Colocation: the first op of a group decides the device and reserves the memory of the *whole* group there
    (the paper, 6.5.2, attributes m-TOPO's OOM on NMT to charging only the first op). When no device has room,
    best effort (6.3): the allowed device with the most memory left; the ops are listed in
    ``info["best_effort_ops"]``. The order per device is the DFS-TOPO order. O(V + E + V * D).
    """

    name = "dfs_topo_seq"

    def __init__(self, memory_fraction: float = 1.0):
        if not memory_fraction > 0:
            raise ConfigError(f"memory_fraction must be > 0, got {memory_fraction!r}")
        self.memory_fraction = float(memory_fraction)

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        idx = graph.index()
        types = effective_types(idx)
        mem = node_memory(idx)
        devs = cluster.devices
        nd = len(devs)
        avail = [d.memory_bytes * self.memory_fraction for d in devs]
        group_mem: dict[str, float] = {}
        for i, g in enumerate(idx.colocation):
            if g is not None:
                group_mem[g] = group_mem.get(g, 0.0) + mem[i]
        group_dev: dict[str, int] = {}
        cur = 0
        dev_of = [0] * idx.n
        best_effort: list[str] = []
        seq = dfs_topo(idx)
        for i in seq:
            g = idx.colocation[i]
            if g is not None and g in group_dev:
                dev_of[i] = group_dev[g]
                continue
            need = group_mem[g] if g is not None else mem[i]
            allowed = [k for k in range(nd) if types[i] is None or devs[k].type == types[i]]
            if not allowed:
                raise InfeasiblePlacement(f"op {idx.names[i]!r} needs a {types[i]} device; the cluster has none")
            aset = set(allowed)
            chosen = next((k for k in range(cur, nd) if k in aset and avail[k] >= need), -1)
            if chosen < 0:
                chosen = next((k for k in range(0, cur) if k in aset and avail[k] >= need), -1)
            if chosen < 0:
                chosen = max(allowed, key=lambda k: (avail[k], -k))
                best_effort.append(idx.names[i])
            elif len(allowed) == nd and chosen > cur:
                cur = chosen
            avail[chosen] -= need
            dev_of[i] = chosen
            if g is not None:
                group_dev[g] = chosen
        names = cluster.names
        assign = {idx.names[i]: names[dev_of[i]] for i in range(idx.n)}
        order: dict[str, list[str]] = {d: [] for d in names}
        for i in seq:
            order[names[dev_of[i]]].append(idx.names[i])
        if best_effort:
            log.warning("dfs_topo_seq: %d ops placed best effort (every allowed device full)", len(best_effort))
        info = {
            "best_effort": int(bool(best_effort)),
            "best_effort_ops_count": len(best_effort),
            "best_effort_ops": best_effort[:1000],
            "devices_used": len({dev_of[i] for i in range(idx.n)}),
        }
        return Placement(assign, order, info)


@dataclass
class DeviationReport:
    """Per-op relative deviation |estimate - measurement| / measurement (Celeritas 6.5.1)."""

    per_op: dict[str, float]
    skipped: list[str]  # ops whose measurement is 0 (deviation undefined)

    @property
    def mean(self) -> float:
        """Table 5's average relative deviation (nan when no op could be compared)."""
        return float(np.mean(list(self.per_op.values()))) if self.per_op else math.nan

    def cdf(self, thresholds: Sequence[float] = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)) -> list[tuple[float, float]]:
        """Figure 5's CDF: (threshold, fraction of ops whose deviation <= threshold)."""
        v = np.sort(np.fromiter(self.per_op.values(), float)) if self.per_op else np.zeros(0)
        n = len(v)
        return [(float(t), float(np.searchsorted(v, t, side="right") / n) if n else math.nan) for t in thresholds]

    def curve(self) -> tuple[list[float], list[float]]:
        """The empirical CDF as sorted deviations and cumulative fractions (for plotting)."""
        v = sorted(self.per_op.values())
        n = len(v)
        return v, [(k + 1) / n for k in range(n)]

    def to_dict(self) -> dict:
        return {
            "mean": self.mean,
            "n_ops": len(self.per_op),
            "skipped": len(self.skipped),
            "cdf": self.cdf(),
            "per_op": self.per_op,
        }


def _op_value(g: OpGraph, op: str, what: str) -> float:
    a = g.op(op)
    if what == "memory":
        return float(a["persistent_bytes"] + a["temporary_bytes"] + a["output_bytes"])
    if what == "time":
        return float(a["compute_s"])
    return float(a[what])


def relative_deviation(estimated: OpGraph, measured: OpGraph, what: str = "memory") -> DeviationReport:
    """Per-op relative deviation of `estimated` from `measured` (ops of `measured` present in both).

    `what`: "memory" (persistent + temporary + output bytes, Figure 5a), "time" (compute_s, Figure 5b), or a
    single cost key. Ops measured at 0 cannot be compared and are listed in `skipped`. O(V).
    """
    per: dict[str, float] = {}
    skipped: list[str] = []
    for op in measured.ops:
        if op not in estimated:
            continue
        a = _op_value(measured, op, what)
        e = _op_value(estimated, op, what)
        if a == 0:
            skipped.append(op)
            continue
        per[op] = abs(e - a) / a
    return DeviationReport(per, skipped)
