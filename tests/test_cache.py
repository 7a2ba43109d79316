"""The content-addressed stage cache: keys, atomicity, concurrency."""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from pathlib import Path

import pytest

from orchestrator.cache import StageCache, stage_key


def _save(v, p: Path):
    (p / "v.json").write_text(json.dumps(v))


def _load(p: Path):
    return json.loads((p / "v.json").read_text())


def test_keys_depend_on_stage_config_upstream_and_code():
    k = stage_key("place", {"a": 1}, ["u"], "v1")
    assert k == stage_key("place", {"a": 1}, ["u"], "v1")
    assert k != stage_key("schedule", {"a": 1}, ["u"], "v1")
    assert k != stage_key("place", {"a": 2}, ["u"], "v1")
    assert k != stage_key("place", {"a": 1}, ["w"], "v1")
    assert k != stage_key("place", {"a": 1}, ["u"], "v2")
    assert stage_key("p", {"a": 1, "b": 2}, [], "v") == stage_key("p", {"b": 2, "a": 1}, [], "v")


def test_hit_after_miss_and_disabled(tmp_path):
    c = StageCache(tmp_path)
    calls = []
    r1 = c.run("s", {"x": 1}, [], lambda: calls.append(1) or {"v": 3}, _save, _load)
    r2 = c.run("s", {"x": 1}, [], lambda: calls.append(1) or {"v": 3}, _save, _load)
    assert (r1.hit, r2.hit, r2.value, len(calls)) == (False, True, {"v": 3}, 1)
    off = StageCache(tmp_path / "off", enabled=False)
    off.run("s", {"x": 1}, [], lambda: {"v": 3}, _save, _load)
    assert not (tmp_path / "off").exists()


def test_failed_compute_or_save_leaves_no_entry(tmp_path):
    c = StageCache(tmp_path)

    def boom():
        raise ValueError("bad input")

    with pytest.raises(ValueError):
        c.run("s", {}, [], boom, _save, _load)

    def bad_save(v, p):
        (p / "half.json").write_text("{")
        raise OSError("disk full")

    with pytest.raises(OSError):
        c.run("s", {"k": 2}, [], lambda: 1, bad_save, _load)
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert leftovers == []
    assert c.run("s", {"k": 2}, [], lambda: 5, _save, _load).hit is False


def _worker(root, counter, results):
    c = StageCache(root)

    def compute():
        with open(counter, "a") as f:
            f.write("x")
        time.sleep(0.5)
        return {"v": 42}

    results.put(c.run("shared", {"k": 1}, [], compute, _save, _load).value)


def test_two_processes_compute_one_entry_once(tmp_path):
    counter = tmp_path / "count.txt"
    q = mp.get_context("spawn").Queue()
    procs = [mp.get_context("spawn").Process(target=_worker, args=(tmp_path / "c", counter, q)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [q.get(timeout=5), q.get(timeout=5)] == [{"v": 42}, {"v": 42}]
    assert counter.read_text() == "x"


def test_code_version_follows_a_plugins_imports_only():
    from orchestrator.cache import code_version, module_closure

    paths = module_closure(("algorithms.placers.baseline",))
    files = {p.name for p in paths}
    assert {"baseline.py", "placement.py", "graph.py", "base.py"} <= files
    # no other placer family is part of the baseline placers' code version
    assert {p.name for p in paths if p.parent.name == "placers"} == {"__init__.py", "baseline.py"}
    assert not any(p.parent.parent.name == "placers" for p in paths)
    a = code_version("place", ("algorithms.placers.baseline.SinglePlacer",))
    b = code_version("place", ("algorithms.schedulers.baseline.TopologicalScheduler",))
    assert a != b and a == code_version("place", ("algorithms.placers.baseline.ExpertPlacer",))
