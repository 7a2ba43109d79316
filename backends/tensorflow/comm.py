"""Communication micro-benchmark between a cluster's devices (Baechi 4.1: a linear model of transfer time,
fitted by linear regression on measured copies of several sizes).

For every ordered pair (src, dst) of the cluster's devices and every size, a float32 tensor of that size is
produced on `src` (an Identity of a variable held there) and read by an Identity placed on `dst`; the same
Identity placed on `src` is the no-transfer baseline. One transfer sample is the wall-clock time of running
the cross-device Identity less the median time of the local one, so session and executor overheads that both
share cancel out. The samples are fitted to ``t = latency_s + bytes / bytes_per_s`` by non-negative least
squares on the per-(pair, size) medians, once over all pairs (`CommFit.latency_s`, `bytes_per_s`) and once per
pair (`CommFit.links`). A slope of zero (no measurable size dependence, which is what virtual CPU devices of
one process show: their "copy" hands a pointer over) gives ``bytes_per_s = inf``.

Complexity: O(pairs x sizes x repeats) session runs.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Iterable, Sequence

import numpy as np
import tensorflow as tf
from scipy.optimize import nnls

from algorithms.cluster import Cluster
from algorithms.errors import ConfigError
from backends.base import CommFit

from .session import cluster_session_config, device_map

log = logging.getLogger(__name__)
v1 = tf.compat.v1

DEFAULT_SIZES = (1024, 16384, 262144, 1048576, 4194304, 16777216)


def fit_linear(points: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """(latency_s, bytes_per_s) of ``t = a + bytes * b`` fitted by non-negative least squares; a size term
    below a nanosecond at the largest size gives ``bytes_per_s = inf``. O(n)."""
    pts = [(float(b), float(t)) for b, t in points]
    if not pts:
        raise ConfigError("communication fit needs at least one sample")
    x = np.array([p[0] for p in pts])
    y = np.array([p[1] for p in pts])
    scale = max(1.0, float(x.max()))
    coef, _ = nnls(np.column_stack([np.ones_like(x), x / scale]), y)
    latency, slope = float(coef[0]), float(coef[1]) / scale
    # under a nanosecond across the largest transfer is no size dependence at all (round-off of the fit)
    return latency, (1.0 / slope if slope * scale > 1e-9 else math.inf)


def fit_linear_relative(points: Iterable[tuple[float, float]], floor_s: float = 5e-5) -> tuple[float, float]:
    """Like `fit_linear`, but each (bytes, seconds) point weighted by 1 / max(seconds, `floor_s`), i.e. least
    squares on relative errors, so that a 64 MB transfer does not decide the latency of a 1 KB one; the floor
    keeps a sample measured as ~0 (below the noise) from dominating. O(n)."""
    pts = [(float(b), float(t)) for b, t in points]
    if not pts:
        raise ConfigError("communication fit needs at least one sample")
    x = np.array([p[0] for p in pts])
    y = np.array([p[1] for p in pts])
    w = 1.0 / np.maximum(y, floor_s)
    scale = max(1.0, float(x.max()))
    coef, _ = nnls(np.column_stack([w, w * x / scale]), w * y)
    latency, slope = float(coef[0]), float(coef[1]) / scale
    return latency, (1.0 / slope if slope * scale > 1e-9 else math.inf)


def comm_benchmark(
    cluster: Cluster,
    sizes: Sequence[int] | None = None,
    repeats: int = 5,
    *,
    inter_op_threads: int = 0,
    intra_op_threads: int = 0,
) -> CommFit:
    """Time copies between every ordered device pair of `cluster` and fit them (module docstring)."""
    sizes = [int(s) for s in (sizes or DEFAULT_SIZES)]
    if repeats < 1 or not sizes or min(sizes) < 4:
        raise ConfigError(f"comm benchmark needs repeats >= 1 and sizes >= 4 bytes, got {repeats}, {sizes}")
    names = cluster.names
    if len(names) < 2:
        log.info("comm benchmark: cluster %r has one device; nothing to transfer", cluster.name)
        return CommFit(latency_s=0.0, bytes_per_s=math.inf)
    devmap = device_map(cluster)
    config = cluster_session_config(cluster, inter_op_threads=inter_op_threads, intra_op_threads=intra_op_threads)
    graph = tf.Graph()
    cross: dict[tuple[str, str, int], tf.Operation] = {}
    local: dict[tuple[str, int], tf.Operation] = {}
    with graph.as_default():
        for src in names:
            for size in sizes:
                with tf.device(devmap[src]):
                    var = v1.get_variable(
                        f"bench/{src}/v{size}",
                        shape=[max(1, size // 4)],
                        dtype=tf.float32,
                        initializer=v1.zeros_initializer(),
                        use_resource=True,
                    )
                    produced = tf.identity(var.value(), name=f"bench/{src}/x{size}")
                    local[(src, size)] = tf.identity(produced, name=f"bench/{src}/local{size}").op
                for dst in names:
                    if dst != src:
                        with tf.device(devmap[dst]):
                            cross[(src, dst, size)] = tf.identity(produced, name=f"bench/{src}_{dst}/{size}").op
        init = v1.global_variables_initializer()

    def timed(sess: v1.Session, op: tf.Operation) -> float:
        t0 = time.perf_counter()
        sess.run(op)
        return time.perf_counter() - t0

    samples: list[tuple[str, str, float, float]] = []
    medians: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with v1.Session(graph=graph, config=config) as sess:
        sess.run(init)
        for op in list(local.values()) + list(cross.values()):
            sess.run(op)  # first runs build the executors
        for (src, dst, size), op in cross.items():
            base = statistics.median(timed(sess, local[(src, size)]) for _ in range(repeats))
            obs = [max(0.0, timed(sess, op) - base) for _ in range(repeats)]
            nbytes = float(max(1, size // 4) * 4)
            samples.extend((src, dst, nbytes, t) for t in obs)
            medians.setdefault((src, dst), []).append((nbytes, statistics.median(obs)))
    links = {pair: fit_linear(pts) for pair, pts in medians.items()}
    latency, bw = fit_linear([p for pts in medians.values() for p in pts])
    log.info(
        "comm benchmark on %s: latency %.3g s, bandwidth %.3g bytes/s (%d samples)",
        cluster.name,
        latency,
        bw,
        len(samples),
    )
    return CommFit(latency_s=latency, bytes_per_s=bw, links=links, samples=samples)
