"""How `backends.torch.worker.spawn_and_collect` hands a job to its workers: arguments far beyond a pipe's
buffer arrive whole, and a script that starts workers without an ``if __name__ == "__main__":`` guard (its
re-import in each child fails) gets an error naming the guard instead of blocking forever (it did, with a
transformer_tiny profile, before the arguments went through a file)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
BIG = 4 << 20  # 4 MiB of arguments: far past the 64 KiB a pipe holds

SCRIPT = """
from backends.torch.worker import spawn_and_collect
from tests._spawn_sleeper import sizer

{guard}reps = spawn_and_collect(sizer, (b"x" * {big},), 2, "sizers", 60)
{guard}print("sizes", sorted(r["bytes"] for r in reps.values()))
"""


def _run(tmp_path: Path, guard: bool) -> subprocess.CompletedProcess[str]:
    body = SCRIPT.format(guard="    " if guard else "", big=BIG)
    if guard:
        body = body.replace("\n    reps", '\nif __name__ == "__main__":\n    reps', 1)
    script = tmp_path / "starter.py"
    script.write_text(body)
    _tmp(tmp_path).mkdir(exist_ok=True)
    # the job file goes to a temporary folder of this test's own, so other processes' files cannot interfere
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "TMPDIR": str(_tmp(tmp_path)),
    }
    return subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
    )


def _tmp(tmp_path: Path) -> Path:
    return tmp_path / "tmp"


def _job_files(tmp_path: Path) -> set[str]:
    return {p for p in os.listdir(_tmp(tmp_path)) if p.startswith("placement-lab-job-")}


def test_large_arguments_arrive_whole_and_leave_no_file(tmp_path):
    out = _run(tmp_path, guard=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"sizes [{BIG}, {BIG}]" in out.stdout
    assert not _job_files(tmp_path)  # the job's temporary file is removed


def test_a_script_without_the_main_guard_gets_an_error_not_a_hang(tmp_path):
    out = _run(tmp_path, guard=False)  # a hang raises subprocess.TimeoutExpired after 180 s
    assert out.returncode != 0
    assert "WorkerError" in out.stderr and "__main__" in out.stderr, out.stderr[-2000:]
    assert not _job_files(tmp_path)
