"""Export of pipeline schedules to torch.distributed.pipelining's per-rank action lists (algorithms/pipeline/export)."""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.pipeline.baselines import GPipeScheduler, OneFOneBPlusScheduler, OneFOneBScheduler
from algorithms.pipeline.blocks import Block, MicroBatchSpec, make_shape, reference_memory
from algorithms.pipeline.export import (
    NotExportable,
    check_executable,
    export_actions,
    parse_action,
    projected_schedule,
    replay,
    torch_stages,
)
from algorithms.pipeline.schedule import PipelineSchedule
from algorithms.pipeline.tessel import TesselScheduler


def _1f1b(D: int, N: int) -> PipelineSchedule:
    return OneFOneBScheduler().schedule(make_shape("v", D), None, None, N)


def test_v_1f1b_exports_to_the_textbook_lists():
    exp = export_actions(_1f1b(2, 3))
    assert exp.ranks == {0: ["0F0", "0F1", "0B0", "0F2", "0B1", "0B2"], 1: ["1F0", "1B0", "1F1", "1B1", "1F2", "1B2"]}
    assert exp.csv_text() == "0F0,0F1,0B0,0F2,0B1,0B2\n1F0,1B0,1F1,1B1,1F2,1B2\n"
    assert [(s.forward, s.backward, s.rank) for s in exp.stages] == [("f0", "b0", 0), ("f1", "b1", 1)]
    assert exp.notes == []


def test_m_embedding_is_collapsed_onto_the_first_stage_rank_and_json_roundtrip_keeps_the_chain():
    sched = OneFOneBPlusScheduler().schedule(make_shape("m", 4, recompute=True), None, None, 6)
    exp = export_actions(PipelineSchedule.from_json(sched.to_json()))  # emb_b reads back as kind "forward"
    assert exp.n_stages == 5
    assert exp.stages[0].forward == "emb" and exp.stages[0].backward == "emb_b"
    assert exp.stages[0].rank == 0 and exp.stages[0].collapsed_from == ("d0", "d1", "d2", "d3")
    assert [s.rank for s in exp.stages] == [0, 0, 1, 2, 3]
    assert exp.stages_on_rank(0) == [0, 1]
    assert len(exp.notes) == 1 and "emb" in exp.notes[0]
    # every block of the schedule appears exactly once, in its device's order
    assert sum(len(a) for a in exp.ranks.values()) == 2 * 5 * 6
    proj = projected_schedule(sched, exp)
    proj.validate(None)
    assert all(len(b.devices) == 1 for b in proj.spec.blocks)
    with pytest.raises(NotExportable, match="tensor parallel"):
        export_actions(sched, multi_device="error")


def test_nn_exports_with_two_collapsed_embeddings():
    sched = GPipeScheduler().schedule(make_shape("nn", 4, recompute=True), None, None, 3)
    exp = export_actions(sched)
    assert exp.n_stages == 6
    assert [s.forward for s in exp.stages] == ["emb_enc", "enc0", "enc1", "emb_dec", "dec2", "dec3"]
    assert exp.stages[3].device == "d1"  # next to the encoder stage it follows


@pytest.mark.parametrize("shape, match", [("x", "starts with 2 blocks"), ("k", "starts with 2 blocks")])
def test_shapes_that_are_not_one_chain_are_refused(shape, match):
    with pytest.raises(NotExportable, match=match):
        torch_stages(make_shape(shape, 4))


def test_mirror_on_another_device_is_refused():
    spec = MicroBatchSpec(
        [
            Block("f0", 1, 1, ("d0",)),
            Block("f1", 1, 1, ("d1",), ("f0",)),
            Block("b1", 2, -1, ("d1",), ("f1",), "backward"),
            Block("b0", 2, -1, ("d1",), ("b1",), "backward"),
        ],
        ["d0", "d1"],
    )
    with pytest.raises(NotExportable, match="'f0'.*'b0'.*different devices"):
        torch_stages(spec)


def test_deadlocking_lists_are_caught():
    exp = export_actions(_1f1b(2, 2))
    exp.ranks[0] = ["0F0", "0B0", "0F1", "0B1"]  # fine
    check_executable(exp)
    exp.ranks[1] = ["1B0", "1F0", "1F1", "1B1"]  # backward before its forward
    with pytest.raises(NotExportable, match="deadlock"):
        check_executable(exp)
    exp.ranks[1] = ["1F0", "1B0", "1F1"]
    with pytest.raises(NotExportable, match="missing"):
        check_executable(exp)


def test_parse_action_rejects_other_types():
    assert parse_action("12B7") == (12, "B", 7)
    with pytest.raises(NotExportable):
        parse_action("0W1")


def test_replay_of_1f1b_with_unit_times_is_its_makespan():
    sched = _1f1b(3, 5)
    exp = export_actions(sched)
    dur = {(s, "F"): 1.0 for s in range(3)} | {(s, "B"): 2.0 for s in range(3)}
    step, busy = replay(exp.ranks, dur, 3)
    assert step == pytest.approx(sched.makespan)
    assert busy == {0: 15.0, 1: 15.0, 2: 15.0}


@settings(max_examples=25, deadline=None)
@given(
    D=st.integers(2, 5),
    N=st.integers(1, 9),
    shape=st.sampled_from(["v", "m"]),
    gen=st.sampled_from(["gpipe", "1f1b_plus"]),
)
def test_generated_schedules_export_and_project_validly(D, N, shape, gen):
    cls = GPipeScheduler if gen == "gpipe" else OneFOneBPlusScheduler
    sched = cls().schedule(make_shape(shape, D, recompute=True), None, None, N)
    exp = export_actions(sched)
    proj = projected_schedule(sched, exp)
    proj.validate(None)
    # projection keeps every block's device order and never delays a single-device schedule
    if shape == "v":
        assert proj.makespan <= sched.makespan


# ------------------------------------------------------------------------------ round trip through torch's parser
@pytest.mark.torch
@pytest.mark.parametrize(
    "shape", ["v", pytest.param("m", marks=pytest.mark.slow), pytest.param("nn", marks=pytest.mark.slow)]
)
def test_torch_parses_validates_and_lowers_the_export(shape):
    sch = pytest.importorskip("torch.distributed.pipelining.schedules")
    sched = TesselScheduler().schedule(make_shape(shape, 4, recompute=True), None, reference_memory(shape, 4), 8)
    exp = export_actions(sched)
    rows = list(csv.reader(io.StringIO(exp.csv_text())))
    actions = {r: [sch._Action.from_str(a) for a in row] for r, row in enumerate(rows)}
    assert {r: [str(a) for a in acts] for r, acts in actions.items()} == exp.ranks  # string round trip
    mapping = sch._validate_schedule(actions, len(exp.devices), exp.n_stages, exp.n_micro)
    assert mapping == {s.index: s.rank for s in exp.stages}
    lowered = sch._add_send_recv(
        {r: list(a) for r, a in actions.items()}, stage_to_rank=lambda s: mapping[s], num_stages=exp.n_stages
    )
    kinds = {a.computation_type.value for acts in lowered.values() for a in acts}
    assert {"F", "B", "SEND_F", "RECV_F", "SEND_B", "RECV_B"} <= kinds
    assert "Rank 0" in sch._format_pipeline_order(actions)


def test_write_export_writes_the_csv_or_says_why_not(tmp_path):
    import json

    from algorithms.pipeline.export import write_export

    (tmp_path / "ok").mkdir()
    paths = write_export(_1f1b(2, 2), tmp_path / "ok")
    assert (tmp_path / "ok" / "pipeline_actions.csv").read_text() == "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n"
    doc = json.loads((tmp_path / "ok" / "pipeline_actions.json").read_text())
    assert doc["exportable"] and doc["ranks"]["1"] == ["1F0", "1B0", "1F1", "1B1"] and len(paths) == 2
    (tmp_path / "x").mkdir()
    chimera = GPipeScheduler().schedule(make_shape("x", 2), None, None, 2)
    paths = write_export(chimera, tmp_path / "x")
    doc = json.loads((tmp_path / "x" / "pipeline_actions.json").read_text())
    assert not doc["exportable"] and "independent pipelines" in doc["reason"]
    assert not (tmp_path / "x" / "pipeline_actions.csv").exists() and len(paths) == 1


@pytest.mark.slow
def test_pipeline_run_writes_the_torch_export(lab):
    import json

    lab.run("model=none", "pipeline=1f1b_plus", "pipeline.shape=m", "pipeline.n_devices=2", "pipeline.n_micro=3")
    (out,) = lab.outputs()
    rows = (out / "pipeline_actions.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[0].startswith("0F0,1F0")
    assert json.loads((out / "result.json").read_text())["pipeline_torch_export"] is True
