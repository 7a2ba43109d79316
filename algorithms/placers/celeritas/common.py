"""Shared pieces of the Celeritas modules: the cost model the algorithms reason with, effective device-type
constraints, and the colocation rule used when a coarse placement is expanded to original ops.

Cost model (Celeritas 4.2.1 and 5.1.1)
--------------------------------------
Celeritas reasons with one computation time ``w_i`` per node and one communication time ``c_ij`` per edge
(equations 1 to 6). The paper's devices are identical V100s, so these are unambiguous there. Here a cluster may
mix device types, speeds and links, so the planning costs are *averages*:

* ``w_i`` = mean of ``GraphIndex.exec_time(i, type, speed)`` over the devices that may run op i (its
  device-type constraint), or over all devices when none may;
* ``c_ij`` = ``latency + bytes_ij / bandwidth`` averaged over ordered pairs of distinct devices, i.e.
  ``mean_latency + bytes_ij * mean(1 / bandwidth)`` (the same average HEFT uses). With one device there is no
  communication and ``c_ij = 0``.

Adjusting Placement (Algorithm 2) uses the exact per-device times and the exact pair transfer times instead,
since it knows which devices it compares.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ...cluster import Cluster
from ...errors import ConfigError, InfeasiblePlacement, InvalidGraph
from ...graph import GraphIndex


@dataclass(frozen=True)
class CommModel:
    """Average communication time ``latency_s + bytes * inv_bytes_per_s`` of one edge (Celeritas 4.2.1)."""

    latency_s: float = 0.0
    inv_bytes_per_s: float = 0.0

    def __call__(self, nbytes: float) -> float:
        return self.latency_s + nbytes * self.inv_bytes_per_s

    @classmethod
    def of_cluster(cls, cluster: Cluster) -> CommModel:
        """Mean over ordered pairs of distinct devices; zero communication with a single device. O(D^2)."""
        n = len(cluster.devices)
        if n < 2:
            return cls(0.0, 0.0)
        lat = inv = 0.0
        for i in range(n):
            for j in range(n):
                if i != j:
                    lat += cluster.latency_table[i][j]
                    inv += 1.0 / cluster.bandwidth_table[i][j]
        k = n * (n - 1)
        return cls(lat / k, inv / k)

    @classmethod
    def of_link(cls, latency_s: float = 0.0, bytes_per_s: float | None = None) -> CommModel:
        """From explicit link parameters; ``bytes_per_s=None`` counts bytes as the cost (unit-free)."""
        if bytes_per_s is None:
            return cls(float(latency_s), 1.0)
        if not bytes_per_s > 0:
            raise ConfigError(f"bytes_per_s must be > 0, got {bytes_per_s!r}")
        return cls(float(latency_s), 0.0 if math.isinf(bytes_per_s) else 1.0 / float(bytes_per_s))


class EdgeCosts:
    """Communication time of every edge, computed once: `succ[i]` / `pred[i]` hold (neighbour, c_ij) pairs
    parallel to `GraphIndex.succ` / `pred`, and `out_total[i]` is the sum of op i's outgoing costs.

    The topological orders, the breakpoint program and CCR accept either a ``comm(bytes)`` callable or an
    `EdgeCosts`, so that a placer pays for the O(E) cost evaluation once."""

    def __init__(self, idx: GraphIndex, comm):
        if isinstance(comm, CommModel):
            lat, inv = comm.latency_s, comm.inv_bytes_per_s
            self.succ = [[(j, lat + b * inv) for j, b in row] for row in idx.succ]
            self.pred = [[(j, lat + b * inv) for j, b in row] for row in idx.pred]
        else:
            self.succ = [[(j, comm(b)) for j, b in row] for row in idx.succ]
            self.pred = [[(j, comm(b)) for j, b in row] for row in idx.pred]
        self.out_total = [sum(c for _, c in row) for row in self.succ]

    @classmethod
    def of(cls, idx: GraphIndex, comm) -> EdgeCosts:
        return comm if isinstance(comm, EdgeCosts) else cls(idx, comm)


def effective_types(idx: GraphIndex) -> list[str | None]:
    """Device type each op must run on: its own `device_type`, or its colocation group's (a group asks for
    one type at most, `OpGraph.validate`). O(V)."""
    group_type: dict[str, str] = {}
    for g, t in zip(idx.colocation, idx.device_type):
        if g is not None and t is not None:
            group_type.setdefault(g, t)
    return [
        t if t is not None else (group_type.get(g) if g is not None else None)
        for g, t in zip(idx.colocation, idx.device_type)
    ]


def mean_compute(idx: GraphIndex, cluster: Cluster | None, types: Sequence[str | None] | None = None) -> list[float]:
    """``w_i``: mean execution time of each op over the devices allowed to run it (`compute_s` without a
    cluster). O(V * D)."""
    if cluster is None:
        return list(idx.compute_s)
    types = types if types is not None else effective_types(idx)
    devs = [(d.type, d.speed) for d in cluster.devices]
    # mean of 1 / speed over the devices allowed for each type constraint (fast path for ops without
    # compute_s_by_type: exec_time = compute_s / speed)
    inv_speed: dict[str | None, float] = {}
    allowed_of: dict[str | None, list[tuple[str, float]]] = {}
    for t in set(types):
        allowed = [dv for dv in devs if t is None or dv[0] == t] or devs
        allowed_of[t] = allowed
        inv_speed[t] = sum(1.0 / sp for _, sp in allowed) / len(allowed)
    out = []
    for i in range(idx.n):
        t = types[i]
        if idx.compute_by_type[i]:
            allowed = allowed_of[t]
            out.append(sum(idx.exec_time(i, dt, sp) for dt, sp in allowed) / len(allowed))
        else:
            out.append(idx.compute_s[i] * inv_speed[t])
    return out


def node_memory(idx: GraphIndex) -> list[float]:
    """Static memory of each op: persistent + temporary + output bytes (the conservative figure Celeritas'
    ``Memory[v]`` of Algorithm 2 is taken to be). O(V)."""
    return [p + t + o for p, t, o in zip(idx.persistent, idx.temporary, idx.output)]


def allowed_devices(cluster: Cluster, dev_type: str | None) -> list[int]:
    """Indices of the devices of `dev_type` (all devices for None)."""
    return [k for k, d in enumerate(cluster.devices) if dev_type is None or d.type == dev_type]


class CoarseState:
    """Memory and colocation book-keeping while coarse nodes are assigned one by one (Algorithm 2's
    ``Ava_m``), and the expansion of the coarse assignment to the original ops.

    Colocation follows the rule Celeritas takes from Baechi (section 6.1): when the first op of a colocation
    group is placed on device d, every op of the group goes to d. At the op level this means:

    * a coarse node is placed freely (within its device type); its members whose group is already pinned
      follow their group to the group's device (forcing the whole node to the device of one pinned member was
      tried and rejected: on training graphs, where each variable is colocated with its update op at the end
      of the step, update clusters were then forced onto full devices and cascaded into best effort);
    * when a coarse node pins a group, the memory of the *whole* group is reserved on the device at once (the
      paper, 6.5.2, blames m-TOPO's OOM on charging only a group's first op), so later members cost nothing.

    ``need(c, d)`` is therefore the memory the node adds on device d: ungrouped members plus the groups it
    pins, plus (with `count_inputs`, the default) one received copy of the output of every producer outside the
    node that sits on another device and has not yet been received on d. Memory is the static persistent +
    temporary + output bytes of each op (`node_memory`). The received copies are our addition to the paper's
    ``Memory[v]``: the simulator (like a real runtime) holds a tensor received from another device until its
    last local consumer has run, and without them a device filled to its limit ran out of memory in the
    simulator with no best effort reported. With them the static figure bounds the simulator's dynamic peak:
    a copy is charged as soon as both ends' devices are known, i.e. when the consumer is placed, or when the
    producer is placed and the consumer is already bound to a pinned group's device. A charge that overfills a
    device other than the one being chosen (a colocation consequence) is recorded (`overflow_nodes`: the nodes
    whose commit pushed another device over its limit; `overflow_bytes()`), and reported by the placers. The
    static figure holds every tensor for the whole step, so such an overflow is not necessarily an OOM in
    the simulator.
    """

    def __init__(
        self,
        idx: GraphIndex,
        cluster: Cluster,
        clusters: Sequence[Sequence[int]],
        types: Sequence[str | None] | None = None,
        count_inputs: bool = True,
    ):
        self.idx = idx
        self.count_inputs = count_inputs
        self.cluster = cluster
        self.clusters = [list(m) for m in clusters]
        self.types = list(types) if types is not None else effective_types(idx)
        self.mem = node_memory(idx)
        self.group_mem: dict[str, float] = {}
        for i, g in enumerate(idx.colocation):
            if g is not None:
                self.group_mem[g] = self.group_mem.get(g, 0.0) + self.mem[i]
        self.group_persist: dict[str, float] = {}
        for i, g in enumerate(idx.colocation):
            if g is not None:
                self.group_persist[g] = self.group_persist.get(g, 0.0) + idx.persistent[i]
        self.group_dev: dict[str, int] = {}
        self.avail = [d.memory_bytes for d in cluster.devices]
        #: the true memory left for persistent bytes, which `avail`'s relaxed scales (placer.memory_scales) must
        #: not relax: they are held for the whole step, so their sum on a device never exceeds its memory
        self.persist_left = [d.memory_bytes for d in cluster.devices]
        self.coarse_dev: list[int] = [-1] * len(self.clusters)
        self.coarse_type: list[str | None] = []
        for members in self.clusters:
            ts = {t for t in (self.types[i] for i in members) if t is not None}
            self.coarse_type.append(next(iter(ts)) if len(ts) == 1 else None)
            if len(ts) > 1:
                raise InvalidGraph(
                    f"coarse node with ops {[idx.names[i] for i in members[:3]]} mixes device types {sorted(ts)}"
                )
        self.best_effort_nodes: list[int] = []
        self.overflow_nodes: list[int] = []  # nodes whose colocated members overfilled another device
        self.op_dev = [-1] * idx.n
        self._cache: tuple | None = None
        self.received: list[set[int]] = [set() for _ in cluster.devices]
        cid = [0] * idx.n
        for c, members in enumerate(self.clusters):
            for i in members:
                cid[i] = c
        self.ext_inputs: list[list[int]] = []
        for c, members in enumerate(self.clusters):
            seen: set[int] = set()
            for i in members:
                for p, _ in idx.pred[i]:
                    if cid[p] != c and p not in seen and idx.copy_bytes[p] > 0:
                        seen.add(p)
            self.ext_inputs.append(sorted(seen))

    def allowed(self, c: int) -> list[int]:
        devs = allowed_devices(self.cluster, self.coarse_type[c])
        if not devs:
            raise InfeasiblePlacement(
                f"no device of type {self.coarse_type[c]} for ops {[self.idx.names[i] for i in self.clusters[c][:3]]}"
            )
        return devs

    def need(self, c: int, d: int | None = None) -> float:
        tot = 0.0
        seen: set[str] = set()
        for i in self.clusters[c]:
            g = self.idx.colocation[i]
            if g is None:
                tot += self.mem[i]
            elif g not in self.group_dev and g not in seen:
                seen.add(g)
                tot += self.group_mem[g]
        if d is not None and self.count_inputs:
            tot += self._input_charges(c, d).get(d, 0.0)
        return tot

    def persistent_need(self, c: int) -> float:
        """Persistent bytes node c adds on its device: its ungrouped members' and those of the groups it pins."""
        tot = 0.0
        seen: set[str] = set()
        for i in self.clusters[c]:
            g = self.idx.colocation[i]
            if g is None:
                tot += self.idx.persistent[i]
            elif g not in self.group_dev and g not in seen:
                seen.add(g)
                tot += self.group_persist[g]
        return tot

    def fits(self, c: int, d: int) -> bool:
        """Whether device d has room for node c: its static need within `avail` (possibly relaxed) and its
        persistent bytes within the true memory left (`persist_left`). O(members + inputs)."""
        return self.avail[d] >= self.need(c, d) and self.persist_left[d] >= self.persistent_need(c)

    def _input_charges(self, c: int, d: int) -> dict[int, float]:
        """Received copies that placing node c on device d adds, per device: one per (producer, device) not
        yet received there, for every member whose producer sits on another device."""
        idx, dev, out = self.idx, self.op_dev, self.idx.copy_bytes
        if self._cache is None or self._cache[0] != c:
            # the (consumer, producer) pairs that can cost a copy, computed once per node (the pins do not
            # change until the node is committed): external producers, and pairs touching a pinned member
            members = self.clusters[c]
            pinned = {
                i: self.group_dev[g] for i in members if (g := idx.colocation[i]) is not None and g in self.group_dev
            }
            pairs = []
            if pinned:
                mine = set(members)
                for i in members:
                    for p, _ in idx.pred[i]:
                        if out[p] > 0 and (p not in mine or i in pinned or p in pinned):
                            pairs.append((i, p))
            self._cache = (c, pinned, pairs)
        _, pinned, pairs = self._cache
        sets: dict[int, set[int]] = {}
        rec_d = self.received[d]
        if not pinned:  # fast path: every member runs on d
            sets[d] = {p for p in self.ext_inputs[c] if dev[p] != d and p not in rec_d}
        else:
            for i, p in pairs:
                di = pinned.get(i, d)
                dp = dev[p] if dev[p] >= 0 else pinned.get(p, d)
                if dp != di and p not in self.received[di]:
                    sets.setdefault(di, set()).add(p)
        return {k: sum(out[p] for p in ps) for k, ps in sets.items() if ps}

    def best_effort_device(self, c: int) -> int:
        """All devices full: the allowed device with the most memory left (least used)."""
        devs = self.allowed(c)
        return max(devs, key=lambda k: (self.avail[k], -k))

    def commit(self, c: int, d: int) -> None:
        charges = self._input_charges(c, d) if self.count_inputs else {}
        before = list(self.avail)
        self.avail[d] -= self.need(c)
        self.persist_left[d] -= self.persistent_need(c)
        for k, x in charges.items():
            self.avail[k] -= x
        for i in self.clusters[c]:
            g = self.idx.colocation[i]
            if g is not None and g not in self.group_dev:
                self.group_dev[g] = d
        self.coarse_dev[c] = d
        for i in self.clusters[c]:
            self.op_dev[i] = self.op_device(i, c)
        if self.count_inputs:
            for i in self.clusters[c]:
                di = self.op_dev[i]
                for p, _ in self.idx.pred[i]:
                    if self.op_dev[p] != di and self.idx.copy_bytes[p] > 0:
                        self.received[di].add(p)
            # copies to consumers not placed yet but bound to a pinned group's device
            for i in self.clusters[c]:
                di = self.op_dev[i]
                if self.idx.copy_bytes[i] <= 0:
                    continue
                for q, _ in self.idx.succ[i]:
                    if self.op_dev[q] >= 0:
                        continue
                    g = self.idx.colocation[q]
                    dq = self.group_dev.get(g) if g is not None else None
                    if dq is not None and dq != di and i not in self.received[dq]:
                        self.received[dq].add(i)
                        self.avail[dq] -= self.idx.copy_bytes[i]
                        charges[dq] = charges.get(dq, 0.0) + self.idx.copy_bytes[i]
        if any(before[k] >= 0 > self.avail[k] for k in charges if k != d):
            self.overflow_nodes.append(c)

    def op_device(self, i: int, c: int) -> int:
        g = self.idx.colocation[i]
        return self.group_dev[g] if g is not None else self.coarse_dev[c]

    def expand(self, coarse_keys: Sequence[tuple]) -> tuple[dict[str, str], dict[str, list[str]]]:
        """Assignment of the original ops and per-device orders: ops sorted by their coarse node's key (e.g.
        (start time, position in the placement sequence)) then by their place inside the node."""
        names = self.idx.names
        devnames = self.cluster.names
        assign: dict[str, str] = {}
        rows: list[tuple] = []
        for c, members in enumerate(self.clusters):
            for k, i in enumerate(members):
                d = self.op_device(i, c)
                assign[names[i]] = devnames[d]
                rows.append((coarse_keys[c], k, d, names[i]))
        rows.sort(key=lambda r: (r[0], r[1]))
        order: dict[str, list[str]] = {d: [] for d in devnames}
        for _, _, d, name in rows:
            order[devnames[d]].append(name)
        return assign, order

    def expand_ops(self, op_keys: Sequence[tuple]) -> tuple[dict[str, str], dict[str, list[str]]]:
        """As `expand`, with a key per original op (e.g. its planned start, `timeline.Timeline.order_key`)."""
        names = self.idx.names
        devnames = self.cluster.names
        assign: dict[str, str] = {}
        rows: list[tuple] = []
        for c, members in enumerate(self.clusters):
            for i in members:
                d = self.op_device(i, c)
                assign[names[i]] = devnames[d]
                rows.append((op_keys[i], d, names[i]))
        rows.sort(key=lambda r: r[0])
        order: dict[str, list[str]] = {d: [] for d in devnames}
        for _, d, name in rows:
            order[devnames[d]].append(name)
        return assign, order

    def best_effort_ops(self) -> list[str]:
        """Ops of the nodes placed best effort (every allowed device full)."""
        return [self.idx.names[i] for c in self.best_effort_nodes for i in self.clusters[c]]

    def overflow_bytes(self) -> float:
        """Static bytes above the devices' limits (best effort, or copies forced by colocation)."""
        return sum(-a for a in self.avail if a < 0)
