"""m-TOPO: memory-constrained topological-order placement (seed 001, Baechi, section 2.2)."""
from __future__ import annotations

import logging
import time

from ...base import Placer
from ...cluster import Cluster
from ...errors import InfeasiblePlacement
from ...graph import OpGraph
from ...placement import Placement

log = logging.getLogger(__name__)


class MTOPOPlacer(Placer):
    """m-TOPO: fill devices one after another in topological order up to a load-balancing cap.

    Baechi section 2.2.  The per-device cap is ``sum_i m_i / n_devices + max_i m_i``, where m_i is op i's
    memory (persistent + temporary + output bytes), capped further by each device's own memory.  Ops are
    taken in topological order and placed on the current device (devices in increasing index) until the
    next op would push it past its cap; then the next device becomes current.  Each device runs its ops in
    topological order (`Placement.order`).

    Choices where the paper is vague: m_i is the static size above (the cap is defined on op sizes, so the
    cap sums are static).  Besides the cap, a device must hold within its memory its ops' sizes plus the
    output of every input already placed on another device (received once per producer and device); this
    total bounds the simulator's dynamic use from above, except for inputs of a colocation group's later
    members that are placed on other devices after the group (counted, for the reported bound, when they
    become known).  A colocation group is placed whole when its first member comes up (3.1), counting the
    group's total size.  An op or group restricted to a device type goes to the first device of that type,
    from the current one on, with room.  An op that fits on no remaining device raises
    `InfeasiblePlacement` naming it.  `info` reports the cap and, per device, the static bytes and the bound.
    O(V + E).
    """

    name = "m_topo"

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        t0 = time.perf_counter()
        idx = graph.index()
        n = idx.n
        devs = cluster.devices
        D = len(devs)
        size = [idx.persistent[i] + idx.temporary[i] + idx.output[i] for i in range(n)]
        total = sum(size)
        cap_all = total / D + max(size, default=0.0)
        limit = [d.memory_bytes for d in devs]
        groups: dict[str, list[int]] = {}
        for i, g in enumerate(idx.colocation):
            if g is not None:
                groups.setdefault(g, []).append(i)
        used = [0.0] * D    # static op sizes (the cap of 2.2)
        held = [0.0] * D    # op sizes + received copies (checked against the device's memory)
        dev = [-1] * n
        group_dev: dict[str, int] = {}
        copied: set[tuple[int, int]] = set()
        cur = 0
        for i in range(n):
            g = idx.colocation[i]
            if dev[i] >= 0:   # a later member of a group placed earlier
                q = dev[i]
                for j, _ in idx.pred[i]:   # copies that became known after the group was placed
                    if dev[j] >= 0 and dev[j] != q and (j, q) not in copied:
                        copied.add((j, q))
                        held[q] += idx.copy_bytes[j]
                continue
            members = groups[g] if g is not None else [i]
            base = sum(size[m] for m in members)
            want = next((idx.device_type[m] for m in members if idx.device_type[m] is not None), None)
            chosen = -1
            for p in range(cur, D):
                if want is not None and devs[p].type != want:
                    continue
                # received copies of inputs already placed elsewhere (once per producer and device)
                srcs = {j for m in members for j, _ in idx.pred[m] if dev[j] >= 0 and dev[j] != p}
                need = base + sum(idx.copy_bytes[j] for j in srcs if (j, p) not in copied)
                if used[p] + base <= cap_all and held[p] + need <= limit[p]:
                    chosen = p
                    break
                # this device is full for the op: move on for good (2.2)
                cur = p + 1
            if chosen < 0:
                what = f"op {idx.names[i]!r}" + (f" (colocation group {g!r})" if g is not None else "")
                raise InfeasiblePlacement(
                    f"m-TOPO: {what} needs {base:.6g} bytes but no device from {devs[min(cur, D - 1)].name!r} on "
                    f"has room under its cap ({cap_all:.6g} bytes) and its memory")
            used[chosen] += base
            held[chosen] += need
            for m in members:
                for j, _ in idx.pred[m]:
                    if dev[j] >= 0 and dev[j] != chosen:
                        copied.add((j, chosen))
            for m in members:
                dev[m] = chosen
            if g is not None:
                group_dev[g] = chosen
        assign = {idx.names[i]: devs[dev[i]].name for i in range(n)}
        order = {d.name: [] for d in devs}
        for i in range(n):
            order[devs[dev[i]].name].append(idx.names[i])
        info = {"cap_bytes": cap_all, "algorithm_time_s": time.perf_counter() - t0, "n_ops": n}
        for p, d in enumerate(devs):
            info[f"static_bytes.{d.name}"] = used[p]
            info[f"bound_bytes.{d.name}"] = held[p]
        log.info("m-TOPO placed %d ops; cap %.6g bytes per device", n, cap_all)
        return Placement(assign, order, info)
