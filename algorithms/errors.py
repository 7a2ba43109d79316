"""One exception hierarchy for the whole project.

Every message names the op, device, key or value at fault and, where it helps, what to do about it.
"""

from __future__ import annotations


class LabError(Exception):
    """Base class of every error this project raises on purpose."""


class InvalidGraph(LabError):
    """The op graph is malformed: a cycle, an unknown endpoint, a missing or negative cost, ..."""


class InvalidCluster(LabError):
    """The cluster description is malformed (duplicate device, non-positive speed, bad link, ...)."""


class InvalidPlacement(LabError):
    """A placement breaks a hard constraint: an op unplaced or placed twice, colocation, device type."""


class InvalidSchedule(LabError):
    """A per-device order is not executable: a missing op, a wrong device, or a dependency deadlock."""


class InfeasiblePlacement(LabError):
    """No assignment satisfies the constraints (typically memory): names the op or unit that does not fit."""


class OutOfMemory(InfeasiblePlacement):
    """A device's memory limit is crossed; carries the op, device, time and bytes, and, where the raiser replayed
    the placement without limits, every device's peak (`peaks`)."""

    def __init__(
        self,
        message: str,
        *,
        op: str | None = None,
        device: str | None = None,
        time_s: float | None = None,
        used_bytes: float | None = None,
        limit_bytes: float | None = None,
        peaks: dict[str, float] | None = None,
    ):
        super().__init__(message)
        self.op = op
        self.device = device
        self.time_s = time_s
        self.used_bytes = used_bytes
        self.limit_bytes = limit_bytes
        self.peaks = peaks


class SimulationError(LabError):
    """The simulator cannot make progress (an event time that is NaN or goes backwards): names the time."""


class ConfigError(LabError):
    """A configuration key or value is wrong; names the key and the allowed values."""


class TrackingError(LabError):
    """The experiment-tracking store (MLflow) cannot be opened or written; names the tracking URI."""


class CacheError(LabError):
    """The stage cache cannot be used (a folder that cannot be created or written); names the folder."""
