"""Execute a placed, scheduled training step with one thread per device in one process (``runtime=threads``).

Limits (issue 16): this runtime is kept for quick checks of placements (memory caps, correctness, the planned
order) and for GPUs shared by virtual devices; its step times do not measure a placement. All "devices" are
threads of one Python process: they share the GIL and the intra-op thread pool, so on virtual CPU devices the
measured step hardly depends on the placement (every placer of the `gnmt_mem_limited` sweep measured
257-276 ms), copies are `clone()`s through copy-engine threads rather than messages, and the per-op profile
taken outside it misses its dispatch and Python costs. For measured steps use the process-per-device runtime,
`backends.torch.distributed.TorchDistributedRuntime` (one pinned OS process per device on torch.distributed),
which reuses this module's `PlacedExecutor` analysis (``start_threads=False``).

Devices
-------
`backends.torch.devices.map_devices` maps the cluster's devices to physical ones (real GPUs, GPUs shared by
virtual devices, or virtual CPU devices, one worker thread each); see `backends/torch/devices.py`.

Execution
---------
Every device has a worker thread that runs its ops in the schedule's order, node by node (the captured aten
ops). A value needed on another device is copied there once per step and destination by that destination's
copy engine (a thread with a FIFO queue, Baechi 4.2's per-device transfer queue): a real ``clone()`` into the
receiving side on the CPU, an asynchronous ``to(device, non_blocking=True)`` on a copy stream ordered by CUDA
events on GPUs. Values are dropped from a device after their last local use, so that the accounted memory
follows the execution. Parameters and optimizer state live on their Variable op's device between steps.

Before running, the schedule is checked op by op (every op once, on its device) and for deadlock by a static
replay over the op dependencies (O(V + E)); a step then cannot hang.

Measured: wall-clock step time (warm-up steps discarded, median of the rest), peak memory per device
(allocator peaks on dedicated GPUs, live-tensor accounting otherwise), bytes copied between devices per step.
Correctness: the first placed step can be compared with a single-device execution of the same program.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import torch

from algorithms.errors import InvalidSchedule, OutOfMemory

from .analysis import StepAnalysis
from .devices import CopyEngine, PhysDevice, copy_value, map_tensors
from .program import Program, resolve, tensors_of

log = logging.getLogger(__name__)


class _Abort(Exception):
    pass


class PlacedExecutor(StepAnalysis):
    """A captured program bound to a placement, a schedule and physical devices; `step()` runs one step.

    Setup is O(N + U) for N traced nodes and U uses; a step costs the ops plus O(N) Python work.
    """

    def __init__(
        self,
        prog: Program,
        placement: Mapping[str, str],
        schedule: Mapping[str, Sequence[str]],
        devices: Sequence[PhysDevice],
        params: Sequence[torch.Tensor],
        states: Sequence[torch.Tensor],
        batch: Sequence[torch.Tensor],
        *,
        start_threads: bool = True,
        share_storages: bool = False,
    ):
        super().__init__(prog, placement, schedule, devices, params, states, batch, share_storages=share_storages)
        # `start_threads=False`: only the analysis of `StepAnalysis` (the process-per-device runtime reuses it)
        self.engines = [CopyEngine(d) for d in self.devices] if start_threads else []
        self.pool = (
            ThreadPoolExecutor(max_workers=len(self.devices), thread_name_prefix="worker") if start_threads else None
        )
        self.peak = [0.0] * len(self.devices)
        self.traffic = 0.0
        #: per device, seconds of the last step spent running ops (including Python dispatch; on CUDA the time
        #: to issue the kernels) and waiting for copies from other devices
        self.last_busy: dict[str, float] = {}
        #: set True to time every op of a step (wall time minus waits for inputs; on CUDA each op is
        #: synchronised, which slows the step): `last_op_times` then holds {op: seconds} of the last step
        self.time_ops = False
        #: a list to record (planned time, device, live bytes, what) at every change in `step_planned`, or None
        self.memory_trace: list[tuple[float, str, float, str]] | None = None
        self.last_op_times: dict[str, float] = {}
        self.last_wait: dict[str, float] = {}
        #: per op of the last step, (device, start, end) in seconds from the step's start: in `step()` the span
        #: after the op's waits for its inputs (on CUDA without `time_ops`: when its kernels were issued), in
        #: `step_planned()` the op's turn in the serial planned order
        self.last_op_spans: dict[str, tuple[str, float, float]] = {}

    # ------------------------------------------------------------------ one step
    def step(self, retain_grads: bool = False) -> tuple[float, list[Any]]:
        """Run one training step; return (seconds, flat outputs). Parameters are updated in `store`.

        Gradients are freed after their last use; with `retain_grads` they are also kept (not accounted) so
        that the returned outputs hold them, else their places in the outputs are None."""
        prog, devs = self.prog, self.devices
        n = len(devs)
        envs: list[dict[int, Any]] = [dict() for _ in range(n)]
        cuda_ready: list[dict[int, Any]] = [dict() for _ in range(n)]
        arrived: list[dict[int, threading.Event]] = [dict() for _ in range(n)]
        for i, dests in self.sends.items():
            for d in dests:
                arrived[d][i] = threading.Event()
        live = [0.0] * n
        busy = [0.0] * n
        op_times: dict[str, float] = {}
        op_spans: dict[str, tuple[str, float, float]] = {}
        waited = [0.0] * n
        lock = threading.Lock()
        abort = threading.Event()
        # in-place updates: a placeholder is released when both its new value exists and its last local
        # reader has run (whichever comes second releases it)
        half_done: set[int] = set()
        retained: dict[int, Any] = {}
        holders = self.new_holders()  # each storage on one device: its thread alone updates its count
        run_alloc = self.prog.alloc_when_run()

        def release_old(ph: int, d: int, what: str) -> None:
            with lock:
                both = ph in half_done
                half_done.add(ph)
            if both:
                envs[d].pop(ph, None)
                account(d, -prog.nodes[ph].nbytes, what)

        errors: list[BaseException] = []
        traffic = [0.0]

        def account(d: int, delta: float, what: str) -> None:
            with lock:
                live[d] += delta
                if live[d] > self.peak[d]:
                    self.peak[d] = live[d]
                over = live[d] > devs[d].memory_limit
            if over and delta > 0:
                raise OutOfMemory(
                    f"out of memory on device {devs[d].name!r} at {what}: "
                    f"{live[d]:.6g} bytes live, limit {devs[d].memory_limit:.6g}",
                    op=what,
                    device=devs[d].name,
                    used_bytes=live[d],
                    limit_bytes=devs[d].memory_limit,
                )

        def send(i: int, val: Any, src: int, ready: Any) -> None:
            nb = prog.nodes[i].nbytes
            for d in self.sends.get(i, ()):

                def done(out, ev, d=d, i=i, nb=nb):
                    if isinstance(ev, BaseException):
                        errors.append(ev)
                        abort.set()
                        return
                    envs[d][i] = out
                    if ev is not None:
                        cuda_ready[d][i] = ev
                    with lock:
                        traffic[0] += nb
                    try:
                        account(d, nb, f"copy of {prog.op_of[i]!r}")
                    except OutOfMemory as exc:
                        errors.append(exc)
                        abort.set()
                    arrived[d][i].set()

                self.engines[d].submit(val, devs[src], ready, done)

        def worker(d: int) -> None:
            dev = devs[d]
            env = envs[d]
            consts = self.consts[d]
            frees = self.frees[d]
            kw_over = self.kwargs[d]
            ctx = ExitStack()
            if dev.is_cuda:
                ctx.enter_context(torch.cuda.device(dev.torch_device))
                ctx.enter_context(torch.cuda.stream(dev.stream))

            def get(i: int) -> Any:
                v = env.get(i)
                if v is not None:
                    return v
                if i in consts:
                    return consts[i]
                if self.node_dev.get(i) == d:
                    raise InvalidSchedule(
                        f"device {dev.name!r} needs the value of op {prog.op_of[i]!r} before running it"
                    )
                ev = arrived[d][i]
                tw = time.perf_counter()
                while not ev.wait(0.05):
                    if abort.is_set():
                        raise _Abort()
                waited[d] += time.perf_counter() - tw
                if abort.is_set():
                    raise _Abort()
                if i in cuda_ready[d]:
                    dev.stream.wait_event(cuda_ready[d].pop(i))
                    for t in tensors_of(env[i]):  # allocated on the copy stream, used on this one
                        t.record_stream(dev.stream)
                return env[i]

            with ctx:
                t_start = time.perf_counter()
                for op in self.order[d]:
                    if abort.is_set():
                        raise _Abort()
                    t_op, w_op = time.perf_counter(), waited[d]
                    for nid in prog.op_nodes[op]:
                        r = prog.nodes[nid]
                        if r.kind != "call":
                            continue
                        val = r.target(*resolve(r.args, get), **resolve(kw_over.get(nid, r.kwargs), get))
                        env[nid] = val
                        account(d, run_alloc[nid], repr(op))
                        ph = self.replaces.get(nid)
                        if ph is not None:
                            if ph not in self.local_read:
                                half_done.add(ph)
                            release_old(ph, d, repr(op))
                        if nid in self.sends:
                            ready = None
                            if dev.is_cuda:
                                ready = torch.cuda.Event()
                                ready.record(dev.stream)
                            send(nid, val, d, ready)
                        if nid in self.drop_now:
                            v = env.pop(nid, None)
                            if retain_grads and nid in self.grad_nids:
                                retained[nid] = v
                            account(d, -self.release_bytes(holders, nid), repr(op))
                        for i in frees.get(nid, ()):
                            if self.node_dev[i] == d and prog.nodes[i].kind == "placeholder":
                                # persistent until its new value exists (in-place update), then released
                                if i in self.replaced_ph:
                                    release_old(i, d, repr(op))
                                continue
                            v = env.pop(i, None)
                            if v is not None:
                                if retain_grads and i in self.grad_nids:
                                    retained[i] = v
                                if self.node_dev[i] != d:
                                    freed = prog.nodes[i].nbytes  # a received copy
                                else:
                                    freed = self.release_bytes(holders, i)
                                account(d, -freed, repr(op))
                    if self.time_ops:
                        if dev.is_cuda:
                            dev.stream.synchronize()
                        op_times[op] = time.perf_counter() - t_op - (waited[d] - w_op)
                    t_end = time.perf_counter()
                    op_spans[op] = (dev.name, t_op - t0 + (waited[d] - w_op), t_end - t0)
                busy[d] = time.perf_counter() - t_start - waited[d]

        for d in range(n):
            if devs[d].is_cuda:
                devs[d].stream.wait_stream(torch.cuda.current_stream(devs[d].torch_device))
        t0 = time.perf_counter()
        for i, d in self.placeholder_dev.items():
            envs[d][i] = self.store[i]
            account(d, prog.nodes[i].nbytes, "parameters and inputs")
        for i, d in self.placeholder_dev.items():
            if i in self.sends:
                ready = None
                if devs[d].is_cuda:
                    ready = torch.cuda.Event()
                    ready.record(torch.cuda.current_stream(devs[d].torch_device))
                send(i, self.store[i], d, ready)
        futures = [self.pool.submit(worker, d) for d in range(n)]
        for f in futures:
            try:
                f.result()
            except _Abort:
                pass
            except BaseException as exc:
                errors.append(exc)
                abort.set()
        if errors:
            raise errors[0]
        for d in devs:
            if d.is_cuda:
                d.stream.synchronize()
        elapsed = time.perf_counter() - t0
        outs = self._finish(envs, retained)
        self.traffic = traffic[0]
        self.last_busy = {devs[d].name: busy[d] for d in range(n)}
        self.last_op_times = dict(op_times)
        self.last_op_spans = dict(op_spans)
        self.last_wait = {devs[d].name: waited[d] for d in range(n)}
        return elapsed, outs

    def _finish(self, envs: list[dict[int, Any]], retained: Mapping[int, Any]) -> list[Any]:
        """The step's flat outputs (gradients from `retained` once freed, None if not retained), then the new
        parameters and optimizer state replace the old ones on their Variable's device."""
        prog, devs = self.prog, self.devices
        outs = []
        for i in prog.outputs:
            d = self.node_dev[i]
            if i in self.grad_nids:
                outs.append(envs[d].get(i, retained.get(i)))
            elif i in envs[d]:
                outs.append(envs[d][i])
            else:  # a placeholder passed through unchanged
                outs.append(self.store[i])
        P, S = prog.n_params, prog.n_params * prog.n_state
        ph = {r.index: r.nid for r in prog.nodes if r.kind == "placeholder"}
        for k in range(P + S):
            out_nid = prog.outputs[1 + P + k]
            val = envs[self.node_dev[out_nid]].get(out_nid, self.store.get(out_nid))
            if self.node_dev[out_nid] != self.placeholder_dev[ph[k]]:
                val, ev = copy_value(val, devs[self.node_dev[out_nid]], devs[self.placeholder_dev[ph[k]]])
                if ev is not None:
                    ev.synchronize()
            self.store[ph[k]] = val
        return outs

    # ------------------------------------------------------------------ one step, following a plan
    def plan_from(self, start: Mapping[str, float], arrivals: Sequence[tuple[str, str, float]]) -> list[tuple]:
        """Events of a planned step: every op at its planned start, every copy at its planned arrival.

        `start` maps op -> planned start time; `arrivals` lists (producer op, destination device, arrival
        time), e.g. the simulator's transfers.  At equal times copies come before op starts (the simulator
        handles arrivals before devices pick their next op); ops at equal times keep the schedule's order on
        their device and the capture order across devices.  O((V + T) log(V + T))."""
        rank = {op: k for k, op in enumerate(self.prog.op_nodes)}
        events: list[tuple] = []
        for d, ops in enumerate(self.order):
            for k, op in enumerate(ops):
                if op not in start:
                    raise InvalidSchedule(f"the plan has no start time for op {op!r}")
                events.append((float(start[op]), 1, k, rank[op], op, d))
        for k, (op, dst, t) in enumerate(arrivals):
            if op not in self.prog.op_nodes or dst not in self.pos:
                raise InvalidSchedule(f"the plan copies op {op!r} to device {dst!r}, which the program lacks")
            events.append((float(t), 0, k, rank[op], op, self.pos[dst]))
        events.sort(key=lambda e: e[:4])
        return events

    def step_planned(self, events: Sequence[tuple], retain_grads: bool = False) -> tuple[float, list[Any]]:
        """Run one training step with one thread, ops and copies in the order of a plan (`plan_from`).

        Virtual CPU devices share the host's cores, so their threads do not keep the relative speeds the
        profile predicts, and copies pushed by a device that runs ahead pile up on one that lags: live memory
        then depends on the host's thread scheduling rather than on the placement.  Following the plan, every
        device's live memory goes through the same sequence as in the simulation (ops atomically at their
        start; a copy is allocated on arrival; a value stays on its device until its last local use and its
        last copy), so a per-device memory cap is checked against what the placement itself implies.  The
        step time is then the time of a serial execution (ops plus copies), not of a parallel one.
        A copy that the plan lacks is made when its consumer first needs it.  Built with ``share_storages``
        (as `TorchBackend.run` builds it for a plan), several values of one storage that a device reads
        (a tensor and its views) cross once, as the owner, and the views are rebuilt there, so that the
        device holds the storage once, as the simulator's one copy per (op, device) counts; without it every
        value is copied apart (gnmt_mem_limited under m-ETF, session 31: a log-softmax gradient and its view,
        10.2 MB each, made the measured peak 18 % above the simulated one).  O(N + U) Python work plus the
        ops and copies."""
        prog, devs = self.prog, self.devices
        n = len(devs)
        envs: list[dict[int, Any]] = [dict() for _ in range(n)]
        live = [0.0] * n
        busy = [0.0] * n
        traffic = 0.0
        op_times: dict[str, float] = {}
        op_spans: dict[str, tuple[str, float, float]] = {}
        retained: dict[int, Any] = {}
        half_done: set[int] = set()
        pending = {i: len(dests) for i, dests in self.sends.items()}  # copies still to make per value
        held: dict[int, Any] = {}  # freed locally, kept (and accounted) until its last copy
        held_bytes: dict[int, float] = {}  # what freeing a held value releases (`release_bytes`)
        holders = self.new_holders()
        run_alloc = self.prog.alloc_when_run()
        ran: set[str] = set()

        trace = self.memory_trace
        now = [0.0]

        def account(d: int, delta: float, what: str) -> None:
            live[d] += delta
            if live[d] > self.peak[d]:
                self.peak[d] = live[d]
            if trace is not None:
                trace.append((now[0], devs[d].name, live[d], what))
            if delta > 0 and live[d] > devs[d].memory_limit:
                raise OutOfMemory(
                    f"out of memory on device {devs[d].name!r} at {what}: "
                    f"{live[d]:.6g} bytes live, limit {devs[d].memory_limit:.6g}",
                    op=what,
                    device=devs[d].name,
                    used_bytes=live[d],
                    limit_bytes=devs[d].memory_limit,
                )

        def free_home(i: int, d: int, nbytes: float, what: str) -> None:
            v = envs[d].pop(i, None)
            if retain_grads and i in self.grad_nids and v is not None:
                retained[i] = v
            if pending.get(i, 0) > 0:
                held[i] = v
                held_bytes[i] = nbytes
            else:
                account(d, -nbytes, what)

        def copy_to(i: int, dst: int) -> None:
            nonlocal traffic
            if dst in self._copied.get(i, ()):
                return
            src = self.node_dev[i]
            v = envs[src].get(i, held.get(i))
            if v is None:
                raise InvalidSchedule(
                    f"the plan copies the value of op {prog.op_of[i]!r} to {devs[dst].name!r} before it exists"
                )
            envs[dst][i] = map_tensors(v, lambda t: t.clone())
            self._copied.setdefault(i, set()).add(dst)
            nb = prog.nodes[i].nbytes
            traffic += nb
            account(dst, nb, f"copy of {prog.op_of[i]!r}")
            pending[i] -= 1
            if pending[i] == 0 and i in held:
                held.pop(i)
                account(src, -held_bytes.pop(i, 0.0), f"copy of {prog.op_of[i]!r}")

        def release_old(ph: int, d: int, what: str) -> None:
            if ph in half_done:
                envs[d].pop(ph, None)
                account(d, -prog.nodes[ph].nbytes, what)
            else:
                half_done.add(ph)

        def run_op(d: int, op: str) -> None:
            env, consts, frees, rebuilt = envs[d], self.consts[d], self.frees[d], self.rebuilt[d]

            def get(i: int) -> Any:
                v = env.get(i)
                if v is not None:
                    return v
                if i in consts:
                    return consts[i]
                if i in rebuilt:  # a view of a storage received once (`StepAnalysis._share_sent_storages`)
                    env[i] = val = self.rebuild_view(d, i, get)
                    return val
                if self.node_dev.get(i) != d and prog.op_of[i] in ran:
                    copy_to(i, d)  # a copy the plan did not list: made on first use
                    return env[i]
                raise InvalidSchedule(
                    f"op {op!r} on {devs[d].name!r} needs the value of op "
                    f"{prog.op_of[i]!r}, which the plan has not produced yet"
                )

            t_op = time.perf_counter()
            for nid in prog.op_nodes[op]:
                r = prog.nodes[nid]
                if r.kind != "call":
                    continue
                val = r.target(*resolve(r.args, get), **resolve(self.kwargs[d].get(nid, r.kwargs), get))
                env[nid] = val
                account(d, run_alloc[nid], repr(op))
                ph = self.replaces.get(nid)
                if ph is not None:
                    if ph not in self.local_read:
                        half_done.add(ph)
                    release_old(ph, d, repr(op))
                if nid in self.drop_now:
                    free_home(nid, d, self.release_bytes(holders, nid), repr(op))
                for i in frees.get(nid, ()):
                    if self.node_dev[i] == d and prog.nodes[i].kind == "placeholder":
                        if i in self.replaced_ph:
                            release_old(i, d, repr(op))
                        continue
                    if self.node_dev[i] != d:
                        if env.pop(i, None) is not None:
                            account(d, -self.received_bytes(d, i), repr(op))
                    elif i in env:
                        free_home(i, d, self.release_bytes(holders, i), repr(op))
            dt = time.perf_counter() - t_op
            busy[d] += dt
            if self.time_ops:
                op_times[op] = dt
            op_spans[op] = (devs[d].name, t_op - t0, t_op - t0 + dt)
            ran.add(op)

        self._copied: dict[int, set[int]] = {}
        t0 = time.perf_counter()
        for i, d in self.placeholder_dev.items():
            envs[d][i] = self.store[i]
            account(d, prog.nodes[i].nbytes, "parameters and inputs")
        late: dict[str, list[int]] = defaultdict(list)  # copies planned before their producer ran (ties)

        def deliver(op: str, d: int) -> None:
            for nid in prog.op_nodes[op]:
                if d in self.sends.get(nid, ()):
                    copy_to(nid, d)

        for t_plan, kind, _, _, op, d in events:
            now[0] = t_plan
            if kind == 1:
                run_op(d, op)
                for dst in late.pop(op, ()):
                    deliver(op, dst)
            elif op in ran or not any(prog.nodes[nid].kind == "call" for nid in prog.op_nodes[op]):
                deliver(op, d)  # Variable and Input ops hold their values from the start
            else:
                late[op].append(d)
        elapsed = time.perf_counter() - t0
        outs = self._finish(envs, retained)
        self.traffic = traffic
        self.last_busy = {devs[d].name: busy[d] for d in range(n)}
        self.last_op_times = dict(op_times)
        self.last_op_spans = dict(op_spans)
        self.last_wait = {devs[d].name: 0.0 for d in range(n)}
        return elapsed, outs

    def close(self) -> None:
        for e in self.engines:
            e.close()
        if self.pool is not None:
            self.pool.shutdown(wait=True)
