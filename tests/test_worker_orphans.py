"""Workers die with the process that spawned them (backends.torch.worker.spawn_and_collect): a parent killed by
a signal runs no `finally`, and its workers used to keep their cores and ports. torch's own spawn wrapper asks
for SIGINT at the parent's death, which a process started in the background of a shell (``nohup ... &``)
ignores, as its children do: the test starts the parent that way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")

ROOT = Path(__file__).resolve().parents[1]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has died
    except FileNotFoundError:
        return False


def test_a_killed_parent_takes_its_workers_with_it(tmp_path):
    code = (
        "from backends.torch.worker import spawn_and_collect\n"
        "from tests._spawn_sleeper import sleeper\n"
        f"spawn_and_collect(sleeper, ({str(tmp_path)!r},), 2, 'sleepers', 300)\n"
    )
    # a killed parent cannot remove its job file: it goes to this test's own folder, not the machine's /tmp
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "TMPDIR": str(tmp_path),
    }

    def like_a_background_job() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    parent = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, preexec_fn=like_a_background_job)
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("child*.pid"))) < 2:
            assert time.monotonic() < deadline, "the workers did not start"
            assert parent.poll() is None, "the parent exited early"
            time.sleep(0.2)
        kids = [int(p.read_text()) for p in tmp_path.glob("child*.pid")]
        assert all(_alive(k) for k in kids)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(_alive(k) for k in kids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(k) for k in kids), "a worker outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        for p in tmp_path.glob("child*.pid"):
            try:
                os.kill(int(p.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
