"""Third-party plugins: a separate package installs, registers through its entry point, and is usable by name
(a placer, a model, a profiler and a runtime); the minimal example of docs/plugins.md runs as written."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """tests/plugin_pkg installed (with its entry point) into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(ROOT / "tests" / "plugin_pkg"),
        ],
        check=True,
    )
    return target


@pytest.mark.slow
def test_installed_plugin_package_is_found_and_runs(lab, plugin_site):
    lab.env["PYTHONPATH"] = os.pathsep.join([str(plugin_site), str(ROOT)])
    cat = subprocess.run(
        [sys.executable, "-m", "orchestrator.catalog", "placer", "model", "profiler", "runtime"],
        cwd=lab.cwd,
        env=lab.env,
        capture_output=True,
        text=True,
        check=True,
    )
    for name in ("round_robin", "chain", "scaled", "emulated"):
        assert re.search(rf"^\s+{name}\s.*\[plugin:demo\]$", cat.stdout, re.M), (name, cat.stdout)
    lab.run("placer=round_robin", "model=linreg_graph", "cluster=cpu2")
    (out,) = lab.outputs()
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "ok" and res["placer"] == "round_robin"
    placement = json.loads((out / "placement.json").read_text())
    assert set(placement.values()) == {"cpu0", "cpu1"}


@pytest.mark.slow
def test_plugin_model_profiler_and_runtime_run_a_job(lab, plugin_site):
    lab.env["PYTHONPATH"] = os.pathsep.join([str(plugin_site), str(ROOT)])
    lab.run(
        "model=chain",
        "model.length=6",
        "profiler=scaled",
        "profiler.factor=3",
        "runtime=emulated",
        "placer=round_robin",
        "cluster=cpu2",
    )
    (out,) = lab.outputs()
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "ok" and res["model"] == "chain" and res["runtime"] == "emulated"
    assert res["n_ops"] == 12  # six layers and their gradients
    # the profiler tripled every op's 1 ms: the chain's critical path is 6 forward + 6 backward ops
    assert res["predicted_step_s"] >= 3 * (6 * 1e-3 + 6 * 2e-3) - 1e-12
    # the emulated runtime sleeps the profiled times one op after another along the chain
    assert res["measured_step_s"] >= 0.9 * 3 * (6 * 1e-3 + 6 * 2e-3)
    assert res["measured_steps"] == 3
    report = json.loads((out / "scaled_profile.json").read_text())
    assert report["factor"] == 3.0 and report["total_compute_s"] == pytest.approx(3 * (6e-3 + 12e-3))
    (run,) = lab.runs()
    assert run.data.metrics["demo.total_compute_s"] == pytest.approx(report["total_compute_s"])


def _doc_blocks(lang: str) -> list[str]:
    text = (ROOT / "docs" / "plugins.md").read_text()
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


@pytest.mark.slow
def test_minimal_placer_of_the_docs_runs_as_written_on_the_default_experiment(lab):
    """The docs' minimal placer and its YAML, written where their first comment line says, in a copy of the
    project, and run on the default experiment (a synthetic graph with colocation groups)."""
    copy = lab.cwd / "project"
    for folder in ("algorithms", "backends", "orchestrator", "conf"):
        shutil.copytree(ROOT / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    written = []
    for block in _doc_blocks("python")[:1] + _doc_blocks("yaml")[:1]:
        first = block.splitlines()[0]
        assert first.startswith("# "), first
        path = copy / first[2:].strip()
        assert not path.exists(), path  # the example adds a file, it does not replace one
        path.write_text(block)
        written.append(path.relative_to(copy).as_posix())
    assert written == ["algorithms/placers/round_robin.py", "conf/placer/round_robin.yaml"]
    lab.env["PYTHONPATH"] = str(copy)
    lab.run("placer=round_robin")
    (out,) = lab.outputs()
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "ok" and res["placer"] == "round_robin" and res["model"] == "synthetic"
    assert len(set(json.loads((out / "placement.json").read_text()).values())) == 4


def test_catalog_lists_every_project_placer_with_a_description():
    from orchestrator.catalog import catalog

    rows = catalog(("placer", "scheduler"))
    names = {r[0] for r in rows["placer"]}
    assert {"single", "expert"} <= names
    assert all(desc and not desc.startswith("(cannot import") for _, _, _, desc in rows["placer"] + rows["scheduler"])
