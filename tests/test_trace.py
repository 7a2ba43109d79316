"""orchestrator.trace: trace.json in Chrome's trace-event format (DESIGN.md), checked against the format's
rules and against the simulated step it draws."""

from __future__ import annotations

import json
import math
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.placement import topological_schedule
from algorithms.placers.thesis import HashingPlacer
from algorithms.simulator import simulate
from algorithms.workloads.synthetic import level_dag, thesis_devices
from orchestrator import trace

PHASES = {"M", "X", "C", "i"}


def _case(seed: int = 1, n_devices: int = 4, memory: float | None = None, placer=HashingPlacer):
    g = level_dag(
        levels=8,
        min_nodes_per_level=2,
        max_nodes_per_level=5,
        colocated_fraction=0.2,
        compute_unit_s=1e-4,
        memory_unit_bytes=1e3,
        seed=seed,
    )
    cl = thesis_devices(n_devices, seed=0)
    pl = placer().place(g, cl)
    if memory is not None:  # placed with room, simulated without: an out-of-memory step
        cl = cl.with_memory(memory)
    sim = simulate(g, cl, pl.assignment, topological_schedule(g, pl.assignment, cl.names))
    return g, cl, sim


def check_structure(obj: dict) -> dict:
    """The trace-event format's rules this lab relies on; returns {pid: {tid: track name}}."""
    assert set(obj) >= {"traceEvents"} and isinstance(obj["traceEvents"], list)
    names: dict[int, dict[int, str]] = defaultdict(dict)
    for ev in obj["traceEvents"]:
        assert ev["ph"] in PHASES, ev
        assert isinstance(ev["pid"], int) and isinstance(ev["name"], str)
        if ev["ph"] == "M":
            assert ev["name"] in {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}
            if ev["name"] == "thread_name":
                names[ev["pid"]][ev["tid"]] = ev["args"]["name"]
            continue
        assert isinstance(ev["ts"], float) and ev["ts"] >= 0, ev
        if ev["ph"] == "X":
            assert isinstance(ev["tid"], int) and isinstance(ev["dur"], float) and ev["dur"] >= 0, ev
        if ev["ph"] == "C":
            assert all(isinstance(v, (int, float)) for v in ev["args"].values()), ev
    for ev in obj["traceEvents"]:  # every op or transfer sits on a named track
        if ev["ph"] in ("X", "i"):
            assert ev["tid"] in names[ev["pid"]], ev
    return names


def _events(obj, ph, pid=trace.PREDICTED_PID, cat=None):
    return [e for e in obj["traceEvents"] if e["ph"] == ph and e["pid"] == pid and (cat is None or e["cat"] == cat)]


def test_one_track_per_device_and_link_ops_transfers_and_memory_match_the_simulation(tmp_path):
    g, cl, sim = _case()
    assert sim.transfers, "the case must move tensors between devices"
    path = trace.write_trace(tmp_path / "trace.json", sim, g, cl)
    obj = json.loads(path.read_text())
    names = check_structure(obj)[trace.PREDICTED_PID]
    links = {f"{s} -> {d}" for _, s, d, *_ in sim.transfers}
    assert sorted(names.values()) == sorted(cl.names + sorted(links))
    # devices first in cluster order, then links
    assert [names[t] for t in sorted(names)][: len(cl.names)] == cl.names
    tid_of = {v: k for k, v in names.items()}

    ops = _events(obj, "X", cat="op")
    assert len(ops) == len(g)
    by_name = {e["name"]: e for e in ops}
    for i, name in enumerate(sim.names):
        e = by_name[name]
        dev = sim.devices[sim.device_of[i]]
        assert e["tid"] == tid_of[dev] and e["args"]["device"] == dev
        assert e["ts"] == pytest.approx(sim.start[i] * 1e6) and e["dur"] == pytest.approx(
            (sim.end[i] - sim.start[i]) * 1e6
        )
        assert e["args"]["compute_s"] == g.op(name)["compute_s"]
    # a device runs one op at a time: its complete events never overlap
    per_tid = defaultdict(list)
    for e in ops:
        per_tid[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for spans in per_tid.values():
        spans.sort()
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(spans, spans[1:]))

    trs = _events(obj, "X", cat="transfer")
    assert len(trs) == len(sim.transfers)
    for e, (op, src, dst, s, end, nbytes) in zip(trs, sim.transfers):
        assert (e["name"], names[e["tid"]], e["args"]["bytes"]) == (op, f"{src} -> {dst}", nbytes)
        assert e["ts"] == pytest.approx(s * 1e6) and e["dur"] == pytest.approx((end - s) * 1e6)

    for dev in cl.names:
        counter = [e for e in _events(obj, "C") if e["name"] == f"memory {dev}"]
        assert len(counter) == len(sim.memory_timeline[dev])
        assert max(e["args"]["used"] for e in counter) == pytest.approx(sim.peak_memory[dev])
        limit = sim.memory_limit[dev]
        assert all(e["args"].get("limit") == (limit if math.isfinite(limit) else None) for e in counter)
    assert not _events(obj, "X", pid=trace.MEASURED_PID)


def test_out_of_memory_mark_limits_and_a_measured_process(tmp_path):
    g, cl, sim = _case(memory=2e3)
    assert sim.oom is not None
    measured = [{**r, "start_s": r["start_s"] * 1.5, "end_s": r["end_s"] * 1.5} for r in sim.timeline()]
    moves = [{"op": "x", "src": cl.names[0], "dst": cl.names[1], "start_s": 0.0, "end_s": 1e-4, "bytes": 8.0}]
    obj = json.loads(trace.write_trace(tmp_path / "t.json", sim, g, cl, measured, moves).read_text())
    names = check_structure(obj)
    oom = [e for e in obj["traceEvents"] if e["ph"] == "i"]
    assert len(oom) == 1 and oom[0]["args"]["device"] == sim.oom.device
    assert names[trace.PREDICTED_PID][oom[0]["tid"]] == sim.oom.device
    assert all(e["args"]["limit"] == 2e3 for e in _events(obj, "C"))
    mops = _events(obj, "X", pid=trace.MEASURED_PID, cat="op")
    assert len(mops) == len(measured)
    assert sorted(names[trace.MEASURED_PID].values()) == sorted(cl.names + [f"{cl.names[0]} -> {cl.names[1]}"])
    procs = {e["pid"]: e["args"]["name"] for e in obj["traceEvents"] if e["name"] == "process_name"}
    assert procs == {trace.PREDICTED_PID: "predicted (simulator)", trace.MEASURED_PID: "measured"}


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n_devices=st.integers(1, 5))
def test_any_simulated_step_gives_a_valid_trace(seed, n_devices):
    g, cl, sim = _case(seed, n_devices, placer=HashingPlacer)
    obj = json.loads(json.dumps(trace.trace(sim, g, cl)))
    names = check_structure(obj)[trace.PREDICTED_PID]
    assert len(_events(obj, "X", cat="op")) == len(g)
    assert len(names) == n_devices + len({(s, d) for _, s, d, *_ in sim.transfers})


def test_written_trace_is_the_bytes_of_the_trace_object(tmp_path, monkeypatch):
    """write_trace streams the events a chunk at a time; the file is what atomic_write_json writes of trace(),
    with the measured part, the metadata and a cut in time."""
    from algorithms import graph as graph_mod
    from algorithms.graph import atomic_write_json

    g, cl, sim = _case(3, 3)
    timeline = sim.timeline()
    other = {"predicted": "the simulator", "measured": "a test"}
    monkeypatch.setattr(graph_mod, "SAVE_CHUNK", 7)
    for max_ops in (None, len(g) // 2):
        trace.write_trace(tmp_path / "new.json", sim, g, cl, timeline, other=other, max_ops=max_ops)
        atomic_write_json(tmp_path / "old.json", trace.trace(sim, g, cl, timeline, other=other, max_ops=max_ops))
        assert (tmp_path / "new.json").read_bytes() == (tmp_path / "old.json").read_bytes()


def test_the_measured_part_says_what_it_holds_or_why_it_is_missing(tmp_path):
    from types import SimpleNamespace

    g, cl, sim = _case()
    none, other = trace.measured_part(None, "none")
    assert none is None and "runtime=none" in other["measured"]
    _, other = trace.measured_part(SimpleNamespace(extra={"op_times_s": {}}), "real")
    assert "runtime real returns no per-op times" in other["measured"]
    ran = SimpleNamespace(extra={"op_timeline": sim.timeline(), "op_timeline_clock": "op ends synchronised"})
    timeline, other = trace.measured_part(ran, "threads")
    assert timeline == sim.timeline() and "median measured step" in other["measured"]
    obj = json.loads(trace.write_trace(tmp_path / "t.json", sim, g, cl, timeline, other=other).read_text())
    check_structure(obj)
    assert obj["otherData"] == other and len(_events(obj, "X", pid=trace.MEASURED_PID)) == len(g)


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.parametrize("order", ["threads", "planned"])
def test_a_run_of_the_threads_runtime_adds_its_measured_step_to_trace_json_and_mlflow(lab, order):
    pytest.importorskip("torch")
    lab.run(
        "model=mlp_tiny",
        "backend=torch",
        "profiler=measured",
        "profiler.steps=2",
        "profiler.warmup=1",
        "runtime=threads",
        f"runtime.order={order}",
        "runtime.steps=3",
        "runtime.warmup=1",
        "cluster=cpu2",
        "placer=m_etf",
    )
    (out,) = lab.outputs()
    obj = json.loads((out / "trace.json").read_text())
    names = check_structure(obj)
    placement = json.loads((out / "placement.json").read_text())
    measured = _events(obj, "X", pid=trace.MEASURED_PID, cat="op")
    assert sorted(e["name"] for e in measured) == sorted(placement)  # every op of the step, once
    for e in measured:  # on its device's track, within the measured step
        assert names[trace.MEASURED_PID][e["tid"]] == placement[e["name"]] == e["args"]["device"]
    step_us = json.loads((out / "result.json").read_text())["measured_step_s"] * 1e6
    assert max(e["ts"] + e["dur"] for e in measured) <= step_us * 1.001  # the median step (3 steps: its own time)
    assert "threads" in obj["otherData"]["measured"]
    assert ("serial" in obj["otherData"]["measured"]) == (order == "planned")
    (run,) = lab.runs()
    from mlflow.tracking import MlflowClient

    arts = {f.path for f in MlflowClient(tracking_uri=f"sqlite:///{lab.db}").list_artifacts(run.info.run_id)}
    assert "trace.json" in arts
