"""A worker main for tests/test_worker_orphans.py (spawned children import it by name)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def sleeper(rank: int, folder: str, results: Any) -> None:
    Path(folder, f"child{rank}.pid").write_text(str(os.getpid()))
    time.sleep(120)
