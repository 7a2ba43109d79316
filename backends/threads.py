"""The `threads` runtime: the backend's own placed execution, one worker thread per device in this process.

Both backends map the runtime names `threads` and (until the one-process-per-device runtimes replace it) `real`
to `ThreadsRuntime` in their `capabilities.runtimes`.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from algorithms.cluster import Cluster
from algorithms.errors import ConfigError
from algorithms.graph import OpGraph

from .base import Backend, RunResult, Runtime

ORDERS = ("threads", "planned")


class ThreadsRuntime(Runtime):
    """Placed execution in one process, a worker thread per device (`Backend.run`).

    `order`: "threads" lets each device's worker run its schedule as inputs arrive (real concurrency; on virtual
    CPU devices the host's thread scheduling decides how far devices run ahead); "planned" runs ops and copies
    on one thread in the simulated step's order, so live memory per device follows the plan (backends whose
    capabilities declare `follows_plan`). `check_correctness` None keeps the backend's setting. The result's
    `step_iqr_s` is the inter-quartile range of the measured steps; `workers` stays empty (one process)."""

    name = "threads"

    def __init__(self, warmup: int = 5, steps: int = 20, check_correctness: bool | None = None, order: str = "threads"):
        if order not in ORDERS:
            raise ConfigError(f"runtime.order: {order!r} is not one of {ORDERS}")
        if int(steps) < 1 or int(warmup) < 0:
            raise ConfigError(f"runtime.steps must be >= 1 and runtime.warmup >= 0, got {steps} and {warmup}")
        self.warmup, self.steps = int(warmup), int(steps)
        self.check_correctness = None if check_correctness is None else bool(check_correctness)
        self.order = order

    def run(
        self,
        backend: Backend,
        model: Any,
        graph: OpGraph,
        placement: Mapping[str, str],
        schedule: Mapping[str, list[str]],
        cluster: Cluster,
        *,
        plan: Any = None,
    ) -> RunResult:
        if backend is None:
            raise ConfigError(f"runtime={self.name} runs a framework model: choose backend=torch or tensorflow")
        if self.order == "planned":
            if not backend.capabilities.follows_plan:
                raise ConfigError(
                    f"runtime.order=planned: backend {backend.name!r} cannot follow a plan; use runtime.order=threads"
                )
            if plan is None:
                raise ConfigError("runtime.order=planned needs the simulated step")
        rr = backend.run(
            model,
            graph,
            placement,
            schedule,
            cluster,
            warmup=self.warmup,
            steps=self.steps,
            check_correctness=self.check_correctness,
            plan=plan if self.order == "planned" else None,
        )
        if rr.step_iqr_s is None and len(rr.step_times_s) >= 2:
            q1, _, q3 = statistics.quantiles(rr.step_times_s, n=4, method="inclusive")
            rr.step_iqr_s = q3 - q1
        return rr
