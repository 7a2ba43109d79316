"""Pure algorithms and the data model: no framework, tracker or config system is imported here."""

from .cluster import Cluster, Device, Link, uniform_cluster
from .errors import (
    ConfigError,
    InfeasiblePlacement,
    InvalidCluster,
    InvalidGraph,
    InvalidPlacement,
    InvalidSchedule,
    LabError,
    OutOfMemory,
)
from .graph import OpGraph
from .placement import CoarseMap, Placement, Schedule, check_placement, check_schedule
from .sim_result import SimResult
from .simulator import simulate

__all__ = [
    "Cluster",
    "Device",
    "Link",
    "uniform_cluster",
    "OpGraph",
    "Placement",
    "Schedule",
    "CoarseMap",
    "check_placement",
    "check_schedule",
    "simulate",
    "SimResult",
    "LabError",
    "InvalidGraph",
    "InvalidCluster",
    "InvalidPlacement",
    "InvalidSchedule",
    "InfeasiblePlacement",
    "OutOfMemory",
    "ConfigError",
]
