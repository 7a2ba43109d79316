"""The (op, device) pair queue of m-ETF (seed 001 section 2.3): which ready op goes to which device next.

m-SCT's queue (`sct_queue.SCTQueue`) is a subclass that orders pairs by SCT's classes and excludes devices
that run out of memory.  Both place ops through `exec_model.ExecModel`.  A list placement that ends with a
colocation group's later member finding its device full is run again with that group kept off that device
(`place_with_group_retries`).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable
from typing import TypeVar

from ...errors import InfeasiblePlacement
from .exec_model import Estimate, ExecModel

log = logging.getLogger(__name__)

T = TypeVar("T")


class GroupOverflow(InfeasiblePlacement):
    """A later member of a colocation group does not fit on the device its group is pinned to; carries the
    group and device indices so that a placer can retry with the group kept off that device."""

    def __init__(self, message: str, group: int, device: int):
        super().__init__(message)
        self.group = group
        self.device = device


def place_with_group_retries(run: Callable[[set[int]], T], D: int, max_retries: int) -> tuple[T, int]:
    """Run a list-scheduling placement, ``run(banned)``, again each time it ends in `GroupOverflow`, with
    the failing (group, device) pair added to ``banned`` (a set of ``group * D + device``) so that the group's
    first member takes its next device choice.  Baechi 3.1 places a colocation group where its memory fits
    when its first member is placed; under dynamic memory (4.2) that cannot be known in advance (a group
    joining a forward op and its backward ops needs its memory long after the first member runs), so the
    check is made a posteriori.  Returns (run's result, retries).

    The budget is per colocation group: a group may be kept off at most ``min(max_retries, D - 1)`` devices
    (one more each time it overflows; a group kept off every device would have nowhere to go), and the
    overflow is re-raised when the failing group has used its budget.  Every retry bans a new (group, device)
    pair, so a placement with G colocation groups takes at most ``G * min(max_retries, D - 1)`` retries: the
    budget scales with the number of groups that overflow.  (A fixed total, 16 before, ran out on Baechi
    Table 4's synthetic graph at 30% memory, where the deepest layers' groups fill the last device one after
    another and 28 (m-ETF) to 38 (m-SCT) distinct groups each need one retry.)  Each retry costs one list
    scheduling pass (not the LP of m-SCT)."""
    per_group_budget = min(max_retries, D - 1)
    banned: set[int] = set()
    used: dict[int, int] = {}  # group -> retries spent on it
    retries = 0
    while True:
        try:
            return run(banned), retries
        except GroupOverflow as exc:
            pair = exc.group * D + exc.device
            if used.get(exc.group, 0) >= per_group_budget or pair in banned:
                raise
            log.info("%s; retrying with that group kept off that device", exc)
            used[exc.group] = used.get(exc.group, 0) + 1
            banned.add(pair)
            retries += 1


class PairQueue:
    """The queue of (op, device) pairs of m-ETF (seed 001 section 2.3).

    A pair exists for every ready, unplaced op and every device it may use.  Pairs are kept in one binary
    heap per device, ordered by the op's data-ready time on that device; since the earliest schedulable
    time (equation (1)) of a pair on p is ``max(avail[p], data ready)``, device p's head is p's best pair
    and the queue's head is the best of the D heads -- the single pair queue of the paper, split by device
    so that a device's clock moving on does not invalidate its pairs.  Invalidation is lazy: pairs of placed
    ops, dropped pairs and stale generations are discarded when they reach a head, and a stored data-ready
    time that grew (sequential queues) sends the pair back when it is about to be placed; nothing is
    re-sorted.  The head pair is placed if the device can hold it (`ExecModel.fits`).

    A refused pair (`_no_fit`).  The paper: "If the head element (o, p) is not schedulable because device
    p's leftover memory is insufficient, then the head is removed" (2.3).  Under its accounting leftover
    memory only shrinks, so a refusal is final.  Here memory is dynamic (4.2: an output is freed when its
    last consumer ends), so a refusal at one start time can be lifted at a later one.  The rule kept: a pair
    is removed only when the device could not hold the op even with none of its transient memory live
    (`ExecModel.exhausted`: persistent bytes, colocation reservations, the op's own bytes and the copies it
    needs exceed the device); any other refused pair is *parked* and queued again, re-estimated, once the
    device's clock or memory has changed (`unpark`, after an op is placed there or a free on it becomes
    known), i.e. it comes back with a later start time on that device.  An op fails only when all its
    pairs are removed, or when nothing placeable is left and it is still parked (`_stuck`).  Colocation is
    co-adjusted (3.1): the first member placed pins its group to the device and reserves the group's
    memory; a later member refused on the group's device is parked like any pair, and raises
    `GroupOverflow` (a retry with the group kept off that device) when exhausted or stuck.
    Ties: earlier data-ready time, then op index, then device index.

    Subclasses (`sct_queue.SCTQueue`) change the order (`_loop`, `push_all`), what a refusal does (`_no_fit`)
    and which pairs may still be used (`usable`).

    m-ETF runs a compiled port of this class with `ExecModel` on large parallel-mode graphs
    (`etf_kernel`); a change here must be made there too (`tests/test_etf_kernel.py` compares the two).

    Complexity: O(V D (log V + d)) for in-degree d, plus the memory checks and the re-estimations that
    sequential queues cause, plus O(log V + d) per parked pair each time its device changes (at most
    O(V) times per pair; none when memory suffices).
    """

    def __init__(self, model: ExecModel, banned: set[int] | None = None):
        self.m = model
        self.banned = banned or set()  # group * D + device: an unpinned group may not start there
        n, D = model.n, model.D
        self.dropped: set[int] = set()
        self.gen = [0] * n
        self.ready: set[int] = set()
        self.left: list[int] = []
        self.tried: dict[int, dict[int, float]] = {}
        self.dheap: list[list[tuple[float, int, int]]] = [[] for _ in range(D)]  # (data ready, op, gen)
        self.parked: list[list[int]] = [[] for _ in range(D)]  # ops refused by a device, waiting for a change
        self.parked_pairs: set[int] = set()  # o * D + p of the parked pairs
        self.parked_at = [0] * D  # ExecModel.version of the device when its pairs were parked
        self.n_dropped = 0
        self.n_parked = 0
        self.n_reestimated = 0
        #: `usable` is this class's (a subclass may exclude more pairs): `push_all` may take its fast path
        self.plain_usable = type(self).usable is PairQueue.usable

    # ----------------------------------------------------------------- helpers
    def usable(self, o: int, p: int) -> bool:
        m = self.m
        g = m.gid[o]
        if g >= 0:
            if m.group_dev[g] >= 0:
                return p == m.group_dev[g]
            if self.banned and g * m.D + p in self.banned:
                return False
        return (o * m.D + p) not in self.dropped

    def push(self, o: int, p: int) -> None:
        """Queue the pair (o, p) unless it is unusable or parked."""
        if self.usable(o, p) and (o * self.m.D + p) not in self.parked_pairs:
            d = self.m.data_ready(o, p)
            heapq.heappush(self.dheap[p], (d, o, self.gen[o]))

    def push_all(self, o: int) -> None:
        """Queue every usable, unparked pair of o (`push` for each device o may use), the keys from one pass
        over o's inputs (`ExecModel.data_ready_all`, issue 22).  An op outside colocation groups, with no
        pair dropped or parked anywhere and this class's own `usable`, has every allowed pair usable."""
        m = self.m
        ps = m.allowed[o]
        if not (self.plain_usable and m.gid[o] < 0 and not self.dropped and not self.parked_pairs):
            D, parked = m.D, self.parked_pairs
            ps = [p for p in ps if self.usable(o, p) and (o * D + p) not in parked]
            if not ps:
                return
        g = self.gen[o]
        dheap = self.dheap
        for p, d in zip(ps, m.data_ready_all(o, ps)):
            heapq.heappush(dheap[p], (d, o, g))

    def make_ready(self, o: int) -> None:
        self.ready.add(o)
        self.check_alive(o)
        self.push_all(o)

    def check_alive(self, o: int) -> None:
        if self.plain_usable and self.m.gid[o] < 0 and not self.dropped:  # every allowed pair is usable
            return
        if not any(self.usable(o, p) for p in self.m.allowed[o]):
            raise self.m.infeasible(o, self.tried.get(o, {}))

    def refresh(self, o: int) -> None:
        self.gen[o] += 1
        self.push_all(o)

    # ----------------------------------------------------------------- main loop
    def run(self) -> None:
        m = self.m
        left = [len(pr) for pr in m.pred]
        self.left = left
        for o in range(m.n):
            if left[o] == 0:
                self.make_ready(o)
        self._loop()
        if m.n_placed < m.n:
            self._stuck()

    def _stuck(self) -> None:
        """Every remaining pair is parked or dropped and nothing will change any more: name an op that cannot
        be placed (a pinned colocation group's member raises `GroupOverflow`, so that the placement is tried
        again with the group kept off that device)."""
        m = self.m
        waiting = sorted(o for o in self.ready if m.dev[o] < 0)
        if not waiting:
            stuck = [m.idx.names[i] for i in range(m.n) if m.dev[i] < 0]
            raise InfeasiblePlacement(f"{len(stuck)} ops could not be placed, e.g. {stuck[:3]}")
        o = waiting[0]
        g = m.gid[o]
        if g >= 0 and m.group_dev[g] >= 0:
            p = m.group_dev[g]
            need = self.tried.get(o, {}).get(p, float("nan"))
            raise GroupOverflow(
                f"op {m.idx.names[o]!r} of colocation group {m.group_names[g]!r} must go to device "
                f"{m.cluster.devices[p].name!r}, which would need {need:.6g} of {m.mem[p].limit:.6g} bytes even "
                f"once everything else placeable was placed",
                g,
                p,
            )
        raise m.infeasible(o, self.tried.get(o, {}))

    def _placed(self, o: int, first_of_group: bool) -> None:
        m = self.m
        self.ready.discard(o)
        if first_of_group:
            for mem in m.members[m.gid[o]]:
                if mem in self.ready:
                    self.refresh(mem)
        left = self.left
        for k, _ in m.succ[o]:
            left[k] -= 1
            if left[k] == 0:
                self.make_ready(k)
        self.unpark()

    def unpark(self) -> None:
        """Queue again the pairs parked on a device whose clock or memory changed since they were refused
        (`ExecModel.version`); they come back with the device's later start time and its new frees."""
        m = self.m
        for p, ops in enumerate(self.parked):
            if ops and m.version[p] != self.parked_at[p]:
                self.parked[p] = []
                for o in ops:
                    self.parked_pairs.discard(o * m.D + p)
                    if m.dev[o] < 0:
                        self.push(o, p)

    def _loop(self) -> None:
        """m-ETF: the pair queue split by device.  Within device p the pairs are ordered by data-ready time,
        so the head has p's earliest schedulable time ``max(avail[p], data ready)``; the global head is the
        best of the D device heads.  Ties: earlier data, then op index, then device."""
        m = self.m
        D = m.D
        dheap = self.dheap
        gen = self.gen
        dev = m.dev
        gid = m.gid
        # `usable` asked only where it can say no: an op outside groups is usable unless dropped (this class)
        dropped = self.dropped
        ask = not self.plain_usable
        while True:
            best = None
            for p in range(D):
                h = dheap[p]
                while h:
                    d, o, g = h[0]
                    if dev[o] >= 0 or g != gen[o] or ((ask or gid[o] >= 0 or dropped) and not self.usable(o, p)):
                        heapq.heappop(h)
                        continue
                    break
                if not h:
                    continue
                d, o, g = h[0]
                av = m.avail[p]
                k = (av if av > d else d, d, o, p)
                if best is None or k < best:
                    best = k
            if best is None:
                return
            _, d, o, p = best
            est = m.estimate(o, p)
            if est.data_ready > d:  # stored data-ready time was a lower bound (sequential queues)
                self.n_reestimated += 1
                heapq.heapreplace(dheap[p], (est.data_ready, o, gen[o]))
                continue
            heapq.heappop(dheap[p])
            self._try_commit(o, p, est)

    def _try_commit(self, o: int, p: int, est: Estimate) -> bool:
        """Place op o on device p as estimated if its memory fits there (else record the refusal)."""
        m = self.m
        if not m.fits(o, p, est):
            self._refused(o, p, est)
            return False
        grp = m.gid[o]
        first_of_group = grp >= 0 and m.group_dev[grp] < 0
        m.commit(o, p, est)
        self._placed(o, first_of_group)
        return True

    def _refused(self, o: int, p: int, est: Estimate) -> None:
        """Record a refusal (device p cannot hold o as estimated); a pinned group member raises
        `GroupOverflow`, anything else goes to `_no_fit`."""
        m = self.m
        need = m.need(o, p, est)
        self.tried.setdefault(o, {})[p] = need
        g = m.gid[o]
        if g >= 0 and m.group_dev[g] >= 0 and m.exhausted(o, p, est):
            raise GroupOverflow(
                f"op {m.idx.names[o]!r} of colocation group {m.group_names[g]!r} must go to device "
                f"{m.cluster.devices[p].name!r}, which would need {need:.6g} of {m.mem[p].limit:.6g} bytes",
                g,
                p,
            )
        self._no_fit(o, p, est, need)

    def _no_fit(self, o: int, p: int, est: Estimate, need: float) -> None:
        """A refusal: the pair is dropped when the device could not hold the op even with none of its
        transient memory live (`ExecModel.exhausted`: waiting cannot help); otherwise it is parked until the
        device's clock or memory changes (`unpark`), then considered again with its later start time."""
        if self.m.exhausted(o, p, est):
            self.drop(o, p)
        else:
            self.park(o, p)

    def park(self, o: int, p: int) -> None:
        m = self.m
        self.parked[p].append(o)
        self.parked_pairs.add(o * m.D + p)
        self.parked_at[p] = m.version[p]
        self.n_parked += 1

    def drop(self, o: int, p: int) -> None:
        self.dropped.add(o * self.m.D + p)
        self.n_dropped += 1
        self.check_alive(o)
