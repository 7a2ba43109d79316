"""One worker's training step as a CUDA graph (`runtime.cuda_graph=true`): capture, check, replay, time.

Why: the lab's models are tiny. Eagerly, a GPU worker's step is bound by the host: gnmt_tiny's 1,632 ops take
about 25 µs of host work each, its kernels far less, so the step measured on an H100 (40.7 ms, session 17)
is the host's Python loop, and its noise (IQR 20-30 % of the step) is the host's. A CUDA graph launches the
whole step at once; the step is then the device's own time, as in the papers' regime where kernels outlast
their launches. The graph changes what runs (no host work per op): result.json says so (`extra["cuda_graph"]`),
and a profile taken in graph mode is keyed apart (`worker_setting`'s ``cuda_graph``).

What is captured (`step_body`): the ops of the worker's device in its schedule order, the same calls
`_Worker.step` makes, then the copy of every new parameter and optimizer state into the tensor that held the
old one. The step's inputs (parameters, state, the batch) thus keep their addresses from replay to replay, as
a graph needs, and the loss stays in the graph's output tensor. Values freed by the eager step are dropped at
the same points, so the graph's private memory pool reuses them as the eager step's allocator would.

One worker only: a placement over several GPUs would capture NCCL send/recv into the graph, which is not
written (the runtime refuses it with a ConfigError). The first warm-up steps run eagerly (the correctness
check compares the first with a single-device step); the graph is captured after them.

Per-op times (`timed=True`, the profile): an external timing event (`torch.cuda.Event(enable_timing=True,
external=True)`, an event-record node of the graph) is recorded before the first op, after every op but the
last, and after the parameter copies; one replay then gives each op its device time between neighbouring
events (the last op is charged the copies). The event nodes add to the step, so the profile scales these times
to the replay of the plain graph (`profile_in_worker`'s scaled median), as it scales host-clock times on CPUs.

The check (`GraphedStep.check`): after capture, one eager step and one replay start from the same state; the
loss and every new parameter and state must agree (relative difference at most `rtol` of the tensor's largest
magnitude), else `GraphMismatch` names the first tensor that does not (an op that read host memory at capture,
say). The state then moves on by that step.

`host_graphs=True` replaces the CUDA graph with a replay that runs the body again on the host, with
`time.perf_counter` for the events: the same capture, check and bookkeeping on a CPU, for tests.

Cost: capture O(ops) host work once per graph (the plain one, and the timed one when ops are timed); a replay
O(1) host work plus the kernels; a timed replay O(ops) event reads afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from algorithms.errors import LabError

from .program import resolve


class GraphMismatch(LabError):
    """A CUDA graph's replay of the step did not give what the eager step gave from the same state."""


class GraphCaptureError(LabError):
    """An op of the step could not be captured in a CUDA graph."""


Mark = Callable[[int], None]


def step_body(w: Any, mark: Mark | None = None) -> torch.Tensor | None:
    """Run worker `w`'s ops once, in its order, then copy each new parameter and state into the tensor that
    holds the old one (`w` is a `worker._Worker` whose placement puts every value it reads on its own device).
    `mark(k)`, when given, is called before the first op (k = 0), after op k (k = 1 .. n-1) and after the
    copies (k = n). Returns the loss tensor (None when the loss is on another device). O(N) calls."""
    prog, ex, d = w.prog, w.ex, w.rank
    nodes = prog.nodes
    consts, frees, kw_over = ex.consts[d], ex.frees[d], ex.kwargs[d]
    loss_nid = prog.outputs[0]
    keep = {out for _, out in w.updates} | {loss_nid}
    env: dict[int, Any] = {i: ex.store[i] for i in w.my_ph}

    def get(i: int) -> Any:
        v = env.get(i)
        return v if v is not None else consts[i]

    n = len(w.order)
    if mark is not None:
        mark(0)
    for k, op in enumerate(w.order):
        for nid in prog.op_nodes[op]:
            r = nodes[nid]
            if r.kind != "call":
                continue
            try:
                env[nid] = r.target(*resolve(r.args, get), **resolve(kw_over.get(nid, r.kwargs), get))
            except Exception as exc:
                raise GraphCaptureError(f"op {op!r} ({r.target}) failed in the graphed step: {exc}") from exc
            for i in frees.get(nid, ()):
                if nodes[i].kind != "placeholder" and i not in keep:
                    env.pop(i, None)
        if mark is not None and k < n - 1:
            mark(k + 1)
    for ph, out in w.updates:
        new = env[out] if out in env else ex.store[out]
        old = ex.store[ph]
        if new is not old:
            old.copy_(new)
    if mark is not None:
        mark(n)
    return env.get(loss_nid)


class _Captured:
    """One captured step: the graph (or its host stand-in), its marks and its loss tensor."""

    def __init__(self, w: Any, timed: bool, host: bool, pool: Any):
        n = len(w.order)
        self.host = host
        self.stamps: list[float] = [0.0] * (n + 1)
        self.events: list[Any] = []
        mark: Mark | None = None
        if timed and host:

            def mark(k: int) -> None:
                self.stamps[k] = time.perf_counter()

        elif timed:
            self.events = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(n + 1)]

            def mark(k: int) -> None:
                self.events[k].record()

        self.timed = timed
        if host:
            self.body: Callable[[], Any] = lambda: step_body(w, mark)
            self.loss: torch.Tensor | None = None
            self.graph: Any = None
        else:
            # torch's recipe: a step on a side stream first (lazy initialisations stay out of the capture); it
            # moves the state on by one step
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                step_body(w)
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, pool=pool):
                self.loss = step_body(w, mark)

    def replay(self) -> None:
        if self.host:
            self.loss = self.body()
        else:
            self.graph.replay()

    def op_times(self) -> list[float]:
        """Seconds between consecutive marks of the last replay (after it finished)."""
        if self.host:
            return [b - a for a, b in zip(self.stamps, self.stamps[1:])]
        return [a.elapsed_time(b) / 1e3 for a, b in zip(self.events, self.events[1:])]


class GraphedStep:
    """Worker `w`'s step captured once (`timed`: a second graph with an event after every op), replayed per
    step; see the module docstring. `host_graphs`: replay on the host instead of a CUDA graph (tests)."""

    def __init__(self, w: Any, timed: bool = False, host_graphs: bool = False):
        if w.world != 1:
            raise GraphCaptureError(f"a graphed step runs on one worker; this placement uses {w.world}")
        self.w = w
        self.host = host_graphs
        self.dev = w.dev
        self.static = {ph: w.ex.store[ph] for ph in w.my_ph}
        pool = None if host_graphs else torch.cuda.graph_pool_handle()
        self.plain = _Captured(w, False, host_graphs, pool)
        self.timed = _Captured(w, True, host_graphs, pool) if timed else None

    def _bind(self) -> None:
        """Point the worker's store at the graph's input tensors again (an eager step rebinds it)."""
        self.w.ex.store.update(self.static)

    def check(self, rtol: float = 1e-3) -> float:
        """One eager step and one replay from the same state; the largest difference found, relative to each
        tensor's largest magnitude. Raises GraphMismatch above `rtol`. Afterwards the state is the replay's."""
        w, ex = self.w, self.w.ex
        o = w.step(retain=False, time_ops=False, last=False)
        eager = {ph: ex.store[ph] for ph, out in w.updates}
        self._bind()
        self.plain.replay()
        self._sync()
        worst = 0.0
        names = list(w.prog.param_names)
        pairs: list[tuple[str, Any, Any]] = []
        if "loss" in o and self.plain.loss is not None:
            pairs.append(("the loss", torch.tensor(o["loss"]), self.plain.loss.detach().cpu()))
        for k, (ph, _) in enumerate(w.updates):
            what = f"parameter {names[k]!r}" if k < len(names) else f"optimizer state #{k - len(names)}"
            pairs.append((what, eager[ph].detach().cpu(), self.static[ph].detach().cpu()))
        for what, a, b in pairs:
            a, b = a.double(), b.double()
            scale = max(float(a.abs().max()) if a.numel() else 0.0, 1e-12)
            diff = float((a - b).abs().max()) / scale if a.numel() else 0.0
            if diff > rtol:
                raise GraphMismatch(
                    f"the graphed step's {what} differs from the eager step's by {diff:.3g} of its largest "
                    f"magnitude (tolerance {rtol:g})"
                )
            worst = max(worst, diff)
        return worst

    def _sync(self) -> None:
        if not self.host:
            torch.cuda.synchronize(self.dev)

    def replay(self, time_ops: bool) -> dict[str, Any]:
        """One step: a replay of the plain graph (or the timed one with `time_ops`), timed by two CUDA events
        around it (on the host: the host's clock). Returns what `_Worker.step` returns: elapsed, wall, op_times,
        t0, spans (the timed graph's ops on the device's clock; empty otherwise) and the loss."""
        cap = self.timed if time_ops and self.timed is not None else self.plain
        self._sync()
        start = end = None
        if not self.host:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        cap.replay()
        if end is not None:
            end.record()
        self._sync()
        wall = time.perf_counter() - t0
        elapsed = wall if start is None else start.elapsed_time(end) / 1e3
        op_times: dict[str, float] = {}
        spans: list[tuple[str, float, float]] = []
        if cap.timed:
            at = 0.0
            for op, t in zip(self.w.order, cap.op_times()):
                op_times[op] = t
                spans.append((op, at, at + t))
                at += t
        out: dict[str, Any] = {"elapsed": elapsed, "wall": wall, "op_times": op_times, "t0": t0, "spans": spans}
        if cap.loss is not None:
            out["loss"] = float(cap.loss)
        return out


def costs_less_event_nodes(medians: dict[str, float], step: float) -> tuple[dict[str, float], float]:
    """Each op's device time in the plain graph from its median in the timed one: the median less the same
    cost per event node, c = (sum of the medians - the plain graph's `step`) / (number of ops), clipped at 0
    and scaled so that the ops add up to `step`. Returns the costs and c.

    Why a constant and not the CPU profile's proportional scaling: the timed graph differs from the plain one
    by one event-record node per op, and a node costs the device about the same whatever op it follows (on an
    H100 the timed graphs' op medians summed to 2.3-3.1 times the plain replay: inception_v3_tiny 7.2 against
    3.15 ms, mlp_tiny 0.20 against 0.066 ms). Scaling in proportion would leave a short op most of its node's
    cost. A single-device prediction is the same either way (the ops add up to `step`); how a placement over
    several GPUs is charged is not (not measured: one GPU was lent). O(ops)."""
    if not medians:
        return {}, 0.0
    c = max(0.0, (sum(medians.values()) - step) / len(medians))
    less = {op: max(0.0, t - c) for op, t in medians.items()}
    total = sum(less.values())
    k = step / total if total > 0 else 0.0
    return {op: k * t for op, t in less.items()}, c
