"""What a GPU worker's caching allocator holds beside the graph's tensors: cuBLAS and cuBLASLt workspaces.

The simulator's memory model counts the graph's tensors (parameters, activations, gradients, received copies).
A GPU worker's measured peak is the caching allocator's `max_memory_allocated`, which also counts the
workspaces PyTorch gives cuBLAS and cuBLASLt: one of each per (handle, stream) that ran a matrix product. On an
H100 (torch 2.11, CUDA 13, session 24) the allocator's peak was 34.6 MB above the tensors' for an eager step
(one stream) and 103.8 MB for a step replayed as a CUDA graph (three streams: the eager warm-up's, the side
stream that warms up before capture, the capture's), for every tiny model alike; with
``CUBLAS_WORKSPACE_CONFIG=:4096:1`` (4 MiB) 5.3 and 15.7 MB. Both fit (cuBLAS workspace + 1 MiB of cuBLASLt) per
stream to within the allocator's rounding.

The workspace sizes, as PyTorch chooses them (a choice: read from the environment variables PyTorch reads, not
from PyTorch's internals, which expose no query):

* cuBLAS: ``CUBLAS_WORKSPACE_CONFIG`` is a list ``:SIZE_KiB:COUNT`` (e.g. ``:4096:8``); the workspace is the sum
  of SIZE × COUNT KiB. Unset: 32 MiB (``:4096:8``) on compute capability 9.x and later, 8 MiB + 128 KiB
  (``:4096:2:16:8``) before (PyTorch's defaults; only 9.0 was measured here).
* cuBLASLt: ``CUBLASLT_WORKSPACE_SIZE`` in KiB, 1 MiB when unset.

`framework_reserve_bytes` is what a run adds to the simulator's peak to predict the allocator's; the
orchestrator's memory error and `experiments/fidelity.py` compare the allocator's peak with that sum. NCCL's
buffers are allocated outside the caching allocator and are not counted by it. Cost: O(1).
"""

from __future__ import annotations

import os

from algorithms.errors import ConfigError

KIB = 1024
CUBLASLT_DEFAULT_BYTES = 1024 * KIB


def _parse_cublas_config(value: str) -> int:
    """Bytes of a ``CUBLAS_WORKSPACE_CONFIG`` value (``:SIZE_KiB:COUNT`` pairs); ConfigError naming it if bad."""
    parts = value.split(":")
    if len(parts) < 3 or parts[0] != "" or (len(parts) - 1) % 2:
        raise ConfigError(f"CUBLAS_WORKSPACE_CONFIG={value!r}: expected ':SIZE_KiB:COUNT' pairs, e.g. ':4096:8'")
    try:
        nums = [int(p) for p in parts[1:]]
    except ValueError:
        raise ConfigError(f"CUBLAS_WORKSPACE_CONFIG={value!r}: sizes and counts must be integers") from None
    if any(n < 0 for n in nums):
        raise ConfigError(f"CUBLAS_WORKSPACE_CONFIG={value!r}: sizes and counts must not be negative")
    return sum(nums[i] * nums[i + 1] for i in range(0, len(nums), 2)) * KIB


def cublas_workspace_bytes(capability_major: int, env: dict[str, str] | None = None) -> int:
    """cuBLAS's workspace per (handle, stream), as PyTorch sizes it (module docstring)."""
    env = os.environ if env is None else env
    value = env.get("CUBLAS_WORKSPACE_CONFIG")
    if value:
        return _parse_cublas_config(value)
    return 4096 * 8 * KIB if capability_major >= 9 else 4096 * 2 * KIB + 16 * 8 * KIB


def cublaslt_workspace_bytes(env: dict[str, str] | None = None) -> int:
    """cuBLASLt's workspace per (handle, stream): ``CUBLASLT_WORKSPACE_SIZE`` KiB, 1 MiB when unset."""
    env = os.environ if env is None else env
    value = env.get("CUBLASLT_WORKSPACE_SIZE")
    if not value:
        return CUBLASLT_DEFAULT_BYTES
    try:
        kib = int(value)
    except ValueError:
        raise ConfigError(f"CUBLASLT_WORKSPACE_SIZE={value!r}: expected a size in KiB") from None
    if kib < 0:
        raise ConfigError(f"CUBLASLT_WORKSPACE_SIZE={value!r}: must not be negative")
    return kib * KIB


def streams_used(cuda_graph: bool) -> int:
    """Streams that run matrix products in a worker's step: the default stream, and with a CUDA graph the side
    stream of the warm-up before capture and the capture stream (`backends.torch.cudagraph`)."""
    return 3 if cuda_graph else 1


def framework_reserve_bytes(capability_major: int, cuda_graph: bool, env: dict[str, str] | None = None) -> int:
    """Bytes the allocator holds beside the tensors in a GPU worker: a cuBLAS and a cuBLASLt workspace per
    stream used. A model with no matrix product allocates none; this upper bound is what the lab's models use."""
    per_stream = cublas_workspace_bytes(capability_major, env) + cublaslt_workspace_bytes(env)
    return streams_used(cuda_graph) * per_stream
