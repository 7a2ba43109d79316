"""Baseline placers: everything on one device, and an expert's hand placement by op-name prefix."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..base import Placer
from ..cluster import Cluster
from ..errors import ConfigError, InfeasiblePlacement
from ..graph import OpGraph
from ..placement import Placement


class SinglePlacer(Placer):
    """Single device: every op on one device (the first device that every op's type constraint allows).

    `device` names the device; by default the first device of the cluster is used. O(V).
    """

    name = "single"

    def __init__(self, device: str | None = None):
        self.device = device

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        if self.device is not None:
            dev = cluster.device(self.device)
        else:
            wanted = {a.get("device_type") for _, a in graph.nx.nodes(data=True)} - {None}
            if len(wanted) > 1:
                raise InfeasiblePlacement(
                    f"single-device placement impossible: ops ask for device types {sorted(wanted)}"
                )
            found = next((d for d in cluster.devices if not wanted or d.type in wanted), None)
            if found is None:
                raise InfeasiblePlacement(f"no device of type {sorted(wanted)} in cluster {cluster.name!r}")
            dev = found
        return Placement({op: dev.name for op in graph.ops})


class ExpertPlacer(Placer):
    """Expert placement: ops go to the device of the longest op-name prefix that matches, as a human would.

    `rules` maps a prefix to a device (a device name, or an integer index into the cluster's devices), or is a
    list of [prefix, device] pairs. An op is resolved in this order: its colocation group's device (the first
    member placed decides); the longest matching prefix, tried on the name and on the name with each of
    `strip_prefixes` removed (e.g. TensorFlow's "gradients/"); the device of its `forward_of` op (backward ops
    follow their forward op); and finally `default` (a device name or index; the first device if unset).
    With `scale_indices`, rules written with device indices for a larger cluster are spread contiguously over
    the devices there are (see `_scaled_rules`). O(V * R) for R rules.
    """

    name = "expert"

    def __init__(
        self,
        rules: Mapping[str, str | int] | Sequence[Sequence[str | int]] | None = None,
        default: str | int | None = None,
        strip_prefixes: Sequence[str] = (),
        scale_indices: bool = True,
    ):
        if rules is None:
            rules = {}
        if isinstance(rules, Mapping):
            pairs = [(str(k), v) for k, v in rules.items()]
        else:
            pairs = []
            for r in rules:
                if len(r) != 2:
                    raise ConfigError(f"placer.rules: each rule must be [prefix, device], got {list(r)!r}")
                pairs.append((str(r[0]), r[1]))
        self.rules = sorted(pairs, key=lambda p: -len(p[0]))
        self.default = default
        self.strip_prefixes = tuple(strip_prefixes)
        self.scale_indices = scale_indices

    @staticmethod
    def _device(cluster: Cluster, dev: str | int, where: str) -> str:
        if isinstance(dev, int) and not isinstance(dev, bool):
            if not 0 <= dev < len(cluster):
                raise ConfigError(
                    f"{where}: device index {dev} out of range for cluster {cluster.name!r} with {len(cluster)} devices"
                )
            return cluster.devices[dev].name
        if str(dev) not in cluster.names:
            raise ConfigError(f"{where}: unknown device {dev!r}; devices are {cluster.names}")
        return str(dev)

    def _scaled_rules(self, cluster: Cluster) -> list[tuple[str, str | int]]:
        """Integer device indices written for more devices than the cluster has are spread over it
        contiguously: index i of 0..m-1 becomes i * n // m on n devices (GNMT's four-layer expert on two
        devices puts layers 0-1 on the first and 2-3 on the second)."""
        idx = [d for _, d in self.rules if isinstance(d, int) and not isinstance(d, bool)]
        m = max(idx, default=-1) + 1
        n = len(cluster)
        if not self.scale_indices or m <= n:
            return list(self.rules)
        return [(p, d * n // m if isinstance(d, int) and not isinstance(d, bool) else d) for p, d in self.rules]

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        rules = [(p, self._device(cluster, d, f"placer.rules[{p!r}]")) for p, d in self._scaled_rules(cluster)]
        default = (
            self._device(cluster, self.default, "placer.default")
            if self.default is not None
            else cluster.devices[0].name
        )
        assign: dict[str, str] = {}
        group_dev: dict[str, str] = {}
        pending_backward: list[str] = []

        def by_rule(op: str) -> str | None:
            cands = [op] + [op[len(s) :] for s in self.strip_prefixes if op.startswith(s)]
            for p, d in rules:
                if any(c.startswith(p) for c in cands):
                    return d
            return None

        for op in graph.topological_order():
            a = graph.op(op)
            grp = a.get("colocation")
            if grp is not None and grp in group_dev:
                assign[op] = group_dev[grp]
                continue
            dev = by_rule(op)
            if dev is None and a.get("forward_of") is not None:
                fw = a["forward_of"]
                dev = assign.get(fw)
                if dev is None:
                    pending_backward.append(op)
                    continue
            dev = dev or default
            assign[op] = dev
            if grp is not None:
                group_dev[grp] = dev
        for op in pending_backward:
            a = graph.op(op)
            grp = a.get("colocation")
            dev = group_dev.get(grp) if grp is not None else None
            dev = dev or assign.get(a["forward_of"], default)
            assign[op] = dev
            if grp is not None:
                group_dev.setdefault(grp, dev)
        return Placement(assign)
