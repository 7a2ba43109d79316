"""Sequential-communication transfer order (Baechi, seed 001, section 3.4): the one model of it that the
simulator (`algorithms.simulator.simulate`) and the placers' execution models (Baechi's
`placers.baechi.exec_model.ExecModel`, Celeritas' `placers.celeritas.timeline.Timeline` with congestion) share.

The model (issue 17, item 2).  Every device has one send queue and one receive queue.  A transfer of the output
of producer i to device d is *requested* when i ends (first-in first-out at production, as a runtime's send
after the producing kernel has it) and the queues serve requests in request order: a transfer starts at

    ``max(request, end of the last earlier request on the sender's send queue,
               end of the last earlier request on the receiver's receive queue)``

and holds both queues until it arrives.  "Earlier" is the order of `transfer_key`: request time, then producer
(its index in `GraphIndex`, the simulator's event order for ops ending at the same time), then the position in
the producer's successor list of its first consumer on the destination device (the order the simulator sends
one producer's tensor to several devices).  Because the greedy rule only looks back, the start of a transfer
depends only on the transfers requested before it.

Two views of the same rule:

* `FifoLinks` serves requests as they come, in request order: the simulator, whose events arrive in time
  order, calls `FifoLinks.reserve` for each transfer when its producer finishes.  O(1) per transfer.
* `replay` runs ops in a given per-device order by the simulator's rules with `FifoLinks`: the times a
  placer's plan gets when it is re-timed.
* `KeyedLinks` keeps the transfers known so far sorted by `transfer_key` per send and per receive queue, for a
  placer that learns of transfers out of request order (a list scheduler creates the transfer of producer i to
  device d when the first consumer of i lands on d, after transfers requested later may have been planned).
  `KeyedLinks.probe` gives the start a new transfer gets at its place in the order, and says whether it would
  delay a transfer already planned after it (then the planned times after it are no longer what the simulator
  replays, and the placer must re-time its plan, see `ExecModel`).  O(log T) per probe for T transfers.

Ties between requests of ops that take no time and end at the same instant may be served in another order by
the simulator (it processes an op that starts and ends at t after the events already queued at t); the two
views agree whenever ops ending at the same time have positive durations.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Sequence

#: A transfer's place in the queues' order: (request time, producer index, first consumer's successor position).
TransferKey = tuple[float, int, int]


def transfer_key(request: float, producer: int, rank: int) -> TransferKey:
    """The order in which the queues serve transfers (module docstring)."""
    return (request, producer, rank)


class FifoLinks:
    """Send and receive queues served in the order requests come (the simulator's view)."""

    __slots__ = ("send_free", "recv_free")

    def __init__(self, n_devices: int):
        self.send_free = [0.0] * n_devices
        self.recv_free = [0.0] * n_devices

    def reserve(self, request: float, src: int, dst: int, duration: float) -> float:
        """Start of a transfer requested at `request` from `src` to `dst` lasting `duration`, after every
        transfer reserved before; both queues are held until it ends. O(1)."""
        sf, rf = self.send_free[src], self.recv_free[dst]
        s0 = request
        if sf > s0:
            s0 = sf
        if rf > s0:
            s0 = rf
        self.send_free[src] = self.recv_free[dst] = s0 + duration
        return s0


class _Queue:
    """One device's send (or receive) queue: planned transfers sorted by key, with their (start, end)."""

    __slots__ = ("keys", "starts", "ends")

    def __init__(self) -> None:
        self.keys: list[TransferKey] = []
        self.starts: list[float] = []
        self.ends: list[float] = []

    def free_before(self, key: TransferKey) -> float:
        """End of the last transfer ordered before `key` (0 when none): ends grow along the queue."""
        k = bisect.bisect_left(self.keys, key)
        return self.ends[k - 1] if k else 0.0

    def next_start_after(self, key: TransferKey) -> float:
        """Start of the first transfer ordered after `key` (+inf when none)."""
        k = bisect.bisect_right(self.keys, key)
        return self.starts[k] if k < len(self.keys) else float("inf")

    def shift_after(self, key: TransferKey, end: float) -> float:
        """Sum of the delays of the transfers ordered after `key` on this queue if one ordered at `key` ended
        at `end`, each pushed by the one before it on this queue alone (0 when none moves)."""
        k = bisect.bisect_right(self.keys, key)
        total = 0.0
        starts, ends = self.starts, self.ends
        while k < len(starts) and end > starts[k]:
            d = end - starts[k]
            total += d
            end = ends[k] + d
            k += 1
        return total

    def add(self, key: TransferKey, start: float, end: float) -> None:
        k = bisect.bisect_left(self.keys, key)
        self.keys.insert(k, key)
        self.starts.insert(k, start)
        self.ends.insert(k, end)

    def remove(self, key: TransferKey) -> None:
        k = bisect.bisect_left(self.keys, key)
        if k < len(self.keys) and self.keys[k] == key:
            del self.keys[k], self.starts[k], self.ends[k]


class KeyedLinks:
    """Send and receive queues of the transfers a placer has planned, sorted by `transfer_key` (the same rule
    as `FifoLinks`, for transfers learnt of out of request order)."""

    __slots__ = ("send", "recv")

    def __init__(self, n_devices: int):
        self.send = [_Queue() for _ in range(n_devices)]
        self.recv = [_Queue() for _ in range(n_devices)]

    def probe(self, items: list[tuple[TransferKey, int, int, float]]) -> tuple[list[tuple[float, float]], float]:
        """(start, end) of each new transfer (key, src, dst, duration) at its place in the order, the items
        sorted by key and distinct from the planned ones; and by how much the first planned transfer ordered
        after one of them on a shared queue would be delayed at least (0: no planned transfer moves). Nothing
        is changed. O(k log T)."""
        out: list[tuple[float, float]] = []
        delay = 0.0
        own_send: dict[int, float] = {}
        own_recv: dict[int, float] = {}
        for key, src, dst, dt in items:
            s0 = key[0]
            sf = max(self.send[src].free_before(key), own_send.get(src, 0.0))
            rf = max(self.recv[dst].free_before(key), own_recv.get(dst, 0.0))
            if sf > s0:
                s0 = sf
            if rf > s0:
                s0 = rf
            e = s0 + dt
            own_send[src] = own_recv[dst] = e
            out.append((s0, e))
            delay += self.send[src].shift_after(key, e) + self.recv[dst].shift_after(key, e)
        return out, delay

    def add(self, key: TransferKey, src: int, dst: int, start: float, end: float) -> None:
        self.send[src].add(key, start, end)
        self.recv[dst].add(key, start, end)

    def remove(self, key: TransferKey, src: int, dst: int) -> None:
        self.send[src].remove(key)
        self.recv[dst].remove(key)


def replay(
    order: Sequence[Sequence[int]],
    dev: Sequence[int],
    dur: Sequence[float],
    succ: Sequence[Sequence[tuple[int, float]]],
    pred: Sequence[Sequence[tuple[int, float]]],
    transfer_time: Callable[[int, int, float], float],
    tensors: Sequence[float] | None = None,
) -> tuple[list[float], dict[tuple[int, int], tuple[TransferKey, float, float, float]]]:
    """Start time of every op in `order` (per device, a linear extension of the graph among the ops it holds;
    ops with ``dev[i] < 0`` are not placed yet and ignored, but every placed op's predecessors must be
    placed) and its transfers, (producer, device) -> (key, start, arrival, bytes), when the ops run in that
    order by the simulator's rules in sequential mode (`algorithms.simulator.simulate` with a static order
    and `FifoLinks`): an op starts when its device is free and its inputs are there; a producer's output
    crosses once to each other device holding a consumer, sized by the largest edge, requested when it ends,
    in the order of the first consumers among its successors; the events at one time are all handled before
    any device starts an op.  `tensors` (`GraphIndex.copy_tensors`): how many latencies a producer's transfer
    pays (a coarse op's tensors; 1 when not given), added as ``(tensors - 1) x transfer_time(d, d', 0)``.  The
    placers re-time their plans with it.  O((V + E) log V)."""
    nd = len(order)
    missing = {o: len(pred[o]) for ops in order for o in ops}
    remote: dict[int, dict[int, list]] = {}
    for ops in order:
        for j in ops:
            dj = dev[j]
            rj: dict[int, list] = {}
            for k, (c, b) in enumerate(succ[j]):
                dc = dev[c]
                if dc < 0 or dc == dj:
                    continue
                ent = rj.get(dc)
                if ent is None:
                    rj[dc] = [b, k, [c]]
                else:
                    if b > ent[0]:
                        ent[0] = b
                    ent[2].append(c)
            if rj:
                remote[j] = rj
    start = [0.0] * len(dev)
    xfer: dict[tuple[int, int], tuple[TransferKey, float, float, float]] = {}
    links = FifoLinks(nd)
    ptr = [0] * nd
    running = [False] * nd
    events: list[tuple[float, int, int, int]] = []

    def dispatch(t: float) -> None:
        for d in range(nd):
            if running[d] or ptr[d] >= len(order[d]):
                continue
            i = order[d][ptr[d]]
            if missing[i]:
                continue
            ptr[d] += 1
            running[d] = True
            start[i] = t
            heapq.heappush(events, (t + dur[i], 0, i, 0))

    dispatch(0.0)
    while events:
        t = events[0][0]
        while events and events[0][0] == t:
            _, kind, i, dst = heapq.heappop(events)
            if kind == 0:
                d = dev[i]
                running[d] = False
                for c, _ in succ[i]:
                    if dev[c] == d:
                        missing[c] -= 1
                for dj, (nbytes, rank, _) in remote.get(i, {}).items():
                    dt = transfer_time(d, dj, nbytes)
                    if tensors is not None and tensors[i] != 1.0:
                        dt += (tensors[i] - 1.0) * transfer_time(d, dj, 0.0)
                    s0 = links.reserve(t, d, dj, dt)
                    xfer[(i, dj)] = (transfer_key(t, i, rank), s0, s0 + dt, nbytes)
                    heapq.heappush(events, (s0 + dt, 1, i, dj))
            else:
                for c in remote[i][dst][2]:
                    missing[c] -= 1
        dispatch(t)
    return start, xfer
