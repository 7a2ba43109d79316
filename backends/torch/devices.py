"""Physical devices of the one-process runtimes: binding cluster devices to CPU/GPU devices, real copies
between them, and the per-destination copy engines.

Devices
-------
`map_devices` maps the cluster's devices to physical ones: GPU-type devices go to ``cuda:i`` when there are at
least as many GPUs, otherwise several of them share a GPU as virtual devices (one CUDA stream each; memory capped
per virtual device by the runtime's own accounting); CPU-type devices (and GPU-type ones when no GPU exists) are
virtual CPU devices, one worker thread each, with the intra-op threads split among them.

`copy_value` makes a real copy (``clone()`` on the CPU, an asynchronous copy on a CUDA copy stream ordered by
CUDA events); a `CopyEngine` is a destination's transfer queue (a thread, first-in first-out: Baechi 4.2's
per-device transfer queue). `set_threads` splits the intra-op threads among the CPU workers.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from algorithms.cluster import Cluster
from algorithms.errors import ConfigError

log = logging.getLogger(__name__)

DEVICE_CHOICES = ("auto", "cpu", "cuda")


@dataclass
class PhysDevice:
    """A cluster device bound to a physical device (and a CUDA stream when it is a GPU)."""

    name: str
    torch_device: torch.device
    memory_limit: float = math.inf
    shared: bool = False  # several cluster devices on this physical device
    stream: Any = None
    copy_stream: Any = None

    @property
    def is_cuda(self) -> bool:
        return self.torch_device.type == "cuda"


def map_devices(cluster: Cluster, prefer: str = "auto") -> list[PhysDevice]:
    """Bind each cluster device to a physical device (see the module docstring). O(devices)."""
    if prefer not in DEVICE_CHOICES:
        raise ConfigError(f"backend.device {prefer!r} is not one of {DEVICE_CHOICES}")
    n_cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if prefer == "cuda" and n_cuda == 0:
        raise ConfigError("backend.device=cuda but no CUDA device is available; use device=auto or cpu")
    use_cuda = n_cuda > 0 and prefer != "cpu"
    gpus = [d for d in cluster.devices if d.type == "GPU" or (prefer == "cuda" and d.type != "TPU")]
    out: list[PhysDevice] = []
    if gpus and not use_cuda:
        log.warning("cluster %r has GPU devices but no GPU is used here: they run as virtual CPU devices", cluster.name)
    gpu_index = {d.name: k for k, d in enumerate(gpus)}
    per_cuda: dict[int, int] = defaultdict(int)
    for d in cluster.devices:
        if use_cuda and d.name in gpu_index:
            per_cuda[gpu_index[d.name] % n_cuda] += 1
    for d in cluster.devices:
        if use_cuda and d.name in gpu_index:
            i = gpu_index[d.name] % n_cuda
            dev = torch.device("cuda", i)
            out.append(
                PhysDevice(d.name, dev, d.memory_bytes, per_cuda[i] > 1, torch.cuda.Stream(dev), torch.cuda.Stream(dev))
            )
        else:
            out.append(PhysDevice(d.name, torch.device("cpu"), d.memory_bytes, True))
    return out


def copy_value(value: Any, src: PhysDevice, dst: PhysDevice, ready: Any = None) -> tuple[Any, Any]:
    """A real copy of `value` (a tensor or a tuple/list of them) from `src` to `dst`.

    Returns (copy, cuda event that marks its completion or None). CPU to CPU: ``clone()``. With a GPU involved
    the copy is issued on a copy stream after waiting for `ready` (the producer's event), asynchronously."""
    if not (src.is_cuda or dst.is_cuda):
        return map_tensors(value, lambda t: t.clone()), None
    stream = dst.copy_stream if dst.is_cuda else src.copy_stream
    with torch.cuda.stream(stream):
        if ready is not None:
            stream.wait_event(ready)

        def move(t: torch.Tensor) -> torch.Tensor:
            if t.device == dst.torch_device:
                c = t.clone()
            else:
                c = t.to(dst.torch_device, non_blocking=dst.is_cuda)
            if t.is_cuda:
                t.record_stream(stream)
            return c

        out = map_tensors(value, move)
        ev = torch.cuda.Event()
        ev.record(stream)
    if not dst.is_cuda:
        ev.synchronize()
        return out, None
    return out, ev


def map_tensors(v: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(v, torch.Tensor):
        return fn(v)
    if isinstance(v, (list, tuple)):
        t = [map_tensors(x, fn) for x in v]
        return t if isinstance(v, list) else tuple(t)
    return v


class CopyEngine:
    """One destination device's transfer queue: a thread that performs copies first-in first-out."""

    def __init__(self, dst: PhysDevice):
        self.dst = dst
        self.q: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._loop, name=f"copy-{dst.name}", daemon=True)
        self.thread.start()

    def submit(self, value: Any, src: PhysDevice, ready: Any, done: Callable[[Any, Any], None]) -> None:
        self.q.put((value, src, ready, done))

    def _loop(self) -> None:
        while True:
            job = self.q.get()
            if job is None:
                return
            value, src, ready, done = job
            try:
                out, ev = copy_value(value, src, self.dst, ready)
                done(out, ev)
            except BaseException as exc:  # reported to the step by `done` never being called
                self.error = exc
                log.exception("copy to %s failed", self.dst.name)
                done(None, exc)

    def close(self) -> None:
        self.q.put(None)
        self.thread.join(timeout=10)


def set_threads(n_cpu_workers: int, threads: int | None) -> tuple[int, int]:
    """Set the intra-op threads of each CPU worker: `threads` when given, else PyTorch's current count split
    among the workers. Returns (previous, per-worker) thread counts."""
    prev = torch.get_num_threads()
    per = int(threads) if threads else max(1, prev // max(1, n_cpu_workers))
    torch.set_num_threads(per)
    return prev, per
