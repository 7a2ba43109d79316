"""`profiler.comm_calibration` (issue 16): which fit of the workers' message costs the job asks the backend for."""

import pytest

from algorithms.errors import ConfigError
from backends.profilers import MeasuredProfiler


def test_an_unknown_calibration_is_refused_by_name():
    with pytest.raises(ConfigError, match="profiler.comm_calibration 'pingpong'"):
        MeasuredProfiler(comm_calibration="pingpong")


def test_in_step_needs_the_workers_setting():
    prof = MeasuredProfiler(comm_calibration="in_step")
    with pytest.raises(ConfigError, match="comm_calibration=in_step.*measures in this process"):
        prof.fit_comm(object(), object())  # type: ignore[arg-type]


def test_torch_workers_fit_asks_for_the_in_step_calibration_under_the_runtimes_transport_policy(monkeypatch):
    pytest.importorskip("torch")
    import backends.torch.comm as comm
    from backends.torch import TorchMeasuredProfiler

    seen = {}

    def fake(cluster, sizes, repeats, **kw):
        seen.update(kw, sizes=sizes, repeats=repeats)
        return "fit"

    monkeypatch.setattr(comm, "comm_benchmark_distributed", fake)
    prof = TorchMeasuredProfiler(comm_calibration="in_step", comm_repeats=3)
    prof.use_workers({"runtime": "torch_distributed", "cores": 1})
    prof.transport_policy = "nice"
    assert prof.fit_comm(object(), object()) == "fit"  # type: ignore[arg-type]
    assert seen == {"in_step": True, "transport_policy": "nice", "sizes": None, "repeats": 3}

    seen.clear()
    TorchMeasuredProfiler(comm_repeats=3).comm_in_workers(object(), object())  # type: ignore[arg-type]
    assert seen["in_step"] is False and seen["transport_policy"] == "idle"


def test_auto_is_in_step_only_in_the_workers_setting_of_a_backend_that_has_one():
    pytest.importorskip("torch")
    from backends.torch import TorchMeasuredProfiler

    plain = MeasuredProfiler(comm_calibration="auto")
    plain.use_workers({"cores": 1})
    assert plain.calibration() == "benchmark"  # no in-step calibration in this class
    torch_prof = TorchMeasuredProfiler(comm_calibration="auto")
    assert torch_prof.calibration() == "benchmark"  # measuring in this process
    torch_prof.use_workers({"cores": 1})
    assert torch_prof.calibration() == "in_step"
