"""`backends.tensorflow.step_anatomy.anatomy` on hand-made traced steps (no worker is started)."""

import pytest

tf = pytest.importorskip("tensorflow")
from tensorflow.core.framework import step_stats_pb2  # noqa: E402

from backends.tensorflow.step_anatomy import anatomy  # noqa: E402

pytestmark = pytest.mark.tf

W0 = "/job:worker/replica:0/task:0/device:CPU:0"
W1 = "/job:worker/replica:0/task:1/device:CPU:0"


def _op(ds, name: str, start: int, dur: int) -> None:
    ds.node_stats.add(node_name=name, all_start_micros=start, all_end_rel_micros=dur)


def _recv(ds, op: str, src: str, dst: str, start: int, dur: int, nbytes: int = 64) -> None:
    ds.node_stats.add(
        node_name="RecvTensor",
        all_start_micros=start,
        all_end_rel_micros=dur,
        timeline_label=f"[{nbytes}B] [1Mb/s] edge_5_{op} from {src} to {dst}",
    )


def test_a_two_task_step_gives_idle_time_hops_and_late_requests():
    # task 0 computes a (0-100 us) and c (400-500); task 1 computes b (300-350) from a's tensor, which it asked
    # for at 200 us (after a ended: late) and got at 290; task 0 asks for b's at 50 (early), gets it at 380
    ss = step_stats_pb2.StepStats()
    d0, d1 = ss.dev_stats.add(device=W0), ss.dev_stats.add(device=W1)
    _op(d0, "a", 1000, 100)
    _op(d0, "c", 1400, 100)
    _op(d1, "b", 1300, 50)
    _recv(d1, "a", W0, W1, 1200, 90)
    _recv(d0, "b", W1, W0, 1050, 330)
    _recv(d1, "x", W1, W1, 1000, 10)  # same task: not a transfer
    an = anatomy(ss, {"a": 50e-6, "b": 25e-6, "c": 100e-6}, {0: "cpu0", 1: "cpu1"})
    assert an["span_s"] == pytest.approx(500e-6)
    # busy: [0,100], [300,350], [400,500] -> idle 100-300 and 350-400
    assert an["all_idle_s"] == pytest.approx(250e-6)
    assert an["all_idle_share"] == pytest.approx(0.5)
    assert an["receives"] == 2
    # hops: a ended 1100, arrived 1290 -> 190 us; b ended 1350, arrived 1380 -> 30 us
    assert an["hop_quantiles_s"][0] == pytest.approx(30e-6) and an["hop_quantiles_s"][-1] == pytest.approx(190e-6)
    assert an["requested_late"] == pytest.approx(0.5)
    c0, c1 = an["devices"]["cpu0"], an["devices"]["cpu1"]
    assert (c0["ops"], c1["ops"]) == (2, 1)
    assert c0["busy_s"] == pytest.approx(200e-6) and c0["profile_s"] == pytest.approx(150e-6)
    assert c0["busy_over_profile"] == pytest.approx(200 / 150)
    assert c0["first_request_s"] == pytest.approx(50e-6) and c1["first_request_s"] == pytest.approx(200e-6)


def test_a_step_without_receives_or_records():
    ss = step_stats_pb2.StepStats()
    _op(ss.dev_stats.add(device=W0), "_SOURCE", 10, 0)  # a 0 us record still marks its task busy for 1 us
    an = anatomy(ss, {}, {0: "cpu0"})
    assert an["receives"] == 0 and an["hop_quantiles_s"] is None and an["requested_late"] is None
    assert an["devices"]["cpu0"]["busy_over_profile"] is None and an["all_idle_s"] == 0.0
    assert anatomy(step_stats_pb2.StepStats(), {}, {})["span_s"] == 0.0
