"""Every script under experiments/ and benchmarks/ imports and parses its arguments.

The scripts are run by hand (docs/ gives their commands), so nothing else imports them: a helper moved to
another module once broke `experiments/fidelity_tf.py` unnoticed. `--help` in a fresh process runs each
script's imports and its argument parser without measuring anything.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(
    p.relative_to(ROOT).as_posix()
    for folder in ("experiments", "benchmarks")
    for p in (ROOT / folder).glob("*.py")
    if not p.name.startswith("_")
)


def test_scripts_are_found() -> None:
    assert "experiments/fidelity_tf.py" in SCRIPTS and "benchmarks/bench_scale.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_help(script: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(
        [sys.executable, script, "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"{script} --help exited {proc.returncode}:\n{proc.stderr[-2000:]}"
    assert "usage:" in proc.stdout, f"{script} --help printed no usage:\n{proc.stdout[-500:]}"


SHELL_SCRIPTS = sorted(
    p.relative_to(ROOT).as_posix() for f in ("experiments", "benchmarks") for p in (ROOT / f).glob("*.sh")
)


@pytest.mark.parametrize("script", SHELL_SCRIPTS)
def test_shell_script_parses_and_names_scripts_that_exist(script: str) -> None:
    """`bash -n` parses it, and every experiments/ or benchmarks/ Python script it runs is there."""
    import re

    proc = subprocess.run(["bash", "-n", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    named = set(re.findall(r"(?:experiments|benchmarks)/\w+\.py", (ROOT / script).read_text()))
    assert named and all((ROOT / n).exists() for n in named), named
