"""How much of a worker's cores other tasks took while it measured steps.

A pinned worker's step is only a measurement of its placement while its cores are its own. On a shared host
another process that runs on a worker's core delays it in two ways: it preempts the compute thread, and, while
the compute thread waits for a message, it takes the core that the worker's idle-class transport thread needs to
read that message (`backends.torch.worker.lower_transport_threads`). The second does not show as the compute
thread's run delay: it waits voluntarily. So the measure here is the core's own account: the time the kernel
charged to any task on the worker's cores (user, nice, system and steal ticks of /proc/stat's per-CPU lines; irq
and softirq ticks are left out, since loopback TCP's receive processing runs there on the worker's behalf), less
the time charged to the worker's process (utime and stime of /proc/self/stat, every thread), over the wall time
times the cores. 0 on a quiet host; a share of 0.05 means other tasks held a twentieth of the worker's cores.

Both counts come in the kernel's ticks (USER_HZ, 10 ms on Linux): over a second of measured steps the share is
good to a few percent, which is what it is for (telling a clean run from a disturbed one), not a per-step
correction. Linux only; elsewhere `sample` returns None. O(cores) per sample.

A virtual machine's core can also slow down with nothing in the guest to show it: on the lab's VM each vCPU
switches between two speeds about 1.7x apart, for spells of a fraction of a second to seconds, each core on its
own, with no steal time and no other task (26 Nov 2026; a hypervisor neighbour on the same physical core, by
all signs). `core_pace` is the sentinel for that: a fixed pure-Python loop each CPU worker times right before
each measured step and after the last, and `slow_steps` marks the steps a slow spell touched, against the
fastest pace this process has seen (`pace_floor`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from algorithms.errors import ConfigError

log = logging.getLogger(__name__)
T = TypeVar("T")

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


@dataclass(frozen=True)
class CoreSample:
    """One reading: seconds the kernel charged to any task on each of the cores, to the measurement's own
    processes (all their threads), and the monotonic clock."""

    busy_s: dict[int, float]
    own_s: float
    at_s: float


def _cpu_s(pid: int | str) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S  # utime, stime (fields 14 and 15 of proc(5))


def process_cpu_s(pid: int) -> float | None:
    """Seconds of processor time (user + system, all threads) the kernel has charged to process `pid`, in whole
    clock ticks; None without /proc or when the process has gone. O(1)."""
    try:
        return _cpu_s(pid)
    except (OSError, ValueError, IndexError):
        return None


def sample(cores: Sequence[int], pids: Sequence[int] = ()) -> CoreSample | None:
    """Read the cores' busy time and the CPU time of this process and of `pids` (the measurement's own
    processes: a TensorFlow client counts its workers) now; None without /proc, with no cores, or when a process
    has gone."""
    if not cores:
        return None
    want = {f"cpu{c}": c for c in cores}
    busy: dict[int, float] = {}
    try:
        with open("/proc/stat") as f:
            for line in f:
                name, _, rest = line.partition(" ")
                if name in want:
                    v = [int(x) for x in rest.split()]
                    # user nice system steal
                    busy[want[name]] = (v[0] + v[1] + v[2] + (v[7] if len(v) > 7 else 0)) * _TICK_S
        own = _cpu_s("self") + sum(_cpu_s(p) for p in pids)
    except (OSError, ValueError, IndexError):
        return None
    if len(busy) != len(want):
        return None
    return CoreSample(busy, own, time.monotonic())


def others_share(spans: Sequence[tuple[CoreSample | None, CoreSample | None]]) -> float | None:
    """The share of the workers' cores that other tasks used over the measured steps: `spans` holds each
    worker's (before, after) samples, taken around the same steps (the workers run them in lock step). Each core
    counts once, whichever worker read it, and every worker's own time is subtracted, so workers that share a
    core (a cluster with more devices than host cores) or a transport thread that runs on another worker's core
    are not counted as interference. The counts are whole ticks, so one tick per core and per process is
    forgiven (over a short measurement, 20 ms on two cores, that hides up to 40 ms of other tasks: the share is
    for runs of some hundreds of milliseconds and more). Returns 0 to 1, clamped; None when a sample is missing
    or no time passed. O(workers x cores)."""
    if not spans or any(a is None or b is None for a, b in spans):
        return None
    busy: dict[int, float] = {}
    own = 0.0
    windows = []
    for a, b in spans:
        assert a is not None and b is not None
        for c, v in b.busy_s.items():
            busy.setdefault(c, v - a.busy_s.get(c, v))
        own += b.own_s - a.own_s
        windows.append(b.at_s - a.at_s)
    window = max(windows)
    if window <= 0 or not busy:
        return None
    # each reading is a whole number of ticks: allow one tick per core and per process before blaming others
    slack = _TICK_S * (len(busy) + len(spans))
    return min(1.0, max(0.0, (sum(busy.values()) - own - slack) / (window * len(busy))))


PACE_TOLERANCE = 1.3
"""A step is slow when a worker's pace before or after it exceeds the floor by more than this factor. The lab's
VM's two speeds gave paces of 26-29 and 35-43 microseconds on 26 Nov 2026 and of 33-39 and 50-65 on 27 Nov
(fastest 30, a slower host): 1.3 separates both days' speeds, where 1.2 called a third of the second day's fast
paces slow."""

_pace_floor = [float("inf")]


def core_pace(loops: int = 3, n: int = 1000) -> float:
    """Seconds a fixed pure-Python loop (`n` additions; 26-29 microseconds on the lab's VM at full speed) takes on
    the calling thread's core now, the fastest of `loops` tries. Interpreter work, like the dispatch that
    dominates the lab's small models' ops: a slow spell slows it as it slows them (transformer_tiny's
    single-device step: 4.4-5.2 ms at paces of 27-29 microseconds, 8.5-10 ms at 37-43). O(loops * n)."""
    best = float("inf")
    for _ in range(loops):
        t = time.perf_counter()
        s = 0
        for i in range(n):
            s += i
        best = min(best, time.perf_counter() - t)
    return best


def pace_floor(paces: Sequence[float] = ()) -> float:
    """The fastest pace this process has seen, `paces` included (inf before any). A process whose every pace so
    far came in a slow spell has a floor that is too high, and marks nothing slow until it sees a faster one: a
    fidelity sweep profiles first, and its many steps give the floor. O(len(paces))."""
    if paces:
        _pace_floor[0] = min(_pace_floor[0], min(paces))
    return _pace_floor[0]


def slow_steps(
    paces: Sequence[Sequence[float]], tolerance: float = PACE_TOLERANCE, floor: float | None = None
) -> list[bool] | None:
    """Which of a run's measured steps a slow spell touched: `paces` holds, per worker, its `core_pace` before
    each measured step and after the last (one more than the steps); step k is slow when any worker's pace k or
    k + 1 exceeds ``tolerance * floor`` (by default `pace_floor`, updated with these paces first; a given `floor`
    leaves the process's alone). None where a worker has no paces (a GPU run, or an older worker).
    O(workers * steps)."""
    if not paces or any(len(p) < 2 for p in paces) or len({len(p) for p in paces}) != 1:
        return None
    if floor is None:
        floor = pace_floor([x for p in paces for x in p])
    limit = tolerance * min(floor, *(x for p in paces for x in p))
    n = len(paces[0]) - 1
    return [any(p[k] > limit or p[k + 1] > limit for p in paces) for k in range(n)]


def fast_share_needed(n: int) -> int:
    """How many of `n` measured steps must be free of slow spells for their median to stand for the run: half
    of them, rounded up (a run of 3 steps may lose one). O(1)."""
    return max(1, (n + 1) // 2)


def steps_to_drop(flags: Sequence[bool] | None, n: int) -> list[int] | None:
    """The indices of a run's `n` measured steps a slow spell touched (`flags`, from `slow_steps`), to be left
    out of its median, when at least `fast_share_needed` are fast; None where there are no flags for these
    steps (a GPU run), too few steps were fast (then every step counts and the run is a disturbed one,
    `spell_disturbance`), or while slow spells prevail (`spells_prevail`: every step counts, in profiles and
    runs alike). The one rule of both backends' runtimes and profiles. O(steps)."""
    if flags is None or len(flags) != n or spells_prevail():
        return None
    if n - sum(flags) < fast_share_needed(n):
        return None
    return [k for k, slow in enumerate(flags) if slow]


def spell_disturbance(share: float | None, flags: Sequence[bool] | None) -> float | None:
    """What `least_disturbed` weighs a measurement by: other processes' share of the cores (`share`), or, when
    slow spells touched more steps than `steps_to_drop` can leave out, the share of slow steps, whichever is
    larger (None when neither was measured). O(steps)."""
    slow = None
    if flags:
        n_slow = sum(flags)
        slow = n_slow / len(flags) if len(flags) - n_slow < fast_share_needed(len(flags)) else 0.0
    if share is None or slow is None:
        return share if slow is None else slow
    return max(share, slow)


def check_policy(max_interference: float | None, retries: int) -> tuple[float | None, int]:
    """A runtime's `max_interference` (0 to 1, or None: never repeat) and `retries` (>= 0), checked."""
    if max_interference is not None and not 0 <= float(max_interference) <= 1:
        raise ConfigError(f"runtime.max_interference must be in [0, 1] or null, got {max_interference}")
    if int(retries) < 0:
        raise ConfigError(f"runtime.retries must be >= 0, got {retries}")
    return (None if max_interference is None else float(max_interference)), int(retries)


RETRY_PAUSE_S = 2.0
"""Seconds `least_disturbed` waits before measuring again: time for a core's slow spell (most last a fraction of
a second to seconds) or another process's burst to pass."""

SPELL_STREAK = 3
"""After this many measurements in a row stayed disturbed by slow spells alone through all their retries, the
spells prevail (`spells_prevail`). On 27 Nov 2026 the lab's VM ran slow most of the time: every run and profile
of a fidelity sweep was measured three times for nothing, and runs that found half their steps fast were compared
with profiles that found too few and counted every step."""

_spell_streak = [0]

Kind = Literal["clean", "spells", "others"]
"""What disturbed a measurement, as its `measure` reports it to `least_disturbed`: ``"others"`` when other
processes took more than the limit of its cores, else ``"spells"`` when a slow spell touched any of its steps,
else ``"clean"``."""


def spells_prevail() -> bool:
    """Whether the last `SPELL_STREAK` judged measurements of this process stayed disturbed by slow spells alone
    after every retry, with no measurement free of spells since. While they prevail, `least_disturbed` does not
    repeat a measurement for slow spells, and the runtimes and the profiles count every step, slow or not
    (`steps_to_drop`, `backends.torch.profiler`, `backends.tensorflow.dist_profile`): then a profile and a run
    describe the same mix of the cores' speeds, instead of a run that found half its steps fast describing the
    fast state and a profile that did not describing the mix. O(1)."""
    return _spell_streak[0] >= SPELL_STREAK


def kind_of(others: float | None, flags: Sequence[bool] | None, limit: float | None) -> Kind:
    """What disturbed a measurement (`Kind`): other processes' share of its cores `others` above `limit`, else a
    slow spell on any step (`flags`, from `slow_steps`), else nothing. O(steps)."""
    if others is not None and limit is not None and others > limit:
        return "others"
    return "spells" if flags and any(flags) else "clean"


def least_disturbed(
    measure: Callable[[], tuple[float | None, T, Kind]], max_interference: float | None, retries: int, what: str
) -> tuple[float | None, T, list[float | None]]:
    """Call `measure` until a share is at most `max_interference`, a share cannot be read, or `retries` repeats
    are spent, pausing `RETRY_PAUSE_S` before each repeat; returns the least disturbed attempt's share and
    result, and every attempt's share. `measure` returns how disturbed its measurement was (the larger of other
    processes' share of the cores and, where too few steps were fast, the share of steps in a slow spell), its
    result, and what disturbed it (`Kind`). While slow spells prevail (`spells_prevail`) a measurement disturbed
    by spells alone is not repeated; others' share still is. The last attempt updates the streak: disturbed by
    spells alone, one more; free of spells, back to 0. Each repeat and a result still disturbed at the end are
    logged, naming `what` was measured. O(retries) measurements."""
    attempts: list[tuple[float | None, T]] = []
    kind: Kind = "clean"
    for attempt in range(1 + retries):
        if attempt:
            time.sleep(RETRY_PAUSE_S)
        share, result, kind = measure()
        attempts.append((share, result))
        if share is None or max_interference is None or share <= max_interference:
            break
        prevail = kind == "spells" and spells_prevail()
        last = attempt == retries or prevail
        log.warning(
            "the measured steps of %s were %.0f %% disturbed (other processes' share of the cores, or the share of "
            "steps in a core's slow spell when too many were; more than %.0f %%)%s",
            what,
            100 * share,
            100 * max_interference,
            ": not measured again, since the cores' slow spells prevail (every step counts)"
            if prevail
            else f": measuring again ({attempt + 1} of {retries})"
            if not last
            else ", after every retry",
        )
        if last:
            break
    if max_interference is not None and share is not None:
        if kind == "clean":
            _spell_streak[0] = 0
        elif kind == "spells" and share > max_interference:
            _spell_streak[0] += 1
            if _spell_streak[0] == SPELL_STREAK:
                log.warning(
                    "slow spells of the workers' cores disturbed the last %d measurements through all their "
                    "retries: such measurements are no longer repeated, and every step counts, until a "
                    "measurement finds no slow step",
                    SPELL_STREAK,
                )
    share, result = min(attempts, key=lambda a: -1.0 if a[0] is None else a[0])
    return share, result, [a[0] for a in attempts]


__all__ = [
    "CoreSample",
    "Kind",
    "check_policy",
    "core_pace",
    "fast_share_needed",
    "kind_of",
    "least_disturbed",
    "others_share",
    "pace_floor",
    "sample",
    "slow_steps",
    "spell_disturbance",
    "spells_prevail",
    "steps_to_drop",
]
