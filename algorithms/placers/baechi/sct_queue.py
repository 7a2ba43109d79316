"""m-SCT's pair queue (seed 001 section 2.4): m-ETF's queue (`pair_queue.PairQueue`) with SCT's order of
favourite children and urgent ops, and devices excluded once they run out of memory."""

from __future__ import annotations

import heapq
import logging
from typing import Any

from ...errors import ConfigError
from .exec_model import Estimate, ExecModel
from .pair_queue import PairQueue

log = logging.getLogger(__name__)

#: When m-SCT excludes a device (see `SCTQueue`): "exhausted" -- the op could not fit there even with no
#: transient memory live; "refusal" -- at the first op the device cannot hold when it is chosen.
EXCLUSIONS = ("exhausted", "refusal")


class SCTQueue(PairQueue):
    """m-SCT's queue.  SCT on finite devices (Baechi 2.4, after Hanen & Munier [17]) "schedules tasks similar
    to ETF, but: a) prefers placing the favorite child of a task on the same device as [its parent] ... and
    b) prioritizes urgent tasks, i.e., a task that can begin right away on any device."

    Rendered here as: pairs are taken by earliest start time, as in m-ETF; among pairs that could start at
    the same time the class decides: 0 for a favourite child on its favourite parent's device, 1 for an
    *urgent* op (its inputs could be on every device by then, communication queues ignored), 2 otherwise
    (`_head`).  *Prefer, not force* (`_prefers_parent`): a favourite child has pairs on every device it
    may use, but a pair on another device p is held back while its parent's device pf still could take it
    and does not start it later than p by more than the transfer it saves (latency + the edge's bytes over
    the pf -> p link): the child goes to p only when ``start on pf - start on p > transfer pf -> p``.  The
    held-back pair is queued again for the time the child could start on pf, where the class-0 pair comes
    first; if pf refuses the child (memory), the pair on p is no longer held back.

    A refusal excludes the device from further placement when `exclude_full` (Baechi 2.4: "when a device
    runs out of available memory"): with ``exclusion="exhausted"`` only when the device could not hold the
    op even with no transient memory live, otherwise the pair is parked as in m-ETF (`PairQueue._no_fit`:
    under dynamic memory a device refusing an op because tensors are live at that moment has not run out of
    memory: those tensors are freed later); with ``exclusion="refusal"`` at the first refusal.

    m-SCT runs a compiled port of this class with `ExecModel` on large parallel-mode graphs
    (`etf_kernel.run_sct`); a change here must be made there too (`tests/test_sct_kernel.py` compares the two).

    Complexity: as `PairQueue`, plus O(log V) per class move and O(d) per held-back pair.
    """

    def __init__(
        self,
        model: ExecModel,
        favorite_parent: list[int],
        exclude_full: bool = False,
        exclusion: str = "exhausted",
        banned: set[int] | None = None,
    ):
        if exclusion not in EXCLUSIONS:
            raise ConfigError(f"placer.exclusion: {exclusion!r} is not one of {EXCLUSIONS}")
        super().__init__(model, banned)
        self.fav = favorite_parent
        self.exclude_full = exclude_full
        self.exclusion = exclusion
        n, D = model.n, model.D
        self.excluded = [False] * D
        self.urgent_at = [0.0] * n
        self.c_fav: list[list[tuple[int, int]]] = [[] for _ in range(D)]  # released, class 0
        self.c_urg: list[list[tuple[int, int]]] = [[] for _ in range(D)]  # released, class 1
        self.c_non: list[list[tuple[float, int, int]]] = [[] for _ in range(D)]  # released, class 2
        self.fav_bytes = [0.0] * n  # bytes of the edge from each op's favourite parent
        for o in range(n):
            f = favorite_parent[o]
            if f >= 0:
                self.fav_bytes[o] = next((b for j, b in model.pred[o] if j == f), 0.0)
        self.n_held_back = 0
        self.held_until: dict[int, float] = {}  # o * D + p -> the time its pair was last held back to

    # ----------------------------------------------------------------- helpers
    def usable(self, o: int, p: int) -> bool:
        # `PairQueue.usable` spelt out (called for every head of every device at every step of the loop)
        m = self.m
        g = m.gid[o]
        if g >= 0:
            if m.group_dev[g] >= 0:  # a pinned group still goes to its device, excluded or not
                return p == m.group_dev[g]
            if self.excluded[p] or (self.banned and g * m.D + p in self.banned):
                return False
        elif self.excluded[p]:
            return False
        return (o * m.D + p) not in self.dropped

    def on_favorite_device(self, o: int, p: int) -> bool:
        f = self.fav[o]
        return f >= 0 and self.m.dev[f] == p

    def make_ready(self, o: int) -> None:
        self.urgent_at[o] = self.m.data_ready_anywhere(o)
        super().make_ready(o)

    # ----------------------------------------------------------------- main loop
    def _valid(self, o: int, p: int, g: int) -> bool:
        return self.m.dev[o] < 0 and g == self.gen[o] and self.usable(o, p)

    def _head(self, p: int) -> tuple[float, int, int, list[Any]] | None:
        """Device p's best pair as (time, class, op, heap holding it), or None.

        Pairs wait in ``dheap[p]`` by data-ready time; once ready by p's available time they are *released*
        into one of three heaps by class: favorite child of an op on p (0), urgent (1: its inputs could be
        on any device by now), others (2, keyed by the time they become urgent).  Released pairs all start
        at ``avail[p]``, so the best class wins, then the lower op index."""
        m = self.m
        av = m.avail[p]
        dev, gen, usable, favp = m.dev, self.gen, self.usable, self.fav
        pend, fav, urg, non = self.dheap[p], self.c_fav[p], self.c_urg[p], self.c_non[p]
        while pend and pend[0][0] <= av:
            _, o, g = heapq.heappop(pend)
            if not (dev[o] < 0 and g == gen[o] and usable(o, p)):  # `_valid`, inline
                continue
            f = favp[o]
            if f >= 0 and dev[f] == p:  # `on_favorite_device`
                heapq.heappush(fav, (o, g))
            elif self.urgent_at[o] <= av:
                heapq.heappush(urg, (o, g))
            else:
                heapq.heappush(non, (self.urgent_at[o], o, g))
        while non and non[0][0] <= av:
            _, o, g = heapq.heappop(non)
            heapq.heappush(urg, (o, g))
        released: tuple[tuple[int, list[Any]], ...] = ((0, fav), (1, urg), (2, non))
        for cls, h in released:  # among released pairs a lower class wins
            while h:
                top = h[0]
                o = top[-2]
                if dev[o] < 0 and top[-1] == gen[o] and usable(o, p):
                    return (av, cls, o, h)
                heapq.heappop(h)
        while pend:
            top = pend[0]
            o = top[1]
            if dev[o] < 0 and top[2] == gen[o] and usable(o, p):
                break
            heapq.heappop(pend)
        if not pend:
            return None
        d, o, _ = pend[0]
        cls = 0 if self.on_favorite_device(o, p) else (1 if d >= self.urgent_at[o] else 2)
        return (d, cls, o, pend)

    def _loop(self) -> None:
        """m-SCT's loop: the best of the D device heads (`_head`) by (time, class, op, device)."""
        m = self.m
        D = m.D
        while True:
            best = None
            for p in range(D):
                h = self._head(p)
                if h is not None and (best is None or (h[0], h[1], h[2], p) < best[:4]):
                    best = (h[0], h[1], h[2], p, h[3])
            if best is None:
                return
            t, _, o, p, heap = best
            est = m.estimate(o, p)
            heapq.heappop(heap)
            if est.start > t:  # its stored data-ready time was a lower bound (sequential queues)
                self.n_reestimated += 1
                heapq.heappush(self.dheap[p], (est.data_ready, o, self.gen[o]))
                continue
            t_fav = self._prefers_parent(o, p, est.start)
            if t_fav is not None:
                self.n_held_back += 1
                heapq.heappush(self.dheap[p], (t_fav, o, self.gen[o]))
                continue
            self._try_commit(o, p, est)

    def _prefers_parent(self, o: int, p: int, start: float) -> float | None:
        """The time o could start on its favourite parent's device if o should wait for that device rather
        than start on p at `start` (class docstring), else None."""
        m = self.m
        f = self.fav[o]
        if f < 0:
            return None
        pf = m.dev[f]
        if pf == p or pf not in m.allowed[o] or not self.usable(o, pf) or (o * m.D + pf) in self.parked_pairs:
            return None
        t_fav = m.estimate(o, pf).start
        saved = m.lat[pf][p] * m.ntens[f] + self.fav_bytes[o] / m.bw[pf][p]
        if t_fav <= start or t_fav - start > saved:
            return None
        key = o * m.D + p
        if self.held_until.get(key, -1.0) >= t_fav:  # held back to this time already: no progress, place it
            return None
        self.held_until[key] = t_fav
        return t_fav

    def _no_fit(self, o: int, p: int, est: Estimate, need: float) -> None:
        m = self.m
        if self.exclude_full and m.gid[o] < 0 and (self.exclusion == "refusal" or m.exhausted(o, p, est)):
            log.debug(
                "device %s cannot hold op %s (%.6g bytes needed): excluded",
                m.cluster.devices[p].name,
                m.idx.names[o],
                need,
            )
            self.excluded[p] = True
            for r in sorted(self.ready):
                if m.dev[r] < 0:
                    self.check_alive(r)
                    if self.on_favorite_device(r, p):
                        self.refresh(r)
            return
        super()._no_fit(o, p, est, need)
