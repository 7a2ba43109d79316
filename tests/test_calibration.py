"""The framework-neutral part of the in-step calibration (`backends.calibration`, issue 16)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms import OpGraph, uniform_cluster
from algorithms.errors import ConfigError
from algorithms.simulator import simulate
from backends.calibration import block_placement, fit_byte_costs, fit_message_costs, topo_schedule, two_devices


def chain_with_variables(n: int, every: int) -> OpGraph:
    """A chain of n ops with skip edges; every `every`-th op shares a colocation group with an op 5 further on
    (a variable and the op that updates it)."""
    g = OpGraph("vars")
    for i in range(n):
        grp = f"v{i // every}" if i % every == 0 or (i >= 5 and (i - 5) % every == 0) else None
        g.add_op(f"o{i}", compute_s=40e-6, output_bytes=1024, colocation=grp)
    for i in range(n - 1):
        g.add_edge(f"o{i}", f"o{i + 1}", bytes=1024)
        if i + 3 < n:  # skip edges: block placements cut edges off the critical path too
            g.add_edge(f"o{i}", f"o{i + 3}", bytes=1024)
    return g


@settings(max_examples=40, deadline=None)
@given(n=st.integers(8, 80), every=st.integers(6, 20), block=st.integers(1, 30), k=st.integers(2, 4))
def test_block_placement_keeps_colocation_groups_together(n, every, block, k):
    g = chain_with_variables(n, every)
    devices = [f"d{j}" for j in range(k)]
    p = block_placement(g, devices, block)
    assert set(p) == set(g.ops) and set(p.values()) <= set(devices)
    order = g.topological_order()
    for grp, members in g.colocation_groups().items():
        first = min(members, key=order.index)
        assert {p[m] for m in members} == {p[first]}, grp
    # outside the groups, the blocks of the topological order
    for k_, op in enumerate(order):
        if g.op(op).get("colocation") is None:
            assert p[op] == devices[(k_ // block) % k]
    sched = topo_schedule(g, p, devices)
    assert sorted(o for d in devices for o in sched[d]) == sorted(g.ops)


def test_two_devices_keeps_the_first_pair():
    c4 = uniform_cluster(4)
    pair = two_devices(c4)
    assert pair.names == c4.names[:2] and pair.name == f"{c4.name}[:2]"
    c2 = uniform_cluster(2)
    assert two_devices(c2) is c2
    with pytest.raises(ConfigError, match="needs two devices"):
        two_devices(uniform_cluster(1))


def test_fit_with_a_predictor_of_another_runtime():
    """The fit takes the runtime's own prediction: here, the simulator's default dispatch plus a fixed step
    cost (TensorFlow's empty step); steps made with known costs are fitted back to them."""
    g = chain_with_variables(60, 7)
    c = uniform_cluster(2, latency_s=30e-6, bytes_per_s=1e9)

    def pred(cl, p, o, s, r):
        return simulate(g, cl, p, send_overhead_s=s, recv_overhead_s=r, record_memory=False).makespan + 4e-4

    truth = c.with_comm(220e-6, c.bytes_per_s)
    runs = []
    for b in (1, 3, 9, 30):
        p = block_placement(g, c.names, b)
        runs.append((p, {}, pred(truth, p, {}, 30e-6, 50e-6)))
    lat, s, r, rms = fit_message_costs(g, c, runs, send_share=0.375, max_message_s=4e-4, predictor=pred)
    assert lat == pytest.approx(220e-6, abs=5e-6)
    assert s + r == pytest.approx(80e-6, abs=3e-6)
    assert rms < 0.01


def test_byte_costs_are_fitted_back_with_the_message_costs_kept():
    """`fit_byte_costs`: steps made with known per-message and per-byte costs on a graph of large messages are
    fitted back to the per-byte time, split in the given ratio; with no per-byte cost in the steps the fit is 0;
    bad input is refused."""
    g = OpGraph("wide")
    for i in range(40):
        g.add_op(f"o{i}", compute_s=200e-6, output_bytes=256 * 1024)
    for i in range(39):
        g.add_edge(f"o{i}", f"o{i + 1}", bytes=256 * 1024)
        if i + 3 < 40:
            g.add_edge(f"o{i}", f"o{i + 3}", bytes=64 * 1024)
    c = uniform_cluster(2, latency_s=50e-6, bytes_per_s=2e9)

    def pred(cl, p, o, s, r, send_byte_s=0.0, recv_byte_s=0.0):
        return simulate(
            g, cl, p, send_overhead_s=s, recv_overhead_s=r, send_byte_s=send_byte_s, recv_byte_s=recv_byte_s,
            record_memory=False,
        ).makespan  # fmt: skip

    placements = [block_placement(g, c.names, b) for b in (1, 3, 9, 30)]
    runs = [(p, {}, pred(c, p, {}, 30e-6, 50e-6, send_byte_s=0.6e-9, recv_byte_s=0.9e-9)) for p in placements]
    sb, rb, rms = fit_byte_costs(c, runs, pred, 30e-6, 50e-6, send_share=0.4)
    assert sb + rb == pytest.approx(1.5e-9, rel=0.02) and sb / (sb + rb) == pytest.approx(0.4)
    assert rms < 0.01
    plain = [(p, {}, pred(c, p, {}, 30e-6, 50e-6)) for p in placements]
    assert fit_byte_costs(c, plain, pred, 30e-6, 50e-6)[:2] == (0.0, 0.0)
    with pytest.raises(ConfigError, match="no calibration runs"):
        fit_byte_costs(c, [], pred, 0.0, 0.0)
    with pytest.raises(ConfigError, match="not positive"):
        fit_byte_costs(c, [(placements[0], {}, 0.0)], pred, 0.0, 0.0)


def test_calibrate_keeps_what_it_measured_for_a_fit_under_another_model():
    """`calibrate` measures (here: steps simulated with pulled receives and known costs stand in for a
    runtime) and fits with the given predictor; `fit_calibration` on its `measured` fits the same steps with
    another predictor, without measuring again: the model the steps came from gets its costs back."""
    from backends.calibration import calibrate, fit_calibration

    g = chain_with_variables(60, 7)
    for i in range(0, 60, 4):  # side ops that need nothing: a receiver has local work before it first idles
        g.add_op(f"side{i}", compute_s=150e-6)
        g.add_edge(f"side{i}", f"o{i}", bytes=0)
    c = uniform_cluster(2, latency_s=40e-6, bytes_per_s=1e9)
    truth = c.with_comm(120e-6, c.bytes_per_s)

    def predictor(mode: str):
        def make(prof: OpGraph):
            def pred(cl, p, o, s, r, **_):
                return simulate(
                    prof, cl, p, send_overhead_s=s, recv_overhead_s=r, record_memory=False, recv_requests=mode
                ).makespan

            return pred

        return make

    def run(prof, p, o):
        return [predictor("when_idle")(prof)(truth, p, o, 20e-6, 30e-6)]

    cal = calibrate(g, c, (1, 3, 9, 30), lambda: (g, 0.0), run, predictor("posted"), rounds=1)
    assert cal.measured is not None and [b for b, *_ in cal.measured.runs] == [1, 3, 9, 30]
    pulled = fit_calibration(cal.measured, predictor("when_idle"))
    assert pulled.latency_s == pytest.approx(120e-6, abs=10e-6)
    assert pulled.send_overhead_s + pulled.recv_overhead_s == pytest.approx(50e-6, abs=5e-6)
    assert pulled.rel_rms < 0.01 and pulled.rel_rms <= cal.rel_rms
    assert [r["measured_s"] for r in pulled.placements] == [r["measured_s"] for r in cal.placements]


@pytest.mark.tf
def test_tensorflow_refit_keeps_a_given_hop_and_fits_the_message_times():
    """`backends.tensorflow.calibrate.refit(..., latency_s=)`: the measured steps fitted again with the hop held
    at a given latency; steps made with that hop give back their per-message times."""
    pytest.importorskip("tensorflow")
    from backends.calibration import calibrate
    from backends.tensorflow.calibrate import refit, tf_predictor

    g = chain_with_variables(60, 7)
    c = uniform_cluster(2, latency_s=30e-6, bytes_per_s=1e9)
    hop = 90e-6

    def run(prof, p, o):
        return [tf_predictor(prof, {2: 5e-4})(c.with_comm(hop, c.bytes_per_s), p, o, 25e-6, 35e-6)]

    cal = calibrate(g, c, (1, 3, 9, 30), lambda: (g, 0.0), run, lambda prof: tf_predictor(prof, {2: 5e-4}), rounds=1)
    kept = refit(cal, step_overhead_s=5e-4, recv_requests="posted", latency_s=hop, send_share=25 / 60)
    assert kept.latency_s == hop
    assert kept.send_overhead_s + kept.recv_overhead_s == pytest.approx(60e-6, abs=3e-6)
    assert kept.rel_rms < 0.01
    with pytest.raises(ConfigError, match="kept its measurements"):
        refit(dataclasses.replace(cal, measured=None), step_overhead_s=5e-4, recv_requests="posted")


def test_calibration_records_the_wide_programs_step_as_the_speed_reference():
    """`calibrate` keeps the wide program's single-device step of each round (the machine's speed while the costs
    were measured) and the fit's `speed_reference_s` is their median; without the wide program there is none.
    `rescale_factor` is the profile's reference over it, and None where either is missing or not positive."""
    import math

    from backends.calibration import WideProgram, calibrate, rescale_factor

    g = chain_with_variables(30, 7)
    c = uniform_cluster(2, latency_s=40e-6, bytes_per_s=1e9)

    def make(prof: OpGraph):
        def pred(cl, p, o, s, r, send_byte_s=0.0, recv_byte_s=0.0):
            return simulate(
                prof, cl, p, send_overhead_s=s, recv_overhead_s=r, send_byte_s=send_byte_s, recv_byte_s=recv_byte_s,
                record_memory=False,
            ).makespan  # fmt: skip

        return pred

    def run(prof, p, o):
        return [make(prof)(c, p, o, 20e-6, 30e-6)]

    wide_steps = iter([0.050, 0.090, 0.060])
    wide = WideProgram(g, lambda: (g, next(wide_steps)), run)
    cal = calibrate(g, c, (1, 3), lambda: (g, 0.01), run, make, rounds=3, wide=wide)
    assert cal.measured is not None and cal.measured.wide_step_s == [0.050, 0.090, 0.060]
    assert cal.speed_reference_s == pytest.approx(0.060)
    narrow = calibrate(g, c, (1, 3), lambda: (g, 0.01), run, make, rounds=1)
    assert math.isnan(narrow.speed_reference_s)

    assert rescale_factor(0.048, cal.speed_reference_s) == pytest.approx(0.8)
    for prof, calib in ((None, 0.06), (0.05, None), (0.05, math.nan), (0.0, 0.06), (0.05, -1.0), ("x", 0.06)):
        assert rescale_factor(prof, calib) is None, (prof, calib)
