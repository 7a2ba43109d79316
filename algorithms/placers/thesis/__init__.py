"""The partitioners of the heterogeneous-devices thesis (seed 004, chapter 4).

Hashing (4.2), HEFT (4.3), Batch Split (4.4), Iterated Critical Path (4.5), Critical Path (4.6), MITE (4.7) and
DFS partitioning (4.8). Every one places whole assignment units (colocation groups or lone ops) on feasible
devices only (device type fits, whole unit fits in the remaining memory, see `common`).
"""

from .batch_split import BatchSplitPlacer
from .critical_path import CriticalPathPlacer
from .dfs import DFSPlacer
from .hashing import HashingPlacer
from .heft import HEFTPlacer
from .icp import IteratedCriticalPathPlacer
from .mite import MITEPlacer

__all__ = [
    "BatchSplitPlacer",
    "CriticalPathPlacer",
    "DFSPlacer",
    "HashingPlacer",
    "HEFTPlacer",
    "IteratedCriticalPathPlacer",
    "MITEPlacer",
]
