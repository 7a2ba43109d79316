"""The share of the workers' cores other tasks used during a measurement (backends/interference.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from backends.interference import CoreSample, others_share, process_cpu_s, sample

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


US = 1e-6


def test_a_step_is_slow_when_a_workers_pace_before_or_after_it_is():
    from backends.interference import slow_steps

    fast, slow = 27 * US, 40 * US
    # two workers, four steps: cpu1's core slows after step 1 (its pace before step 2 and after it)
    paces = [[fast] * 5, [fast, fast, slow, fast, fast]]
    assert slow_steps(paces, floor=fast) == [False, True, True, False]
    # within the tolerance (1.3 by default) is fast; a pace below the floor lowers the limit
    assert slow_steps([[fast, 1.25 * fast, fast]], floor=fast) == [False, False]
    assert slow_steps([[fast, 1.35 * fast, fast]], floor=fast) == [True, True]
    assert slow_steps([[fast, fast, fast]], floor=2 * fast) == [False, False]
    assert slow_steps([[2 * fast, 2 * fast]], floor=2 * fast) == [False]  # every pace slow: nothing to tell
    # no paces (a GPU run) or ragged ones: no verdict
    assert slow_steps([[], []]) is None and slow_steps([]) is None
    assert slow_steps([[fast, fast], [fast, fast, fast]], floor=fast) is None


def test_the_floor_is_the_fastest_pace_seen_and_a_real_pace_is_positive():
    from backends.interference import core_pace, pace_floor

    p = core_pace(loops=2, n=200)
    assert 0 < p < 1
    assert pace_floor([p]) <= p and pace_floor() <= p  # kept for the process


def test_half_the_steps_must_be_fast():
    from backends.interference import fast_share_needed

    assert [fast_share_needed(n) for n in (1, 2, 3, 4, 5, 12)] == [1, 1, 2, 2, 3, 6]


def test_the_runtime_leaves_slow_steps_out_only_while_enough_are_fast(monkeypatch):
    import backends.interference as interference
    from backends.torch.distributed import pace_filter, worst_disturbance

    monkeypatch.setattr(interference, "_pace_floor", [float("inf")])  # this test's floor, not the process's
    fast, slow = 1 * US, 2 * US
    times = [5.0, 9.0, 5.1, 5.2, 4.9, 9.5]
    paces = [[fast, slow, fast, fast, fast, slow, slow]]  # steps 0, 1 touched by the pace before 1; 4, 5 by 5
    assert pace_filter([{"paces": paces[0]}], times) is None  # 2 fast steps left of 6, 3 needed
    # with a second worker's paces fast, it is the same: any worker's slow pace marks the step
    assert pace_filter([{"paces": paces[0]}, {"paces": [fast] * 7}], times) is None
    one_slow = [fast, fast, slow, fast, fast, fast, fast]  # steps 1 and 2
    assert pace_filter([{"paces": one_slow}], times) == [1, 2]  # the indices left out
    assert pace_filter([{}], times) is None  # no paces (GPU)
    # a run whose fast steps are too few weighs as disturbed as its share of slow steps
    assert worst_disturbance(0.01, [{"paces": paces[0]}]) == pytest.approx(4 / 6)
    assert worst_disturbance(0.01, [{"paces": one_slow}]) == 0.01
    assert worst_disturbance(None, [{}]) is None and worst_disturbance(None, [{"paces": one_slow}]) == 0.0


def test_the_profile_drops_a_slow_steps_op_samples_and_step_time(monkeypatch):
    pytest.importorskip("torch")
    import backends.interference as interference
    from backends.torch.profiler import _without_slow_steps
    from backends.torch.worker import untimed_flags

    monkeypatch.setattr(interference, "_pace_floor", [float("inf")])
    fast, slow = 1 * US, 2 * US
    plain = untimed_flags(4, 4)  # timed, untimed, timed, untimed, ...
    assert plain == [False, True] * 4
    rep = {
        "op_times": {"a": [1.0, 1.1, 1.2, 1.3], "b": [2.0, 2.1, 2.2, 2.3]},
        "times": [3.0, 3.1, 3.2, 3.3],
        "untimed_times": [2.9, 3.05, 3.15, 3.25],
        "paces": [fast, fast, fast, fast, fast, fast, slow, fast, fast],  # steps 5, 6: untimed #2, timed #3
    }
    out = _without_slow_steps(rep, plain)
    assert out is not None and out["slow_steps"] == 1  # timed steps left out
    assert out["op_times"] == {"a": [1.0, 1.1, 1.2], "b": [2.0, 2.1, 2.2]} and out["times"] == [3.0, 3.1, 3.2]
    assert out["untimed_times"] == [2.9, 3.05, 3.25]
    # half the timed steps slow: the report cannot stand for a quiet core
    rep["paces"] = [fast, slow, slow, fast, slow, fast, fast, fast, fast]
    assert _without_slow_steps(rep, plain) is None
    assert _without_slow_steps({**rep, "paces": []}, plain) is not None  # no paces: kept as it is


def test_spells_that_prevail_stop_the_repeats_and_others_share_still_repeats(monkeypatch):
    import backends.interference as interference

    monkeypatch.setattr(interference, "RETRY_PAUSE_S", 0.0)
    monkeypatch.setattr(interference, "_spell_streak", [0])
    calls: list[str] = []

    def spells() -> tuple[float | None, str, interference.Kind]:
        calls.append("spells")
        return 1.0, "slow", "spells"  # every step in a spell, the cores otherwise ours

    def busy() -> tuple[float | None, str, interference.Kind]:
        calls.append("busy")
        return 0.3, "busy", "others"  # another process held the cores

    # the first SPELL_STREAK measurements are each repeated twice, as before
    for _ in range(interference.SPELL_STREAK):
        assert interference.least_disturbed(spells, 0.05, 2, "x")[2] == [1.0, 1.0, 1.0]
    assert interference.spells_prevail() and len(calls) == 3 * interference.SPELL_STREAK
    # then a measurement disturbed by spells alone is kept at once ...
    calls.clear()
    assert interference.least_disturbed(spells, 0.05, 2, "x") == (1.0, "slow", [1.0])
    # ... while one another process disturbed is still repeated
    assert interference.least_disturbed(busy, 0.05, 2, "x")[2] == [0.3, 0.3, 0.3]
    assert calls == ["spells", "busy", "busy", "busy"]
    # enough fast steps, but some slow: the spells still prevail
    interference.least_disturbed(lambda: (0.0, "mixed", "spells"), 0.05, 2, "x")
    assert interference.spells_prevail()
    # a measurement without a slow step ends the streak: repeats resume
    interference.least_disturbed(lambda: (0.0, "fast", "clean"), 0.05, 2, "x")
    assert not interference.spells_prevail()
    assert len(interference.least_disturbed(spells, 0.05, 2, "x")[2]) == 3
    # without a limit nothing is judged and the streak is left alone
    interference.least_disturbed(spells, None, 2, "x")
    assert interference._spell_streak == [1]


def test_what_disturbed_a_measurement():
    from backends.interference import kind_of

    assert kind_of(0.3, [False, True], 0.05) == "others"  # others' share first
    assert kind_of(0.01, [False, True], 0.05) == "spells" and kind_of(None, [True], None) == "spells"
    assert kind_of(0.01, [False, False], 0.05) == "clean" and kind_of(None, None, 0.05) == "clean"


def test_while_spells_prevail_runs_and_profiles_count_every_step(monkeypatch):
    pytest.importorskip("torch")
    import backends.interference as interference
    from backends.torch.distributed import pace_filter
    from backends.torch.profiler import _without_slow_steps

    monkeypatch.setattr(interference, "_pace_floor", [float("inf")])
    fast, slow = 1 * US, 2 * US
    one_slow = [fast, fast, slow, fast, fast]  # steps 1 and 2 of 4
    rep = {"op_times": {"a": [1.0] * 4}, "times": [3.0] * 4, "paces": one_slow}
    monkeypatch.setattr(interference, "_spell_streak", [0])
    assert pace_filter([{"paces": one_slow}], [1.0] * 4) == [1, 2]
    assert _without_slow_steps(rep, [False] * 4)["slow_steps"] == 2
    monkeypatch.setattr(interference, "_spell_streak", [interference.SPELL_STREAK])
    assert pace_filter([{"paces": one_slow}], [1.0] * 4) is None
    assert _without_slow_steps(rep, [False] * 4) is rep


@linux
def test_a_process_cpu_time_grows_with_its_work_and_a_gone_process_reads_none():
    before = process_cpu_s(os.getpid())
    t = time.process_time()
    while time.process_time() - t < 0.1:  # 0.1 s of this process's own work
        pass
    after = process_cpu_s(os.getpid())
    assert before is not None and after is not None and after - before >= 0.05
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_cpu_s(child.pid) is None
