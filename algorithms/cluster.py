"""Devices and the communication model.

A `Cluster` is a list of `Device`s plus a communication model: a transfer of `b` bytes from device `s` to
device `d` takes ``latency_s + b / bytes_per_s`` (Baechi section 4.1, a linear fit of a micro-benchmark),
with optional per-pair overrides (`links`). A transfer between an op and itself on one device costs nothing.

`mode` chooses how concurrent transfers interact (Baechi section 3.4):

* ``parallel``: every transfer proceeds independently as soon as it is requested;
* ``sequential``: each device sends one tensor at a time and receives one tensor at a time; requests are
  served first-in first-out, so a transfer starts when both the sender's send queue and the receiver's
  receive queue are free.

A link given only as ``src -> dst`` also serves ``dst -> src`` unless that direction has its own entry
(transfer rates are bidirectional in the thesis' device model, section 6.2).

`recv_buffers` says when a received copy takes the receiving device's memory: ``arrival`` (the default, the
papers' model: from its arrival to its last reader) or ``step_start`` (from the step's start: a runtime that
posts every receive with its buffer before the step, as the lab's process-per-device runtime does on gloo,
issue 16). It is part of the cluster so that every simulation of it, the memory-aware placers' own replays
included, holds the copies the way the runtime that will run the placement does; the config key is
``comm.recv_buffers``, written only when it is not the default.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import InvalidCluster
from .graph import DEVICE_TYPES

MODES = ("parallel", "sequential")
#: When a received copy's memory is taken (`Cluster.recv_buffers`; module docstring)
RECV_BUFFERS = ("arrival", "step_start")
#: A runtime that posts receives as early as a device's memory limit allows (PyTorch's
#: ``post_receives="within_limit"``) keeps this share of the limit free of early receive buffers; the prediction
#: of its peak (orchestrator/stages/simulate.py) uses the same share
RECV_POST_MARGIN = 0.02
#: Top-level keys of a cluster config (conf/cluster/*.yaml); any other key is a typo and fails.
CLUSTER_KEYS = ("name", "devices", "comm", "links", "memory_fraction", "need_fraction", "generate", "_target_")


@dataclass(frozen=True)
class Device:
    name: str
    type: str = "CPU"
    memory_bytes: float = math.inf
    speed: float = 1.0
    cores: int = 1  # host CPU cores a worker process of this device owns (CPU devices of a real run)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "memory_bytes": self.memory_bytes,
            "speed": self.speed,
            "cores": self.cores,
        }


@dataclass(frozen=True)
class Link:
    latency_s: float
    bytes_per_s: float


@dataclass
class Cluster:
    devices: list[Device]
    latency_s: float = 0.0
    bytes_per_s: float = math.inf
    mode: str = "parallel"
    links: dict[tuple[str, str], Link] = field(default_factory=dict)
    name: str = "cluster"
    recv_buffers: str = "arrival"

    def __post_init__(self) -> None:
        if not self.devices:
            raise InvalidCluster(f"cluster {self.name!r} has no devices")
        seen: set[str] = set()
        for d in self.devices:
            if d.name in seen:
                raise InvalidCluster(f"cluster {self.name!r}: duplicate device name {d.name!r}")
            seen.add(d.name)
            if d.type not in DEVICE_TYPES:
                raise InvalidCluster(f"device {d.name!r}: type {d.type!r} is not one of {DEVICE_TYPES}")
            if not (d.speed > 0) or math.isinf(d.speed):
                raise InvalidCluster(f"device {d.name!r}: speed must be > 0 and finite, got {d.speed!r}")
            if not (isinstance(d.cores, int) and d.cores >= 1):
                raise InvalidCluster(f"device {d.name!r}: cores must be an integer >= 1, got {d.cores!r}")
            if not (d.memory_bytes >= 0):
                raise InvalidCluster(f"device {d.name!r}: memory_bytes must be >= 0, got {d.memory_bytes!r}")
        if self.mode not in MODES:
            raise InvalidCluster(f"cluster {self.name!r}: comm.mode {self.mode!r} is not one of {MODES}")
        if self.recv_buffers not in RECV_BUFFERS:
            raise InvalidCluster(
                f"cluster {self.name!r}: comm.recv_buffers {self.recv_buffers!r} is not one of {RECV_BUFFERS}"
            )
        if not (0 <= self.latency_s < math.inf) or not (self.bytes_per_s > 0):  # NaN fails both
            raise InvalidCluster(
                f"cluster {self.name!r}: comm.latency_s must be finite and >= 0 (got {self.latency_s!r}) and "
                f"comm.bytes_per_s > 0 (got {self.bytes_per_s!r})"
            )
        for (src, dst), link in self.links.items():
            for end in (src, dst):
                if end not in seen:
                    raise InvalidCluster(f"cluster {self.name!r}: link {src}->{dst} names unknown device {end!r}")
            if not (0 <= link.latency_s < math.inf) or not (link.bytes_per_s > 0):
                raise InvalidCluster(
                    f"cluster {self.name!r}: link {src}->{dst} needs latency_s finite and >= 0 (got "
                    f"{link.latency_s!r}) and bytes_per_s > 0 (got {link.bytes_per_s!r})"
                )
        self._pos = {d.name: i for i, d in enumerate(self.devices)}
        self._build_tables()

    def _build_tables(self) -> None:
        n = len(self.devices)
        lat = [[self.latency_s] * n for _ in range(n)]
        bw = [[self.bytes_per_s] * n for _ in range(n)]
        explicit = set(self.links)
        for (s, d), link in self.links.items():
            i, j = self._pos[s], self._pos[d]
            lat[i][j], bw[i][j] = link.latency_s, link.bytes_per_s
            if (d, s) not in explicit:
                lat[j][i], bw[j][i] = link.latency_s, link.bytes_per_s
        for i in range(n):
            lat[i][i], bw[i][i] = 0.0, math.inf
        self.latency_table = lat
        self.bandwidth_table = bw

    # ----------------------------------------------------------------- queries
    def __len__(self) -> int:
        return len(self.devices)

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.devices]

    def device(self, name: str) -> Device:
        try:
            return self.devices[self._pos[name]]
        except KeyError:
            raise InvalidCluster(f"unknown device {name!r}; cluster {self.name!r} has {self.names}") from None

    def index_of(self, name: str) -> int:
        try:
            return self._pos[name]
        except KeyError:
            raise InvalidCluster(f"unknown device {name!r}; cluster {self.name!r} has {self.names}") from None

    def transfer_time(self, src: str | int, dst: str | int, nbytes: float) -> float:
        """Seconds to move `nbytes` from `src` to `dst` (0 on the same device)."""
        i = src if isinstance(src, int) else self._pos[src]
        j = dst if isinstance(dst, int) else self._pos[dst]
        if i == j:
            return 0.0
        return self.latency_table[i][j] + nbytes / self.bandwidth_table[i][j]

    def average_transfer_time(self, nbytes: float) -> float:
        """Mean transfer time over ordered pairs of distinct devices (HEFT-style averages)."""
        n = len(self.devices)
        if n < 2:
            return 0.0
        tot = sum(self.transfer_time(i, j, nbytes) for i in range(n) for j in range(n) if i != j)
        return tot / (n * (n - 1))

    def total_memory(self) -> float:
        return sum(d.memory_bytes for d in self.devices)

    def scaled(self, memory_fraction: float) -> Cluster:
        """A copy with every device's memory multiplied by `memory_fraction`."""
        if not memory_fraction > 0:
            raise InvalidCluster(f"memory_fraction must be > 0, got {memory_fraction!r}")
        devs = [replace(d, memory_bytes=d.memory_bytes * memory_fraction) for d in self.devices]
        return replace(self, devices=devs, links=dict(self.links))

    def with_memory(self, memory_bytes: Mapping[str, float] | float) -> Cluster:
        """A copy with new memory limits (one number for all devices, or per device)."""
        if isinstance(memory_bytes, Mapping):
            devs = [replace(d, memory_bytes=float(memory_bytes.get(d.name, d.memory_bytes))) for d in self.devices]
        else:
            devs = [replace(d, memory_bytes=float(memory_bytes)) for d in self.devices]
        return replace(self, devices=devs, links=dict(self.links))

    def with_comm(
        self, latency_s: float, bytes_per_s: float, links: Mapping[tuple[str, str], Link] | None = None
    ) -> Cluster:
        """A copy with a new communication model (e.g. fitted by a micro-benchmark)."""
        return replace(
            self,
            devices=list(self.devices),
            latency_s=latency_s,
            bytes_per_s=bytes_per_s,
            links=dict(links if links is not None else self.links),
        )

    # ----------------------------------------------------------------- (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "devices": [d.to_dict() for d in self.devices],
            "comm": {
                "latency_s": self.latency_s,
                "bytes_per_s": self.bytes_per_s,
                "mode": self.mode,
                # only where it is not the default: the papers' clusters read as before
                **({"recv_buffers": self.recv_buffers} if self.recv_buffers != "arrival" else {}),
            },
            "links": [
                {"src": s, "dst": d, "latency_s": ln.latency_s, "bytes_per_s": ln.bytes_per_s}
                for (s, d), ln in self.links.items()
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], name: str | None = None) -> Cluster:
        """Build from the cluster config of docs/formats.md (extra keys such as `_target_` are ignored)."""
        if not isinstance(data, Mapping):
            raise InvalidCluster("cluster config must be a mapping with 'devices' and 'comm'")
        unknown = set(data) - set(CLUSTER_KEYS)
        if unknown:
            raise InvalidCluster(f"cluster: unknown keys {sorted(unknown)}; the known keys are {list(CLUSTER_KEYS)}")
        raw = data.get("devices")
        if not raw:
            raise InvalidCluster(f"cluster {name or data.get('name')!r}: key 'devices' is missing or empty")
        devs = []
        for k, d in enumerate(raw):
            if not isinstance(d, Mapping) or "name" not in d:
                raise InvalidCluster(f"cluster devices[{k}] needs a 'name'")
            unknown = set(d) - {"name", "type", "memory_bytes", "speed", "cores"}
            if unknown:
                raise InvalidCluster(
                    f"device {d['name']!r}: unknown keys {sorted(unknown)}; the known keys are "
                    f"['name', 'type', 'memory_bytes', 'speed', 'cores']"
                )
            mem = d.get("memory_bytes", math.inf)
            devs.append(
                Device(
                    str(d["name"]),
                    str(d.get("type", "CPU")),
                    float(mem) if mem is not None else math.inf,
                    float(d.get("speed", 1.0)),
                    int(d.get("cores", 1)),
                )
            )
        comm = dict(data.get("comm") or {})
        unknown = set(comm) - {"latency_s", "bytes_per_s", "mode", "recv_buffers"}
        if unknown:
            raise InvalidCluster(
                f"cluster comm: unknown keys {sorted(unknown)}; the known keys are ['latency_s', 'bytes_per_s', "
                "'mode', 'recv_buffers']"
            )
        links: dict[tuple[str, str], Link] = {}
        for k, ln in enumerate(data.get("links") or []):
            try:
                links[(str(ln["src"]), str(ln["dst"]))] = Link(
                    float(ln.get("latency_s", comm.get("latency_s", 0.0))),
                    float(ln.get("bytes_per_s", comm.get("bytes_per_s", math.inf))),
                )
            except KeyError as exc:
                raise InvalidCluster(f"cluster links[{k}] needs {exc.args[0]!r}") from None
        bps = comm.get("bytes_per_s", math.inf)
        cl = cls(
            devs,
            float(comm.get("latency_s", 0.0)),
            float(bps) if bps is not None else math.inf,
            str(comm.get("mode", "parallel")),
            links,
            str(name or data.get("name") or "cluster"),
            str(comm.get("recv_buffers", "arrival")),
        )
        frac = data.get("memory_fraction")
        if frac is not None and float(frac) != 1.0:
            cl = cl.scaled(float(frac))
        return cl


def uniform_cluster(
    n: int,
    memory_bytes: float = math.inf,
    *,
    type: str = "CPU",
    speed: float = 1.0,
    latency_s: float = 0.0,
    bytes_per_s: float = math.inf,
    mode: str = "parallel",
    prefix: str | None = None,
    name: str | None = None,
) -> Cluster:
    """`n` identical devices named ``<prefix><i>`` (prefix defaults to the lower-case type)."""
    prefix = prefix if prefix is not None else type.lower()
    devs = [Device(f"{prefix}{i}", type, memory_bytes, speed) for i in range(n)]
    return Cluster(devs, latency_s, bytes_per_s, mode, {}, name or f"{prefix}{n}")


def device_names(cluster: Cluster) -> Iterable[str]:
    return (d.name for d in cluster.devices)


def worker_cores(cluster: Cluster, host_cores: Iterable[int]) -> list[list[int]]:
    """The host cores each device's worker process is pinned to, in device order.

    Devices take `device.cores` consecutive cores from `host_cores` (the ids the process may run on, e.g.
    ``sorted(os.sched_getaffinity(0))``), wrapping around when the cluster asks for more cores than the host
    has: then several workers share a core, which `oversubscription` reports and the simulator models.
    O(total cores).
    """
    ids = list(host_cores)
    if not ids:
        raise InvalidCluster("no host cores to pin workers to")
    out: list[list[int]] = []
    k = 0
    for d in cluster.devices:
        out.append(sorted({ids[(k + j) % len(ids)] for j in range(d.cores)}))
        k += d.cores
    return out


def oversubscription(cluster: Cluster, n_host_cores: int) -> float:
    """How many workers share each host core on average: (cores the devices ask for) / (host cores); <= 1
    means every worker owns its cores."""
    return sum(d.cores for d in cluster.devices) / max(1, n_host_cores)
