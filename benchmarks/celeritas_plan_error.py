"""Celeritas' planned makespan against the simulator's for the same placement (issue 17, item 7).

For random training graphs with colocation groups (`algorithms.workloads.synthetic.level_dag`) on 2 to 4
identical devices with ample memory, parallel communication: Adjusting Placement's own EST plan
(``info["planned_makespan_s"]``) against the simulator's replay of the placement in its per-device order
(``info["simulated_makespan_s"]``).  Prints the number of cases, how many differ by more than 1e-6
relative, and the mean and largest relative difference |planned - simulated| / simulated.

    PYTHONPATH=. python benchmarks/celeritas_plan_error.py [--cases 150] [--seed 0] [--R 5 20 200]
"""

from __future__ import annotations

import argparse
import logging
import random

from algorithms.cluster import uniform_cluster
from algorithms.placers.celeritas import CeleritasPlacer
from algorithms.workloads.synthetic import level_dag


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--R", type=int, nargs="+", default=[5, 20, 200])
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    for R in args.R:
        run(args.cases, args.seed, R)


def run(cases: int, seed: int, R: int) -> None:
    rng = random.Random(seed)
    errs = []
    for k in range(cases):
        g = level_dag(
            levels=rng.randint(4, 12),
            max_nodes_per_level=rng.randint(2, 6),
            edge_probability=rng.uniform(0.2, 0.5),
            colocated_fraction=rng.choice([0.0, 0.2, 0.4]),
            training=True,
            seed=rng.randrange(1 << 30),
            name=f"plan{k}",
        )
        cl = uniform_cluster(rng.randint(2, 4), latency_s=1e-5, bytes_per_s=rng.choice([1e8, 1e9, 1e10]))
        info = CeleritasPlacer(R=R).place(g, cl).info
        sim = info["simulated_makespan_s"]
        errs.append(abs(info["planned_makespan_s"] - sim) / sim if sim > 0 else 0.0)
    differ = sum(e > 1e-6 for e in errs)
    print(
        f"{cases} cases (R={R}): planned != simulated in {differ}; relative error mean "
        f"{sum(errs) / len(errs):.3%}, max {max(errs):.3%}"
    )


if __name__ == "__main__":
    main()
