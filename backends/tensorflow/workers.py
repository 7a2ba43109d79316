"""Local TensorFlow worker processes: one `tf.distribute.Server` per device, pinned to the device's cores.

`WorkerPool` starts one OS process per cluster device: a fresh interpreter running
``python -m backends.tensorflow.workers '<json>'`` (a subprocess rather than ``multiprocessing`` spawn, whose
children re-import the caller's ``__main__``: scripts without a main guard and Hydra apps would run again).
Worker `k` listens on a free local port and is the task ``/job:worker/task:k`` of one `ClusterSpec` naming
all of them; it serves the ops a client session puts on ``/job:worker/task:k/device:CPU:0`` (GPU devices:
``device:GPU:0`` of a process whose ``CUDA_VISIBLE_DEVICES`` shows only its GPU; not run here, no GPU).
Every thread of the worker is pinned with ``os.sched_setaffinity`` to the cores
`algorithms.cluster.worker_cores` gives its device in the whole cluster (so a device keeps its cores whichever
devices a run uses), before and after the server starts; its session thread pools get
``intra_op_parallelism_threads = device.cores`` and ``inter_op_parallelism_threads = 1``, so a worker runs
one op at a time on its own cores, the way the simulator runs a device (ECOSYSTEM.md, "Distributed
execution").

Protocol: JSON lines; the worker answers ``ready`` (pid, gRPC target, affinity, resident set) or ``error``
(traceback) once, then ``stat`` (resident set and its high-water mark ``ru_maxrss``, bytes) or ``pace``
(`backends.interference.core_pace` on the worker's pinned core: the sentinel of the VM's slow spells, which the
runtime and the profile take between steps) per request, and exits on ``stop`` or when its stdin closes (the
parent went away, even by SIGKILL).

Ports are picked per pool by binding port 0 and releasing it just before the servers bind (a small race with
other programs, retried once). `close` asks every worker to stop, then terminates and finally kills whatever
is left; the pool is a context manager, and an `atexit` hook closes pools still open at interpreter exit.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import resource
import select
import socket
import subprocess
import sys
import time
import traceback
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from algorithms.cluster import Cluster, oversubscription, worker_cores
from algorithms.errors import ConfigError, LabError
from backends.interference import core_pace

log = logging.getLogger(__name__)

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_OPEN: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


PACE_LOOPS = 10
"""Tries of `core_pace` a worker takes the fastest of (the PyTorch workers take 3). Right after a two-device step
a worker's pace read higher than a single-device worker's in the same minutes (medians of 41-58 against 36-40
microseconds with 3 tries, gnmt_tiny, 27 Nov 2026), perhaps the server's gRPC threads winding down on its core;
more tries give a quiet loop more chances. A choice: on a slow VM ten tries read the same as three (45-59
microseconds for both kinds). Ten tries of about 50 microseconds cost half a millisecond between steps, outside
the timed step."""


class WorkerError(LabError):
    """A worker process failed to start or died."""


def free_ports(n: int) -> list[int]:
    """`n` distinct free TCP ports on 127.0.0.1 (bound to port 0, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def task_device(task: int, dev_type: str = "CPU") -> str:
    """The TensorFlow device of worker `task` (its first CPU, or the one GPU its process sees)."""
    return f"/job:worker/replica:0/task:{task}/device:{dev_type}:0"


def pin_threads(cores: Sequence[int]) -> None:
    """Pin every thread of this process (``/proc/self/task``) to `cores`; a thread that has exited meanwhile is
    skipped."""
    mask = set(int(c) for c in cores)
    os.sched_setaffinity(0, mask)
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # no procfs: the calling thread is pinned, later threads inherit its mask
        return
    for tid in tids:
        try:
            os.sched_setaffinity(tid, mask)
        except OSError:
            pass


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _maxrss_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


def _serve(args: dict[str, Any], out: Any) -> None:
    """Body of a worker process: pin, start the server, answer ``stat``/``stop`` lines on stdin with JSON
    lines on `out`. Exits when stdin closes (the parent went away)."""

    def send(*msg: Any) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()

    cores = [int(c) for c in args["cores"]]
    try:
        gpu = args.get("gpu")
        os.environ["CUDA_VISIBLE_DEVICES"] = "" if gpu is None else str(gpu)
        pin_threads(cores)
        import tensorflow as tf

        pin_threads(cores)
        config = tf.compat.v1.ConfigProto(
            intra_op_parallelism_threads=int(args["threads"]),
            inter_op_parallelism_threads=1,
            allow_soft_placement=False,
        )
        if gpu is not None:
            config.gpu_options.allow_growth = True
        server = tf.distribute.Server(
            tf.train.ClusterSpec(args["spec"]), job_name="worker", task_index=int(args["task"]), config=config
        )
        pin_threads(cores)
        send("ready", os.getpid(), server.target, sorted(os.sched_getaffinity(0)), _rss_bytes())
    except BaseException:  # report any start failure to the parent instead of dying silently
        send("error", os.getpid(), traceback.format_exc())
        return
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "stat":
            send("stat", _rss_bytes(), _maxrss_bytes())
        elif cmd == "pace":  # the sentinel of a core's slow spells, on this worker's pinned core
            send("pace", core_pace(loops=PACE_LOOPS))
        elif cmd == "stop":
            send("stopped")
            return


def _main() -> None:
    """``python -m backends.tensorflow.workers '<json args>'``: one worker. The protocol goes to a private copy
    of stdout; fd 1 is pointed at stderr so that nothing else (library prints) can corrupt it."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    _serve(json.loads(sys.argv[1]), proto)


@dataclass
class Worker:
    device: str
    task: int
    cores: list[int]
    threads: int
    process: subprocess.Popen
    pid: int = 0
    target: str = ""
    rss_at_start: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "pid": self.pid, "cores": list(self.cores), "task": self.task}


@dataclass(eq=False)  # compared and hashed by identity: the atexit registry holds pools in a WeakSet
class WorkerPool:
    """One pinned `tf.distribute.Server` process per device of `devices` (all of `cluster` by default)."""

    cluster: Cluster
    devices: list[str] | None = None
    host_cores: list[int] | None = None
    start_timeout_s: float = 300.0
    workers: list[Worker] = field(default_factory=list)
    oversubscribed: bool = False

    def __post_init__(self) -> None:
        names = self.cluster.names
        self.devices = list(self.devices or names)
        unknown = [d for d in self.devices if d not in names]
        if unknown:
            raise ConfigError(f"worker pool: devices {unknown} are not in cluster {self.cluster.name!r} {names}")
        bad = [d.name for d in self.cluster.devices if d.name in self.devices and d.type not in ("CPU", "GPU")]
        if bad:
            raise ConfigError(f"devices {bad} cannot run as TensorFlow workers here (CPU and GPU only)")
        if self.host_cores is None:
            self.host_cores = sorted(os.sched_getaffinity(0))

    def __enter__(self) -> WorkerPool:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def target(self) -> str:
        """The gRPC target a client session connects to (task 0, the master)."""
        return self.workers[0].target

    def task_of(self) -> dict[str, int]:
        return {w.device: w.task for w in self.workers}

    def device_map(self) -> dict[str, str]:
        """cluster device name -> its worker's TensorFlow device."""
        types = {d.name: d.type for d in self.cluster.devices}
        return {w.device: task_device(w.task, types[w.device]) for w in self.workers}

    def start(self) -> None:
        assert self.devices is not None and self.host_cores is not None
        sub = Cluster(devices=[self.cluster.device(n) for n in self.devices], name=self.cluster.name)
        # cores as the whole cluster would pin them, so a device keeps its cores whichever devices run
        by_name = dict(zip(self.cluster.names, worker_cores(self.cluster, self.host_cores)))
        pins = [by_name[n] for n in self.devices]
        ratio = oversubscription(sub, len(self.host_cores))
        self.oversubscribed = ratio > 1.0
        if self.oversubscribed:
            log.warning(
                "cluster %r asks for %d cores but this host gives %d: workers share cores (%.2f per core); "
                "measured steps include that sharing",
                self.cluster.name,
                sum(d.cores for d in sub.devices),
                len(self.host_cores),
                ratio,
            )
        for attempt in range(2):
            try:
                self._spawn(sub, pins)
                return
            except WorkerError as exc:
                self.close()
                if attempt == 1 or "address" not in str(exc).lower():
                    raise
                log.warning("worker port taken, retrying with new ports: %s", exc)

    def _spawn(self, sub: Cluster, pins: list[list[int]]) -> None:
        ports = free_ports(len(sub.devices))
        spec = {"worker": [f"localhost:{p}" for p in ports]}
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [_REPO_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        )
        gpu_index = 0
        _OPEN.add(self)
        for k, (dev, cores) in enumerate(zip(sub.devices, pins)):
            gpu = None
            if dev.type == "GPU":
                gpu, gpu_index = gpu_index, gpu_index + 1
            args = {"spec": spec, "task": k, "cores": cores, "threads": int(dev.cores), "gpu": gpu}
            proc = subprocess.Popen(
                [sys.executable, "-m", "backends.tensorflow.workers", json.dumps(args)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=_REPO_ROOT,
                env=env,
                text=True,
                bufsize=1,
            )
            self.workers.append(Worker(dev.name, k, cores, int(dev.cores), proc))
        deadline = time.monotonic() + self.start_timeout_s
        for w in self.workers:
            msg = self._recv(w, max(0.0, deadline - time.monotonic()), "start")
            if msg[0] == "error":
                raise WorkerError(f"worker for device {w.device!r} failed to start:\n{msg[2]}")
            _, w.pid, w.target, w.cores, w.rss_at_start = msg
        log.info(
            "started %d TensorFlow workers: %s",
            len(self.workers),
            ", ".join(f"{w.device}=pid {w.pid} cores {w.cores}" for w in self.workers),
        )

    @staticmethod
    def _recv(w: Worker, timeout_s: float, what: str) -> list[Any]:
        assert w.process.stdout is not None
        ready, _, _ = select.select([w.process.stdout], [], [], timeout_s)
        if not ready:
            raise WorkerError(
                f"worker for device {w.device!r} (pid {w.process.pid}) did not answer ({what}) in {timeout_s:.0f} s"
            )
        line = w.process.stdout.readline()
        if not line:
            raise WorkerError(
                f"worker for device {w.device!r} (pid {w.process.pid}) exited (code {w.process.poll()}) during {what}"
            )
        return list(json.loads(line))

    @staticmethod
    def _send(w: Worker, cmd: str) -> None:
        assert w.process.stdin is not None
        w.process.stdin.write(cmd + "\n")
        w.process.stdin.flush()

    def stats(self) -> dict[str, dict[str, int]]:
        """device -> {"rss", "maxrss", "rss_at_start"} (bytes) from each live worker."""
        out = {}
        for w in self.workers:
            self._send(w, "stat")
            _, rss, maxrss = self._recv(w, 30.0, "stat")
            out[w.device] = {"rss": rss, "maxrss": maxrss, "rss_at_start": w.rss_at_start}
        return out

    def paces(self) -> list[float]:
        """Each live worker's `interference.core_pace` now, in worker order: asked of every worker first and
        then read, so that they time their cores at the same moment. O(workers)."""
        for w in self.workers:
            self._send(w, "pace")
        return [float(self._recv(w, 30.0, "pace")[1]) for w in self.workers]

    def pids(self) -> list[int]:
        return [w.process.pid for w in self.workers]

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop every worker: a polite ``stop``, then SIGTERM, then SIGKILL. Idempotent."""
        for w in self.workers:
            try:
                if w.process.poll() is None:
                    self._send(w, "stop")
                    assert w.process.stdin is not None
                    w.process.stdin.close()
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + timeout_s
        for w in self.workers:
            _wait(w.process, deadline - time.monotonic())
        for w in self.workers:
            if w.process.poll() is None:
                w.process.terminate()
                _wait(w.process, 5.0)
            if w.process.poll() is None:
                log.warning("worker %s (pid %s) ignored SIGTERM; killing it", w.device, w.process.pid)
                w.process.kill()
                _wait(w.process, 5.0)
            for f in (w.process.stdin, w.process.stdout):
                try:
                    if f is not None:
                        f.close()
                except OSError:
                    pass
        self.workers = []
        _OPEN.discard(self)


def _wait(proc: subprocess.Popen, timeout_s: float) -> None:
    try:
        proc.wait(max(0.01, timeout_s))
    except subprocess.TimeoutExpired:
        pass


@atexit.register
def _close_open_pools() -> None:
    for pool in list(_OPEN):
        pool.close(timeout_s=2.0)


if __name__ == "__main__":
    _main()
