"""Worker mains for the spawn tests (tests/test_worker_orphans.py, tests/test_worker_spawn.py); spawned children
import them by name."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def sleeper(rank: int, folder: str, results: Any) -> None:
    Path(folder, f"child{rank}.pid").write_text(str(os.getpid()))
    time.sleep(120)


def sizer(rank: int, payload: bytes, results: Any) -> None:
    """Reports the size of the payload it was given (tests/test_worker_spawn.py)."""
    results.put((rank, {"bytes": len(payload)}))
