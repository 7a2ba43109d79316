"""A searched pipeline schedule executed for real with PyTorch on 2 virtual CPU devices."""

from __future__ import annotations

import pytest
import torch

from algorithms.pipeline.blocks import make_shape
from algorithms.pipeline.runtime import chrome_trace
from algorithms.pipeline.tessel import TesselScheduler
from backends.torch.pipeline import build_gpt_stages, run_schedule


@pytest.mark.slow
@pytest.mark.torch
def test_searched_schedule_matches_single_device_loss():
    torch.set_num_threads(1)
    sched = TesselScheduler(time_limit_s=30).schedule(make_shape("v", 2), None, 2, 5)
    sched.validate()
    out = run_schedule(sched, iterations=2, use_cuda=False, n_layers=2, d_model=16, seq_len=8)
    assert out["loss"] == pytest.approx(out["reference_loss"], rel=1e-5, abs=1e-6)
    assert out["max_grad_diff"] < 1e-5
    assert out["measured_step_s"] > 0 and out["predicted_step_s"] > 0
    assert {r["device"] for r in out["records"]} == {"d0", "d1"}
    assert len(out["records"]) == 2 * 2 * 5  # forward + backward of 5 micro-batches on 2 devices
    trace = chrome_trace(sched, measured=out["records"])
    assert any(e.get("pid") == 1 and e["ph"] == "X" for e in trace["traceEvents"])


@pytest.mark.torch
def test_gpt_stages_split_evenly():
    stages = build_gpt_stages(3, n_layers=4)
    assert len(stages) == 3
    assert sum(len(s) for s in stages) == 6  # embedding + 4 layers + head
