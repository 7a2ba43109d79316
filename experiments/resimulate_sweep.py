"""Predict an orchestrator sweep's measured runs again under other models of the runtime, without measuring.

A run directory of `python -m orchestrator ... runtime=real` keeps what its prediction used, placement.json and
schedule.json, and its log names the cache entries of its profile and communication fit (``stage profile ...
<key>``, ``stage comm ... <key>``, `orchestrator.cache`). With the stage cache the run used (``LAB_CACHE_DIR``),
this script loads that profiled graph and comm.json, rebuilds the simulation the simulate stage made
(`orchestrator.stages.simulate`: the workers' host cores, per-message and per-byte costs, shared-core charge, and
the receive policy of the run's runtime) and repeats it for every model of where a receive's processor time goes
(`algorithms.simulator`, ``recv_work``) and, with ``--comm``, with another fit's costs. Each run's measured step
is printed beside every prediction, and the median |error| of each variant over the runs.

Session 42 (docs/fidelity.md) used it on session 41's `gnmt_mem_limited regime=here` sweeps.

    python experiments/resimulate_sweep.py --cache /tmp/s41/cache /tmp/s41/gm3/sweep [--comm other/comm.json]

Cost: two simulations per run and variant (`simulate_within_limit`); seconds for default-size GNMT.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from algorithms.simulator import RECV_WORK  # noqa: E402  (after the repository root is on the path)

COSTS = ("send_overhead_s", "recv_overhead_s", "send_byte_s", "recv_byte_s")


def cache_entry(cache: Path, log: str, stage: str) -> Path:
    """The cache folder of `stage` named in a run's log (hit or computed)."""
    m = re.search(rf"stage {stage}\s+(?:cache hit|computed)\s+([0-9a-f]+)", log)
    if m is None:
        raise ValueError(f"the log names no {stage} cache entry")
    found = sorted(cache.glob(f"{m.group(1)[:2]}/{m.group(1)}*/"))
    if not found:
        raise FileNotFoundError(f"{stage} entry {m.group(1)} is not in {cache}")
    return found[0]


def run_inputs(run: Path, cache: Path) -> dict[str, Any]:
    """What the run's simulate stage used, read back: graph, cluster (memory limits, fitted links), placement,
    schedule, comm.json, host cores and whether its workers post receives within the memory limit."""
    from omegaconf import OmegaConf

    from algorithms.graph import OpGraph
    from orchestrator.context import build_cluster

    result = json.loads((run / "result.json").read_text())
    log = (run / "__main__.log").read_text()
    cfg = OmegaConf.load(run / "config.yaml")
    comm = json.loads((cache_entry(cache, log, "comm") / "comm.json").read_text())
    cluster = build_cluster(cfg.cluster, str(result["cluster"]))
    cluster = cluster.with_comm(float(comm["latency_s"]), float(comm["bytes_per_s"] or float("inf")))
    cluster = cluster.with_memory(result["memory_limit_bytes"])
    runtime = cfg.get("runtime") or {}
    return {
        "result": result,
        "graph": OpGraph.load(cache_entry(cache, log, "profile") / "graph.json"),
        "cluster": cluster,
        "placement": json.loads((run / "placement.json").read_text()),
        "schedule": json.loads((run / "schedule.json").read_text()),
        "comm": comm,
        "host_cores": result.get("host_cores"),
        "within_limit": runtime.get("post_receives", "up_front") == "within_limit",
    }


def predict(inp: dict[str, Any], comm: dict[str, Any], recv_work: str) -> float:
    """The simulate stage's step for the run with `comm`'s costs and `recv_work`."""
    from algorithms.simulator import simulate
    from orchestrator.stages.simulate import simulate_within_limit

    opts: dict[str, Any] = {k: float(comm.get(k) or 0.0) for k in COSTS}
    cluster = inp["cluster"].with_comm(float(comm["latency_s"]), inp["cluster"].bytes_per_s)
    if inp["host_cores"]:
        opts["host_cores"] = int(inp["host_cores"])
        opts["shared_core_slowdown"] = float(comm.get("shared_core_slowdown") or 0.0)
    opts["recv_work"] = recv_work
    if inp["within_limit"]:
        return simulate_within_limit(inp["graph"], cluster, inp["placement"], inp["schedule"], opts).makespan
    opts["recv_buffers"] = "step_start"
    return simulate(inp["graph"], cluster, inp["placement"], inp["schedule"], **opts).makespan


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweeps", nargs="+", type=Path, help="multirun folders (hydra.sweep.dir) or run folders")
    ap.add_argument("--cache", type=Path, required=True, help="the stage cache the runs used (LAB_CACHE_DIR)")
    ap.add_argument("--recv-work", nargs="+", choices=RECV_WORK, default=list(RECV_WORK))
    ap.add_argument("--comm", type=Path, default=None, help="a comm.json whose costs are tried too")
    args = ap.parse_args(argv)
    other = json.loads(args.comm.read_text()) if args.comm else None
    for sweep in args.sweeps:
        found = [p.parent for p in sweep.glob("*/result.json")]
        runs = [sweep] if (sweep / "result.json").exists() else sorted(found, key=lambda p: (len(p.name), p.name))
        errors: dict[str, list[float]] = {}
        print(sweep)
        for run in runs:
            result = json.loads((run / "result.json").read_text())
            measured = result.get("measured_step_s")
            if not measured:
                continue
            inp = run_inputs(run, args.cache)
            cells = []
            for work in args.recv_work:
                for label, comm in (("", inp["comm"]), (" (--comm)", other)):
                    if comm is None:
                        continue
                    name = work + label
                    p = predict(inp, comm, work)
                    errors.setdefault(name, []).append(abs(p - measured) / measured)
                    cells.append(f"{name}: {p:.4g} s ({100 * (p / measured - 1):+.1f}%)")
            print(
                f"  {run.name:>3} {result['placer']:10s} {result['traffic_bytes'] / 1e6:6.0f} MB  measured "
                f"{measured:.4g} s (as run {result['predicted_step_s']:.4g}) | " + "  ".join(cells),
                flush=True,
            )
        for name, errs in errors.items():
            print(f"  median |error| {name}: {100 * statistics.median(errs):.1f}% over {len(errs)} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
