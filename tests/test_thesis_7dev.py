"""The thesis' evaluation on seven devices (7.3, Figures 7.7 - 7.10): every partitioner places graphs 2 and 3, as
in the thesis (its Figures 7.7 and 7.9 (b) show every partitioner on graph 3, MITE included)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from experiments.thesis_7dev_sensitivity import CONF, PLACERS, compose_7dev
from orchestrator.context import build_cluster
from orchestrator.models import SyntheticGraph
from orchestrator.registry import instantiate, plain


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_partitioner_fits_graphs_2_and_3_on_seven_devices(seed):
    for graph in ("g2", "g3"):
        cfg = compose_7dev(f"thesis_graph={graph}", f"seed={seed}")
        g = SyntheticGraph(plain(cfg.model.generator), name=str(cfg.model.name)).graph()
        cluster = build_cluster(cfg.cluster, "thesis_hetero")
        assert len(cluster.devices) == 7
        for placer in PLACERS:
            pl = instantiate(compose_7dev(f"placer={placer}").placer, "placer").place(
                g, cluster
            )  # raises if infeasible
            assert set(pl.assignment) == set(g.nx.nodes)


@pytest.mark.slow
def test_mite_fits_graph_3_at_the_thesis_size():
    """At thesis_synthetic's memory calibration MITE found no feasible CPU device for an op of graph 3 (7,562 ops)."""
    cfg = compose_7dev("thesis_graph=g3", "thesis_size=paper", "placer=mite")
    g = SyntheticGraph(plain(cfg.model.generator), name=str(cfg.model.name)).graph()
    pl = instantiate(cfg.placer, "placer").place(g, build_cluster(cfg.cluster, "thesis_hetero"))
    assert len(pl.assignment) == len(g) == 7562


def test_seven_device_memory_is_a_quarter_above_the_100_device_calibration():
    for size, frac in (("small", 0.125), ("paper", 1.25)):
        assert compose_7dev(f"thesis_size={size}").cluster.memory_fraction == pytest.approx(frac)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        base = compose("config", overrides=["+experiment=thesis_synthetic", "thesis_size=paper"])
    GlobalHydra.instance().clear()
    assert base.cluster.memory_fraction == pytest.approx(1.0)
