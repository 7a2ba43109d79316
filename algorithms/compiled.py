"""Loading the numba-compiled kernels ahead of a timed call.

The list scheduling of m-ETF and m-SCT (`placers.baechi.etf_kernel`, one compiled function for both), the
SCT LP's preparation (`placers.baechi.sct_kernel`), the loops of ICP, HEFT, MITE and DFS
(`placers.thesis.icp_kernel`, `heft_kernel`, `mite_kernel`) and of m-TOPO (`placers.baechi.topo_kernel`), and the
simulator's event loop for static orders and for the readiness order (`sim_kernel`) run compiled for graphs
of 2,000 ops or more (`simulator.COMPILED_MIN_OPS` and each placer's `COMPILED_MIN_OPS`), unless the config key
``compiled`` says ``never`` or ``always`` (`compiled_mode`).
The first use in a process imports numba and the kernels (about 0.5 s on the lab VM) and, at each kernel's
first call, loads its machine code from numba's cache (another 0.6 s; the first use in a fresh checkout
compiles them instead, about a minute). A placement time is the placer's own work, as the papers measure it
(Baechi Table 2, Celeritas Table 4), so the place stage calls `preload` before its timer starts: otherwise
whichever job of a sweep ran first would carry the process's one-off cost. `preload` places and simulates a
small synthetic training graph just above the thresholds (m-ETF, static order: about 2,100 ops, a few
hundredths of a second once loaded), simulates it in the readiness order, and places it with ICP, HEFT, MITE,
DFS and m-TOPO, which goes through the kernels' entry points with
the argument types of real graphs (m-SCT's list scheduling shares m-ETF's compiled function); a kernel it does
not call (the SCT LP's preparation, a fraction of a second) still loads at its first real use.
"""

from __future__ import annotations

import functools
import importlib
import logging
import time

from .compiled_mode import applies

log = logging.getLogger(__name__)

#: The compiled kernels, by module, and the smallest graph each is used for.
KERNELS = (
    "algorithms.sim_kernel",
    "algorithms.placers.baechi.etf_kernel",
    "algorithms.placers.baechi.sct_kernel",
    "algorithms.placers.thesis.icp_kernel",
    "algorithms.placers.thesis.heft_kernel",
    "algorithms.placers.thesis.mite_kernel",
    "algorithms.placers.baechi.topo_kernel",
)


def min_ops() -> int:
    """The smallest graph any compiled kernel is used for (the thresholds of its callers)."""
    from .placers.baechi import m_etf
    from .placers.thesis import icp
    from .simulator import COMPILED_MIN_OPS

    sizes = [COMPILED_MIN_OPS] + [k for k in (m_etf.COMPILED_MIN_OPS, icp.COMPILED_MIN_OPS) if k is not None]
    return min(sizes)


def preload(n_ops: int) -> float:
    """Import the compiled kernels when a graph of `n_ops` ops would use one; the seconds it took (0 when
    nothing was loaded: a small graph, numba missing, or already loaded)."""
    if not applies(n_ops, min_ops()):
        return 0.0
    if _warm.cache_info().currsize:
        return 0.0
    t0 = time.perf_counter()
    _warm()
    return time.perf_counter() - t0


@functools.cache
def _warm() -> None:
    for name in KERNELS:
        try:
            importlib.import_module(name)
        except ImportError as exc:  # numba missing: the callers fall back to their Python code
            log.debug("compiled kernel %s unavailable: %s", name, exc)
            return
    from .cluster import uniform_cluster
    from .placers.baechi.m_etf import METFPlacer
    from .placers.baechi.m_topo import MTOPOPlacer
    from .placers.thesis.dfs import DFSPlacer
    from .placers.thesis.heft import HEFTPlacer
    from .placers.thesis.icp import IteratedCriticalPathPlacer
    from .placers.thesis.mite import MITEPlacer
    from .simulator import simulate
    from .workloads.synthetic import level_dag

    g = level_dag(
        levels=min_ops() // 31 + 2,
        min_nodes_per_level=4,
        max_nodes_per_level=12,
        edge_probability=0.1,
        memory_unit_bytes=100.0,
        colocated_fraction=0.15,
        training=True,
        seed=0,
        name="compiled-warm-up",
    )
    cluster = uniform_cluster(2, 4 * g.total_memory(), type="GPU", latency_s=1e-4, bytes_per_s=1e9)
    pl = METFPlacer().place(g, cluster)
    simulate(g, cluster, pl.assignment, pl.order)
    simulate(g, cluster, pl.assignment)  # the readiness order (first-in first-out)
    IteratedCriticalPathPlacer().place(g, cluster)
    for placer in (HEFTPlacer(), MITEPlacer(), DFSPlacer(), MTOPOPlacer()):
        placer.place(g, cluster)
    log.debug("compiled kernels warmed up on %d ops (m-ETF compiled: %s)", g.index().n, pl.info.get("compiled"))
