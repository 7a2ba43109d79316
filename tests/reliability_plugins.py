"""Placers used by tests/test_reliability*.py to stop or fail a job at a known point."""

from __future__ import annotations

import os
import time
from pathlib import Path

from algorithms.cluster import Cluster
from algorithms.graph import OpGraph
from algorithms.placement import Placement
from algorithms.placers.baseline import SinglePlacer


class SleepPlacer(SinglePlacer):
    """Everything on one device, after writing `marker` (when given) and sleeping `seconds`."""

    def __init__(self, seconds: float = 60.0, marker: str | None = None, device: str | None = None):
        super().__init__(device)
        self.seconds = seconds
        self.marker = marker

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        if self.marker:
            Path(self.marker).write_text(str(os.getpid()))
        time.sleep(self.seconds)
        return super().place(graph, cluster)


class FailPlacer(SinglePlacer):
    """Raises a plain RuntimeError (not a LabError): an unforeseen failure of a plugin."""

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        raise RuntimeError("plugin exploded")
