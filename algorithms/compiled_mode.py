"""Which implementation runs: a numba kernel or its caller's Python code (config key ``compiled``).

The placers' and the simulator's kernels (`algorithms.compiled` loads them) give the same placement, order and
prediction as the Python code, only faster; each caller uses its kernel from its own ``COMPILED_MIN_OPS`` ops on.
This module holds the process's choice and nothing else, so that the simulator and every placer can ask it
without importing one another (a stage's code version follows its plugin's imports: orchestrator/cache.py).
"""

from __future__ import annotations

from .errors import ConfigError

#: How the callers choose between a kernel and their Python code (`applies`): ``auto`` by the graph's size
#: (each caller's ``COMPILED_MIN_OPS``), ``never`` the Python code for every graph, ``always`` the kernel for
#: every graph (numba installed; a caller whose threshold is None keeps its Python code).
MODES = ("auto", "never", "always")
_mode = "auto"


def set_mode(mode: str) -> str:
    """Set the process's choice (`MODES`; config key ``compiled``); return the previous one.

    Why a switch: a kernel gives the same placement as its Python code, only faster, so a figure that compares
    placement times across graphs on both sides of a threshold compares two implementations (Thesis Figure
    7.3 by graph, 27 Nov 2026: HEFT placed the 3,745-op graph 1 in 0.05 s compiled and the 1,854-op graph 2 in
    0.29 s in Python). Presets that time placers across graph sizes set ``compiled: never``."""
    global _mode
    if mode not in MODES:
        raise ConfigError(f"compiled must be one of {', '.join(MODES)}, got {mode!r}")
    previous, _mode = _mode, mode
    return previous


def mode() -> str:
    """The process's current choice (`set_mode`)."""
    return _mode


def applies(n_ops: int, threshold: int | None) -> bool:
    """Whether a caller whose kernel serves graphs of `threshold` ops or more (None: never) runs it on a graph of
    `n_ops` ops, under the process's mode (`set_mode`). The caller still falls back to its Python code when
    numba is missing. O(1)."""
    if threshold is None or _mode == "never":
        return False
    return _mode == "always" or n_ops >= threshold
