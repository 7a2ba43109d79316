"""Reference results of every Baechi and thesis placer and of the simulator on a few fixed graphs, for
`tests/test_scale_identical.py`: the speed work of issue 22 must leave every placement, makespan and peak
unchanged.  ``python -m tests.scale_fixture`` records them (run it on the code whose results are the
reference, then commit ``tests/data/scale_reference.json``)."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from algorithms.cluster import uniform_cluster
from algorithms.errors import LabError
from algorithms.memory import single_device_need
from algorithms.placers.baechi import METFPlacer, MSCTPlacer, MTOPOPlacer
from algorithms.placers.thesis import (
    BatchSplitPlacer,
    CriticalPathPlacer,
    DFSPlacer,
    HashingPlacer,
    HEFTPlacer,
    IteratedCriticalPathPlacer,
    MITEPlacer,
)
from algorithms.simulator import simulate
from algorithms.workloads.synthetic import level_dag

PATH = os.path.join(os.path.dirname(__file__), "data", "scale_reference.json")

PLACERS = {
    "m_topo": MTOPOPlacer,
    "m_etf": METFPlacer,
    "m_sct": MSCTPlacer,
    "hashing": HashingPlacer,
    "heft": HEFTPlacer,
    "batch_split": BatchSplitPlacer,
    "icp": IteratedCriticalPathPlacer,
    "critical_path": CriticalPathPlacer,
    "mite": MITEPlacer,
    "dfs": DFSPlacer,
}

#: (case name, level_dag arguments, cluster mode, memory as a fraction of the single-device need)
CASES: list[tuple[str, dict[str, Any], str, float]] = [
    (
        "levels_parallel",
        dict(
            levels=40,
            min_nodes_per_level=4,
            max_nodes_per_level=12,
            edge_probability=0.15,
            random_edges=40,
            colocated_fraction=0.15,
            max_group_size=6,
            training=True,
            seed=3,
        ),
        "parallel",
        2.0,
    ),
    (
        "levels_tight",
        dict(
            levels=30,
            min_nodes_per_level=3,
            max_nodes_per_level=10,
            edge_probability=0.2,
            random_edges=20,
            colocated_fraction=0.1,
            max_group_size=4,
            training=True,
            seed=7,
        ),
        "parallel",
        0.45,
    ),
    (
        "levels_sequential",
        dict(
            levels=25,
            min_nodes_per_level=2,
            max_nodes_per_level=10,
            edge_probability=0.25,
            random_edges=20,
            training=True,
            seed=11,
        ),
        "sequential",
        1.5,
    ),
    (
        "chain",
        dict(
            levels=150,
            min_nodes_per_level=1,
            max_nodes_per_level=1,
            edge_probability=1.0,
            edge_level_limit=1,
            training=True,
            seed=5,
        ),
        "parallel",
        1.2,
    ),
]


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def case_results(case: tuple[str, dict[str, Any], str, float]) -> dict[str, Any]:
    """Every placer's placement (digests of the assignment and order), predicted makespan, and the simulated
    makespan and peak bytes per device of the placement replayed in its order and first-in first-out."""
    name, gen, mode, frac = case
    g = level_dag(**gen)
    need = single_device_need(g)
    cl = uniform_cluster(4, need * frac, type="GPU", latency_s=1e-4, bytes_per_s=1e9, mode=mode)
    out: dict[str, Any] = {"ops": len(g), "edges": g.number_of_edges()}
    for pname, cls in PLACERS.items():
        try:
            pl = cls().place(g, cl)
        except LabError as exc:
            out[pname] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        rec: dict[str, Any] = {
            "assignment": _digest(pl.assignment),
            "order": _digest(pl.order),
            "predicted_makespan_s": pl.info.get("predicted_makespan_s"),
        }
        sims = {"fifo": simulate(g, cl, pl.assignment)}
        if pl.order:
            try:
                sims["order"] = simulate(g, cl, pl.assignment, pl.order)
            except LabError as exc:
                rec["order_error"] = f"{type(exc).__name__}: {exc}"
        for k, r in sims.items():
            rec[k] = {
                "makespan": r.makespan,
                "peak_memory": r.peak_memory,
                "traffic_bytes": r.traffic_bytes,
                "oom": r.oom.to_dict() if r.oom else None,
                "start": _digest(r.start),
                "memory_timeline": _digest(r.memory_timeline),
            }
        out[pname] = rec
    return out


def main() -> None:
    ref = {c[0]: case_results(c) for c in CASES}
    with open(PATH, "w", encoding="utf-8") as f:
        json.dump(ref, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
