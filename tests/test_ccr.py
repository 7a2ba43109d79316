"""CCR (Celeritas eq. 1) on hand-computed graphs, and the compute scale of the papers' regime."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.ccr import compute_scale_for_ccr, graph_ccr, scale_compute
from algorithms.cluster import Cluster, Device, Link, uniform_cluster
from algorithms.errors import ConfigError
from algorithms.graph import OpGraph


def _chain() -> OpGraph:
    g = OpGraph("hand")
    g.add_op("a", compute_s=0.5)
    g.add_op("b", compute_s=1.0)
    g.add_op("c", compute_s=0.5)
    g.add_edge("a", "b", bytes=1000)
    g.add_edge("b", "c", bytes=3000)
    return g


def test_ccr_by_hand_on_a_uniform_cluster():
    # edges: (0.5 + 1000/1000) + (0.5 + 3000/1000) = 5.0 s; compute 0.5 + 1.0 + 0.5 = 2.0 s -> 2.5
    cl = uniform_cluster(2, latency_s=0.5, bytes_per_s=1000.0)
    assert graph_ccr(_chain(), cl) == pytest.approx(2.5)


def test_ccr_by_hand_with_speeds_and_links():
    # device speeds 1 and 4: w = mean(compute / speed) = compute * (1 + 0.25) / 2 -> 2.0 * 0.625 = 1.25 s.
    # links: a->b direction 1 s latency, 500 B/s; the reverse uses the same link (no explicit reverse).
    # c_ij = mean over the two ordered pairs = 1 + bytes / 500: (1 + 2) + (1 + 6) = 10 s -> CCR 8.
    cl = Cluster(
        [Device("d0", speed=1.0), Device("d1", speed=4.0)],
        latency_s=9.0,
        bytes_per_s=1.0,
        links={("d0", "d1"): Link(1.0, 500.0)},
    )
    assert graph_ccr(_chain(), cl) == pytest.approx(10.0 / 1.25)


def test_one_device_has_no_communication():
    assert graph_ccr(_chain(), uniform_cluster(1, latency_s=0.5, bytes_per_s=1000.0)) == 0.0


def test_control_edge_counts_latency_only():
    g = _chain()
    g.add_edge("a", "c", control=True)
    cl = uniform_cluster(2, latency_s=0.5, bytes_per_s=1000.0)
    assert graph_ccr(g, cl) == pytest.approx(5.5 / 2.0)


@settings(max_examples=30, deadline=None)
@given(target=st.floats(0.01, 500.0), lat=st.floats(1e-6, 1e-2), bw=st.floats(1e6, 1e11))
def test_compute_scale_hits_the_target_ccr(target, lat, bw):
    g = _chain()
    cl = uniform_cluster(4, latency_s=lat, bytes_per_s=bw)
    s = compute_scale_for_ccr(g, cl, target)
    scaled = scale_compute(g, s)
    assert graph_ccr(scaled, cl) == pytest.approx(target, rel=1e-9)
    # the original graph is untouched, memory and bytes unchanged
    assert g.op("b")["compute_s"] == 1.0
    assert scaled.nx.edges["b", "c"]["bytes"] == 3000


def test_scale_covers_per_type_times():
    g = OpGraph("typed")
    g.add_op("a", compute_s=1.0, compute_s_by_type={"GPU": 0.1})
    g.add_op("b", compute_s=1.0)
    g.add_edge("a", "b", bytes=10)
    s = scale_compute(g, 3.0)
    assert s.op("a")["compute_s_by_type"]["GPU"] == pytest.approx(0.3)
    assert s.op("a")["compute_s"] == pytest.approx(3.0)


@pytest.mark.parametrize("target", [0, -1.0, math.inf, math.nan])
def test_bad_target_is_a_config_error(target):
    with pytest.raises(ConfigError, match="target_ccr"):
        compute_scale_for_ccr(_chain(), uniform_cluster(2, latency_s=0.1, bytes_per_s=1.0), target)


def test_no_communication_cannot_be_scaled():
    with pytest.raises(ConfigError, match="CCR"):
        compute_scale_for_ccr(_chain(), uniform_cluster(1), 10.0)
