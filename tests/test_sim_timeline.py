"""`SimResult.iter_timeline`: the records of timeline.json, in the order the list version always had."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.sim_result import SimResult


def _old_timeline(r: SimResult) -> list[dict]:
    """timeline() before it streamed: every record, then a stable sort by (start, device)."""
    out = [
        {"op": n, "device": r.devices[r.device_of[i]], "start_s": r.start[i], "end_s": r.end[i]}
        for i, n in enumerate(r.names)
    ]
    out.sort(key=lambda rec: (rec["start_s"], rec["device"]))
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0.0, -0.0, 1.0, 2.5, 1e-9, 3.0])), max_size=30),
    st.permutations(["gpu1", "cpu0", "gpu0", "b"]),
)
def test_iter_timeline_keeps_the_order_of_the_sorted_list(ops, devices):
    n = len(ops)
    r = SimResult(
        names=[f"op{i}" for i in range(n)],
        devices=list(devices),
        start=[s for _, s in ops],
        end=[s + 1.0 for _, s in ops],
        device_of=[d for d, _ in ops],
        order={},
        makespan=4.0,
        busy_s={},
        peak_memory={},
        memory_limit={},
        memory_timeline={},
        traffic_bytes=0.0,
        cut_edge_bytes=0.0,
        transfers=[],
    )
    got = list(r.iter_timeline())
    assert got == _old_timeline(r)
    assert [g["op"] for g in got] == [o["op"] for o in _old_timeline(r)]  # ties in the same order
    assert r.timeline() == got
