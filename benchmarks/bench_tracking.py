"""MLflow's share of a cached rerun of the default experiment (`python -m orchestrator` twice).

    python benchmarks/bench_tracking.py [--root DIR] [--repeats N] [--also OVERRIDE ...]

Runs the default experiment once in a fresh folder (fills the stage cache and creates the MLflow store), then
`repeats` times each, alternating, `python -m orchestrator` (tracking on, default configuration) and `python -m
orchestrator tracking.enabled=false`, and prints the median wall and CPU (user + system) seconds of both and their
difference: MLflow's share; and the wall time the job itself spent in RunTracker (its debug log line). Each
`--also` override (e.g. `tracking.direct=false`: every run through MlflowClient) adds rows measured the same
way. `--root` runs another checkout's code (PYTHONPATH), to compare before and after. On a loaded machine the CPU
figures are the steadier ones.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(root: Path, cwd: Path, *args: str) -> tuple[float, float, float | None]:
    """(wall s, CPU s, the job's own tracking time in s as RunTracker.elapsed_s logs it, or None) of one job."""
    env = dict(os.environ, PYTHONPATH=str(root), LAB_CACHE_DIR=str(cwd / "cache"))
    env.pop("MLFLOW_TRACKING_URI", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args, "hydra.verbose=orchestrator.tracking"],
        cwd=cwd,
        env=env,
        check=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    own = re.search(r"MLflow \((\w+)\): ([0-9.]+) s for run", out.stdout)
    return wall, cpu, float(own.group(2)) if own else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--also", action="append", default=[], help="another configuration to measure (an override)")
    args = ap.parse_args()
    configs: list[tuple[str, ...]] = [(), *((o,) for o in args.also), ("tracking.enabled=false",)]
    times: dict[tuple[str, ...], list[tuple[float, float, float | None]]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="bench-tracking-") as tmp:
        cwd = Path(tmp)
        _run(args.root, cwd)  # fill the cache, create the store
        for _ in range(args.repeats):
            for c in configs:
                times[c].append(_run(args.root, cwd, *c))
    off = configs[-1]
    for c in configs[:-1]:
        label = " ".join(c) or "default"
        for name, k in (("wall", 0), ("cpu", 1)):
            a = statistics.median(x[k] for x in times[c])
            b = statistics.median(x[k] for x in times[off])
            print(f"{label:24s} {name:4s}: tracking on {a:6.2f} s   off {b:6.2f} s   MLflow's share {a - b:6.2f} s")
        own = [x[2] for x in times[c] if x[2] is not None]
        if own:  # wall time inside RunTracker (create, one batch, artifacts, end), imports of MLflow included
            print(f"{label:24s} in the job: RunTracker {statistics.median(own):6.3f} s (median wall)")
    print(f"(median of {args.repeats} cached reruns each, code from {args.root})")


if __name__ == "__main__":
    main()
