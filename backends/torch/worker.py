"""The worker side of the process-per-device runtime (`backends.torch.distributed`): what a worker process
receives (`WorkerJob`: the pickled program, inputs, placement, schedule, cores), how it pins itself, and how it
runs its device's part of each training step (`_Worker.step`) and reports (`_worker_main`). See
distributed.py's docstring for the protocol. Cost per step: the ops plus O(N + U) Python work.
"""

from __future__ import annotations

import collections
import contextlib
import io
import os
import pickle
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from tqdm import tqdm

from algorithms.cluster import RECV_POST_MARGIN
from algorithms.errors import ConfigError, LabError, OutOfMemory

from .. import interference
from .cuda_memory import framework_reserve_bytes
from .cudagraph import GraphedStep
from .devices import PhysDevice
from .program import Program, device_kwargs, resolve, tensors_of
from .reference import tf32_in_effect
from .runtime import PlacedExecutor


class WorkerError(LabError):
    """A worker process of the distributed runtime failed (the message carries its traceback)."""


# ---------------------------------------------------------------------------- shipping the program
class _ProgramPickler(pickle.Pickler):
    """Pickles aten OpOverloads by name (they are not picklable themselves)."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, torch._ops.OpOverload):
            return _load_op, (str(obj),)
        return NotImplemented


def _load_op(name: str) -> Any:
    ns, op, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, ns), op), overload)


def dump_program(prog: Program) -> bytes:
    """The program as bytes a spawned worker can load (without its fx GraphModule)."""
    gm, prog.gm = prog.gm, None
    consts, prog.consts = prog.consts, {nid: c.cpu() for nid, c in prog.consts.items()}  # a GPU capture's too
    try:
        buf = io.BytesIO()
        _ProgramPickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(prog)
        return buf.getvalue()
    finally:
        prog.gm, prog.consts = gm, consts


# ---------------------------------------------------------------------------- value layouts
def value_spec(v: Any) -> Any:
    """The layout of a value: ("t", shape, dtype, strides) for a tensor (strides None when it is contiguous, or
    when its elements overlap, e.g. an expanded tensor), ("l"/"u", [...]) for a list/tuple, ("c", v) for anything
    else (sent as nothing: the receiver rebuilds the constant)."""
    if isinstance(v, torch.Tensor):
        strided = not v.is_contiguous() and all(st > 0 or n == 1 for n, st in zip(v.shape, v.stride()))
        return ("t", tuple(v.shape), v.dtype, tuple(v.stride()) if strided else None)
    if isinstance(v, (list, tuple)):
        return ("l" if isinstance(v, list) else "u", [value_spec(x) for x in v])
    return ("c", v)


def restrided(spec: Any, v: Any) -> Any:
    """Value `v`, received contiguous, with the strides its sender had (`value_spec`): a copy for each tensor
    whose spec records strides, `v` itself otherwise. Ops after a received transpose depend on them: on the
    sender ``t(t(x))`` is contiguous and can be viewed; on a contiguous copy of ``t(x)`` it cannot, and
    ``aten.view`` fails ("view size is not compatible with input tensor's size and stride"), as a transformer_tiny
    placement did before this copy. O(bytes of the tensors with strides)."""
    kind = spec[0]
    if kind == "t":
        if spec[3] is None:
            return v
        return torch.empty_strided(spec[1], spec[3], dtype=spec[2], device=v.device).copy_(v)
    if kind == "c":
        return v
    parts = [restrided(s, x) for s, x in zip(spec[1], v)]
    return parts if kind == "l" else tuple(parts)


def has_strides(spec: Any) -> bool:
    """Whether a value of layout `spec` needs `restrided` after its receive."""
    if spec[0] == "t":
        return spec[3] is not None
    return spec[0] in ("l", "u") and any(has_strides(s) for s in spec[1])


def _alloc(spec: Any, device: torch.device) -> tuple[Any, list[torch.Tensor]]:
    kind = spec[0]
    if kind == "t":
        t = torch.empty(spec[1], dtype=spec[2], device=device)
        return t, [t]
    if kind == "c":
        return spec[1], []
    parts, bufs = [], []
    for s in spec[1]:
        v, b = _alloc(s, device)
        parts.append(v)
        bufs.extend(b)
    return (parts if kind == "l" else tuple(parts)), bufs


def value_specs(
    prog: Program, flat: Sequence[torch.Tensor], nids: set[int], device: torch.device | str = "cpu"
) -> dict[int, Any]:
    """Layouts of the values `nids` from one execution of the program (no freeing) on `device`, the workers'
    kind (a GPU capture may hold ops the CPU has not, and a kernel's output strides can depend on the device);
    nothing runs when `nids` is empty (a one-device placement). O(N)."""
    if not nids:
        return {}
    dev = torch.device(device)
    env: dict[int, Any] = {}
    for r in prog.nodes:
        if r.kind == "placeholder":
            env[r.nid] = flat[r.index].to(dev)
        elif r.kind == "const":
            env[r.nid] = prog.consts[r.nid].to(dev)
    get = env.__getitem__
    for r in prog.nodes:
        if r.kind == "call":
            kw = device_kwargs(r, dev) or r.kwargs
            env[r.nid] = r.target(*resolve(r.args, get), **resolve(kw, get))
    return {i: value_spec(env[i]) for i in nids}


# ---------------------------------------------------------------------------- the job a worker gets
@dataclass
class WorkerJob:
    """Everything a worker process needs (picklable)."""

    program: bytes
    flat: list[torch.Tensor]
    placement: dict[str, str]
    schedule: dict[str, list[str]]
    devices: list[str]
    cores: list[list[int]]
    cuda: bool
    port: int  # 0: rendezvous from the environment (torchrun)
    warmup: int
    steps: int
    retain_first: bool = False
    time_ops: bool = False
    specs: dict[int, Any] = field(default_factory=dict)
    threads: int | None = None  # intra-op threads (default: the worker's core count)
    trace: bool = False  # debug: record per message when it was sent and how long its receiver waited
    memory_limits: list[float] = field(default_factory=list)  # bytes per device (empty: no limit)
    pin_transport: bool = True  # False: pin only the compute thread, gloo's transport threads stay unpinned
    transport_policy: str = "idle"  # what happens to gloo's transport threads (`lower_transport_threads`)
    # with `time_ops`: this many more measured steps without the per-op timing, alternating with the timed ones
    # (reported as ``untimed_times``): the step the ops add up to when nothing times them, as a placed run's
    untimed_steps: int = 0
    untimed_block: bool = False  # the untimed steps all first, in one block, instead of alternating
    # GPU, one worker: the steps after warm-up replay a CUDA graph of the step (`backends.torch.cudagraph`);
    # host_graphs: the same on the host (tests on a CPU)
    cuda_graph: bool = False
    host_graphs: bool = False
    # gloo: "up_front" posts every receive before the step; "within_limit" posts each as early as the device's
    # memory limit allows, at the latest when an op needs it (`plan_receive_posts`)
    post_receives: str = "up_front"


def spawn_and_collect(
    main: Any,
    args: tuple[Any, ...],
    n: int,
    what: str,
    timeout_s: float,
    on_error: Any = None,
) -> dict[int, dict[str, Any]]:
    """Spawn `n` processes running ``main(rank, *args, results)`` and collect the ``(rank, report)`` pairs they
    put on `results` (a spawn-context queue made here); `what` names them in errors. Raises `WorkerError`
    when a worker reports ``{"error": ...}`` (or calls ``on_error(rank, report, results)``, which raises),
    exits with an error or without reporting, or when `timeout_s` passes; terminates what is left running.

    `args` reach the workers through a temporary file, not the spawn pipe: multiprocessing writes a process's
    arguments into a pipe whose read end the parent itself keeps open until the write returns, so a child that
    dies before reading them all (a script without an ``if __name__ == "__main__":`` guard, whose re-import in
    the child fails) left the caller blocked forever once they passed the pipe's 64 KB (a transformer_tiny job
    did, 26 Nov 2026). Through the file the pipe carries a path, the child's exit is seen and reported."""
    import tempfile

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    fd, job_path = tempfile.mkstemp(prefix="placement-lab-job-", suffix=".pkl")
    reports: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout_s
    try:
        with os.fdopen(fd, "wb") as f:
            pickle.dump(args, f, protocol=pickle.HIGHEST_PROTOCOL)
        pc = mp.start_processes(
            _child, args=(main, os.getpid(), job_path, results), nprocs=n, join=False, start_method="spawn"
        )
    except BaseException:
        os.unlink(job_path)
        raise
    try:
        while len(reports) < n:
            try:
                rank, rep = results.get(timeout=1.0)
            except Exception:  # queue.Empty: a worker that died without reporting must not hang the caller
                if all(p.exitcode == 0 for p in pc.processes) and results.empty():
                    time.sleep(2.0)  # the last reports may still be in flight
                    if results.empty():
                        raise WorkerError(f"{what} exited without reporting") from None
                bad = [(k, p.exitcode) for k, p in enumerate(pc.processes) if p.exitcode not in (None, 0)]
                if bad:
                    raise WorkerError(
                        f"{what}: worker(s) {bad} (rank, exit code) exited with an error; its traceback is on "
                        "stderr (a script that starts workers must do so under `if __name__ == '__main__':`)"
                    ) from None
                if time.monotonic() > deadline:
                    raise WorkerError(f"{what} did not finish in {timeout_s:.0f} s") from None
                continue
            if "error" in rep:
                if on_error is not None:
                    on_error(rank, rep, results)
                raise WorkerError(f"{what}: worker {rank} failed: {rep['error']}")
            reports[rank] = rep
        pc.join(timeout=60)
    finally:
        for p in pc.processes:
            if p.is_alive():
                p.terminate()
        for p in pc.processes:
            p.join(timeout=10)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(job_path)
    return reports


def _child(rank: int, main: Any, parent_pid: int, job_path: str, results: Any) -> None:
    """Entry of every process `spawn_and_collect` starts: tied to the parent's life, then ``main(rank, *args,
    results)`` with the arguments read from `job_path`."""
    die_with_parent(parent_pid)
    with open(job_path, "rb") as f:
        args = pickle.load(f)
    main(rank, *args, results)


def die_with_parent(parent_pid: int) -> None:
    """Linux: have the kernel SIGKILL this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``), and exit
    now if the parent is already gone. torch's spawn wrapper asks for SIGINT, which a process started in a
    shell's background (``nohup ... &``) ignores, and so do its children: a parent killed by a signal (no
    ``finally`` runs) left its workers running, holding cores and ports. Elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:
        os._exit(1)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pin_worker(cores: Sequence[int], threads: int | None = None) -> int:
    """Pin this process to `cores` and set its intra-op threads (default: one per core). Returns the threads."""
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(cores))
    n = int(threads or max(1, len(cores)))
    torch.set_num_threads(n)
    return n


TRANSPORT_THREADS = ("gloo_tcp_loop",)  # the thread names of gloo's TCP device loops


TRANSPORT_POLICIES = ("idle", "nice", "normal")  # what `lower_transport_threads` can do to gloo's loop threads


def lower_transport_threads(policy: str = "idle") -> int:
    """Lower the priority of this process's gloo transport threads (named in `TRANSPORT_THREADS`); call it after
    ``init_process_group``. ``"idle"`` (the default): ``SCHED_IDLE``; ``"nice"``: nice 19; ``"normal"``: leave
    them. Returns how many threads were changed (0 where /proc/self/task or SCHED_IDLE is missing).

    Why: gloo's TCP device loop handles a socket's events only if it gets the pair's mutex with a *try*-lock,
    and returns otherwise; its epoll is level-triggered, so while the compute thread holds that mutex (inside
    ``isend``/``irecv``) the loop polls again at once. At the compute thread's priority, pinned to the worker's
    core, the loop thread preempted the compute thread when a message arrived, found the mutex taken by the
    very thread it had preempted, and spun until its time slice ended: on gnmt_tiny m-SCT, cpu2, the loop
    threads took 1.5 s of processor time over 13 steps (0.35 ms per message) and the step was 275 ms on a
    quiet machine (23 Nov 2026). Measured steps of that placement, back to back:

    - quiet machine: SCHED_IDLE 82-89 ms, nice 19 149 ms, normal 275 ms;
    - other sessions busy on both cores (load 3): SCHED_IDLE 347-371 ms, nice 19 107-126 ms, normal 256-276 ms.

    A SCHED_IDLE thread runs only when its core would otherwise idle, which is when the worker blocks in a
    receive's ``wait()``, when the data is needed: it never takes the core from the lock holder. But every waking
    normal task preempts it, other sessions' included, so on a busy host the worker waits for them; at nice 19
    the loop thread still gets a small share of a busy core, and now and then spins through it. Measurements
    belong on a quiet host, so SCHED_IDLE is the default; ``"nice"`` suits a shared one. Sends are unaffected
    (gloo writes a payload from the caller's thread once the receiver has announced the receive); the
    announcements themselves are read by the peer's loop thread, so the workers post their receives before the
    step's barrier, during which both loops run. Lowering a thread's priority needs no privilege. O(threads)."""
    if policy not in TRANSPORT_POLICIES:
        raise ConfigError(f"transport priority {policy!r} is not one of {list(TRANSPORT_POLICIES)}")
    if policy == "normal" or not os.path.isdir("/proc/self/task") or not hasattr(os, "SCHED_IDLE"):
        return 0
    me, n = threading.get_native_id(), 0
    for t in os.listdir("/proc/self/task"):
        if int(t) == me:
            continue
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                name = f.read().strip()
            if name in TRANSPORT_THREADS:
                if policy == "idle":
                    os.sched_setscheduler(int(t), os.SCHED_IDLE, os.sched_param(0))
                else:
                    os.setpriority(os.PRIO_PROCESS, int(t), 19)  # PRIO_PROCESS with a thread id: that thread
                n += 1
        except OSError:  # the thread ended meanwhile
            continue
    return n


def allocator_peaks(dev: torch.device) -> dict[str, float]:
    """The CUDA caching allocator's peaks since its last reset: ``allocated`` (the blocks handed out, each
    rounded up to the allocator's 512-byte granularity, or a whole unsplit block) and ``requested`` (the bytes the
    tensors asked for). Their difference is the allocator's rounding; ``requested`` above the tensors' own peak is
    memory that aten ops allocate and free inside themselves."""
    stats = torch.cuda.memory_stats(dev)
    return {
        "allocated": float(stats.get("allocated_bytes.all.peak", torch.cuda.max_memory_allocated(dev))),
        "requested": float(stats.get("requested_bytes.all.peak", float("nan"))),
    }


def _rss_bytes() -> float:
    with open("/proc/self/statm") as f:
        return float(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


POST_RECEIVES = ("up_front", "within_limit")  # when a gloo worker posts its receives (`WorkerJob.post_receives`)


def plan_receive_posts(
    op_peaks: Sequence[float],
    needed_at: Mapping[int, int],
    sizes: Mapping[int, float],
    order: Sequence[int],
    limit: float,
    margin: float = RECV_POST_MARGIN,
) -> dict[int, int]:
    """Where a worker posts each receive under ``post_receives="within_limit"``: value -> the position in its
    device's op order before which its receive is posted (0: before the step, with the up-front receives).

    `op_peaks[p]` is the device's largest live memory during its op `p` in a step that posted every receive when
    an op first needed it (position `needed_at[i]`; the buffer of `sizes[i]` bytes counted from there), which is
    the least memory the step can hold. Greedy, in `order` (the receives in their senders' send order): each
    receive moves back from its position one op at a time while every op it then spans stays within
    ``limit * (1 - margin)`` with its buffer added, and its buffer is added to those ops. With room everywhere
    (no limit) every receive is posted up front, as ``post_receives="up_front"`` does; where the limit binds,
    the receives the senders send first get the room first. The margin keeps room for what varies between
    steps (a sent value is held until its receiver has posted; `_Worker.step`). O(R * ops) for R receives."""
    budget = limit * (1.0 - margin) if limit != float("inf") else limit
    peaks = list(op_peaks)
    n = len(peaks)
    out: dict[int, int] = {}
    for i in order:
        c = min(int(needed_at.get(i, n)), n)
        b = float(sizes[i])
        k = c
        while k > 0 and peaks[k - 1] + b <= budget:
            k -= 1
        for q in range(k, c):
            peaks[q] += b
        out[i] = k
    return out


class _HeldSends:
    """gloo sends whose values the sender has freed while their receivers may not have posted yet: a thread per
    value waits for its works (``Work.wait`` releases the GIL; a gloo work completes only in ``wait``), so that
    the compute thread never blocks on a receiver that posts later (which can wait for this very worker: a
    deadlock). `done()` lists the values whose sends have completed since the last call; `join()` waits for all."""

    def __init__(self) -> None:
        self._done: collections.deque[int] = collections.deque()
        self._threads: list[threading.Thread] = []
        self._errors: list[BaseException] = []

    def add(self, i: int, works: list[Any]) -> None:
        def wait() -> None:
            try:
                for w in works:
                    w.wait()
            except BaseException as exc:  # raised again in the compute thread by done() / join()
                self._errors.append(exc)
            self._done.append(i)

        t = threading.Thread(target=wait, name="held-send", daemon=True)
        t.start()
        self._threads.append(t)

    def done(self) -> list[int]:
        if self._errors:
            raise self._errors[0]
        out = []
        while self._done:  # popleft is atomic: a value appended meanwhile stays for the next call
            out.append(self._done.popleft())
        return out

    def join(self) -> list[int]:
        for t in self._threads:
            t.join()
        self._threads = []
        return self.done()


class _Worker:
    """One device's side of the step (see the module docstring)."""

    def __init__(self, rank: int, job: WorkerJob):
        self.rank, self.job = rank, job
        self.world = len(job.devices)
        prog: Program = pickle.loads(job.program)
        self.prog = prog
        if job.cuda:
            local = int(os.environ.get("LOCAL_RANK", rank))  # torchrun: one GPU per local rank
            self.dev = torch.device("cuda", local % torch.cuda.device_count())
            torch.cuda.set_device(self.dev)
        else:
            self.dev = torch.device("cpu")
        phys = [PhysDevice(name, self.dev) for name in job.devices]
        P, S = prog.n_params, prog.n_params * prog.n_state
        flat = job.flat
        self.ex = PlacedExecutor(
            prog, job.placement, job.schedule, phys, flat[:P], flat[P : P + S], flat[P + S :], start_threads=False,
            share_storages=not job.cuda,
        )  # fmt: skip
        ex, d = self.ex, rank
        self.order = ex.order[d]
        # what this worker sends, in its send order, and what it receives from each source in that source's order
        self.my_ph = [i for i, dd in ex.placeholder_dev.items() if dd == d]
        seq: list[list[int]] = [[] for _ in range(self.world)]  # per source: nids it sends, in order
        for src in range(self.world):
            seq[src] = [i for i, dd in ex.placeholder_dev.items() if dd == src and ex.sends.get(i)]
            for op in ex.order[src]:
                seq[src].extend(
                    nid for nid in prog.op_nodes[op] if ex.sends.get(nid) and prog.nodes[nid].kind == "call"
                )
        self.recv_plan = [(src, i) for src in range(self.world) if src != d for i in seq[src] if d in ex.sends[i]]
        ph_of_index = {r.index: r.nid for r in prog.nodes if r.kind == "placeholder"}
        self.updates = []  # (placeholder nid, new-value nid) of every parameter and state
        for k in range(P + S):
            self.updates.append((ph_of_index[k], prog.outputs[1 + P + k]))
        self.tag_base = len(prog.nodes)
        self.sent = {i for i, dests in ex.sends.items() if dests}
        self.peak = 0.0
        self.traffic = 0.0
        self.next_recvs: dict[int, tuple[Any, list[Any]]] | None = None  # posted at the end of the step before
        if job.post_receives not in POST_RECEIVES:
            raise ConfigError(f"runtime.post_receives {job.post_receives!r} is not one of {list(POST_RECEIVES)}")
        # post_receives="within_limit" (gloo): value -> position before which its receive is posted, planned
        # after the first step (`plan_receive_posts`); None until then (every receive posted when needed)
        self.within_limit = job.post_receives == "within_limit" and not job.cuda and self.world > 1
        self.post_at: dict[int, int] | None = None
        self.late_sends: set[int] = set()  # values this worker sends to a receiver that posts after the step's start
        self.strided = {i for i, spec in job.specs.items() if has_strides(spec)}  # received values to re-stride

    # ------------------------------------------------------------------ receives
    def post_receive(self, i: int) -> tuple[Any, list[Any]]:
        """Allocate value `i`'s receive buffer and post its receives: (value, works)."""
        val, bufs = _alloc(self.job.specs[i], self.dev)
        src = self.ex.node_dev[i]
        return val, [dist.irecv(b, src, tag=i * 16 + k) for k, b in enumerate(bufs)]

    def post_receives(self, nids: Sequence[int] | None = None) -> dict[int, tuple[Any, list[Any]]]:
        """The receives of `nids` (default: every receive of one step, gloo), in the order of `recv_plan`."""
        return {i: self.post_receive(i) for i in (nids if nids is not None else [i for _, i in self.recv_plan])}

    def up_front(self) -> list[int]:
        """``post_receives="within_limit"``: the receives planned before the step (none before the plan)."""
        if self.post_at is None:
            return []
        return [i for _, i in self.recv_plan if self.post_at[i] == 0]

    def plan_posts(self, op_peaks: list[float], needed_at: dict[int, int]) -> None:
        """After the first step under ``post_receives="within_limit"``: plan where each receive is posted
        (`plan_receive_posts`) and tell every sender which of its values go to a receiver that posts after the
        step's start (a collective: every worker calls it after the same step)."""
        d = self.rank
        limit = self.job.memory_limits[d] if self.job.memory_limits else float("inf")
        sizes = {i: self.prog.nodes[i].nbytes for _, i in self.recv_plan}
        self.post_at = plan_receive_posts(op_peaks, needed_at, sizes, [i for _, i in self.recv_plan], limit)
        late = [(src, i) for src, i in self.recv_plan if self.post_at[i] > 0]
        everyone: list[Any] = [None] * self.world
        dist.all_gather_object(everyone, late)
        self.late_sends = {i for r, pairs in enumerate(everyone) if r != d for src, i in pairs if src == d}

    # ------------------------------------------------------------------ one step
    def step(self, retain: bool, time_ops: bool, last: bool = True) -> dict[str, Any]:
        """Run one training step (`last`: no step follows, so the next step's receives are not posted)."""
        prog, ex, d = self.prog, self.ex, self.rank
        nodes, sent, strided = prog.nodes, self.sent, self.strided
        cuda, dev = self.job.cuda, self.dev
        env: dict[int, Any] = {}
        live = [0.0]
        retained: dict[int, Any] = {}
        op_times: dict[str, float] = {}
        spans: list[tuple[str, float, float]] = []  # (op, start, end) from t0: trace.json's measured part
        send_works: dict[int, list[Any]] = {}  # nid -> the works of its sends not waited for yet
        moves_out: list[Any] = []  # the works sending new parameters / state to their Variable's device
        held: dict[int, float] = {}  # home values freed locally, still being sent: nid -> bytes
        half_done: set[int] = set()
        traffic = 0.0
        trace = self.job.trace
        sent_at: dict[int, float] = {}  # trace: nid -> time its isend was posted (perf_counter, system-wide)
        waited: dict[int, tuple[float, float]] = {}  # trace: nid -> (wait start, wait end)
        op_end: dict[str, float] = {}  # trace: op -> time it finished
        spent = {"send": 0.0, "send_wait": 0.0}  # trace: seconds in isend calls / in waits for sends
        send_s: list[float] = []  # trace: seconds of each send_value

        holders = ex.new_holders()  # values still holding each shared storage (views and their source)
        run_alloc = prog.alloc_when_run()  # a tuple's items moved to their own op are allocated by their producer
        limit = self.job.memory_limits[d] if self.job.memory_limits else float("inf")
        where = ["the step's start"]  # what is being allocated, for the out-of-memory message

        def account(delta: float) -> None:
            live[0] += delta
            if live[0] > self.peak:
                self.peak = live[0]
            if live[0] > opmax[0]:
                opmax[0] = live[0]
            if delta > 0 and live[0] > limit:
                name = self.job.devices[d]
                raise OutOfMemory(
                    f"out of memory on device {name!r} at {where[0]}: {live[0]:.6g} bytes live, limit {limit:.6g}",
                    op=where[0],
                    device=name,
                    used_bytes=live[0],
                    limit_bytes=limit,
                )

        def isend(i: int, v: Any, dst: int, tag: int) -> list[Any]:
            nonlocal traffic
            works = []
            for k, t in enumerate(tensors_of(v)):
                works.append(dist.isend(t.contiguous(), dst, tag=tag * 16 + k))
                traffic += t.numel() * t.element_size()
            return works

        def send_value(i: int, v: Any) -> None:
            if trace:
                sent_at[i] = time.perf_counter()
            for dst in ex.sends[i]:
                send_works.setdefault(i, []).extend(isend(i, v, dst, i))
            if trace:
                spent["send"] += time.perf_counter() - sent_at[i]
                send_s.append(time.perf_counter() - sent_at[i])

        def reap() -> None:
            # NCCL: O(held values) per op, only the sends of values already freed locally are checked (gloo
            # holds only under post_receives="within_limit", where a thread per value waits: `_HeldSends`)
            if held:
                if holds is not None:
                    for i in holds.done():
                        account(-held.pop(i))
                    return
                for i in [i for i in held if all(x.is_completed() for x in send_works[i])]:
                    account(-held.pop(i))

        def free_home(i: int, nbytes: float) -> None:
            v = env.pop(i, None)
            if retain and i in ex.grad_nids and v is not None:
                retained[i] = v
            if i in sent and cuda:
                held[i] = nbytes
            elif i in sent and holds is not None and (tracing or i in self.late_sends):
                # a receiver may post this value's receive only later (and wait for this worker meanwhile):
                # its memory stays counted until the send completes, which a thread waits for
                held[i] = nbytes
                holds.add(i, send_works.pop(i, []))
            else:
                if i in sent:
                    # gloo: a send's work completes only in wait(), and holds the tensor until then. Every
                    # receive is posted at the start of the step, so by now the data has (almost always) been
                    # written: the wait returns at once and the memory is really freed here
                    tw = time.perf_counter()
                    for w in send_works.pop(i, ()):
                        w.wait()
                    spent["send_wait"] += time.perf_counter() - tw
                account(-nbytes)

        def release_old(ph: int) -> None:
            if ph in half_done:
                env.pop(ph, None)
                account(-nodes[ph].nbytes)
            else:
                half_done.add(ph)

        # gloo: every receive is posted up front (matched by tag), at the end of the step before (timed there),
        # or here before the barrier for the first step, so that the barrier lets the peers' transport threads
        # read the announcements (see `lower_transport_threads`). NCCL runs a pair's operations in the order they
        # are posted on one stream, so receives posted ahead of sends in the other direction would deadlock:
        # there each receive is posted when an op first needs it (program order)
        # post_receives="within_limit" (`lazy`): the receives planned at position 0 are posted up front, the others
        # before their planned op, and in the first step (`tracing`) each when an op first needs it, while the
        # device's live memory per op is recorded for the plan (`plan_receive_posts`)
        lazy = self.within_limit
        tracing = lazy and self.post_at is None
        if self.next_recvs is not None:
            posted = self.next_recvs
        elif cuda:
            posted = {}
        else:
            posted = self.post_receives(self.up_front() if lazy else None)
        self.next_recvs = None
        due: dict[int, list[int]] = {}
        if lazy and self.post_at is not None:
            for _, i in self.recv_plan:
                if self.post_at[i] > 0:
                    due.setdefault(self.post_at[i], []).append(i)
        op_peaks: list[float] = []  # tracing: the live memory's peak during each op
        needed_at: dict[int, int] = {}  # tracing: value -> position of the op that posted its receive
        opmax, pos = [0.0], [0]
        holds = _HeldSends() if lazy else None
        seen: set[int] = set()  # the receives posted in this step
        if self.world > 1:
            dist.barrier()
        if cuda:
            torch.cuda.synchronize(dev)
            # two CUDA events on the worker's stream time the step on the device
            ev_start = torch.cuda.Event(enable_timing=True)
            ev_start.record()
        t0 = time.perf_counter()
        for i in self.my_ph:
            env[i] = ex.store[i]
            where[0] = f"parameter/input {prog.op_of.get(i, i)!r}"
            account(nodes[i].nbytes)
        recvs: dict[int, tuple[Any, list[Any]]] = {}

        def post_recv(i: int) -> None:
            recvs[i] = posted.pop(i) if i in posted else self.post_receive(i)
            seen.add(i)
            if tracing:
                needed_at.setdefault(i, pos[0])
            where[0] = f"receive buffer for {prog.op_of.get(i, i)!r}"
            account(nodes[i].nbytes)  # the buffer is held from the step's start (or from here, NCCL)

        if not cuda:
            for _, i in self.recv_plan:
                if not lazy or i in posted:
                    post_recv(i)
        for i in self.my_ph:
            if i in sent:
                send_value(i, ex.store[i])
        t_setup = time.perf_counter()
        consts, frees, kw_over = ex.consts[d], ex.frees[d], ex.kwargs[d]

        rebuilt = ex.rebuilt[d]

        def get(i: int) -> Any:
            v = env.get(i)
            if v is not None:
                return v
            if i in consts:
                return consts[i]
            if i in rebuilt:  # a view of a storage received once (`StepAnalysis._share_sent_storages`)
                env[i] = val = ex.rebuild_view(d, i, get)
                return val
            if i not in recvs:
                post_recv(i)
            val, works = recvs.pop(i)
            if trace:
                tw = time.perf_counter()
                for w in works:
                    w.wait()
                waited[i] = (tw, time.perf_counter())
            else:
                for w in works:
                    w.wait()
            if i in strided:
                val = restrided(self.job.specs[i], val)
            env[i] = val
            return val

        t_last = t0  # the first op is also charged the step's set-up (placeholders, posted receives)
        for p, op in enumerate(self.order):
            if lazy:
                pos[0] = p
                for i in due.get(p, ()):
                    if i not in seen:
                        post_recv(i)
                opmax[0] = live[0]
            t_op = time.perf_counter()
            for nid in prog.op_nodes[op]:
                r = nodes[nid]
                if r.kind != "call":
                    continue
                val = r.target(*resolve(r.args, get), **resolve(kw_over.get(nid, r.kwargs), get))
                env[nid] = val
                where[0] = repr(op)
                account(run_alloc[nid])
                if retain and nid in ex.grad_nids:
                    retained[nid] = val
                ph = ex.replaces.get(nid)
                if ph is not None:
                    if ph not in ex.local_read:
                        half_done.add(ph)
                    release_old(ph)
                if nid in sent:
                    send_value(nid, val)
                if nid in ex.drop_now:
                    free_home(nid, ex.release_bytes(holders, nid))
                for i in frees.get(nid, ()):
                    if ex.node_dev[i] == d and nodes[i].kind == "placeholder":
                        if i in ex.replaced_ph:
                            release_old(i)
                        continue
                    if ex.node_dev[i] != d:
                        if env.pop(i, None) is not None:
                            account(-ex.received_bytes(d, i))
                    elif i in env:
                        free_home(i, ex.release_bytes(holders, i))
            reap()
            if tracing:
                op_peaks.append(opmax[0])
            t_end = time.perf_counter()
            spans.append((op, t_op - t0, t_end - t0))
            if trace:
                op_end[op] = t_end
            if time_ops:
                # back to back on the host's clock: the loop's own per-op work is charged too. On a GPU this is
                # the op's launch time; no event or synchronisation per op (gnmt_tiny on an H200: an event
                # recorded after each of its 1632 ops made the step 69.8 ms, against 23.8 ms without)
                now = time.perf_counter()
                op_times[op] = now - t_last
                t_last = now
        if lazy:
            # a receive no op read (none expected): posted and waited for here, so that its sender's wait ends
            pos[0] = len(self.order)
            for _, i in self.recv_plan:
                if i not in seen:
                    post_recv(i)
            for i in list(recvs):
                _, works = recvs.pop(i)
                for w in works:
                    w.wait()
                account(-nodes[i].nbytes)
        t_ops = time.perf_counter()
        # new parameters and optimizer state replace the old ones on their Variable's device
        moves = []
        for ph, out in self.updates:
            src, dst = ex.node_dev[out], ex.placeholder_dev[ph]
            if src == dst == d:
                ex.store[ph] = env.get(out, ex.store.get(out))
            elif src == d:
                v = env.get(out, ex.store.get(out))
                moves_out.extend(isend(out, v, dst, self.tag_base + ph))
            elif dst == d:
                spec = value_spec(ex.store[ph])
                val, bufs = _alloc(spec, dev)
                moves.append(
                    (
                        ph,
                        spec,
                        val,
                        [dist.irecv(b, src, tag=(self.tag_base + ph) * 16 + k) for k, b in enumerate(bufs)],
                    )
                )
        for ph, spec, val, works in moves:
            for w in works:
                w.wait()
            ex.store[ph] = restrided(spec, val)
        t_moves = time.perf_counter()
        for works in send_works.values():  # a gloo work must be waited for once only
            for w in works:
                w.wait()
        for w in moves_out:
            w.wait()
        if holds is not None:
            for i in holds.join():
                account(-held.pop(i))
        t_sends = time.perf_counter()
        if tracing and not last:
            self.plan_posts(op_peaks, needed_at)
        if not cuda and not last:
            self.next_recvs = self.post_receives(self.up_front() if lazy else None)
        t_posted = time.perf_counter()
        if cuda:
            ev_end = torch.cuda.Event(enable_timing=True)
            ev_end.record()
            torch.cuda.synchronize(dev)
        wall = time.perf_counter() - t0
        elapsed = wall
        if cuda:
            # device time from the step's first record to its last: the ops, the waits for received values
            # and, where the host's launches are slower than the kernels, the gaps between them
            elapsed = ev_start.elapsed_time(ev_end) / 1e3
        for b in held.values():
            account(-b)
        self.traffic = traffic
        loss_nid = prog.outputs[0]
        out: dict[str, Any] = {"elapsed": elapsed, "wall": wall, "op_times": op_times, "t0": t0, "spans": spans}
        if trace:
            out["trace"] = {
                "t0": t0,
                "setup": t_setup,
                "end": t0 + elapsed,
                "sent_at": sent_at,
                "waited": waited,
                "op_end": op_end,
                "spent": spent,
                "send_s": send_s,
                # the step's tail after its last op: parameter moves, the waits for sends, the next receives
                "tail": {"moves": t_moves - t_ops, "send_wait": t_sends - t_moves, "post": t_posted - t_sends},
            }
        if ex.node_dev[loss_nid] == d:
            out["loss"] = float(env[loss_nid])
        if retain:
            # as numpy arrays: pickled by value (a torch tensor would go through shared memory, which the
            # parent cannot open once this process has exited)
            out["grads"] = {i: v.detach().cpu().numpy().copy() for i, v in retained.items() if ex.node_dev[i] == d}
        return out


def untimed_flags(timed: int, untimed: int, block: bool = False) -> list[bool]:
    """Which measured steps run without per-op timing: `untimed` of them alternating with the first `timed`
    ones (timed, untimed, timed, ...), the rest of the longer kind after, so that both kinds see the same drift
    of the machine's speed. `block`: the untimed steps all first, back to back as a placed run's steps are, then
    the timed ones (a timed step may leave the device or the host in a state that the next step pays for).
    O(timed + untimed)."""
    if block:
        return [True] * untimed + [False] * timed
    out: list[bool] = []
    for k in range(max(timed, untimed)):
        if k < timed:
            out.append(False)
        if k < untimed:
            out.append(True)
    return out


def _worker_main(rank: int, job: WorkerJob, results: Any) -> None:
    """Entry point of a spawned worker: pin, join the group, run the steps, report to `results`."""
    try:
        threads = 1
        # under torchrun on another host only the cores this host has count (none: threads set, no pinning)
        mine = [c for c in job.cores[rank] if c in os.sched_getaffinity(0)] if not job.cuda else []
        if not job.cuda and job.pin_transport:
            threads = pin_worker(mine, job.threads or len(job.cores[rank]))
        world = len(job.devices)
        if world > 1:
            dist.init_process_group(
                "nccl" if job.cuda else "gloo",
                init_method=f"tcp://127.0.0.1:{job.port}" if job.port else "env://",  # env://: torchrun
                rank=rank,
                world_size=world,
            )
        idle = lower_transport_threads(job.transport_policy) if world > 1 and not job.cuda else 0
        if not job.cuda and not job.pin_transport:
            # pinned after gloo started its transport threads: sched_setaffinity(0) pins the calling thread
            # only, so those threads stay free to run on any host core
            threads = pin_worker(mine, job.threads or len(job.cores[rank]))
        w = _Worker(rank, job)
        rss0 = _rss_bytes()
        if job.cuda:
            torch.cuda.reset_peak_memory_stats(w.dev)
        times, walls, losses, op_samples, traces = [], [], [], {}, []
        step_spans: list[tuple[float, list[tuple[str, float, float]]]] = []  # per measured step: (t0, spans)
        grads = None
        rss_peak = rss0
        untimed = untimed_flags(job.steps, job.untimed_steps if job.time_ops else 0, job.untimed_block)
        steps = range(job.warmup + len(untimed))
        untimed_times: list[float] = []
        # one bar, the first worker's: every worker runs the same steps
        bar = tqdm(
            steps, desc="run (warm-up + measured steps)", unit="step", disable=None if rank == 0 else True, leave=False
        )
        # the cores' account around the measured steps (backends.interference): did other tasks share them?
        mine_cores = [] if job.cuda else mine
        before = after = None
        paces: list[float] = []  # interference.core_pace() before each measured step, and after the last
        graphed: GraphedStep | None = None
        graph_check: float | None = None
        first_peaks: dict[str, float] = {}
        for k in bar:
            if k == job.warmup and (job.cuda_graph or job.host_graphs):
                if k < 1:
                    raise ConfigError("a graphed step needs warmup >= 1 (the first step runs eagerly)")
                graphed = GraphedStep(w, timed=job.time_ops, host_graphs=job.host_graphs)
                graph_check = graphed.check()
            if k == job.warmup:
                before = interference.sample(mine_cores)
            if k >= job.warmup and not job.cuda:
                paces.append(interference.core_pace())
            plain = k >= job.warmup and untimed[k - job.warmup]
            timed = job.time_ops and k >= job.warmup and not plain
            if graphed is not None:
                o = graphed.replay(time_ops=timed)
            else:
                o = w.step(retain=(k == 0 and job.retain_first), time_ops=timed, last=k == len(steps) - 1)
            if world > 1 and not job.cuda:
                # every worker waits here, untimed, until all have ended the step: a worker's bookkeeping between
                # steps would otherwise hold a core it shares with a worker still in the step, whose messages are
                # read only when that core idles (experiments/shared_core_hop.py)
                dist.barrier()
            if "grads" in o:
                grads = o["grads"]
            if job.cuda and k == 0:
                # the allocator's peaks of the first step (which holds the correctness check's gradients) apart
                # from the later steps' (`allocator_peaks`; `peak` below)
                first_peaks = allocator_peaks(w.dev)
                torch.cuda.reset_peak_memory_stats(w.dev)
            if "loss" in o:
                losses.append(o["loss"])
            rss_peak = max(rss_peak, _rss_bytes())
            if plain:
                untimed_times.append(o["elapsed"])
            elif k >= job.warmup:
                times.append(o["elapsed"])
                walls.append(o["wall"])
                step_spans.append((o["t0"], o["spans"]))
                if "trace" in o:
                    traces.append(o["trace"])
                for op, t in o["op_times"].items():
                    op_samples.setdefault(op, []).append(t)
        after = interference.sample(mine_cores)
        if not job.cuda:
            paces.append(interference.core_pace())
        later_peaks = allocator_peaks(w.dev) if job.cuda else {}
        peak = w.peak
        if job.cuda:
            # the first step of a checked run keeps every gradient for the check (gnmt on an H100: 42 MB above
            # a training step's peak, session 27), which a training step does not: its peak counts only when
            # no other step ran
            kept = job.retain_first and len(steps) > 1
            peak = later_peaks["allocated"] if kept else max(first_peaks["allocated"], later_peaks["allocated"])
        # what the allocator holds beside the tensors (cuBLAS / cuBLASLt workspaces), to predict its peak
        reserve = framework_reserve_bytes(torch.cuda.get_device_capability(w.dev)[0], job.cuda_graph) if job.cuda else 0
        rss_growth = rss_peak - rss0  # sampled after every step
        results.put(
            (
                rank,
                {
                    "pid": os.getpid(),
                    "times": times,
                    "untimed_times": untimed_times,
                    "wall_times": walls,  # host clock; `times` are CUDA-event times on a GPU
                    "core_samples": (before, after),
                    "losses": losses,
                    "grads": grads,
                    "peak": peak,
                    "tensor_peak": w.peak,
                    "allocator_peaks": {"first_step": first_peaks, "later_steps": later_peaks} if job.cuda else None,
                    "reserve": reserve,
                    "rss_growth": rss_growth,
                    "traffic": w.traffic,
                    # post_receives="within_limit": how many receives the plan posts after the step's start
                    "late_receives": sum(k > 0 for k in w.post_at.values()) if w.post_at is not None else None,
                    "threads": threads,
                    "lower_transport_threads": idle,
                    "op_times": op_samples,
                    "cores": list(job.cores[rank]) if not job.cuda else [],
                    "traces": traces,
                    "spans": step_spans,
                    "paces": paces,
                    "graph_check": graph_check,  # GraphedStep.check's largest relative difference
                    "tf32": bool(job.cuda and tf32_in_effect()),  # the correctness check's tolerance allows for it
                },
            )
        )
        if world > 1:
            dist.barrier()
            dist.destroy_process_group()
    except BaseException as exc:
        import traceback

        rep: dict[str, Any] = {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}
        if isinstance(exc, OutOfMemory):  # the parent raises it again: the run's status is "oom"
            rep["oom"] = {
                "message": str(exc),
                "op": exc.op,
                "device": exc.device,
                "used_bytes": exc.used_bytes,
                "limit_bytes": exc.limit_bytes,
            }
        results.put((rank, rep))
        raise
