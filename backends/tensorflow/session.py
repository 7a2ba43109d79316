"""Sessions for a cluster: the v1 `ConfigProto` and the map from cluster device names to TensorFlow devices.

A cluster's CPU devices become virtual CPU devices of one process (``device_count={'CPU': n}``); its GPU
devices become the machine's GPUs, each limited to the cluster device's memory, or, when the cluster has more
GPUs than the machine, memory-limited virtual GPUs carved out of the first GPU
(``GPUOptions.experimental.virtual_devices``, one per cluster GPU, each with the cluster device's memory).
Virtual CPU devices share the process' thread pools and the host allocator, so they run concurrently only as
far as `inter_op_threads` and the machine's cores allow (distributed.py runs one process per device instead).

Graph rewrites are switched off (Grappler's meta-optimizer, the classic graph optimizer's constant folding,
CSE and inlining) so that the ops that run are the ops that were captured, profiled and placed, one for one.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import tensorflow as tf

from algorithms.cluster import Cluster
from algorithms.errors import ConfigError

v1 = tf.compat.v1
PREFIX = "/job:localhost/replica:0/task:0/device:"


@functools.cache
def physical_gpus() -> int:
    return len(tf.config.list_physical_devices("GPU"))


def session_config(
    *,
    n_cpu: int = 1,
    n_gpu: int = 0,
    gpu_memory_bytes: list[float] | None = None,
    inter_op_threads: int = 0,
    intra_op_threads: int = 0,
    graph_rewrites: bool = False,
    allow_soft_placement: bool = False,
) -> Any:
    """A `ConfigProto` with `n_cpu` CPU devices and `n_gpu` GPU devices (virtual ones when the machine has
    fewer; `gpu_memory_bytes` then sets each one's memory). Threads: 0 lets TensorFlow choose."""
    count = {"CPU": max(1, int(n_cpu)), "GPU": 0}
    gpu_options = None
    if n_gpu:
        have = physical_gpus()
        if have == 0:
            raise ConfigError(
                f"the cluster has {n_gpu} GPU devices but TensorFlow sees no GPU on this machine; "
                f"use a CPU cluster (cluster=cpu2 or cluster=cpu4)"
            )
        mems = list(gpu_memory_bytes or [])
        limited = len(mems) == n_gpu and all(math.isfinite(m) for m in mems)
        if n_gpu <= have:
            count["GPU"] = n_gpu
            if limited:  # one memory-limited virtual device per physical GPU: the cluster's memory holds
                vds = [v1.GPUOptions.Experimental.VirtualDevices(memory_limit_mb=[m / 2**20]) for m in mems]
                gpu_options = v1.GPUOptions(
                    visible_device_list=",".join(str(k) for k in range(n_gpu)),
                    experimental=v1.GPUOptions.Experimental(virtual_devices=vds),
                )
            else:
                gpu_options = v1.GPUOptions(allow_growth=True)
        else:
            if not limited:
                raise ConfigError(
                    f"{n_gpu} virtual GPUs on {have} physical GPU(s) need a finite memory_bytes "
                    f"for every GPU device of the cluster"
                )
            count["GPU"] = 1
            vd = v1.GPUOptions.Experimental.VirtualDevices(memory_limit_mb=[m / 2**20 for m in mems])
            gpu_options = v1.GPUOptions(
                visible_device_list="0", experimental=v1.GPUOptions.Experimental(virtual_devices=[vd])
            )
    cfg = v1.ConfigProto(
        device_count=count,
        inter_op_parallelism_threads=int(inter_op_threads),
        intra_op_parallelism_threads=int(intra_op_threads),
        allow_soft_placement=allow_soft_placement,
    )
    if gpu_options is not None:
        cfg.gpu_options.CopyFrom(gpu_options)
    if not graph_rewrites:
        cfg.graph_options.rewrite_options.disable_meta_optimizer = True
        opts = cfg.graph_options.optimizer_options
        opts.opt_level = v1.OptimizerOptions.L0
        opts.do_constant_folding = False
        opts.do_common_subexpression_elimination = False
        opts.do_function_inlining = False
    return cfg


def device_map(cluster: Cluster) -> dict[str, str]:
    """cluster device name -> fully qualified TensorFlow device (the k-th CPU device -> ``CPU:k``, the k-th
    GPU device -> ``GPU:k``). Raises `ConfigError` for device types TensorFlow cannot run here (TPU)."""
    out: dict[str, str] = {}
    seen = {"CPU": 0, "GPU": 0}
    for d in cluster.devices:
        if d.type not in seen:
            raise ConfigError(f"device {d.name!r} of type {d.type} cannot run in a TensorFlow session here")
        out[d.name] = f"{PREFIX}{d.type}:{seen[d.type]}"
        seen[d.type] += 1
    return out


def cluster_session_config(cluster: Cluster, **kwargs: Any) -> Any:
    """`session_config` with the devices `cluster` names."""
    n_cpu = sum(1 for d in cluster.devices if d.type == "CPU")
    gpus = [d for d in cluster.devices if d.type == "GPU"]
    return session_config(n_cpu=n_cpu, n_gpu=len(gpus), gpu_memory_bytes=[d.memory_bytes for d in gpus], **kwargs)


def canonical_device(name: str) -> str:
    """Normalise a step-stats device string (``/job:localhost/.../device:CPU:0``, maybe with ``/stream:..``)
    to ``<TYPE>:<index>``."""
    tail = name.split("device:")[-1]
    return ":".join(tail.split("/")[0].split(":")[:2]).upper()
