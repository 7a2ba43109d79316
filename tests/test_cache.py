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


def test_a_disabled_cache_does_not_hash_the_sources(tmp_path, monkeypatch):
    """Without a cache the key only chains the stages: no `code_version` (an AST walk of the project, ~1 s a
    run); keys still differ by stage, config and upstream."""
    from orchestrator import cache

    def refuse(*a, **k):
        raise AssertionError("code_version called with the cache disabled")

    monkeypatch.setattr(cache, "code_version", refuse)
    off = StageCache(tmp_path / "off", enabled=False)
    a = off.run("s", {"x": 1}, [], lambda: 1, _save, _load)
    b = off.run("s", {"x": 2}, [a.key], lambda: 2, _save, _load)
    assert (a.value, b.value, a.hit, b.hit) == (1, 2, False, False) and a.key != b.key


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


# --------------------------------------------------------------------------- integrity (issue 19)
def _entry(c: StageCache, config) -> Path:
    from orchestrator.cache import stage_key

    return c.path(stage_key("s", config, []))


def test_an_edited_truncated_or_incomplete_entry_is_recomputed(tmp_path, caplog):
    from orchestrator.cache import verify_entry

    c = StageCache(tmp_path)
    calls = []

    def compute():
        calls.append(1)
        return {"v": 3}

    def save2(v, p):
        _save(v, p)
        (p / "extra.json").write_text("[1, 2]")

    c.run("s", {"x": 1}, [], compute, save2, _load)
    entry = _entry(c, {"x": 1})
    tamper = [
        lambda: (entry / "v.json").write_text(json.dumps({"v": 999})),  # other valid JSON: a forged result
        lambda: (entry / "v.json").write_text('{"v": '),  # truncated
        lambda: (entry / "extra.json").unlink(),  # a file lost
        lambda: (entry / "new.json").write_text("{}"),  # a file added
        lambda: (entry / ".complete").write_text("{"),  # the manifest itself truncated
    ]
    for k, spoil in enumerate(tamper):
        spoil()
        assert verify_entry(entry, entry.name) is not None
        with caplog.at_level("WARNING"):
            r = c.run("s", {"x": 1}, [], compute, save2, _load)
        assert (r.hit, r.value, len(calls)) == (False, {"v": 3}, k + 2)
        assert "corrupt" in caplog.text
        caplog.clear()
        assert verify_entry(entry, entry.name) is None  # replaced by a good entry
        assert c.run("s", {"x": 1}, [], compute, save2, _load).hit
    assert not [p for p in entry.parent.iterdir() if p.name.startswith((".tmp-", ".old-"))]


def test_an_entry_that_fails_to_load_is_recomputed(tmp_path):
    c = StageCache(tmp_path)
    c.run("s", {"x": 2}, [], lambda: {"v": 1}, _save, _load)

    def bad_load(p):
        raise KeyError("format changed")

    r = c.run("s", {"x": 2}, [], lambda: {"v": 1}, _save, bad_load)
    assert r.hit is False and r.value == {"v": 1}


def test_a_cache_folder_that_cannot_be_written_says_so(tmp_path, monkeypatch):
    from algorithms.errors import CacheError

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(CacheError, match=r"cache\.dir=.*file/cache.*cache\.enabled=false"):
        StageCache(blocker / "cache")
    monkeypatch.setattr("os.access", lambda *a, **k: False)  # root ignores permission bits: pretend
    with pytest.raises(CacheError, match="is not writable"):
        StageCache(tmp_path / "ro")
    StageCache(blocker / "cache", enabled=False)  # no cache, no error


def test_editing_a_plugin_outside_the_project_changes_its_code_version(tmp_path, monkeypatch):
    import sys

    from orchestrator import cache

    pkg = tmp_path / "outside_plug"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("SCALE = 1\n")
    (pkg / "placer.py").write_text("from .helper import SCALE\n\nclass P:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    target = ("outside_plug.placer.P",)

    def version():
        cache._VERSIONS.clear()
        sys.modules.pop("outside_plug.placer", None)
        sys.modules.pop("outside_plug.helper", None)
        return cache.code_version("place", target)

    v0 = version()
    assert {p.name for p in cache.module_closure(("outside_plug.placer",))} >= {"placer.py", "helper.py"}
    (pkg / "placer.py").write_text("from .helper import SCALE\n\nclass P:\n    x = 2\n")
    v1 = version()
    (pkg / "helper.py").write_text("SCALE = 2\n")
    v2 = version()
    assert len({v0, v1, v2}) == 3
    cache._VERSIONS.clear()


_WRITER = """
import json, sys, time
from pathlib import Path
from orchestrator.cache import StageCache

c = StageCache(sys.argv[1])
n = 200_000

def save(v, p):
    for name in ("a.json", "b.json", "c.json"):
        (p / name).write_text(json.dumps(v))
        time.sleep(0.02)

def load(p):
    return [json.loads((p / n).read_text()) for n in ("a.json", "b.json", "c.json")]

print("ready", flush=True)
i = 0
while True:
    c.run("s", {"i": i}, [], lambda: {"i": i, "data": list(range(n))}, save, load)
    i += 1
"""


@pytest.mark.slow
def test_a_writer_killed_at_random_points_never_leaves_a_corrupt_entry(tmp_path):
    import random
    import signal
    import subprocess
    import sys

    from orchestrator.cache import stage_key, verify_entry

    root = tmp_path / "cache"
    rng = random.Random(19)
    for trial in range(8):
        p = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(root)],
            cwd=Path(__file__).resolve().parent.parent,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 1.5))
        p.send_signal(signal.SIGKILL)
        p.wait(30)
        c = StageCache(root)
        seen = 0
        for i in range(400):
            key = stage_key("s", {"i": i}, [])
            entry = c.path(key)
            if not entry.exists():
                continue
            seen += 1
            assert verify_entry(entry, key) is None, (trial, i)
        # the rerun reads every complete entry and recomputes the one the kill interrupted
        calls = []

        def compute(i=seen, calls=calls):
            calls.append(i)
            return {"i": i, "data": list(range(200_000))}

        def save(v, p):
            for name in ("a.json", "b.json", "c.json"):
                (p / name).write_text(json.dumps(v))

        def load(p):
            return [json.loads((p / n).read_text()) for n in ("a.json", "b.json", "c.json")]

        r = c.run("s", {"i": seen}, [], compute, save, load)
        assert r.hit is False and calls == [seen]
        assert verify_entry(c.path(r.key), r.key) is None
        if seen:
            back = c.run("s", {"i": seen - 1}, [], compute, save, load)
            assert back.hit and back.value[0]["i"] == seen - 1
        leftovers = [q for q in c.path(r.key).parent.iterdir() if q.name.startswith(f".tmp-{r.key[:12]}")]
        assert leftovers == []
