"""Celeritas' planned makespan against the simulator's for the same placement (issue 17, item 7).

For random training graphs with colocation groups (`algorithms.workloads.synthetic.level_dag`) on 2 to 4
identical devices with ample memory: Adjusting Placement's own plan (``info["planned_makespan_s"]``) against
the simulator's replay of the placement in its per-device order (``info["simulated_makespan_s"]``).  Prints,
per exploration range R, for the cluster's communication mode, the plan (`plan`: "ops", the simulator's
op-level model, or "coarse", the paper's per-node EST) and `congestion` (Celeritas 6.1; "auto": on in
sequential mode): the number of cases, how many differ by more than 1e-6 relative, the mean and largest
relative difference |planned - simulated| / simulated, and the mean simulated makespan (the placement's
quality; the same graphs for every configuration).

    PYTHONPATH=. python benchmarks/celeritas_plan_error.py [--cases 150] [--seed 0] [--R 5 20 200 auto]
        [--mode parallel] [--plan ops] [--congestion auto]
"""

from __future__ import annotations

import argparse
import logging
import random

from algorithms.cluster import uniform_cluster
from algorithms.placers.celeritas import CeleritasPlacer
from algorithms.workloads.synthetic import level_dag


def _congestion(x: str) -> bool | str:
    return {"auto": "auto", "true": True, "false": False}[x.lower()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--R", nargs="+", default=["5", "20", "200"])
    ap.add_argument("--mode", choices=("parallel", "sequential"), default="parallel")
    ap.add_argument("--plan", choices=("ops", "coarse"), default="ops")
    ap.add_argument("--congestion", type=_congestion, default="auto", help="auto | true | false")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    for R in args.R:
        run(args.cases, args.seed, R if R == "auto" else int(R), args.mode, args.plan, args.congestion)


def run(cases: int, seed: int, R: int | str, mode: str, plan: str, congestion: bool | str) -> None:
    rng = random.Random(seed)
    errs = []
    sims = []
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
        cl = uniform_cluster(rng.randint(2, 4), latency_s=1e-5, bytes_per_s=rng.choice([1e8, 1e9, 1e10]), mode=mode)
        kw = {"congestion": congestion} if plan == "ops" else {}
        info = CeleritasPlacer(R=R, plan=plan, **kw).place(g, cl).info
        sim = info["simulated_makespan_s"]
        sims.append(sim)
        errs.append(abs(info["planned_makespan_s"] - sim) / sim if sim > 0 else 0.0)
    differ = sum(e > 1e-6 for e in errs)
    print(
        f"{cases} cases (R={R}, {mode}, plan={plan}, congestion={congestion}): planned != simulated in {differ}; "
        f"relative error mean {sum(errs) / len(errs):.3%}, max {max(errs):.3%}; "
        f"mean simulated makespan {sum(sims) / len(sims) * 1e3:.3f} ms"
    )


if __name__ == "__main__":
    main()
