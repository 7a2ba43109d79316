"""OpGraph's bulk construction (`add_ops`, `add_edges`, `from_dict`) and its index give exactly what op-by-op
construction and the reference topological order give (issue 22)."""

from __future__ import annotations

import math

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms import graph as graph_mod
from algorithms.errors import InvalidGraph
from algorithms.graph import OpGraph, _all_finite, _topological_order, non_finite_path, op_attrs


def _snapshot(g: OpGraph) -> bytes:
    idx = g.index()
    preds = {n: list(g.nx.pred[n]) for n in g.nx}
    return orjson.dumps([g.to_dict(), idx.names, idx.succ, idx.pred, idx.copy_bytes, preds])


@st.composite
def _recipes(draw):
    n = draw(st.integers(1, 12))
    ops = []
    for k in range(n):
        ops.append(
            (
                f"op{k}",
                dict(
                    compute_s=draw(st.floats(0, 5)),
                    output_bytes=draw(st.integers(0, 100)),
                    colocation=draw(st.sampled_from([None, "g0", "g1"])),
                    phase=draw(st.sampled_from(["forward", "backward"])),
                ),
            )
        )
    # edges from a lower to a higher number (a DAG), duplicates and control edges included
    pairs = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda t: t[0] < t[1])
    edges = draw(st.lists(st.tuples(pairs, st.integers(0, 50), st.booleans()), max_size=30)) if n > 1 else []
    order = draw(st.permutations(range(n)))  # insertion order of the ops, not topological
    return [ops[k] for k in order], [(f"op{a}", f"op{b}", float(by), c) for (a, b), by, c in edges]


@settings(max_examples=60, deadline=None)
@given(_recipes())
def test_bulk_equals_one_by_one(recipe):
    ops, edges = recipe
    one = OpGraph("g")
    for name, kw in ops:
        one.add_op(name, **kw)
    for s, d, b, c in edges:
        one.add_edge(s, d, bytes=b, control=c)
    bulk = OpGraph("g")
    bulk.add_ops((name, op_attrs(**kw)) for name, kw in ops)
    bulk.add_edges(edges)
    assert _snapshot(bulk) == _snapshot(one)
    assert bulk.index().names == _topological_order(one.nx)
    data = orjson.loads(orjson.dumps(one.to_dict()))
    ref = OpGraph("g")  # what op-by-op loading gives (edges in the file's order)
    for rec in data["ops"]:
        rec = dict(rec)
        ref.add_op(rec.pop("name"), **rec)
    for e in data["edges"]:
        ref.add_edge(e["src"], e["dst"], bytes=e["bytes"], control=e["control"])
    assert _snapshot(OpGraph.from_dict(data)) == _snapshot(ref)
    assert OpGraph.from_dict(data).to_dict() == one.to_dict()


def test_bulk_errors():
    g = OpGraph("g")
    g.add_ops([("a", op_attrs()), ("b", op_attrs())])
    with pytest.raises(InvalidGraph, match="duplicate op name 'a'"):
        g.add_ops([("a", op_attrs())])
    with pytest.raises(InvalidGraph, match="unknown destination op 'z'"):
        g.add_edges([("a", "z", 1.0, False)])
    with pytest.raises(InvalidGraph, match="unknown source op"):
        g.add_edges([(["a"], "b", 1.0, False)])  # type: ignore[list-item]  # an unhashable name on purpose


def test_from_dict_errors_name_the_edge():
    ops = [{"name": n, "compute_s": 1, "persistent_bytes": 0, "temporary_bytes": 0, "output_bytes": 0} for n in "ab"]
    with pytest.raises(InvalidGraph, match=r"unknown source op \['x'\]"):
        OpGraph.from_dict({"ops": ops, "edges": [{"src": ["x"], "dst": "b", "bytes": 1}]})
    with pytest.raises(InvalidGraph, match="edges\\[1\\] needs"):
        OpGraph.from_dict({"ops": ops, "edges": [{"src": "a", "dst": "b", "bytes": 1}, {"src": "a"}]})
    with pytest.raises(InvalidGraph, match="duplicate op name 'a' \\(ops\\[2\\]\\)"):
        OpGraph.from_dict({"ops": ops + ops[:1], "edges": []})


def test_index_cycle_names_its_ops():
    g = OpGraph("g")
    g.add_ops((n, op_attrs()) for n in "abcd")
    g.add_edges([("a", "b", 1.0, False), ("b", "c", 1.0, False), ("c", "b", 1.0, False), ("c", "d", 1.0, False)])
    with pytest.raises(InvalidGraph, match="cycle through ops"):
        g.index()


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.text(max_size=3),
    st.floats(-1e6, 1e6),
    st.sampled_from([math.nan, math.inf, -math.inf]),
)
_json_like = st.recursive(
    _scalars,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.dictionaries(st.text(max_size=3), kids, max_size=4),
        st.lists(st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)), max_size=3),
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json_like)
def test_all_finite_agrees_with_non_finite_path(obj):
    assert _all_finite(obj) == (non_finite_path(obj) is None)


@pytest.mark.parametrize("chunk", [1, 2, 1000])
def test_save_writes_the_bytes_of_the_whole_dict(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(graph_mod, "SAVE_CHUNK", chunk)
    g = OpGraph("g")
    g.add_op("a", compute_s=1.5, output_bytes=3, module="m", compute_s_by_type={"GPU": 0.5})
    g.add_op("b", compute_s=0, colocation="c")
    g.add_op("c")
    g.add_edge("a", "b", bytes=7)
    g.add_edge("a", "c", control=True)
    g.add_edge("b", "c", bytes=1e-5)
    g.save(tmp_path / "new.json")
    graph_mod.atomic_write_json(tmp_path / "old.json", g.to_dict())
    assert (tmp_path / "new.json").read_bytes() == (tmp_path / "old.json").read_bytes()
    assert OpGraph.load(tmp_path / "new.json").to_dict() == g.to_dict()
    empty = OpGraph("e")
    empty.add_op("only")
    empty.save(tmp_path / "e.json")
    graph_mod.atomic_write_json(tmp_path / "e_old.json", empty.to_dict())
    assert (tmp_path / "e.json").read_bytes() == (tmp_path / "e_old.json").read_bytes()


def test_save_falls_back_with_the_same_error_and_text(tmp_path, monkeypatch):
    monkeypatch.setattr(graph_mod, "SAVE_CHUNK", 1)
    g = OpGraph("g")
    g.add_op("a", compute_s=1.0)
    g.add_op("b", compute_s=math.nan)
    with pytest.raises(ValueError, match=r"ops\[1\]\.compute_s is not a finite number"):
        g.save(tmp_path / "nan.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no temporary file left behind
    h = OpGraph("h")
    h.add_op("a", extra={1: 2})  # a non-string key: json.dumps' text, as before
    h.save(tmp_path / "h.json")
    graph_mod.atomic_write_json(tmp_path / "h_old.json", h.to_dict())
    assert (tmp_path / "h.json").read_bytes() == (tmp_path / "h_old.json").read_bytes()


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 4),
    st.integers(0, 6),
    st.floats(0.05, 1.0),
    st.booleans(),
    st.integers(0, 3),
    st.integers(1, 9),
)
def test_level_dag_batches_give_the_graph_of_one_level_at_a_time(levels, lo, extra, p, training, seed, batch):
    """`level_dag` hands whole levels to the graph in batches of `_BATCH_OPS` ops: any batch size gives the
    graph (records, node and adjacency orders, index) that one level per call gave."""
    from algorithms.workloads import synthetic

    kw = dict(
        levels=levels,
        min_nodes_per_level=lo,
        max_nodes_per_level=lo + extra,
        edge_probability=p,
        random_edges=3,
        colocated_fraction=0.2,
        training=training,
        seed=seed,
    )
    saved = synthetic._BATCH_OPS
    try:
        synthetic._BATCH_OPS = 1
        one = _snapshot(synthetic.level_dag(**kw))
        synthetic._BATCH_OPS = batch
        assert _snapshot(synthetic.level_dag(**kw)) == one
    finally:
        synthetic._BATCH_OPS = saved
    assert _snapshot(synthetic.level_dag(**kw)) == one


_records = st.lists(
    st.dictionaries(st.sampled_from(["op", "device", "start_s", "end_s"]), _json_like, max_size=4), max_size=7
)


@settings(max_examples=200, deadline=None)
@given(_records, st.sampled_from([None, 0, 1]), st.integers(1, 3))
def test_json_list_writer_writes_the_bytes_of_the_whole_list(tmp_path_factory, records, indent, chunk):
    """`atomic_write_json_list` streams what `atomic_write_json` writes of the list, or raises its error."""
    d = tmp_path_factory.mktemp("w")
    old_chunk, graph_mod.SAVE_CHUNK = graph_mod.SAVE_CHUNK, chunk
    try:
        try:
            graph_mod.atomic_write_json(d / "old.json", records, indent=indent)
        except ValueError as exc:
            with pytest.raises(ValueError) as got:
                graph_mod.atomic_write_json_list(d / "new.json", lambda: iter(records), indent=indent)
            assert str(got.value) == str(exc).replace("old.json", "new.json")
            assert sorted(p.name for p in d.iterdir()) == []  # no partial file, no temporary file
            return
        graph_mod.atomic_write_json_list(d / "new.json", lambda: iter(records), indent=indent)
    finally:
        graph_mod.SAVE_CHUNK = old_chunk
    assert (d / "new.json").read_bytes() == (d / "old.json").read_bytes()


@settings(max_examples=200, deadline=None)
@given(_records, st.dictionaries(st.sampled_from(["displayTimeUnit", "otherData"]), _json_like), st.integers(1, 3))
def test_json_object_writer_writes_the_bytes_of_the_whole_object(tmp_path_factory, records, rest, chunk):
    """`atomic_write_json_with_list` streams what `atomic_write_json` writes of the object, or raises its error."""
    d = tmp_path_factory.mktemp("w")
    old_chunk, graph_mod.SAVE_CHUNK = graph_mod.SAVE_CHUNK, chunk
    try:
        try:
            graph_mod.atomic_write_json(d / "old.json", {"traceEvents": records, **rest})
        except ValueError as exc:
            with pytest.raises(ValueError) as got:
                graph_mod.atomic_write_json_with_list(d / "new.json", "traceEvents", lambda: iter(records), rest)
            assert str(got.value) == str(exc).replace("old.json", "new.json")
            assert sorted(p.name for p in d.iterdir()) == []
            return
        graph_mod.atomic_write_json_with_list(d / "new.json", "traceEvents", lambda: iter(records), rest)
    finally:
        graph_mod.SAVE_CHUNK = old_chunk
    assert (d / "new.json").read_bytes() == (d / "old.json").read_bytes()
    with pytest.raises(ValueError, match="both the list's"):
        graph_mod.atomic_write_json_with_list(d / "x.json", "a", lambda: iter(records), {"a": 1})
