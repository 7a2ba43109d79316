"""Third-party plugins: a separate package installs, registers through its entry point, and is usable by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_installed_plugin_package_is_found_and_runs(lab, tmp_path):
    target = tmp_path / "site"
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
    lab.env["PYTHONPATH"] = os.pathsep.join([str(target), str(ROOT)])
    cat = subprocess.run(
        [sys.executable, "-m", "orchestrator.catalog", "placer"],
        cwd=lab.cwd,
        env=lab.env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "round_robin" in cat.stdout and "[plugin:demo]" in cat.stdout
    lab.run("placer=round_robin", "model=linreg_graph", "cluster=cpu2")
    (out,) = lab.outputs()
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "ok" and res["placer"] == "round_robin"
    placement = json.loads((out / "placement.json").read_text())
    assert set(placement.values()) == {"cpu0", "cpu1"}


def test_catalog_lists_every_project_placer_with_a_description():
    from orchestrator.catalog import catalog

    rows = catalog(("placer", "scheduler"))
    names = {r[0] for r in rows["placer"]}
    assert {"single", "expert"} <= names
    assert all(desc and not desc.startswith("(cannot import") for _, _, _, desc in rows["placer"] + rows["scheduler"])
