"""The share of the workers' cores other tasks used during a measurement (backends/interference.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from backends.interference import CoreSample, others_share, sample

linux = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux /proc")


def test_each_core_counts_once_and_every_workers_own_time_is_subtracted():
    # two workers sharing core 0 (oversubscribed) and one on core 1, one second apart
    a0 = CoreSample({0: 10.0}, 1.0, 100.0)
    b0 = CoreSample({0: 10.9}, 1.5, 101.0)  # core 0 busy 0.9 s; this worker 0.5 s
    a1 = CoreSample({0: 10.0}, 2.0, 100.0)
    b1 = CoreSample({0: 10.9}, 2.3, 101.0)  # its sibling on core 0: 0.3 s
    a2 = CoreSample({1: 5.0}, 0.0, 100.0)
    b2 = CoreSample({1: 5.6}, 0.6, 101.0)  # core 1 busy 0.6 s, all of it this worker
    # others: core 0 0.9 + core 1 0.6 - own (0.5 + 0.3 + 0.6) = 0.1 s, less a tick (10 ms) per core and per
    # process for the whole-tick readings: 0.05 s of 2 core-seconds
    tick = 1.0 / os.sysconf("SC_CLK_TCK")
    assert others_share([(a0, b0), (a1, b1), (a2, b2)]) == pytest.approx((0.1 - 5 * tick) / 2)
    # the tick counts may cross: never below 0, never above 1
    assert others_share([(a2, CoreSample({1: 5.5}, 0.6, 101.0))]) == 0.0
    assert others_share([(a2, CoreSample({1: 9.0}, 0.0, 101.0))]) == 1.0
    assert others_share([(a2, CoreSample({1: 5.0 + tick}, 0.0, 101.0))]) == 0.0  # one tick: forgiven
    assert others_share([(a0, None)]) is None and others_share([]) is None
    assert others_share([(a0, CoreSample({0: 10.0}, 1.0, 100.0))]) is None  # no time passed


@linux
def test_a_busy_process_on_the_core_is_interference_and_our_own_work_is_not():
    core = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    child = subprocess.Popen(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"]
    )
    try:
        time.sleep(0.3)  # the child is spinning on `core`
        a = sample([core])
        time.sleep(0.8)  # this process idles: the core's time is the child's
        b = sample([core])
    finally:
        child.kill()
        child.wait()
    assert a is not None and b is not None
    assert others_share([(a, b)]) > 0.5
    # now this process spins on the core alone: its own time is not interference
    os.sched_setaffinity(0, {core})
    try:
        a = sample([core])
        t = time.monotonic()
        while time.monotonic() - t < 0.8:
            pass
        b = sample([core])
    finally:
        os.sched_setaffinity(0, before)
    assert others_share([(a, b)]) < 0.5


@linux
def test_the_measurements_own_processes_can_be_named():
    core = min(os.sched_getaffinity(0))
    child = subprocess.Popen(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"]
    )
    try:
        time.sleep(0.3)
        a = sample([core], [child.pid])
        time.sleep(0.8)
        b = sample([core], [child.pid])
    finally:
        child.kill()
        child.wait()
    assert others_share([(a, b)]) < 0.5  # the child is the measurement's own (a TensorFlow worker)
    assert sample([core], [child.pid]) is None  # a process that has gone: no sample
    assert sample([]) is None
