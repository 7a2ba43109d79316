"""Discrete-event execution simulator with dynamic memory (Baechi section 4.2, thesis sections 2.4-2.5, 3.2).

Model
-----
* Each device runs the ops placed on it one at a time, non-preemptively. An op becomes *executable* on its
  device when every input has arrived there; it starts when its device is free and the scheduling rule picks it.
* A producer's output crosses to another device once per destination device, however many consumers it has
  there (the send/receive pair of thesis 2.4), and is then cached on that device. The bytes sent for the pair
  (producer, device) are the largest edge size from the producer to a consumer on that device (every out-edge
  of an op carries its output tensor in the thesis' model; a control edge alone costs only the latency).
* Transfers follow the cluster's communication model ``latency + bytes / bandwidth``; a transfer of a coarse op
  (`algorithms.passes.contract`) pays its ``send_tensors`` latencies, one per tensor its members send. In
  ``parallel`` mode a transfer starts when requested; in ``sequential`` mode (Baechi 3.4) each device sends one
  tensor at a time and receives one at a time, first-in first-out: a transfer is requested when its producer ends
  and starts at ``max(request, sender's send queue free, receiver's receive queue free)`` (`algorithms.comm_queue`,
  the model of transfer order the placers' execution models share; a producer's transfers to several devices are
  requested in the order of their first consumers in its successor list).
* Shared host cores (issue 16): with ``host_cores`` given and the devices' workers asking for more cores than
  the host has (`algorithms.cluster.oversubscription` > 1), every device's worker is pinned to the cores
  `algorithms.cluster.worker_cores` gives it, and devices whose workers share a core take turns: an op starts
  only when its device is free *and* every core of its worker is free, and holds those cores until it ends
  (the operating system time-slices the workers; at the granularity of ops, turn-taking gives each the same
  share). When cores free up, the device that took its turn least recently goes first (round robin).
  Without oversubscription (or without ``host_cores``) nothing changes.
  A message is read when it arrives (``shared_core_reads="at_arrival"``, the default). ``"when_idle"`` reads a
  message to a device whose core is shared only when that core idles, which is what idle-class transport
  threads (`backends.torch.worker.lower_transport_threads`) would imply: while the worker that shares the core
  has ops to run, the bytes wait in the socket; the read happens at the first moment no op runs on the core.
  On an unshared core the two are the same. Measured on cpu4 (docs/fidelity.md, session 14) the two rules'
  predictions were equally far from the measured steps (median 38.2 % against 37.5 %, 23.4 % against 23.6 %
  on two sweeps), so the simpler one is the default.
  Time-sharing costs (``shared_core_slowdown`` = s, 0 by default): an op that starts on a shared core while a
  device that shares the core has an executable op waiting runs (1 + s) times its cost. Turn-taking alone
  charges nothing for the sharing itself, while the real workers pay for it: each turn is a context switch, a
  wake-up of a blocked worker and a cache refilled after the other worker's ops. The charge falls where the
  workers actually alternate (both have work), not on a device that has its core to itself for a while (a
  pipeline-like placement). A choice: one factor per host, fitted to placed steps (docs/fidelity.md, session
  15: s = 0.35 on the lab's VM, from cpu4 sweeps of four models; fitted on three models it predicts the fourth
  within 2-14 %, median 6 %, against 12-17 % without it); where the waiting op becomes executable during the
  op, the op is not charged (the check is made when it starts).
* Per-message processor time (issue 16, optional, 0 by default): a real runtime spends processor time on
  each send and each receive (the process-per-device runtime: an ``isend`` right after the producing op; every
  ``irecv`` posted once per step, and the arrival read by gloo's transport thread while the worker waits for
  it, in the first op that needs it). With ``send_overhead_s`` an op that sends its value to k other devices
  runs k * send_overhead_s longer; with ``recv_overhead_s`` the first consumer of a received value on its
  device (first in the device's static order, or in topological order under a policy) runs recv_overhead_s
  longer, once per (value, device); a transfer of several tensors (``send_tensors``: a coarse op's, or a
  captured op whose out-edge carries several storages) is that many messages, each charged. With
  ``send_byte_s`` / ``recv_byte_s`` each of those charges grows by that many seconds per byte of the message
  (the value's bytes, the largest tensor it sends): on loopback TCP the kernel's copies of a message run on the
  workers' own cores (gloo's transport threads are pinned with the worker), so a large message takes processor
  time from the compute on both sides, beyond the hop's ``bytes / bandwidth`` (which only delays the arrival).
  Session 23 (docs/fidelity.md): calibration programs of wider layers (16-256 KB messages) were under-predicted
  by 15-39 % with per-message costs fitted on 1-4 KB ones.
* Where a receive's processor time goes (``recv_work``): by default (``"in_consumer"``) the first consumer of
  a received value runs its ``recv_overhead_s`` / ``recv_byte_s`` longer, as if the worker read the message
  itself when it needs it. ``"when_idle"`` models gloo's transport thread at idle priority (the PyTorch
  workers' default, `backends.torch.worker.lower_transport_threads`): that thread, not the worker, reads an
  arrived message into its posted buffer, and it runs only when no op runs on the receiver's cores (on a
  shared core: no op of any device sharing it). A device with no op to run whose cores idle reads its arrived
  messages one at a time, oldest first, each for its receive time; the value reaches its consumers when its
  read ends. A read is not preempted: the worker can only be woken by a read (it waits for a message) and a
  sharer's op only by its own reads on the same core, so a read in progress is rarely interrupted (a choice:
  the model ignores the sharer's wake-up by one of its own sends completing). The charge is the same work as
  ``"in_consumer"``'s, placed where the thread does it: in a step with idle moments (a device waiting for
  another's message, or for its core's sharer) the reads fill them instead of lengthening the consumers.
  ``"bytes_when_idle"`` reads only the per-byte part that way (the copy of the payload, the transport thread's
  own work) and leaves the per-message part with the first consumer (the worker's wake-up and bookkeeping for a
  message it waits for); a message without bytes reaches its consumers on arrival. The PyTorch workers' fit and
  prediction take the model from `profiler.comm_recv_work`, ``"in_consumer"`` by default: two tests decided
  before their sweeps kept it (docs/fidelity.md, session 42: ``"when_idle"`` 13.9 % against 8.3 % on cpu2,
  ``"bytes_when_idle"`` 12.5 % against 9.3 % on cpu4, the four tiny models, each fitted on the same calibration
  runs), though both idle models predicted default-size GNMT's message-heavy cpu4 placements better.
* Waking a receiver (``send_wake_s``, session 43): a gloo send of a small message writes to its socket from
  the sender's thread, and when the receiving worker's core is idle its vCPU has halted and the write wakes it:
  on the lab's VM an ``isend`` of 1 KB held the sender 46-54 us to a receiver blocked in ``wait()`` and 13-18
  us to one computing (nine measurements, session 43; `experiments/send_wake.py`). With ``send_wake_s`` a sender
  pays that much more per message to a device whose cores all idle when the producing op ends (and share none
  with the sender, whose own core is awake); its cores are held that long after the op, and each message leaves
  after the wake-ups before it. The state is read when the op ends, not when the message lands (a choice: the
  small messages this concerns land within microseconds). The PyTorch workers' fit charges it only with
  ``profiler.comm_send_wake``, off by default: the in-step calibration cannot separate it from the per-message
  costs (docs/fidelity.md, session 43).
* Receives posted or pulled (``recv_requests``): by default a receive is posted before its tensor is ready, so
  a transfer leaves when its producer ends (``"posted"``: gloo's ``irecv`` posted at the step's start, and the
  placers' model). TensorFlow's receives are pulled: the receiving executor's ``_Recv`` kernel sends the
  request, and with one inter-op thread that kernel runs only after the local work queued before it (traced
  steps, docs/fidelity.md, session 36: a task's first request 0.5-56 ms into the step). ``"when_idle"`` models
  that: a device asks for its tensors the first time it has nothing to run; a tensor whose producer ended before
  the request waits on its sender and leaves one latency after the request (the request crossing), later ones
  leave when their producer ends. A choice: the request time is the first idle moment, not the executor's exact
  queue order (which TensorFlow sets by its own cost estimates of "expensive" kernels). Measured (session 36,
  TensorFlow cpu2, 31 runs a sweep, the calibration refitted under each model): 13.9 % against the posted
  model's 13.5 % in one sweep, 10.9 % against 13.1 % in another, most predictions within 2 % of each other; what
  decides TensorFlow's steps is the time per message, not when the receives are asked for, so ``"posted"``
  stays the default.
* Time advances event by event. All events at time t (op completions, arrivals) are processed before any
  device decides what to run at t, which is the thesis' rule (3.2) that the device with the lowest local time
  decides next and never decides without knowing what is executable at that moment.
* Dynamic memory per device: persistent bytes of every op placed there are held for the whole step;
  temporary bytes are held while the op runs; an op's output is allocated when the op starts and held on the
  producer's device until its last local consumer has finished and every outgoing transfer has completed; on a
  receiving device the copy (`GraphIndex.copy_bytes`: the largest tensor the op sends, at least its output
  bytes, so that a view such as a transpose, which owns no storage where it is made, still costs the
  receiver the whole tensor) is held from its arrival (with ``recv_buffers="step_start"``: from the step's
  start, where a runtime posts every receive with its buffer up front) until the last consumer there has
  finished. The first
  time a device's usage exceeds its memory the simulator records an out-of-memory event naming the op, the
  device, the time and the bytes; it goes on simulating so that the peak is still reported.

Orders
------
The order in which a device runs its executable ops comes from either a static per-device list
(``schedule``: the device runs exactly that sequence) or a `DispatchPolicy` consulted at each decision
(``policy``: FIFO, PCT and MSR are policies; see `algorithms.schedulers`). The order actually executed is
returned, so running a policy once yields a static schedule that replays to the same result.

Complexity: O((V + E) log V) with a static order or a heap policy; a dynamic policy adds the cost of its
`choose` over the executable ops at each decision.  A graph of `COMPILED_MIN_OPS` ops or more with a static order,
or with first-in first-out or a `RankPolicy` (without shared host cores, message overheads or recorded
decisions), runs the same loop compiled (`algorithms.sim_kernel`, numba): the same result, bit for bit; a
change to the loop below must be made there too (`tests/test_sim_kernel.py` and
`tests/test_sim_ready_kernel.py` compare the two).
"""

from __future__ import annotations

import collections
import functools
import heapq
import importlib
import math
from collections.abc import Mapping

from . import compiled_mode
from .cluster import Cluster, oversubscription, worker_cores
from .comm_queue import FifoLinks
from .dispatch import DispatchPolicy, FifoPolicy, RankPolicy, SimState
from .errors import InvalidCluster, InvalidSchedule, SimulationError
from .graph import OpGraph, gc_paused
from .placement import Placement, Schedule, check_schedule
from .sim_result import OOMEvent, SimResult

_FINISH, _ARRIVE, _READ, _WAKE = 0, 1, 2, 3
#: when a message to a device on a shared host core is read (`simulate(shared_core_reads=...)`)
SHARED_CORE_READS = ("when_idle", "at_arrival")
#: when a device asks for the tensors it receives (`simulate(recv_requests=...)`)
RECV_REQUESTS = ("posted", "when_idle")
#: where a receive's processor time is spent (`simulate(recv_work=...)`)
RECV_WORK = ("in_consumer", "when_idle", "bytes_when_idle")

#: A graph of at least this many ops, with a static order, FIFO or a `RankPolicy`, is simulated by the compiled
#: loop (`algorithms.sim_kernel`; numba installed, no shared host cores, message overheads or recorded
#: decisions): the same result, several times faster.  Smaller graphs need no compiled code loaded.
COMPILED_MIN_OPS = 2000


@functools.cache
def _compiled() -> bool | None:
    """True when `algorithms.sim_kernel` can be imported (numba installed), else None."""
    try:
        importlib.import_module(".sim_kernel", __package__)
    except ImportError:
        return None
    return True


@gc_paused()  # no reference cycles are made; see `graph.gc_paused` and docs/scale.md
def simulate(
    graph: OpGraph,
    cluster: Cluster,
    placement: Placement | Mapping[str, str],
    schedule: Schedule | None = None,
    policy: DispatchPolicy | None = None,
    *,
    record_memory: bool = True,
    record_decisions: bool = False,
    host_cores: int | None = None,
    send_overhead_s: float = 0.0,
    recv_overhead_s: float = 0.0,
    recv_buffers: str | None = None,
    shared_core_reads: str = "at_arrival",
    shared_core_slowdown: float = 0.0,
    send_byte_s: float = 0.0,
    recv_byte_s: float = 0.0,
    recv_requests: str = "posted",
    recv_work: str = "in_consumer",
    send_wake_s: float = 0.0,
) -> SimResult:
    """Simulate one training step of `graph` placed by `placement` on `cluster`.

    Give either `schedule` (a static per-device order, checked first) or `policy`; with neither, executable
    ops run first-in first-out. Raises `InvalidSchedule` when a static order deadlocks (naming the device,
    the op it waits on and the missing input). `host_cores`: the number of host cores real CPU workers are
    pinned to; when the devices ask for more, devices sharing a core take turns (see the module docstring).
    `send_overhead_s` / `recv_overhead_s`: processor time a device spends per message it sends / receives
    (see the module docstring; 0 by default); `send_byte_s` / `recv_byte_s`: the same per byte of the message.
    `recv_buffers`: when a received copy's memory is taken,
    ``"arrival"`` (the papers' model) or ``"step_start"`` (a runtime that posts every receive, with
    its buffer, before the step starts, as the process-per-device runtime does on gloo); by default the
    cluster's (`Cluster.recv_buffers`). `shared_core_reads`:
    when a message to a device on a shared core is read, ``"when_idle"`` or ``"at_arrival"`` (module docstring).
    `shared_core_slowdown`: the factor by which an op on a shared core runs longer while another device on that
    core has an executable op waiting (module docstring; 0 by default). `recv_requests`: ``"posted"`` (a
    receive waits for its tensor before the tensor is ready) or ``"when_idle"`` (TensorFlow's pulled receives:
    module docstring). `recv_work`: where a receive's processor time (`recv_overhead_s`, `recv_byte_s`) is
    spent, ``"in_consumer"`` (its first consumer runs that much longer), ``"when_idle"`` (read by an idle-class
    transport thread when the receiver's cores idle) or ``"bytes_when_idle"`` (the per-byte part read so, the
    per-message part in the consumer); module docstring. `send_wake_s`: processor time a sender spends per
    message, beyond `send_overhead_s`, when every core of the receiving device is idle as the producing op ends
    (none shared with the sender): its write wakes a halted core (module docstring); the sender's cores are held
    that long after the op and the message leaves after it.
    """
    if recv_work not in RECV_WORK:
        raise InvalidCluster(f"recv_work must be one of {list(RECV_WORK)}, got {recv_work!r}")
    if recv_work != "in_consumer" and shared_core_reads == "when_idle":
        raise InvalidCluster(f"recv_work={recv_work!r} reads messages when their core idles; leave shared_core_reads")
    if recv_requests not in RECV_REQUESTS:
        raise InvalidCluster(f"recv_requests must be one of {list(RECV_REQUESTS)}, got {recv_requests!r}")
    if recv_buffers is None:
        recv_buffers = cluster.recv_buffers
    if recv_buffers not in ("arrival", "step_start"):
        raise InvalidCluster(f"recv_buffers must be 'arrival' or 'step_start', got {recv_buffers!r}")
    if shared_core_reads not in SHARED_CORE_READS:
        raise InvalidCluster(f"shared_core_reads must be one of {list(SHARED_CORE_READS)}, got {shared_core_reads!r}")
    if not shared_core_slowdown >= 0:  # NaN too
        raise InvalidCluster(f"shared_core_slowdown must be >= 0, got {shared_core_slowdown!r}")
    if not (send_overhead_s >= 0 and recv_overhead_s >= 0):  # NaN too
        raise InvalidCluster(f"message overheads must be >= 0, got {send_overhead_s!r}, {recv_overhead_s!r}")
    if not (send_byte_s >= 0 and recv_byte_s >= 0):
        raise InvalidCluster(f"per-byte message overheads must be >= 0, got {send_byte_s!r}, {recv_byte_s!r}")
    if not send_wake_s >= 0:
        raise InvalidCluster(f"send_wake_s must be >= 0, got {send_wake_s!r}")
    charged = bool(send_overhead_s or recv_overhead_s or send_byte_s or recv_byte_s or send_wake_s)
    # the part of a receive's processor time an idle-class thread reads when the receiver's cores idle; the rest
    # is its first consumer's
    read_msg_s = recv_overhead_s if recv_work == "when_idle" else 0.0
    read_byte_s = recv_byte_s if recv_work != "in_consumer" else 0.0
    consumer_msg_s, consumer_byte_s = recv_overhead_s - read_msg_s, recv_byte_s - read_byte_s
    idle_reads = bool(read_msg_s or read_byte_s)
    assign = placement.assignment if isinstance(placement, Placement) else placement
    idx = graph.index()
    n = idx.n
    names = idx.names
    devs = cluster.devices
    nd = len(devs)
    dpos = {d.name: k for k, d in enumerate(devs)}
    try:
        dev_of = [dpos[assign[name]] for name in names]
    except KeyError as exc:
        key = exc.args[0]
        if key in dpos or key in assign:
            raise InvalidSchedule(f"op {key!r} is placed on unknown device {assign.get(key)!r}") from None
        raise InvalidSchedule(f"op {key!r} is not placed") from None

    # per-op execution time on its device (`GraphIndex.exec_time`, spelt out when no op has per-type times)
    if any(idx.compute_by_type):
        dur = [idx.exec_time(i, devs[dev_of[i]].type, devs[dev_of[i]].speed) for i in range(n)]
    else:
        speeds = [d.speed for d in devs]
        dur = [c / speeds[k] for c, k in zip(idx.compute_s, dev_of)]

    # shared host cores: core ids of each device's worker (only when oversubscribed)
    core_sets: list[list[int]] | None = None
    if host_cores is not None:
        if int(host_cores) < 1:
            raise InvalidCluster(f"host_cores must be >= 1, got {host_cores!r}")
        if oversubscription(cluster, int(host_cores)) > 1:
            core_sets = worker_cores(cluster, range(int(host_cores)))
    core_free = [0.0] * (int(host_cores) if host_cores is not None and core_sets is not None else 0)
    # devices whose worker shares a core with another device's: their messages wait for an idle core
    deferred_reads = [False] * nd
    if core_sets is not None and shared_core_reads == "when_idle":
        for d in range(nd):
            deferred_reads[d] = any(set(core_sets[d]) & set(core_sets[e]) for e in range(nd) if e != d)
    # devices whose worker shares a core with this device's (who can make its ops pay `shared_core_slowdown`)
    sharers: list[list[int]] = [[] for _ in range(nd)]
    if core_sets is not None and shared_core_slowdown:
        for d in range(nd):
            sharers[d] = [e for e in range(nd) if e != d and set(core_sets[d]) & set(core_sets[e])]
    pending: list[list[int]] = [[] for _ in range(nd)]  # arrived, unread messages (producers) per device
    n_pending = 0
    last_turn = [-math.inf] * nd  # when each device last took its cores: the longest-waiting device goes first

    # static order or policy
    static = schedule is not None
    if schedule is not None:
        check_schedule(graph, assign, schedule)
        seq_of = [[idx.pos[o] for o in schedule.get(d.name, [])] for d in devs]
        ptr = [0] * nd
    else:
        pol: DispatchPolicy = policy or FifoPolicy()
        pol.prepare(graph, cluster, dev_of)
        dynamic = pol.dynamic
    if (
        static
        and compiled_mode.applies(n, COMPILED_MIN_OPS)
        and core_sets is None
        and not (record_decisions or charged)
        and recv_requests == "posted"
        and _compiled() is not None
    ):  # the same result from the compiled loop (`algorithms.sim_kernel`, issue 22)
        from .sim_kernel import simulate_static

        return simulate_static(
            idx, cluster, dev_of, dur, seq_of, record_memory=record_memory, up_front=recv_buffers == "step_start"
        )
    if (
        not static
        and compiled_mode.applies(n, COMPILED_MIN_OPS)
        and core_sets is None
        and not (record_decisions or charged)
        and recv_requests == "posted"
        and _compiled() is not None
    ):  # the readiness order compiled (`sim_kernel.simulate_ready`, issue 22) for the policies it knows
        rank = _ready_rank(pol, n)
        if rank is not None:
            from .sim_kernel import simulate_ready

            return simulate_ready(
                idx, cluster, dev_of, dur, rank, record_memory=record_memory, up_front=recv_buffers == "step_start"
            )
    ready: list[list] = [[] for _ in range(nd)]  # heap entries (key, i) or plain list for dynamic
    is_ready = [False] * n

    # input bookkeeping: which (producer -> device) arrivals each op waits for
    succ, pred = idx.succ, idx.pred
    # remote consumers grouped per (producer, device): bytes and consumers
    remote: list[dict[int, list]] = [dict() for _ in range(n)]
    local_cons = [0] * n
    cut_edge_bytes = 0.0
    for i in range(n):
        di = dev_of[i]
        for j, b in succ[i]:
            dj = dev_of[j]
            if dj == di:
                local_cons[i] += 1
            else:
                cut_edge_bytes += b
                ent = remote[i].get(dj)
                if ent is None:
                    remote[i][dj] = [b, [j]]
                else:
                    if b > ent[0]:
                        ent[0] = b
                    ent[1].append(j)
    # per-message processor time: the sender after the op that produced the value, the receiver in its first
    # consumer there (first in the device's static order; without one, first in topological order)
    if charged:
        first_key = list(range(n))
        if static:
            for seq in seq_of:
                for k, j in enumerate(seq):
                    first_key[j] = k
        msgs = idx.copy_tensors  # the messages of one transfer (a coarse op's tensors, a captured op's storages)
        for i in range(n):
            for nbytes, consumers in remote[i].values():  # one transfer per (value, device), its bytes the largest
                dur[i] += send_overhead_s * msgs[i] + send_byte_s * nbytes
                if consumer_msg_s or consumer_byte_s:
                    first = min(consumers, key=first_key.__getitem__)
                    dur[first] += consumer_msg_s * msgs[i] + consumer_byte_s * nbytes
    # one arrival per predecessor (a DiGraph has at most one edge per pair)
    missing = [len(pred[i]) for i in range(n)]
    unfinished_preds = [len(pred[i]) for i in range(n)]

    # memory
    limit = [d.memory_bytes for d in devs]
    mem = [0.0] * nd
    peak = [0.0] * nd
    mtl: list[list[tuple[float, float]]] = [[(0.0, 0.0)] for _ in range(nd)]
    oom: list[OOMEvent | None] = [None]
    persist = idx.persistent
    temp = idx.temporary
    outb = idx.output
    copyb = idx.copy_bytes  # a received copy holds the tensor that crossed
    ntens = idx.copy_tensors  # latencies a transfer pays (a coarse op's tensors, `algorithms.passes.contract`)

    def alloc(d: int, nbytes: float, t: float, op: int) -> None:
        m = mem[d] + nbytes
        mem[d] = m
        if m > peak[d]:
            peak[d] = m
        if record_memory:
            mtl[d].append((t, m))
        if m > limit[d] and oom[0] is None:
            oom[0] = OOMEvent(names[op], devs[d].name, t, m, limit[d])

    def free(d: int, nbytes: float, t: float) -> None:
        if nbytes:
            mem[d] -= nbytes
            if record_memory:
                mtl[d].append((t, mem[d]))

    for i in range(n):
        if persist[i]:
            alloc(dev_of[i], persist[i], 0.0, i)
    buffers_up_front = recv_buffers == "step_start"
    if buffers_up_front:  # every receive buffer held from the step's start (its receive is posted before it)
        for i in range(n):
            for dj in remote[i]:
                alloc(dj, copyb[i], 0.0, i)

    # output reference counts: home copy waits for local consumers + remote sends
    home_ref = [local_cons[i] + len(remote[i]) for i in range(n)]
    recv_ref: dict[tuple[int, int], int] = {}

    start = [math.nan] * n
    end = [math.nan] * n
    busy_until = [0.0] * nd
    busy_s = [0.0] * nd
    running = [False] * nd
    links = FifoLinks(nd)  # sequential mode's send and receive queues
    seqno = [0]
    events: list[tuple] = []
    transfers: list[tuple[str, str, str, float, float, float]] = []
    traffic = [0.0]
    decisions: list[tuple[float, str, int]] = []
    order_out: list[list[str]] = [[] for _ in range(nd)]
    lat, bw = cluster.latency_table, cluster.bandwidth_table
    sequential = cluster.mode == "sequential"
    done = [0]
    # pulled receives: when each device asked for its tensors, and the transfers waiting for that request
    pulled = recv_requests == "when_idle"
    requested_at = [math.inf if pulled else 0.0] * nd
    parked: list[list[tuple[int, int, float]]] = [[] for _ in range(nd)]  # (producer, its device, hop)

    def make_ready(j: int, t: float) -> None:
        is_ready[j] = True
        d = dev_of[j]
        if static:
            return
        seqno[0] += 1
        if dynamic:
            ready[d].append(j)
        else:
            heapq.heappush(ready[d], (pol.key(j, t, seqno[0]), seqno[0], j))

    def input_arrived(j: int, t: float) -> None:
        missing[j] -= 1
        if missing[j] == 0:
            make_ready(j, t)

    for i in range(n):
        if missing[i] == 0:
            make_ready(i, 0.0)

    def waiting(f: int) -> bool:
        """Whether device f has an executable op it has not started (its worker is runnable)."""
        if static:
            p = ptr[f]
            return p < len(seq_of[f]) and is_ready[seq_of[f][p]]
        return bool(ready[f])

    def dispatch(t: float) -> None:
        for d in range(nd) if core_sets is None else sorted(range(nd), key=last_turn.__getitem__):
            if running[d] or busy_until[d] > t:
                continue
            if core_sets is not None and any(core_free[c] > t for c in core_sets[d]):
                continue  # a device sharing a core with this one is running an op
            if static:
                p = ptr[d]
                seq = seq_of[d]
                if p >= len(seq) or not is_ready[seq[p]]:
                    continue
                i = seq[p]
                ptr[d] = p + 1
                if record_decisions:
                    decisions.append((t, devs[d].name, 1))
            else:
                r = ready[d]
                if not r:
                    continue
                if record_decisions:
                    decisions.append((t, devs[d].name, len(r)))
                if dynamic:
                    state = SimState(t, dev_of, busy_until, unfinished_preds, ready)
                    k = pol.choose(d, r, state)
                    i = r[k]
                    r[k] = r[-1]
                    r.pop()
                else:
                    i = heapq.heappop(r)[2]
            start[i] = t
            di = dur[i]
            if sharers[d] and any(waiting(f) for f in sharers[d]):
                di *= 1.0 + shared_core_slowdown
            e = t + di
            end[i] = e
            busy_until[d] = e
            if core_sets is not None:
                last_turn[d] = t
                for c in core_sets[d]:
                    core_free[c] = e
            busy_s[d] += di
            running[d] = True
            order_out[d].append(names[i])
            if temp[i] or outb[i]:
                alloc(d, temp[i] + outb[i], t, i)
            heapq.heappush(events, (e, _FINISH, i, 0))

    # reads by idle-class transport threads (recv_work): arrived messages and their read times per device, first
    # in first out
    unread: list[collections.deque[tuple[int, float]]] = [collections.deque() for _ in range(nd)]
    n_unread = 0

    def start_reads(t: float) -> None:
        """Devices with no op to run whose cores idle read their oldest arrived message (one at a time, not
        preempted: its worker waits for a message that only this transport thread can deliver)."""
        for d in range(nd) if core_sets is None else sorted(range(nd), key=last_turn.__getitem__):
            if not unread[d] or running[d] or busy_until[d] > t:
                continue
            if core_sets is not None and any(core_free[c] > t for c in core_sets[d]):
                continue
            i, w = unread[d].popleft()
            e = t + w
            busy_until[d] = e
            busy_s[d] += w
            if core_sets is not None:
                last_turn[d] = t
                for c in core_sets[d]:
                    core_free[c] = e
            heapq.heappush(events, (e, _READ, i, d))

    def read(i: int, dj: int, t: float) -> None:
        """Op i's value is read on device dj at t: its buffer and its consumers there."""
        recv_ref[(i, dj)] = len(remote[i][dj][1])
        if not buffers_up_front:
            alloc(dj, copyb[i], t, i)
        release_home(i, t)
        for j in remote[i][dj][1]:
            input_arrived(j, t)

    def release_home(i: int, t: float) -> None:
        home_ref[i] -= 1
        if home_ref[i] == 0:
            free(dev_of[i], outb[i], t)

    def transfer(i: int, d: int, dj: int, dt: float, t: float) -> None:
        """Op i's value leaves device d for device dj at t (after the sender's queue in sequential mode)."""
        s0 = links.reserve(t, d, dj, dt) if sequential else t
        nbytes = remote[i][dj][0]
        traffic[0] += nbytes
        transfers.append((names[i], devs[d].name, devs[dj].name, s0, s0 + dt, nbytes))
        heapq.heappush(events, (s0 + dt, _ARRIVE, i, dj))

    def request_when_idle(t: float) -> None:
        """Pulled receives: a device with nothing to run asks for its tensors; those already waiting on their
        sender leave once the request has crossed (one latency)."""
        for d in range(nd):
            if requested_at[d] <= t or running[d] or busy_until[d] > t or waiting(d):
                continue
            requested_at[d] = t
            for i, src, dt in parked[d]:
                transfer(i, src, d, dt, t + lat[d][src])
            parked[d] = []

    def asleep(dj: int, d: int, t: float) -> bool:
        """Whether every core of device dj idles at t and none is the sending device d's (`send_wake_s`)."""
        if running[dj] or busy_until[dj] > t:
            return False
        if core_sets is None:
            return True
        return not set(core_sets[dj]) & set(core_sets[d]) and all(core_free[c] <= t for c in core_sets[dj])

    def dispatch_and_request(t: float) -> None:
        dispatch(t)
        if pulled:
            request_when_idle(t)

    dispatch_and_request(0.0)
    t_last = 0.0
    while events:
        t = events[0][0]
        if not t >= t_last:  # progress guard: a NaN time never equals itself and would spin here for ever
            raise SimulationError(f"simulator: event time {t!r} after {t_last!r}; is a cost, latency or bandwidth NaN?")
        t_last = t
        while events and events[0][0] == t:
            _, kind, a, b = heapq.heappop(events)
            if kind == _FINISH:
                i = a
                d = dev_of[i]
                running[d] = False
                done[0] += 1
                if temp[i]:
                    free(d, temp[i], t)
                # inputs this op consumed
                for j, _ in pred[i]:
                    dj = dev_of[j]
                    if dj == d:
                        home_ref[j] -= 1  # release_home, inlined on this hot path
                        if home_ref[j] == 0:
                            free(d, outb[j], t)
                    else:
                        key = (j, d)
                        recv_ref[key] -= 1
                        if recv_ref[key] == 0:
                            free(d, copyb[j], t)
                if home_ref[i] == 0:
                    free(d, outb[i], t)
                for j, _ in succ[i]:
                    unfinished_preds[j] -= 1
                    if dev_of[j] == d:
                        missing[j] -= 1  # input_arrived, inlined on this hot path
                        if missing[j] == 0:
                            make_ready(j, t)
                t_send = t  # when the next message leaves: after the wake-ups of those before it
                for dj, (nbytes, _cons) in remote[i].items():
                    dt = lat[d][dj] * ntens[i] + nbytes / bw[d][dj]
                    if requested_at[dj] > t:  # not asked for yet: the tensor waits on its sender
                        parked[dj].append((i, d, dt))
                        continue
                    if send_wake_s and asleep(dj, d, t):
                        t_send += send_wake_s * ntens[i]
                    transfer(i, d, dj, dt, t_send)
                if t_send > t:  # the sender's cores are held by the wake-ups
                    busy_until[d] = t_send
                    busy_s[d] += t_send - t
                    if core_sets is not None:
                        for c in core_sets[d]:
                            core_free[c] = t_send
                    heapq.heappush(events, (t_send, _WAKE, i, d))
            elif kind == _READ:
                n_unread -= 1
                read(a, b, t)
            elif kind == _WAKE:  # a sender's wake-ups are over: only the dispatch after this time's events acts
                continue
            else:
                i, dj = a, b
                w = read_msg_s * ntens[i] + read_byte_s * remote[i][dj][0] if idle_reads else 0.0
                if w > 0:
                    unread[dj].append((i, w))
                    n_unread += 1
                    continue
                if deferred_reads[dj] and any(core_free[c] > t for c in core_sets[dj]):  # type: ignore[index]
                    pending[dj].append(i)  # the core is busy: the idle-class transport thread waits
                    n_pending += 1
                    continue
                read(i, dj, t)
        dispatch_and_request(t)
        while n_pending:  # cores left idle after the dispatch read their waiting messages, then dispatch again
            idle = [
                d
                for d in range(nd)
                if pending[d] and all(core_free[c] <= t for c in core_sets[d])  # type: ignore[index]
            ]
            if not idle:
                break
            for d in idle:
                for i in pending[d]:
                    read(i, d, t)
                n_pending -= len(pending[d])
                pending[d] = []
            dispatch_and_request(t)
        if n_unread:
            start_reads(t)

    if done[0] < n:
        _raise_deadlock(
            names, devs, dev_of, pred, missing, start, static, seq_of if static else None, ptr if static else None
        )

    makespan = max((e for e in end), default=0.0)
    if transfers:
        makespan = max(makespan, max(tr[4] for tr in transfers))
    return SimResult(
        names=list(names),
        devices=[d.name for d in devs],
        start=start,
        end=end,
        device_of=dev_of,
        order={devs[d].name: order_out[d] for d in range(nd)},
        makespan=makespan if n else 0.0,
        busy_s={devs[d].name: busy_s[d] for d in range(nd)},
        peak_memory={devs[d].name: peak[d] for d in range(nd)},
        memory_limit={devs[d].name: limit[d] for d in range(nd)},
        memory_timeline={devs[d].name: mtl[d] for d in range(nd)},
        traffic_bytes=traffic[0],
        cut_edge_bytes=cut_edge_bytes,
        transfers=transfers,
        oom=oom[0],
        decisions=decisions,
    )


def _ready_rank(pol: DispatchPolicy, n: int) -> list[float] | None:
    """The rank per op by which `sim_kernel.simulate_ready` orders a device's executable ops as `pol` would
    (by (rank, the order ops became executable)): 0 for every op under `FifoPolicy`, `RankPolicy`'s ranks
    (prepared) when none is NaN; None for any other policy (a subclass too: its keys may differ)."""
    if pol.dynamic:
        return None
    if type(pol) is FifoPolicy:
        return [0.0] * n
    if type(pol) is RankPolicy:
        r = pol._r
        if len(r) == n and all(x == x for x in r):
            return r
    return None


def _raise_deadlock(names, devs, dev_of, pred, missing, start, static, seq_of, ptr) -> None:
    for d in range(len(devs)):
        if static and ptr[d] < len(seq_of[d]):
            i = seq_of[d][ptr[d]]
            waiting = [names[j] for j, _ in pred[i] if math.isnan(start[j])]
            raise InvalidSchedule(
                f"schedule deadlocks: device {devs[d].name!r} waits to run op {names[i]!r}, whose input(s) "
                f"{waiting[:3]} never run because they are ordered after a blocked op on their device"
            )
    stuck = [names[i] for i in range(len(names)) if math.isnan(start[i])]
    raise InvalidSchedule(f"simulation stopped with {len(stuck)} ops never run, e.g. {stuck[:3]}")
