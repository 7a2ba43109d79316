"""Where a placed TensorFlow step's time goes, read from one traced step (issue 16, TensorFlow half).

`TFDistributedRuntime` traces one training step after the measured ones (``FULL_TRACE``) for the traffic and
the memory. The same ``StepStats`` say when each op ran on each task and, in the ``RecvTensor`` records that
TensorFlow's gRPC worker cache writes on the receiving task, when each receive was requested and when its
tensor arrived. `anatomy` condenses them into the figures that tell a gap between the simulator's predicted
step and the measured one apart:

* ``span_s``: first to last event of the traced step (tracing inflates the ops; compare shares, not seconds);
* ``all_idle_s``: the time in the span during which no task runs any op (gaps between the ops of every task:
  everybody waits for a message in flight, or for an executor to get to a ready op). Idle of ops, not of cores:
  the workers' processor time (procfs, ``extra["worker_cpu_per_step_s"]``) kept both cores 80-90 % busy in
  every multi-device step measured (docs/fidelity.md, session 37), with gRPC's and the executor's message work;
* per device: the ops it ran, their summed traced time ``busy_s``, what the profile gives for the same ops
  (``profile_s``; the profile is scaled to an untraced step, so ``busy_s / profile_s`` is the traced
  inflation, 1.5-1.7 on a single device here), and ``first_request_s``: when its first receive was requested,
  from the step's first event;
* receives: their count; the quantiles (10, 50, 90 %) of the hop, arrival less the end of the op that produced
  the tensor on the other task; and the share of receives requested only after their tensor was ready
  (``requested_late``). TensorFlow's receives are pulled: a ``_Recv`` kernel of the receiving executor sends the
  ``RecvTensor`` request, so a tensor can wait on its sender until the receiver's executor reaches that kernel.

Choices: an event is a node record of a task's device (``_SOURCE`` included, ``RecvTensor`` records excluded
from the busy intervals; a record's end is its ``all_end_rel_micros``, at least 1 µs so that an op of 0 µs still
marks its task busy); a hop whose producer has no record in the trace (an op the trace left out) is skipped.
Times are the hosts' wall clocks in µs, one clock for the local workers of this lab.

Complexity: O(R log R) for R node records (the busy intervals are sorted once).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .trace_records import RECV_LABEL, task_of_device

QUANTILES = (0.1, 0.5, 0.9)


def _quantiles(xs: list[float]) -> list[float] | None:
    """Nearest-rank quantiles of `xs` at `QUANTILES` (None for an empty list)."""
    if not xs:
        return None
    s = sorted(xs)
    return [s[int(round(q * (len(s) - 1)))] for q in QUANTILES]


def _device_entry() -> dict[str, Any]:
    return {"ops": 0, "busy_s": 0.0, "profile_s": 0.0, "first_request_s": None}


def anatomy(step_stats: Any, op_time_s: Mapping[str, float], task_device: Mapping[int, str]) -> dict[str, Any]:
    """The traced step's anatomy (module docstring). `op_time_s`: the profiled time of every op of the placed
    graph, by name (ops the trace shows that are not in it, e.g. TensorFlow's ``_SOURCE``, count as busy but
    add nothing to ``profile_s``); `task_device`: task index -> the cluster device it runs."""
    busy_iv: list[tuple[int, int]] = []
    per: dict[str, dict[str, Any]] = {}
    ends: dict[str, int] = {}
    requests: list[tuple[int, int, str, int, int]] = []  # (src, dst, source op, requested, arrived)
    for ds in step_stats.dev_stats:
        task = task_of_device(ds.device)
        if task is None or "/stream:" in ds.device:
            continue
        dev = task_device.get(task, f"task:{task}")
        for ns in ds.node_stats:
            start = int(ns.all_start_micros)
            end = start + max(1, int(ns.all_end_rel_micros or ns.op_end_rel_micros))
            if ns.node_name == "RecvTensor":
                m = RECV_LABEL.match(ns.timeline_label)
                if m:
                    src, dst = task_of_device(m.group(4)), task_of_device(m.group(5))
                    if src is not None and dst is not None and src != dst:
                        requests.append((src, dst, m.group(3), start, end))
                continue
            busy_iv.append((start, end))
            d = per.setdefault(dev, _device_entry())
            d["ops"] += 1
            d["busy_s"] += (end - start) * 1e-6
            d["profile_s"] += float(op_time_s.get(ns.node_name, 0.0))
            if ns.node_name in op_time_s:
                ends[ns.node_name] = max(ends.get(ns.node_name, end), end)
    if not busy_iv:
        return {"span_s": 0.0, "all_idle_s": 0.0, "devices": {}, "receives": 0}
    busy_iv.sort()
    t0 = busy_iv[0][0]
    idle, reach = 0, busy_iv[0][1]
    for s, e in busy_iv[1:]:
        if s > reach:
            idle += s - reach
        reach = max(reach, e)
    t_end = max([reach] + [r[4] for r in requests])
    hops: list[float] = []
    late = 0
    for _src, dst, op, req, arr in requests:
        d = per.setdefault(task_device.get(dst, f"task:{dst}"), _device_entry())
        rel = (req - t0) * 1e-6
        d["first_request_s"] = rel if d["first_request_s"] is None else min(d["first_request_s"], rel)
        if op in ends:
            hops.append((arr - ends[op]) * 1e-6)
            late += int(req > ends[op])
    for d in per.values():
        d["busy_over_profile"] = d["busy_s"] / d["profile_s"] if d["profile_s"] > 0 else None
    q = _quantiles(hops)
    return {
        "span_s": (t_end - t0) * 1e-6,
        "all_idle_s": idle * 1e-6,
        "all_idle_share": idle / (t_end - t0) if t_end > t0 else 0.0,
        "devices": per,
        "receives": len(requests),
        "hop_quantiles_s": q,
        "hop_quantile_levels": list(QUANTILES),
        "requested_late": late / len(hops) if hops else None,
    }


__all__ = ["QUANTILES", "anatomy"]
