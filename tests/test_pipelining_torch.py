"""Schedules executed by torch.distributed.pipelining's runtime in worker processes (backends/torch/pipelining)."""

from __future__ import annotations

import pytest

from algorithms.errors import ConfigError
from algorithms.pipeline.blocks import make_shape, reference_memory
from algorithms.pipeline.export import export_actions
from algorithms.pipeline.tessel import TesselScheduler
from backends.torch.pipelining import (
    GPTConfig,
    PipelineJob,
    run_export,
    run_pipeline_job,
    stage_module_ranges,
)

pytestmark = pytest.mark.torch


def test_stage_layouts():
    # M export: the embedding alone, then the layers evenly, the head with the last stage
    assert stage_module_ranges(4, 3, True) == [(0, 1), (1, 3), (3, 6)]
    # torch's own schedules: the embedding joins the first stage
    assert stage_module_ranges(4, 4, False) == [(0, 2), (2, 3), (3, 4), (4, 6)]
    with pytest.raises(ConfigError, match="n_layers=4.*3 decoder"):
        stage_module_ranges(4, 3, False)


def test_unknown_schedule_is_a_config_error():
    with pytest.raises(ConfigError, match="ScheduleNope"):
        run_pipeline_job(PipelineJob("ScheduleNope", 2, 2, 2, GPTConfig()))


@pytest.mark.slow
def test_tessel_m_schedule_runs_on_torch_in_our_order_with_the_single_process_loss():
    sched = TesselScheduler().schedule(make_shape("m", 2), None, reference_memory("m", 2), 4)
    exp = export_actions(sched)
    gpt = GPTConfig(vocab=64, d_model=32, n_heads=2, n_layers=2, seq_len=16, micro_batch=2)
    run = run_export(exp, gpt, warmup=1, steps=2)
    assert run.n_stages == 3 and run.n_ranks == 2  # embedding stage + one decoder stage per rank
    assert run.rank_orders == exp.ranks  # torch ran exactly our per-rank order
    assert run.loss == pytest.approx(run.reference_loss, rel=1e-5)
    assert run.max_grad_diff < 1e-5
    assert len(run.step_s) == 2 and all(s > 0 for s in run.step_s)
    step, bubble = run.predicted()
    assert 0 < step and 0 <= bubble < 1
