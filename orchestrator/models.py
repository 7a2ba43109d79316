"""Models that are their op graph, no framework needed (conf/model/synthetic, graph_file, linreg_graph).

Each is a `backends.base.GraphModel` named by its config's `_target_`; framework models (conf/model files with
`family:` and no `_target_`) are built by the chosen backend's zoo instead.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from algorithms.errors import ConfigError
from algorithms.graph import OpGraph
from backends.base import GraphModel


class SyntheticGraph(GraphModel):
    """The thesis' random level-based training graph (seed 004, chapter 6.2); `generator` holds
    `algorithms.workloads.synthetic.level_dag`'s arguments. O(ops + edges)."""

    def __init__(self, generator: Mapping[str, Any], name: str = "synthetic"):
        self.generator = dict(generator)
        self.name = name

    def graph(self) -> OpGraph:
        from algorithms.workloads.synthetic import level_dag

        return level_dag(name=f"synthetic-s{self.generator.get('seed', 0)}", **self.generator)


class GraphFile(GraphModel):
    """A graph JSON of your own (docs/formats.md), read from `path`; its SHA-256 is part of the cache key."""

    def __init__(self, path: str | None = None, name: str = "graph_file"):
        if not path or path == "???":
            raise ConfigError("model=graph_file needs model.path=/abs/path/to/graph.json")
        if not os.path.isfile(path):
            raise ConfigError(f"model.path: graph file {path!r} does not exist")
        self.path = path
        self.name = name

    def fingerprint(self) -> dict[str, Any]:
        return {"sha256": hashlib.sha256(Path(self.path).read_bytes()).hexdigest()}

    def graph(self) -> OpGraph:
        return OpGraph.load(self.path)


class LinregGraph(GraphModel):
    """Baechi's linear-regression working example (seed 001, Figure 2), hand-built."""

    def __init__(self, batch: int = 128, features: int = 1024, name: str = "linreg_graph"):
        self.batch, self.features = int(batch), int(features)
        self.name = name

    def graph(self) -> OpGraph:
        from algorithms.workloads.synthetic import linreg_graph

        return linreg_graph(batch=self.batch, features=self.features)
