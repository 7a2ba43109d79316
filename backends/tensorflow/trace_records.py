"""Names in TensorFlow's trace records: the worker task of a device string, and the label of a gRPC receive.

A traced step's ``StepStats`` name each task's device ``/job:worker/replica:0/task:k/device:CPU:0``, and the
``RecvTensor`` records that the receiving task's worker cache writes (worker_cache_logger.cc) carry the label
``[<n>B] [<rate>] edge_<id>_<source op> from <task> to <task>``, with the size as ``[<x.x>MB]`` (MiB, one
decimal) from 0.1 MiB on. `backends.tensorflow.distributed` reads traffic and memory from them,
`backends.tensorflow.step_anatomy` the step's timeline.
"""

from __future__ import annotations

import re

_TASK = re.compile(r"/job:worker/(?:replica:\d+/)?task:(\d+)")
#: groups: exact bytes, or MiB with one decimal; source op; source device; destination device
RECV_LABEL = re.compile(r"^\[(?:(\d+)B|(\d+(?:\.\d+)?)MB)\]\s+(?:\[[^\]]*\]\s+)?edge_\d+_(\S+)\sfrom\s(\S+)\sto\s(\S+)")
MIB = 1048576.0


def task_of_device(name: str) -> int | None:
    """Task index in a ``/job:worker/replica:0/task:k/...`` device string, or None."""
    m = _TASK.search(name)
    return int(m.group(1)) if m else None


__all__ = ["MIB", "RECV_LABEL", "task_of_device"]
