"""OpGraph validation and JSON, Cluster and its communication model, placements, coarse maps."""

from __future__ import annotations

import json
import math

import pytest

from algorithms import (
    CoarseMap,
    InvalidCluster,
    InvalidGraph,
    InvalidPlacement,
    OpGraph,
    Placement,
    check_placement,
    uniform_cluster,
)
from algorithms.cluster import Cluster, Device, Link


def op(name, **kw):
    rec = {"name": name, "compute_s": 1.0, "persistent_bytes": 0, "temporary_bytes": 0, "output_bytes": 8}
    rec.update(kw)
    return rec


def graph_dict(ops, edges):
    return {
        "format": "opgraph/1",
        "name": "t",
        "ops": ops,
        "edges": [{"src": s, "dst": d, "bytes": 8, "control": False} for s, d in edges],
    }


def test_roundtrip_keeps_every_attribute(tmp_path):
    g = OpGraph("rt")
    g.add_op(
        "a",
        compute_s=0.5,
        persistent_bytes=10,
        temporary_bytes=2,
        output_bytes=3,
        type="MatMul",
        colocation="grp",
        device_type="GPU",
        compute_s_by_type={"GPU": 0.1},
    )
    g.add_op("a/grad", compute_s=1.0, phase="backward", forward_of="a")
    g.add_edge("a", "a/grad", bytes=3)
    g.add_edge("a", "a/grad", bytes=0, control=True)  # a control edge next to data keeps the data bytes
    p = tmp_path / "g.graph.json"
    g.save(p)
    data = json.loads(p.read_text())
    assert data["format"] == "opgraph/1"
    assert set(data["ops"][0]) >= {
        "name",
        "type",
        "phase",
        "compute_s",
        "persistent_bytes",
        "temporary_bytes",
        "output_bytes",
        "colocation",
        "device_type",
        "forward_of",
    }
    assert data["edges"] == [{"src": "a", "dst": "a/grad", "bytes": 3, "control": False}]
    h = OpGraph.load(p)
    assert h.to_dict() == g.to_dict()


def test_cycle_names_its_ops():
    d = graph_dict([op("a"), op("b"), op("c")], [("a", "b"), ("b", "c"), ("c", "a")])
    with pytest.raises(InvalidGraph, match=r"cycle.*'a'.*'b'.*'c'|cycle.*'b'.*'c'.*'a'|cycle"):
        OpGraph.from_dict(d)
    try:
        OpGraph.from_dict(d)
    except InvalidGraph as exc:
        assert all(x in str(exc) for x in ("'a'", "'b'", "'c'"))


@pytest.mark.parametrize(
    "ops,edges,match",
    [
        ([op("a"), op("a")], [], "duplicate op name 'a'"),
        ([op("a")], [("a", "zz")], "unknown destination op 'zz'"),
        ([op("a", compute_s=-1.0)], [], "op 'a': compute_s"),
        (
            [{"name": "a", "compute_s": 1, "persistent_bytes": 0, "temporary_bytes": 0}],
            [],
            "op 'a': missing output_bytes",
        ),
        ([op("a", output_bytes=float("nan"))], [], "op 'a': output_bytes"),
        (
            [op("a", colocation="g", device_type="CPU"), op("b", colocation="g", device_type="GPU")],
            [],
            "colocation group 'g'",
        ),
        ([op("a", phase="sideways")], [], "op 'a': phase"),
        ([op("a", forward_of="nope")], [], "forward_of names unknown op 'nope'"),
    ],
)
def test_validation_names_the_culprit(ops, edges, match):
    with pytest.raises(InvalidGraph, match=match):
        OpGraph.from_dict(graph_dict(ops, edges))


def test_negative_edge_bytes_rejected():
    d = graph_dict([op("a"), op("b")], [])
    d["edges"] = [{"src": "a", "dst": "b", "bytes": -3}]
    with pytest.raises(InvalidGraph, match="edge 'a' -> 'b'"):
        OpGraph.from_dict(d)


def test_device_type_no_device_has():
    g = OpGraph.from_dict(graph_dict([op("a", device_type="TPU")], []))
    with pytest.raises(InvalidGraph, match="op 'a' needs device type TPU"):
        g.validate(uniform_cluster(2))


def test_bad_file_messages(tmp_path):
    with pytest.raises(InvalidGraph, match="does not exist"):
        OpGraph.load(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(InvalidGraph, match="not valid JSON"):
        OpGraph.load(tmp_path / "x.json")


def test_cluster_comm_model_and_links():
    c = Cluster(
        [Device("a"), Device("b"), Device("c")], latency_s=1.0, bytes_per_s=10.0, links={("a", "b"): Link(0.5, 100.0)}
    )
    assert c.transfer_time("a", "a", 1e9) == 0
    assert c.transfer_time("a", "c", 100) == pytest.approx(11.0)
    assert c.transfer_time("a", "b", 100) == pytest.approx(1.5)
    assert c.transfer_time("b", "a", 100) == pytest.approx(1.5)  # one-sided link serves both directions


@pytest.mark.parametrize(
    "data,match",
    [
        ({"devices": []}, "devices"),
        ({"devices": [{"name": "a"}, {"name": "a"}]}, "duplicate device name 'a'"),
        ({"devices": [{"name": "a", "speed": 0}]}, "device 'a': speed"),
        ({"devices": [{"name": "a", "type": "FPGA"}]}, "device 'a': type"),
        ({"devices": [{"name": "a"}], "comm": {"mode": "bursty"}}, "comm.mode"),
        ({"devices": [{"name": "a"}], "links": [{"src": "a", "dst": "q"}]}, "unknown device 'q'"),
        ({"devices": [{"name": "a", "ram": 3}]}, "unknown keys"),
    ],
)
def test_cluster_errors(data, match):
    with pytest.raises(InvalidCluster, match=match):
        Cluster.from_dict(data)


def test_memory_fraction_scales_every_device():
    c = Cluster.from_dict(
        {"devices": [{"name": "a", "memory_bytes": 10.0}, {"name": "b", "memory_bytes": 20.0}], "memory_fraction": 0.3}
    )
    assert [d.memory_bytes for d in c.devices] == pytest.approx([3.0, 6.0])


def test_placement_checker():
    g = OpGraph.from_dict(
        graph_dict([op("a", colocation="g"), op("b", colocation="g"), op("c", device_type="GPU")], [("a", "b")])
    )
    c = Cluster([Device("c0", "CPU"), Device("g0", "GPU")])
    check_placement(g, c, {"a": "c0", "b": "c0", "c": "g0"})
    with pytest.raises(InvalidPlacement, match="op 'c' is not placed"):
        check_placement(g, c, {"a": "c0", "b": "c0"})
    with pytest.raises(InvalidPlacement, match="colocation group 'g' split"):
        check_placement(g, c, {"a": "c0", "b": "g0", "c": "g0"})
    with pytest.raises(InvalidPlacement, match="op 'c' needs a GPU"):
        check_placement(g, c, Placement({"a": "c0", "b": "c0", "c": "c0"}))
    with pytest.raises(InvalidPlacement, match="unknown device 'zz'"):
        check_placement(g, c, {"a": "zz", "b": "c0", "c": "g0"})


def test_coarse_maps_compose_and_expand():
    first = CoarseMap({"ab": ["a", "b"], "c": ["c"], "d": ["d"]})
    second = CoarseMap({"abc": ["ab", "c"], "d": ["d"]})
    both = first.then(second)
    assert both == {"abc": ["a", "b", "c"], "d": ["d"]}
    assert both.expand_assignment({"abc": "x", "d": "y"}) == {"a": "x", "b": "x", "c": "x", "d": "y"}
    assert both.expand_schedule({"x": ["abc"], "y": ["d"]}) == {"x": ["a", "b", "c"], "y": ["d"]}
    g = OpGraph.from_dict(graph_dict([op(x) for x in "abcd"], []))
    both.check_covers(g)
    with pytest.raises(InvalidPlacement, match="loses original ops"):
        CoarseMap({"abc": ["a", "b", "c"]}).check_covers(g)


def test_index_is_topological_and_invalidated():
    g = OpGraph()
    g.add_op("z", compute_s=1)
    g.add_op("y", compute_s=1)
    g.add_edge("y", "z", bytes=4)
    assert g.topological_order() == ["y", "z"]
    g.add_op("x", compute_s=1)
    g.add_edge("x", "y", bytes=4)
    assert g.topological_order() == ["x", "y", "z"]
    assert math.isclose(g.index().exec_time(0, "CPU", 2.0), 0.5)
