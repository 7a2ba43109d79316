"""The registry: every stage object is built by one helper from a config with `_target_` or from a name the
backend declares in its capabilities; unknown names fail listing what exists."""

from __future__ import annotations

from typing import Any

import pytest
from omegaconf import OmegaConf

from algorithms.cluster import uniform_cluster
from algorithms.errors import ConfigError
from algorithms.workloads.synthetic import linreg_graph
from backends.base import Backend, Capabilities, CommFit, RunResult
from backends.profilers import FileProfiler, MeasuredProfiler
from backends.threads import ThreadsRuntime
from orchestrator.models import GraphFile, LinregGraph
from orchestrator.registry import (
    build_backend,
    build_graph_model,
    build_profiler,
    build_runtime,
    check_framework_model,
    instantiate,
)


class FakeBackend(Backend):
    """A backend that records the arguments of `run` (no framework)."""

    name = "fake"
    capabilities = Capabilities(
        models={"toy": "tests.toy"},
        profilers={"measured": "backends.profilers.MeasuredProfiler"},
        runtimes={"threads": "backends.threads.ThreadsRuntime"},
        follows_plan=True,
    )

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def build(self, model_cfg):
        return dict(model_cfg)

    def capture(self, model):
        return linreg_graph()

    def profile(self, model, graph, *, warmup=5, steps=10, batch_size=None):
        return graph

    def comm_benchmark(self, cluster, sizes=None, repeats=5):
        return CommFit(0.0, 1e9)

    def run(self, model, graph, placement, schedule, cluster, **kwargs):
        self.calls.append(kwargs)
        return RunResult(3.0, [1.0, 2.0, 3.0, 4.0, 5.0], {}, 0.0)


class NoPlanBackend(FakeBackend):
    capabilities = Capabilities(runtimes={"threads": "backends.threads.ThreadsRuntime"}, follows_plan=False)


def cfg(**kw: Any):
    return OmegaConf.create(kw)


def test_runtime_named_by_the_backend_gets_the_config_as_constructor_arguments():
    rt = build_runtime(cfg(name="threads", warmup=2, steps=7, check_correctness=False, order="planned"), FakeBackend())
    assert isinstance(rt, ThreadsRuntime) and rt.name == "threads"
    assert (rt.warmup, rt.steps, rt.check_correctness, rt.order) == (2, 7, False, "planned")


def test_runtime_none_and_runtime_with_target():
    assert build_runtime(cfg(name="none"), FakeBackend()) is None
    rt = build_runtime(cfg(_target_="backends.threads.ThreadsRuntime", steps=3), None)
    assert isinstance(rt, ThreadsRuntime) and rt.steps == 3


def test_unknown_runtime_name_lists_what_the_backend_provides_and_the_configs():
    with pytest.raises(ConfigError) as e:
        build_runtime(cfg(name="warp"), FakeBackend())
    msg = str(e.value)
    assert "'warp'" in msg and "['threads']" in msg and "'real'" in msg and "'none'" in msg


def test_backend_provided_runtime_without_backend_says_what_to_choose():
    with pytest.raises(ConfigError, match="backend=torch or backend=tensorflow"):
        build_runtime(cfg(name="real"), None)


def test_a_target_of_the_wrong_kind_is_refused():
    with pytest.raises(ConfigError, match="is not a backends.base.Runtime"):
        build_runtime(cfg(_target_="backends.profilers.FileProfiler"), None)


def test_planned_order_follows_the_declared_capability_not_a_signature():
    rt = ThreadsRuntime(warmup=0, steps=1, order="planned")
    g, cl = linreg_graph(), uniform_cluster(2)
    plan = ({}, [])
    fake = FakeBackend()
    rt.run(fake, {}, g, {}, {}, cl, plan=plan)
    assert fake.calls == [{"warmup": 0, "steps": 1, "check_correctness": None, "plan": plan}]
    with pytest.raises(ConfigError, match="runtime.order=planned: backend 'fake' cannot follow a plan"):
        rt.run(NoPlanBackend(), {}, g, {}, {}, cl, plan=plan)
    threads = FakeBackend()
    ThreadsRuntime(warmup=1, steps=2).run(threads, {}, g, {}, {}, cl, plan=plan)
    assert threads.calls[0]["plan"] is None  # order=threads: the plan is not followed


def test_threads_runtime_reports_the_interquartile_range_of_the_measured_steps():
    rr = ThreadsRuntime(warmup=0, steps=5).run(FakeBackend(), {}, linreg_graph(), {}, {}, uniform_cluster(2))
    assert rr.step_iqr_s == pytest.approx(4.0 - 2.0)


def test_bad_runtime_order_is_a_config_error():
    with pytest.raises(ConfigError, match="runtime.order"):
        build_runtime(cfg(name="threads", order="sideways"), FakeBackend())


def test_profilers():
    assert build_profiler(cfg(_target_="backends.profilers.FileProfiler"), None).measures is False
    assert isinstance(build_profiler(cfg(_target_="backends.profilers.FileProfiler"), None), FileProfiler)
    p = build_profiler(cfg(name="measured", warmup=1, steps=2, batch_size=None, comm_benchmark=False), FakeBackend())
    assert isinstance(p, MeasuredProfiler) and (p.warmup, p.steps, p.comm_benchmark) == (1, 2, False)
    with pytest.raises(ConfigError, match="framework backend"):
        build_profiler(cfg(name="measured"), None)


def test_models(tmp_path):
    m = build_graph_model(cfg(_target_="orchestrator.models.LinregGraph", name="lr", batch=4, features=8))
    assert isinstance(m, LinregGraph) and m.name == "lr" and len(m.graph()) == len(linreg_graph(batch=4, features=8))
    path = tmp_path / "g.graph.json"
    linreg_graph().save(path)
    f = build_graph_model(cfg(_target_="orchestrator.models.GraphFile", path=str(path)))
    assert isinstance(f, GraphFile) and len(f.fingerprint()["sha256"]) == 64
    with pytest.raises(ConfigError, match="does not exist"):
        build_graph_model(cfg(_target_="orchestrator.models.GraphFile", path=str(tmp_path / "nope.json")))
    check_framework_model({"family": "toy"}, FakeBackend(), "toy")
    with pytest.raises(ConfigError, match=r"families: \['toy'\]"):
        check_framework_model({"family": "resnet"}, FakeBackend(), "resnet")
    with pytest.raises(ConfigError, match="framework model: choose backend"):
        check_framework_model({"family": "toy"}, None, "toy")


def test_backend_none_and_instantiate_errors_name_the_target():
    assert build_backend(cfg(name="none")) is None
    with pytest.raises(ConfigError, match="no_such.Backend"):
        build_backend(cfg(_target_="no_such.Backend"))
    with pytest.raises(ConfigError, match="has no _target_"):
        instantiate(cfg(rules=[]), "placer")


def test_file_profiler_warns_when_no_op_has_a_compute_time(caplog):
    """A captured model placed without a profile predicts a step of about 0 s: the file profiler says why."""
    from algorithms.cluster import uniform_cluster
    from algorithms.graph import OpGraph

    g = OpGraph("unprofiled")
    g.add_op("a", output_bytes=8)
    g.add_op("b")
    g.add_edge("a", "b", bytes=8)
    with caplog.at_level("WARNING", logger="backends.profilers"):
        out, _ = FileProfiler().profile(None, None, g, uniform_cluster(1), model_cfg={})
    assert out is g
    assert "'unprofiled'" in caplog.text and "no op" in caplog.text
    caplog.clear()
    g.op("b")["compute_s"] = 1e-3
    with caplog.at_level("WARNING", logger="backends.profilers"):
        FileProfiler().profile(None, None, g, uniform_cluster(1), model_cfg={})
    assert "no op" not in caplog.text
