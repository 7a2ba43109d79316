"""The debug trace's hops to a waiting worker (`backends.torch.distributed.trace_hops`)."""

from __future__ import annotations

import pytest

from backends.torch.distributed import trace_hops


def step(sent: dict[int, float], waited: dict[int, tuple[float, float]]) -> dict:
    return {"sent_at": sent, "waited": waited}


def test_hops_are_split_by_shared_core_and_count_only_waits_begun_before_the_send():
    # worker 0 (core 0) sends values 1, 2 and 3; worker 1 shares core 0, worker 2 has core 1
    traces = [
        [step({1: 1.0, 2: 2.0, 3: 3.0}, {})],
        [step({}, {1: (0.5, 1.7), 3: (3.5, 3.6)})],  # value 3: the wait began after the send, not a hop to a waiter
        [step({}, {2: (1.0, 2.00006)})],
    ]
    out = trace_hops(traces, [[0], [0], [1]])
    assert out["same_core"]["count"] == 1
    assert out["same_core"]["median_s"] == pytest.approx(0.7)
    assert out["other_core"]["count"] == 1
    assert out["other_core"]["median_s"] == pytest.approx(60e-6)


def test_medians_over_steps_and_no_traces_give_nothing():
    traces = [
        [step({5: 0.0}, {}), step({5: 10.0}, {}), step({5: 20.0}, {})],
        [step({}, {5: (0.0, 0.1)}), step({}, {5: (9.0, 10.3)}), step({}, {5: (19.0, 20.2)})],
    ]
    out = trace_hops(traces, [[0], [1]])
    assert set(out) == {"other_core"}
    assert out["other_core"]["count"] == 3
    assert out["other_core"]["median_s"] == pytest.approx(0.2)
    assert out["other_core"]["p25_s"] == pytest.approx(0.1)
    assert out["other_core"]["p75_s"] == pytest.approx(0.3)
    assert trace_hops([], []) == {}
    assert trace_hops([[], []], [[0], [1]]) == {}
