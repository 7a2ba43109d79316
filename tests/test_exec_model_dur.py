"""Issue 22: `ExecModel.dur` is an ops x devices numpy array (it was a list of D Python floats per op, 1.8 M
objects and 55 MB at 300,000 ops on four devices).  The durations are the same floats, and the Baechi placers
that read them (m-ETF by the Python classes and compiled, m-SCT, in parallel and sequential mode) give the same
placements as the list-based model: the digests below were recorded on the code before the change (main
1887ecb), on graphs whose ops have per-device-type compute times and a cluster of two device types and four
speeds."""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np
import pytest

from algorithms.cluster import Cluster, Device, uniform_cluster
from algorithms.memory import single_device_need
from algorithms.placers.baechi import METFPlacer, MSCTPlacer, m_etf, m_sct
from algorithms.placers.baechi.exec_model import ExecModel, durations, mean_durations
from algorithms.workloads.synthetic import level_dag


def _graph(seed: int, by_type: bool):
    """A training graph of about 150 ops; with `by_type`, every third op runs at its own speed per device type."""
    g = level_dag(
        levels=12,
        min_nodes_per_level=2,
        max_nodes_per_level=6,
        edge_probability=0.3,
        random_edges=8,
        colocated_fraction=0.1,
        max_group_size=4,
        training=True,
        seed=seed,
    )
    if by_type:
        for k, (_, a) in enumerate(g.nx.nodes(data=True)):
            if k % 3 == 0:
                a["compute_s_by_type"] = {"GPU": a["compute_s"] / 3.0, "CPU": a["compute_s"] * 1.7}
        g.invalidate()
    return g


def _cluster(graph, mode: str) -> Cluster:
    mem = 0.6 * single_device_need(graph)
    devs = [
        Device("gpu0", "GPU", mem, 1.0),
        Device("gpu1", "GPU", mem, 1.3),
        Device("cpu0", "CPU", mem, 0.7),
        Device("cpu1", "CPU", mem, 1.1),
    ]
    return Cluster(devs, 1e-4, 1e9, mode, {}, "mixed4")


def _digest(pl) -> str:
    rec = {"assignment": pl.assignment, "order": pl.order, "makespan": pl.info["predicted_makespan_s"]}
    rec.update({k: v for k, v in pl.info.items() if k.startswith("predicted_peak_bytes")})
    return hashlib.sha256(json.dumps(rec, sort_keys=True).encode()).hexdigest()[:16]


@pytest.mark.parametrize("by_type", [False, True])
def test_dur_is_the_list_models_floats(by_type):
    g = _graph(1, by_type)
    cl = _cluster(g, "parallel")
    model = ExecModel(g, cl)
    idx = g.index()
    devs = cl.devices
    if by_type:
        old = [[idx.exec_time(i, d.type, d.speed) for d in devs] for i in range(idx.n)]
    else:
        old = [[c / d.speed for d in devs] for c in idx.compute_s]
    assert isinstance(model.dur, np.ndarray) and model.dur.shape == (idx.n, len(devs))
    assert model.dur.dtype == np.float64
    assert model.dur.tolist() == old


@pytest.mark.parametrize("by_type", [False, True])
def test_durations_functions_are_the_models(by_type):
    """`exec_model.durations` and `mean_durations` (which m-SCT calls before the model exists, session 17) give
    the model's array and means, bit for bit."""
    g = _graph(1, by_type)
    cl = _cluster(g, "parallel")
    model = ExecModel(g, cl)
    dur = durations(g, cl)
    assert dur.dtype == np.float64 and dur.tobytes() == model.dur.tobytes()
    assert mean_durations(dur).tobytes() == model.mean_durations().tobytes()


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12's sum() of floats is compensated")
@pytest.mark.parametrize("by_type", [False, True])
@pytest.mark.parametrize("n_dev", [1, 3, 4, 7])
def test_mean_durations_are_the_python_sums(by_type, n_dev):
    """`ExecModel.mean_durations` (column additions over the array) gives the floats of ``sum(row) / D``, the
    code before session 16, bit for bit (Python 3.11 adds a list of floats left to right)."""
    g = _graph(2, by_type)
    cl = uniform_cluster(n_dev, 4 * g.total_memory(), latency_s=1e-4, bytes_per_s=5e9)
    model = ExecModel(g, cl)
    got = model.mean_durations()
    want = np.array(model._mean_durations_loop())
    assert got.dtype == np.float64 and got.tobytes() == want.tobytes()


#: (placer, mode, compiled, seed, compute_s_by_type) -> digest of the placement, recorded on main 1887ecb
EXPECTED = {
    ("m_etf", "parallel", False, 1, False): "9fb5cb36bcc5770b",
    ("m_etf", "parallel", False, 1, True): "f081cf07332cc5bd",
    ("m_etf", "parallel", False, 2, False): "21a9c6360c4e93a7",
    ("m_etf", "parallel", False, 2, True): "8cae855815524396",
    ("m_etf", "parallel", True, 1, False): "9fb5cb36bcc5770b",
    ("m_etf", "parallel", True, 1, True): "f081cf07332cc5bd",
    ("m_etf", "parallel", True, 2, False): "21a9c6360c4e93a7",
    ("m_etf", "parallel", True, 2, True): "8cae855815524396",
    ("m_etf", "sequential", False, 1, False): "18001b4ac846dc4c",
    ("m_etf", "sequential", False, 1, True): "b0182d0ab033d311",
    ("m_etf", "sequential", False, 2, False): "e1ce8debcb25b3d7",
    ("m_etf", "sequential", False, 2, True): "e0eeb49d7e63cf68",
    ("m_sct", "parallel", False, 1, False): "8cb6a9510277e32f",
    ("m_sct", "parallel", False, 1, True): "5f05320a656ba367",
    ("m_sct", "parallel", False, 2, False): "be6267be19f55282",
    ("m_sct", "parallel", False, 2, True): "e96a539779693755",
    ("m_sct", "parallel", True, 1, False): "8cb6a9510277e32f",
    ("m_sct", "parallel", True, 1, True): "5f05320a656ba367",
    ("m_sct", "parallel", True, 2, False): "be6267be19f55282",
    ("m_sct", "parallel", True, 2, True): "e96a539779693755",
    ("m_sct", "sequential", False, 1, False): "c8a506b2a8f544a5",
    ("m_sct", "sequential", False, 1, True): "d4a132580d8cbdbe",
    ("m_sct", "sequential", False, 2, False): "f02d31d0d36fac68",
    ("m_sct", "sequential", False, 2, True): "d7e24392200419b3",
}

CASES = [
    (placer, mode, compiled, seed, by_type)
    for placer in ("m_etf", "m_sct")
    for mode in ("parallel", "sequential")
    for compiled in ((False, True) if mode == "parallel" else (False,))
    for seed in (1, 2)
    for by_type in (False, True)
]


def _place(placer: str, mode: str, compiled: bool, seed: int, by_type: bool, monkeypatch) -> str:
    if compiled:
        pytest.importorskip("numba")
    mod = m_etf if placer == "m_etf" else m_sct
    monkeypatch.setattr(mod, "COMPILED_MIN_OPS", 1 if compiled else None)
    g = _graph(seed, by_type)
    cl = _cluster(g, mode)
    pl = (METFPlacer() if placer == "m_etf" else MSCTPlacer()).place(g, cl)
    return _digest(pl)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_placements_as_with_list_durations(case, monkeypatch):
    assert _place(*case, monkeypatch) == EXPECTED[case]
