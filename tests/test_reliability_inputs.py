"""Bad numbers and bad files fail clearly instead of hanging or writing non-JSON (issue 19)."""

from __future__ import annotations

import json
import math
import signal

import pytest

from algorithms.cluster import Cluster, Device, Link, uniform_cluster
from algorithms.errors import InvalidCluster, InvalidGraph, LabError, SimulationError
from algorithms.graph import OpGraph, atomic_write_json
from algorithms.simulator import simulate
from algorithms.workloads.synthetic import linreg_graph

BASE = {
    "devices": [{"name": "a", "memory_bytes": 1e9}, {"name": "b", "memory_bytes": 1e9}],
    "comm": {"latency_s": 1e-5, "bytes_per_s": 1e9, "mode": "parallel"},
}


@pytest.mark.parametrize(
    "where, key, value",
    [
        ("comm", "latency_s", math.nan),
        ("comm", "latency_s", math.inf),
        ("comm", "latency_s", -1.0),
        ("comm", "bytes_per_s", math.nan),
        ("comm", "bytes_per_s", 0.0),
        ("device", "speed", math.nan),
        ("device", "speed", math.inf),
        ("device", "memory_bytes", math.nan),
        ("device", "memory_bytes", -5.0),
        ("link", "latency_s", math.nan),
        ("link", "bytes_per_s", -1.0),
    ],
)
def test_non_finite_or_negative_cluster_numbers_name_the_key(where, key, value):
    data = json.loads(json.dumps(BASE))
    if where == "comm":
        data["comm"][key] = value
    elif where == "device":
        data["devices"][1][key] = value
    else:
        data["links"] = [{"src": "a", "dst": "b", key: value}]
    with pytest.raises(InvalidCluster) as err:
        Cluster.from_dict(data, name="c")
    msg = str(err.value)
    assert key in msg and repr(value) in msg
    if where == "device":
        assert "'b'" in msg


def test_unknown_cluster_keys_fail_listing_the_known_ones():
    with pytest.raises(InvalidCluster, match=r"unknown keys \['unknown_key'\].*'devices'.*'comm'"):
        Cluster.from_dict({**BASE, "unknown_key": 1})
    with pytest.raises(InvalidCluster, match=r"unknown keys \['latency'\].*'latency_s'"):
        Cluster.from_dict({**BASE, "comm": {"latency": 1.0}})
    with pytest.raises(InvalidCluster, match=r"unknown keys \['ram'\].*'memory_bytes'"):
        Cluster.from_dict({"devices": [{"name": "a", "ram": 1}]})
    # the keys the shipped configs use are all known
    Cluster.from_dict({**BASE, "name": "x", "links": [], "memory_fraction": 1.0, "need_fraction": None})


def _alarm(seconds: int):
    def handler(signum, frame):
        raise TimeoutError(f"no answer in {seconds} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.alarm(seconds)
    return old


def test_the_simulator_raises_instead_of_spinning_on_a_nan_time():
    g = linreg_graph(batch=4, features=8)
    cl = uniform_cluster(2, latency_s=1e-5, bytes_per_s=1e9)
    ops = g.topological_order()
    assignment = {op: ("cpu0" if k % 2 else "cpu1") for k, op in enumerate(ops)}
    # a NaN that got past validation (tables patched after the checks)
    cl.latency_table[0][1] = cl.latency_table[1][0] = math.nan
    old = _alarm(30)
    try:
        with pytest.raises(SimulationError, match="NaN"):
            simulate(g, cl, assignment)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_graph_numbers_name_the_op_and_field(tmp_path):
    d = linreg_graph(batch=4, features=8).to_dict()
    op = d["ops"][2]["name"]
    d["ops"][2]["compute_s"] = math.nan
    path = tmp_path / "g.json"
    path.write_text(json.dumps(d))  # Python writes the NaN literal, which json.load accepts
    with pytest.raises(InvalidGraph, match=rf"op '{op}': compute_s must be finite"):
        OpGraph.load(path)
    d["ops"][2]["compute_s"] = 1.0
    d["edges"][0]["bytes"] = -3
    with pytest.raises(InvalidGraph, match=r"edge .* bytes must be finite and >= 0, got -3"):
        OpGraph.from_dict(d)


def test_an_empty_graph_is_an_error():
    with pytest.raises(InvalidGraph, match="no ops"):
        OpGraph.from_dict({"format": "opgraph/1", "name": "e", "ops": [], "edges": []})
    with pytest.raises(InvalidGraph, match="no ops"):
        OpGraph("e").validate()


def test_a_graph_file_that_is_not_utf8_names_the_file(tmp_path):
    path = tmp_path / "latin1.graph.json"
    path.write_bytes('{"format": "opgraph/1", "name": "caf\u00e9", "ops": [], "edges": []}'.encode("latin-1"))
    with pytest.raises(InvalidGraph, match=r"latin1\.graph\.json.*not UTF-8"):
        OpGraph.load(path)


def test_outputs_are_strict_json(tmp_path):
    path = tmp_path / "r.json"
    with pytest.raises(ValueError, match=r"r\.json: peak\.d1 is not a finite number"):
        atomic_write_json(path, {"status": "ok", "peak": {"d0": 1.0, "d1": math.inf}})
    with pytest.raises(ValueError, match=r"rows\[1\]\[0\]"):
        atomic_write_json(path, {"rows": [[1.0], [math.nan]]})
    assert not path.exists() and list(tmp_path.iterdir()) == []
    atomic_write_json(path, {"x": [1.5, None]})
    assert json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(c)) == {"x": [1.5, None]}


def test_lab_errors_for_every_device_check():
    with pytest.raises(LabError):
        Cluster([Device("a", speed=math.nan)])
    with pytest.raises(LabError):
        Cluster([Device("a"), Device("b")], links={("a", "b"): Link(math.nan, 1.0)})


@pytest.mark.slow
def test_a_nan_latency_or_unknown_key_on_the_command_line_fails_fast(lab):
    out = lab.cwd / "nan"
    p = lab.run("model.generator.levels=4", "cluster.comm.latency_s=nan", f"hydra.run.dir={out}", check=False)
    assert p.returncode == 1
    r = json.loads((out / "result.json").read_text())
    # caught when the resolved config is written (config.json is strict JSON), before the cluster is built
    assert r["status"] == "error" and "cluster.comm.latency_s is not a finite number" in r["error"]
    out = lab.cwd / "negative"
    p = lab.run("model.generator.levels=4", "cluster.comm.latency_s=-1", f"hydra.run.dir={out}", check=False)
    assert p.returncode == 1
    r = json.loads((out / "result.json").read_text())
    assert r["status"] == "error" and "comm.latency_s must be finite and >= 0 (got -1.0)" in r["error"]
    out = lab.cwd / "unknown"
    p = lab.run("model.generator.levels=4", "+cluster.unknown_key=1", f"hydra.run.dir={out}", check=False)
    assert p.returncode == 1
    r = json.loads((out / "result.json").read_text())
    assert "unknown keys ['unknown_key']" in r["error"] and "'devices'" in r["error"]
