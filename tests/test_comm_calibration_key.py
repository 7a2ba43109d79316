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
    prof = TorchMeasuredProfiler(
        comm_calibration="in_step", comm_repeats=3, comm_shared_core_slowdown=0.35, comm_send_wake=True
    )
    prof.use_workers({"runtime": "torch_distributed", "cores": 1})
    prof.transport_policy = "nice"
    assert prof.fit_comm(object(), object()) == "fit"  # type: ignore[arg-type]
    assert seen == {
        "in_step": True,
        "transport_policy": "nice",
        "sizes": None,
        "repeats": 3,
        "cuda": False,
        "shared_core_slowdown": 0.35,  # the in-step fit is made with the charge the predictions use
        "recv_work": "in_consumer",  # and under the model of receives they use
        "send_wake": True,  # and, when asked, with a send to an idle receiver charged its wake-up
    }

    seen.clear()
    TorchMeasuredProfiler(comm_repeats=3).comm_in_workers(object(), object())  # type: ignore[arg-type]
    assert seen["in_step"] is False and seen["transport_policy"] == "idle"
    assert seen["send_wake"] is False  # the benchmark's costs were not fitted with it


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


def test_tf_workers_fit_takes_the_in_step_latency_and_costs(monkeypatch):
    """TensorFlow's workers: with in_step the benchmark's fit is kept for its samples and bandwidth, and the
    hop latency and per-message costs come from the calibration (per-pair links dropped, which would override
    the fitted hop); comm.json records the benchmark's own latency for its residual."""
    pytest.importorskip("tensorflow")
    from algorithms import uniform_cluster
    from backends.calibration import InStepCalibration
    from backends.tensorflow import TFMeasuredProfiler, dist_profile
    from backends.tensorflow import calibrate as tfcal
    from orchestrator.stages.graph import comm_json

    bench = dist_profile.TFCommFit(
        40e-6, 1.6e9, {("cpu0", "cpu1"): (45e-6, 1.5e9)}, [("cpu0", "cpu1", 1024.0, 1e-4)],
        step_overhead_s=1e-3, send_overhead_s=30e-6, recv_overhead_s=10e-6,
    )  # fmt: skip
    seen = {}

    def fake_cal(cluster, **kw):
        seen.update(kw, links=dict(cluster.links), latency=cluster.latency_s)
        return InStepCalibration(90e-6, 25e-6, 35e-6, rel_rms=0.03, send_byte_s=1e-9, recv_byte_s=2e-9)

    monkeypatch.setattr(dist_profile, "comm_benchmark_distributed", lambda *a, **k: bench)
    monkeypatch.setattr(tfcal, "calibrate_in_step", fake_cal)
    prof = TFMeasuredProfiler(comm_calibration="auto")
    prof.use_workers({"cores": 1})
    assert prof.calibration() == "in_step"  # auto in the workers' setting: in-step (since 27 Nov 2026)
    assert TFMeasuredProfiler(comm_calibration="auto").calibration() == "benchmark"  # not measuring in workers
    prof = TFMeasuredProfiler(comm_calibration="in_step")
    prof.use_workers({"cores": 1})
    fit = prof.comm_in_workers(None, uniform_cluster(2))
    assert seen["links"] == {} and seen["latency"] == 40e-6 and seen["step_overhead_s"] == 1e-3
    assert seen["send_share"] == pytest.approx(0.75) and seen["benchmark_costs"] == (30e-6, 10e-6)
    assert (fit.latency_s, fit.send_overhead_s, fit.recv_overhead_s, fit.links) == (90e-6, 25e-6, 35e-6, {})
    assert fit.bytes_per_s == 1.6e9 and fit.samples == bench.samples
    out = comm_json(fit, "worker", "in_step")
    assert out["pingpong_latency_s"] == 40e-6 and out["calibration_rel_rms"] == 0.03
    assert (out["send_byte_s"], out["recv_byte_s"]) == (1e-9, 2e-9)  # the wide program's, to the simulator
    assert out["residual_rel_median"] == pytest.approx(abs(40e-6 + 1024 / 1.6e9 - 1e-4) / 1e-4)
    prof = TFMeasuredProfiler(comm_calibration="benchmark")
    prof.use_workers({"cores": 1})
    assert prof.comm_in_workers(None, uniform_cluster(2)) is bench


def test_the_shared_core_charge_goes_into_comm_json_and_bad_values_are_refused():
    pytest.importorskip("torch")
    from algorithms.errors import ConfigError
    from backends.torch import TorchMeasuredProfiler
    from backends.torch.comm import DistributedCommFit
    from orchestrator.stages.graph import comm_json

    fit = DistributedCommFit(1e-4, 4e9, {}, [("cpu0", "cpu1", 1024.0, 2e-4)], 2e-5, 4e-5)
    fit.shared_core_slowdown = 0.35
    out = comm_json(fit, "worker", "in_step")
    assert out["shared_core_slowdown"] == 0.35 and out["send_overhead_s"] == 2e-5
    for bad in (-0.1, float("nan")):
        with pytest.raises(ConfigError, match="comm_shared_core_slowdown"):
            TorchMeasuredProfiler(comm_shared_core_slowdown=bad)
