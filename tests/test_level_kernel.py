"""Issue 22: `level_dag` with its level draws compiled (`algorithms.workloads.level_kernel`) builds the graph the
Python loop builds, byte for byte: the same graph JSON (ops, attributes with their types, edges, in order),
the same predecessor order, the same generator state afterwards (the random edges, colocation groups and
backward ops that follow draw from it), for several sizes, seeds, streams and generator arguments."""

from __future__ import annotations

import math
import random

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.workloads import synthetic
from algorithms.workloads.synthetic import level_dag

pytest.importorskip("algorithms.workloads.level_kernel")  # needs numba


def _fingerprint(g) -> tuple[bytes, list[list[str]], list[str]]:
    pred = g.nx._pred
    return orjson.dumps(g.to_dict()), [list(pred[v]) for v in g.nx], g.index().names


def _both(monkeypatch, **kw):
    out = []
    for threshold in (math.inf, 0):
        monkeypatch.setattr(synthetic, "COMPILED_MIN_OPS", threshold)
        out.append(_fingerprint(level_dag(**kw)))
    return out


def test_mersenne_twister_is_cpythons():
    """The kernel's words, `random()` and `randint` follow `random.Random` draw for draw (across twists)."""
    import numpy as np

    from algorithms.workloads.level_kernel import _randint, _random, _word

    for seed in (0, 1, "level_dag/3/2"):
        rng = random.Random(seed)
        _, state, _ = rng.getstate()
        mt = np.array(state[:624], np.int64)
        st_ = np.array([state[624]], np.int64)
        for k in range(2000):
            if k % 3 == 0:
                assert _word(mt, st_) == rng.getrandbits(32)
            elif k % 3 == 1:
                assert _random(mt, st_) == rng.random()
            else:
                lo, hi = (1, 100) if k % 2 else (5, 5 + k)
                assert _randint(mt, st_, lo, hi) == rng.randint(lo, hi)
        assert tuple(mt.tolist()) + (int(st_[0]),) == rng.getstate()[1]


RANDOM = dict(  # bench_scale's random training graph (`make_graph("random", n)`)
    min_nodes_per_level=4,
    max_nodes_per_level=12,
    edge_probability=0.10,
    edge_level_limit=5,
    random_edges=200,
    memory_unit_bytes=100.0,
    colocated_fraction=0.15,
    max_group_size=6,
    training=True,
)


@pytest.mark.parametrize("levels,seed", [(30, 0), (300, 0), (300, 7), (1000, 3)])
def test_bench_graph_identical(monkeypatch, levels, seed):
    python, compiled = _both(monkeypatch, levels=levels, seed=seed, **RANDOM)
    assert compiled == python


def test_whole_run_graph_identical(monkeypatch):
    """The whole run's graph (conf/model/synthetic.yaml with bench_scale's overrides: an int memory unit)."""
    kw = dict(RANDOM, memory_unit_bytes=100, tensor_unit_bytes=1.0e4, compute_unit_s=1.0e-5, edge_decay=1.0)
    python, compiled = _both(monkeypatch, levels=400, seed=0, **kw)
    assert compiled == python


@pytest.mark.parametrize(
    "kw",
    [
        dict(levels=500, min_nodes_per_level=1, max_nodes_per_level=1, edge_probability=1.0, edge_level_limit=1),
        dict(levels=60, max_nodes_per_level=20, edge_probability=0.3, edge_level_limit=0, edge_decay=0.7),
        dict(levels=80, edge_probability=0.5, edge_decay=1.3, edge_level_limit=8, stream=2, seed=11),
        dict(levels=90, p_cpu_only=0.3, p_gpu_only=0.2, colocated_fraction=0.3, training=True, random_edges=50),
        dict(levels=70, ops_range=(3, 3), memory_range=(0, 10**6), tensor_range=(1, 2**32), seed=5),
        dict(levels=70, compute_unit_s=2, memory_unit_bytes=3, tensor_unit_bytes=7, training=True),
        dict(levels=50, edge_probability=0.0, training=True, colocated_fraction=0.5),
    ],
)
def test_generator_arguments_identical(monkeypatch, kw):
    python, compiled = _both(monkeypatch, **kw)
    assert compiled == python


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    levels=st.integers(1, 40),
    wmin=st.integers(1, 6),
    wextra=st.integers(0, 10),
    p=st.sampled_from([0.0, 0.05, 0.3, 1.0]),
    limit=st.integers(0, 6),
    decay=st.sampled_from([1.0, 0.5, 2.0]),
    pc=st.sampled_from([0.0, 0.25]),
    pg=st.sampled_from([0.0, 0.5]),
    seed=st.integers(0, 2**40),
    stream=st.integers(0, 3),
    training=st.booleans(),
    coloc=st.sampled_from([0.0, 0.2]),
)
def test_random_arguments_identical(
    monkeypatch, levels, wmin, wextra, p, limit, decay, pc, pg, seed, stream, training, coloc
):
    python, compiled = _both(
        monkeypatch,
        levels=levels,
        min_nodes_per_level=wmin,
        max_nodes_per_level=wmin + wextra,
        edge_probability=p,
        edge_level_limit=limit,
        edge_decay=decay,
        p_cpu_only=pc,
        p_gpu_only=pg,
        seed=seed,
        stream=stream,
        training=training,
        colocated_fraction=coloc,
        random_edges=5,
    )
    assert compiled == python


def test_errors_unchanged(monkeypatch):
    """An empty draw range raises randrange's error on both paths (the kernel leaves it to Python)."""
    errors = []
    for threshold in (math.inf, 0):
        monkeypatch.setattr(synthetic, "COMPILED_MIN_OPS", threshold)
        with pytest.raises(ValueError) as exc:
            level_dag(levels=10, ops_range=(5, 4))
        errors.append(str(exc.value))
    assert errors[0] == errors[1]


def _digest(g) -> str:
    import hashlib

    pred = g.nx._pred
    h = hashlib.sha256(orjson.dumps(g.to_dict()))
    h.update(orjson.dumps([list(pred[v]) for v in g.nx]))
    return h.hexdigest()[:16]


def test_graph_bytes_pinned():
    """The graphs (JSON bytes and predecessor order) that the generator wrote before its draws were compiled
    and its colocation top-up and backward ops were rewritten (4440a88's code, session 15)."""
    from benchmarks.bench_scale import make_graph

    assert _digest(make_graph("random", 3000, 0)) == "3c3fbed472e269a0"
    assert _digest(make_graph("random", 30000, 5)) == "8df2dd32514bbf4c"
    assert _digest(make_graph("chain", 20000, 0)) == "8e05116a30b50c8c"
    kw = dict(p_cpu_only=0.3, p_gpu_only=0.3, colocated_fraction=0.5, training=True, stream=3, seed=9)
    assert _digest(level_dag(levels=2000, edge_decay=0.8, edge_level_limit=0, **kw)) == "5f0a7c212e8df61e"
