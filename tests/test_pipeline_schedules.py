"""Pipeline schedules: block model, validator, generator baselines, Tessel's search, extension, runtime plans."""

from __future__ import annotations

import json

import pytest

from algorithms.errors import ConfigError, InvalidPlacement, InvalidSchedule
from algorithms.graph import OpGraph
from algorithms.pipeline.baselines import ChimeraScheduler, GPipeScheduler, OneFOneBPlusScheduler, OneFOneBScheduler
from algorithms.pipeline.blocks import Block, MicroBatchSpec, blocks_from_placement, make_shape, reference_memory
from algorithms.pipeline.completion import extend, periodic_phases, phase_ok
from algorithms.pipeline.repetend import dependency_period_ok, iter_repetend_assignments, repetend_size_bound
from algorithms.pipeline.repetend_solver import repetend_time, solve_repetend
from algorithms.pipeline.runtime import build_actions, check_deadlock_free, chrome_trace, simulate_actions
from algorithms.pipeline.schedule import PipelineSchedule, ScheduleViolation, validate
from algorithms.pipeline.smt import Budget
from algorithms.pipeline.tessel import TesselScheduler
from algorithms.pipeline.time_optimal import TimeOptimalScheduler, greedy_schedule, solve_time_optimal


def _two_stage() -> MicroBatchSpec:
    return MicroBatchSpec(
        [
            Block("f0", 1, 1, ("d0",)),
            Block("f1", 1, 1, ("d1",), ("f0",)),
            Block("b1", 2, -1, ("d1",), ("f1",), "backward"),
            Block("b0", 2, -1, ("d0",), ("b1",), "backward"),
        ],
        ["d0", "d1"],
    )


def _valid_two_stage() -> PipelineSchedule:
    spec = _two_stage()
    start = {
        ("f0", 0): 0,
        ("f1", 0): 1,
        ("b1", 0): 2,
        ("b0", 0): 4,
        ("f0", 1): 1,
        ("f1", 1): 4,
        ("b1", 1): 5,
        ("b0", 1): 7,
    }
    return PipelineSchedule(spec, 2, start, memory_limit=2)


# ----------------------------------------------------------------------------------------------- block model
def test_shapes_have_balanced_training_blocks():
    for shape in ("v", "x", "m", "nn", "k"):
        spec = make_shape(shape, 4, recompute=True)
        assert all(spec.net_memory(d) == 0 for d in spec.devices), shape
        loads = {spec.device_load(d) for d in spec.devices}
        assert len(loads) == 1, (shape, loads)  # balanced workload (section VI-B)
    v = make_shape("v", 4, recompute=True)
    assert [b.name for b in v.blocks] == ["f0", "f1", "f2", "f3", "b3", "b2", "b1", "b0"]
    assert v.block("b2").time == 3 and v.block("f2").time == 1
    assert make_shape("v", 4).block("b2").time == 2
    m = make_shape("m", 4)
    assert m.block("emb").devices == ("d0", "d1", "d2", "d3")
    with pytest.raises(ConfigError):
        make_shape("w", 4)


def test_nn_shape_is_mt5_layout():
    # encoder stages on the first half of the devices, decoder stages on the second half, the shared embedding
    # looked up on all devices before each (Figure 8d, the authors' NN case)
    nn = make_shape("nn", 4, recompute=True)
    alld = ("d0", "d1", "d2", "d3")
    assert [b.name for b in nn.blocks if b.devices == alld] == ["emb_enc", "emb_dec", "emb_dec_b", "emb_enc_b"]
    assert [(b.name, b.devices) for b in nn.blocks if len(b.devices) == 1 and b.kind == "forward"] == [
        ("enc0", ("d0",)),
        ("enc1", ("d1",)),
        ("dec2", ("d2",)),
        ("dec3", ("d3",)),
    ]
    # the reference's full-device blocks: span 1 both ways, memory 0 (zhiqi-0/Tessel nnshape)
    assert nn.block("dec2_b").time == 3 and nn.block("emb_dec_b").time == 1 and nn.block("emb_enc").memory == 0
    assert nn.lower_bound() == 8
    # our earlier reading is kept under its own name: embeddings keep activations, backward 2x forward
    old = make_shape("nn_emb", 4, recompute=True)
    assert old.block("emb_dec_b").time == 2 and old.block("emb_enc").memory == 1 and old.lower_bound() == 10
    with pytest.raises(ConfigError):
        make_shape("nn", 1)


@pytest.mark.parametrize(
    "shape, k, lb, cp",
    [("v", 8, 4, 16), ("x", 16, 8, 16), ("m", 10, 6, 18), ("nn", 12, 8, 20), ("k", 10, 6, 10)],
)
def test_reference_shapes_at_4_devices(shape, k, lb, cp):
    # block counts, per-device load (the repetend's lower bound) and one micro-batch's critical path of the
    # authors' cases_tessel.py shapes, training with recompute (backward span 3)
    spec = make_shape(shape, 4, recompute=True)
    assert (spec.K, spec.lower_bound(), spec.critical_path()) == (k, lb, cp)
    assert reference_memory(shape, 4) == (4 if shape in ("v", "x") else 6)


def test_k_shape_branches_run_down_the_devices():
    k = make_shape("k", 6, recompute=True)
    assert [k.block(f"t{i}").devices for i in range(3)] == [("d0",), ("d1",), ("d2",)]
    assert [k.block(f"v{i}").devices for i in range(3)] == [("d3",), ("d4",), ("d5",)]
    assert set(k.block("cross").deps) == {"t2", "v2"} and k.block("cross_b").time == 1
    assert make_shape("k_mid", 6, recompute=True).block("v0").devices == ("d5",)


def test_cyclic_spec_rejected():
    with pytest.raises(ConfigError, match="cyclic"):
        MicroBatchSpec([Block("a", 1, 0, ("d0",), ("b",)), Block("b", 1, 0, ("d0",), ("a",))], ["d0"])


def test_blocks_from_placement_stages():
    g = OpGraph("tiny")
    for i in range(4):
        g.add_op(f"l{i}", compute_s=0.002, output_bytes=1000 * (i + 1), persistent_bytes=10)
        g.add_op(f"l{i}_grad", compute_s=0.004, phase="backward", forward_of=f"l{i}")
    for i in range(3):
        g.add_edge(f"l{i}", f"l{i + 1}", bytes=100)
        g.add_edge(f"l{i + 1}_grad", f"l{i}_grad", bytes=100)
    g.add_edge("l3", "l3_grad")
    for i in range(4):
        g.add_edge(f"l{i}", f"l{i}_grad")
    place = {"l0": "a", "l1": "a", "l2": "b", "l3": "b", "l0_grad": "a", "l1_grad": "a", "l2_grad": "b", "l3_grad": "b"}
    spec = blocks_from_placement(g, place, time_resolution=4)
    assert [b.name for b in spec.blocks] == ["F_a", "F_b", "B_b", "B_a"]
    assert spec.block("B_a").time == 2 * spec.block("F_a").time == 4
    assert spec.block("F_b").memory > spec.block("F_a").memory > 0
    assert spec.block("B_b").memory == -spec.block("F_b").memory
    assert set(spec.block("B_a").deps) == {"F_a", "B_b"}
    # a placement interleaving layers is not a pipeline
    bad = dict(place, l1="b", l1_grad="b", l2="a", l2_grad="a")
    with pytest.raises(InvalidPlacement):
        blocks_from_placement(g, bad)


# ----------------------------------------------------------------------------------------------- validator
def test_validator_accepts_valid_schedule_and_figures():
    s = _valid_two_stage()
    s.validate()
    assert s.makespan == 9
    assert s.bubble_rate == pytest.approx(1 - 12 / 18)
    assert s.peak_memory() == {"d0": 2, "d1": 1}


@pytest.mark.parametrize(
    "kind,change,limit,where",
    [
        ("dependency", {("f1", 1): 2}, 2, ("f1", 1, "d1")),  # f1#1 before f0#1 ends (t=2 ok) -> overlap? no: dep
        ("exclusive", {("f0", 1): 0}, 2, ("f0", 1, "d0")),  # two blocks at once on d0
        ("memory", {}, 1, ("f0", 1, "d0")),  # two micro-batches in flight on d0 with M = 1
        ("missing", None, 2, ("b0", 1, "d0")),
    ],
)
def test_validator_catches_each_violation(kind, change, limit, where):
    s = _valid_two_stage()
    if change is None:
        del s.start[("b0", 1)]
    else:
        s.start.update(change)
    if kind == "dependency":
        s.start[("f0", 1)] = 2  # f0#1 now ends at 3 > f1#1's start 2
        s.start[("b0", 0)] = 4
    with pytest.raises(ScheduleViolation) as ei:
        validate(s, limit)
    e = ei.value
    assert isinstance(e, InvalidSchedule)
    assert e.kind == kind
    assert (e.block, e.micro, e.device) == where
    assert where[0] in str(e) and str(where[1]) in str(e) and where[2] in str(e)


def test_json_round_trip_matches_design_format():
    s = TesselScheduler(time_limit_s=30).schedule(make_shape("v", 4), None, 6, 8)
    data = json.loads(json.dumps(s.to_json()))
    assert set(data) == {"devices", "n_micro", "memory_limit", "blocks", "repetend", "makespan", "bubble_rate"}
    assert set(data["blocks"][0]) == {"name", "micro", "devices", "start", "span", "memory", "after"}
    assert set(data["repetend"]) == {"start", "end"}
    back = PipelineSchedule.from_json(data)
    back.validate()
    assert back.start == s.start and back.makespan == s.makespan
    assert back.bubble_rate == pytest.approx(s.bubble_rate)


# ----------------------------------------------------------------------------------------------- generators
def test_gpipe_textbook_timeline_4_devices():
    D, N = 4, 4
    s = GPipeScheduler().schedule(make_shape("v", D), None, None, N)
    for m in range(N):
        for d in range(D):
            assert s.start[(f"f{d}", m)] == m + d
            assert s.start[(f"b{d}", m)] == (N + D - 1) + 2 * m + 2 * (D - 1 - d)
    assert s.makespan == 3 * (N + D - 1)
    assert s.peak_memory() == {f"d{d}": N for d in range(D)}


def test_1f1b_textbook_timeline_4_devices():
    D, N = 4, 8
    s = OneFOneBScheduler().schedule(make_shape("v", D), None, D, N)
    assert s.makespan == 3 * (N + D - 1)
    assert s.peak_memory() == {f"d{d}": D - d for d in range(D)}
    for m in range(N):  # the last stage alternates F and B with no gap
        assert s.start[("f3", m)] == 3 + 3 * m
        assert s.start[("b3", m)] == 4 + 3 * m
    orders = s.device_orders()
    for d in range(D):  # warm-up of D-1-d forwards, then one forward one backward
        kinds = ["f" if b.startswith("f") else "b" for b, _ in orders[f"d{d}"]]
        w = D - 1 - d
        assert kinds[:w] == ["f"] * w
        assert kinds[w : w + 2 * (N - w)] == ["f", "b"] * (N - w)
    assert s.start[("b0", 0)] == 10 and s.start[("f0", 4)] == 12


def test_chimera_and_1f1b_plus_are_valid():
    c = ChimeraScheduler().schedule(make_shape("x", 4, recompute=True), None, None, 8)
    assert 0 < c.bubble_rate < 0.5
    assert max(c.peak_memory().values()) <= 4
    for shape in ("m", "nn"):
        p = OneFOneBPlusScheduler().schedule(make_shape(shape, 4, recompute=True), None, None, 8)
        p.validate(None)
    v = make_shape("v", 4)
    assert (
        OneFOneBPlusScheduler().schedule(v, None, None, 8).makespan
        == OneFOneBScheduler().schedule(v, None, None, 8).makespan
    )


def test_1f1b_plus_in_steps_gives_table_ii_and_falls_back_off_a_chain():
    """Tessel Table II's 1F1B+ column (recompute, numerous micro-batches): 25 % on M, 20 % on NN, at any device
    count, from the global-step insertion; K (not adaptable in the paper) falls back to the order-based one."""
    from algorithms.pipeline.api import steady_bubble_rate

    for D in (2, 4, 6):
        for shape, rate in (("m", 0.25), ("nn", 0.20)):
            spec = make_shape(shape, D, recompute=True)
            sched = OneFOneBPlusScheduler().schedule(spec, None, None, 10)
            assert sched.info["insertion"] == "step"
            assert steady_bubble_rate(OneFOneBPlusScheduler(), spec) == pytest.approx(rate)
    m = OneFOneBPlusScheduler().schedule(make_shape("m", 4, recompute=True), None, None, 6)
    # each micro-batch's embedding runs on all devices at once, right before its first stage
    assert all(m.start[("emb", k)] + 1 <= m.start[("f0", k)] for k in range(6))
    k = OneFOneBPlusScheduler().schedule(make_shape("k", 4, recompute=True), None, None, 8)
    assert k.info["insertion"] == "order"
    k.validate(None)


@pytest.mark.parametrize("recompute, unit", [(False, 16), (True, 22)])
def test_chimera_unit_is_time_optimal_on_4_devices(recompute, unit):
    # one Chimera unit (D real micro-batches = 2 X micro-batches) is as short as the TO search allows; units are
    # concatenated directly, so the steady bubble is the unit's own: 1 - 16/22 with recompute
    x = make_shape("x", 4, recompute=recompute)
    c = ChimeraScheduler().schedule(x, None, None, 2)
    to = TimeOptimalScheduler(time_limit_s=60).schedule(x, None, None, 2)
    assert to.info["optimal"] and c.makespan == to.makespan == unit
    assert ChimeraScheduler().schedule(x, None, None, 8).makespan == 4 * unit


def test_generator_breaking_memory_cap_is_reported():
    with pytest.raises(ScheduleViolation) as ei:
        GPipeScheduler().schedule(make_shape("v", 4), None, 3, 8)
    assert ei.value.kind == "memory"


# ----------------------------------------------------------------------------------------------- Tessel
def test_repetend_enumeration_obeys_properties():
    spec = make_shape("v", 3)
    cands = list(iter_repetend_assignments(spec, 3))
    assert cands and len(set(cands)) == len(cands)
    for n in cands:
        assert min(n) == 0 and max(n) == 2
        for j in range(spec.K):
            for i in spec.preds[j]:
                assert n[i] >= n[j]  # Property IV.2
    # some candidate (a 1F1B-like one) meets the dependency bound at the lower bound, the plain one does not
    assert any(dependency_period_ok(spec, n, spec.lower_bound()) for n in cands)
    assert not dependency_period_ok(spec, (0,) * spec.K, spec.lower_bound())


def test_tessel_tight_memory_gives_longer_repetend():
    # with 2 micro-batches in flight on d0, a round trip of 12 units allows one micro-batch per 6 units
    res = TesselScheduler(time_limit_s=60).search(make_shape("v", 4), 2)
    assert res.period == 6
    extend(res, 10).validate(2)


@pytest.mark.parametrize("memory", [None, 4])
def test_tessel_finds_zero_bubble_repetend_on_v(memory):
    spec = make_shape("v", 4)
    ts = TesselScheduler(time_limit_s=60)
    res = ts.search(spec, memory)
    assert res.period == spec.lower_bound() == 3
    assert res.repetend_bubble_rate == 0.0
    sched = ts.schedule(spec, None, memory, 12)
    sched.validate()
    a, b = sched.repetend
    assert b - a == res.period
    if memory is not None:
        assert max(sched.peak_memory().values()) <= memory


def test_nn_repetend_at_lower_bound_exists():
    # an N_R = 6 repetend on NN: its period and its compacted t_R meet the lower bound (0% bubble)
    spec = make_shape("nn", 4, recompute=True)
    n = (5, 5, 5, 4, 4, 4, 3, 2, 1, 1, 0, 0)
    lb = spec.lower_bound()
    starts, p, _, _ = solve_repetend(spec, n, None, lb, lb)
    assert p == lb
    assert repetend_time(spec, n, starts, None, p)[0] == lb


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["m", "nn"])
def test_tessel_reaches_lower_bound_under_the_reference_budget(shape):
    # the reference finds zero-idle repetends on M and NN under 6 micro-batches' activations (issue 18)
    spec = make_shape(shape, 4, recompute=True)
    ts = TesselScheduler()
    res = ts.search(spec, 6)
    assert res.period == spec.lower_bound() == {"m": 6, "nn": 8}[shape] and res.repetend_bubble_rate == 0.0
    s = ts.schedule(spec, None, 6, 128)
    s.validate(6)
    assert s.bubble_rate < 0.02  # the reference: 1.66% (M), 1.63% (NN)


@pytest.mark.parametrize("search", ["period", "scan"])
def test_both_searches_reach_the_known_optimum_on_small_shapes(search):
    # V on 3 devices under memory 3 and K on 4 devices under 6: the optimum repetend is the lower bound
    for shape, D in (("v", 3), ("k", 4)):
        spec = make_shape(shape, D, recompute=True)
        mem = reference_memory(shape, D)
        res = TesselScheduler(search=search).search(spec, mem)
        assert res.period == spec.lower_bound() == {"v": 4, "k": 6}[shape]
        extend(res, 20).validate(mem)


@pytest.mark.parametrize("shape", ["k", pytest.param("nn", marks=pytest.mark.slow)])
def test_same_input_gives_the_same_schedule(shape):
    # deterministic budgets (Z3 resource units) and a fresh Z3 context per search: another search run in between,
    # and a budget so small that checks run out, change nothing from one run to the next
    spec = make_shape(shape, 4, recompute=True)
    runs = []
    for _ in range(2):
        TesselScheduler().search(make_shape("x", 4, recompute=True), 4)  # something else in between
        for kw in ({}, {"check_rlimit": 200_000, "completion_rlimit": 400_000}):
            s = TesselScheduler(**kw).schedule(spec, None, 6, 16)
            runs.append((s.start, s.info["t_r"], s.info["n_r"]))
    assert runs[0] == runs[2] and runs[1] == runs[3]


def test_repetend_size_bound_follows_memory_and_devices():
    # V on D devices under memory D: the first forward and the last backward of a device are at most D
    # micro-batches apart, so N_R <= D + 1; more memory or more devices allow more
    for D in (3, 4, 6):
        assert repetend_size_bound(make_shape("v", D, True), D, 4) == D + 1
    m = make_shape("m", 4, True)
    assert repetend_size_bound(m, 6, 6) < repetend_size_bound(m, 12, 6) <= repetend_size_bound(m, None, 6)
    res = TesselScheduler().search(m, 6)
    assert res.n_r <= res.stats["max_n_r"] == repetend_size_bound(m, 6, 6)


def test_budget_counts_resource_units_and_runs_out():
    import z3

    ctx = z3.Context()
    xs = [z3.Int(f"x{i}", ctx) for i in range(8)]
    sol = z3.Solver(ctx=ctx)
    for i in range(8):  # 8 blocks of 4 units in [0, 40): feasible
        sol.add(xs[i] >= 0, xs[i] <= 36)
        for j in range(i + 1, 8):
            sol.add(z3.Or(xs[i] + 4 <= xs[j], xs[j] + 4 <= xs[i]))
    tiny = Budget(per_check=10)
    assert tiny.check(sol) == z3.unknown and tiny.unknown == 1
    big = Budget(per_check=0, total=10**8)
    assert big.check(sol) == z3.sat and big.used > 0 and not big.exhausted()
    spent = Budget(total=1, used=1)
    assert spent.exhausted() and spent.check(sol) == z3.unknown


@pytest.mark.parametrize(
    "shape", ["v", "k", pytest.param("m", marks=pytest.mark.slow), pytest.param("nn", marks=pytest.mark.slow)]
)
def test_periodic_completion_seeds_are_feasible(shape):
    spec = make_shape(shape, 4, recompute=True)
    mem = reference_memory(shape, 4)
    res = TesselScheduler().search(spec, mem)
    n = res.assignment
    warm, cool = periodic_phases(spec, n, res.starts, res.stats["window"], res.n_r)
    init = {d: sum((n[i] + 1) * spec.blocks[i].memory for i in spec.on_device(d)) for d in spec.devices}
    assert phase_ok(spec, warm, mem) and phase_ok(spec, cool, mem, init)
    g = greedy_schedule(spec, list(warm), mem)
    assert g is not None and phase_ok(spec, g, mem)


def test_memory_reference_key_and_bad_values():
    assert TesselScheduler(shape="nn", n_devices=4, memory="reference").case["memory"] == 6
    assert TesselScheduler(shape="v", n_devices=8, memory="reference").case["memory"] == 8
    assert TesselScheduler(shape="m", n_devices=8, memory="reference").case["memory"] == 20
    with pytest.raises(ConfigError, match="memory"):
        TesselScheduler(memory="lots")
    with pytest.raises(ConfigError, match="reference"):
        reference_memory("from_placement", 4)
    with pytest.raises(ConfigError, match="search"):
        TesselScheduler(search="fast")


def test_completion_symmetry_keeps_the_optimum():
    # Property IV.1 on warm-up (prefix) and cool-down (suffix) sets of equations 5 and 6 keeps the makespan
    spec = make_shape("v", 4, recompute=True)
    n, n_r = (3, 2, 1, 0, 0, 0, 0, 0), 4
    warm = [(i, m) for i in range(spec.K) for m in range(n[i])]
    cool = [(i, m) for i in range(spec.K) for m in range(n[i] + 1, n_r)]
    init = {d: sum((n[i] + 1) * spec.blocks[i].memory for i in spec.on_device(d)) for d in spec.devices}
    for items, ini in ((warm, None), (cool, init)):
        for mem in (None, 4):
            a = solve_time_optimal(spec, items, mem, ini)
            b = solve_time_optimal(spec, items, mem, ini, symmetry=True)
            assert a.optimal and b.optimal and a.makespan == b.makespan


@pytest.mark.parametrize("shape", ["v", "k"])
def test_extension_to_n_keeps_validity(shape):
    spec = make_shape(shape, 4, recompute=True)
    ts = TesselScheduler(time_limit_s=60)
    res = ts.search(spec, 6)
    prev = None
    for n in range(res.n_r, res.n_r + 12, 3):
        s = extend(res, n)
        s.validate(6)
        assert sorted(m for (b, m) in s.start if b == spec.blocks[0].name) == list(range(n))
        if prev is not None:  # each extra micro-batch costs exactly one repetend period
            assert s.makespan - prev.makespan == 3 * res.period
            assert s.bubble_rate <= prev.bubble_rate + 1e-12
        prev = s
    small = ts.schedule(spec, None, 6, 1)  # N < N_R falls back to the time-optimal search
    small.validate(6)


def test_time_optimal_baseline_small_n():
    spec = make_shape("v", 4)
    to = TimeOptimalScheduler(time_limit_s=60).schedule(spec, None, None, 2)
    to.validate()
    assert to.makespan == 15  # micro-batch 1 trails by one forward and one backward on d3
    assert to.info["optimal"]
    ts = TesselScheduler(time_limit_s=60).schedule(spec, None, None, 2)
    assert ts.makespan >= to.makespan


@pytest.mark.parametrize("shape, slope, offset", [("v", 4, 12), ("m", 6, 12), ("k", 6, 4), ("nn", 8, 12)])
def test_time_optimal_matches_the_reference_optima(shape, slope, offset):
    # the reference's TO optima on 4 devices: 4N+12 (V), 6N+12 (M), 6N+4 (K), 8N+12 (NN), proven for N = 1, 2
    spec = make_shape(shape, 4, recompute=True)
    for n in (1, 2):
        to = TimeOptimalScheduler().schedule(spec, None, None, n)
        assert to.info["optimal"] and to.makespan == slope * n + offset


# ----------------------------------------------------------------------------------------------- runtime
@pytest.mark.parametrize(
    "make",
    [
        lambda: GPipeScheduler().schedule(make_shape("v", 4), None, None, 5),
        lambda: OneFOneBScheduler().schedule(make_shape("v", 4), None, None, 6),
        lambda: ChimeraScheduler().schedule(make_shape("x", 4, True), None, None, 4),
        lambda: OneFOneBPlusScheduler().schedule(make_shape("m", 4, True), None, None, 5),
        lambda: TesselScheduler(time_limit_s=30).schedule(make_shape("k", 4, True), None, None, 7),
        lambda: TesselScheduler(time_limit_s=30).schedule(make_shape("v", 4), None, 3, 9),
    ],
)
def test_action_lists_never_deadlock(make):
    s = make()
    acts = build_actions(s)
    check_deadlock_free(s, acts, blocking=True)
    check_deadlock_free(s, acts, blocking=False)
    sim = simulate_actions(s, acts)
    assert all(sim[it] <= s.start[it] for it in s.start)  # the plan never runs later than the schedule
    n_send = sum(a.kind == "send" for lst in acts.values() for a in lst)
    n_recv = sum(a.kind == "recv" for lst in acts.values() for a in lst)
    assert n_send == n_recv > 0
    trace = chrome_trace(s, actions=acts)
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "repetend"]
    assert len(xs) == sum(len(s.spec.block(b).devices) for b, _ in s.start)
    json.dumps(trace)


def test_misordered_action_lists_deadlock_is_detected():
    s = OneFOneBScheduler().schedule(make_shape("v", 2), None, None, 2)
    acts = build_actions(s)
    # swap two receives on d1 so they no longer match d0's send order
    lst = acts["d1"]
    idx = [k for k, a in enumerate(lst) if a.kind == "recv"]
    lst[idx[0]], lst[idx[1]] = lst[idx[1]], lst[idx[0]]
    with pytest.raises(InvalidSchedule, match="deadlock"):
        check_deadlock_free(s, acts, blocking=True)


def test_generators_refuse_placements_they_do_not_define():
    with pytest.raises(ConfigError, match="1f1b_plus"):
        OneFOneBScheduler().schedule(make_shape("m", 4), None, None, 4)
    with pytest.raises(ConfigError, match="X shape"):
        ChimeraScheduler().schedule(make_shape("v", 4), None, None, 4)
