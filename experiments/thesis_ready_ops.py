"""Thesis (seed 004) Figure 7.10: the number of executable nodes a device had before each scheduling decision, on
synthetic graphs 2 and 3 and seven devices, for every partitioner and scheduler (the setting of Figures 7.7 -
7.9, `conf/experiment/thesis_synthetic_7dev.yaml`).

The thesis' claim (7.3): "for every strategy there were far more executable nodes on graph 2 when making the
scheduling decision" than on the narrow graph 3, which explains graph 3's idle gaps (Figure 7.9).

For each graph, partitioner and scheduler the script composes the preset's config (graph, devices, memory),
places the graph with the partitioner, runs the scheduler's dispatch policy in the simulator with its decision log
(`record_decisions=True`: (time, device, executable ops) at every decision) and records the mean number of
executable ops per decision. Each cell becomes an MLflow run of the experiment `thesis_ready_ops` (params
`thesis_graph`, `placer`, `scheduler`; metrics `ready_ops_mean`, `predicted_step_s`); the scoreboard
(`python -m orchestrator.reproduce thesis-f7.10`) reads them. With --out, the HEFT + PCT decision logs are drawn
as Figure 7.10 (`orchestrator.plots.executable_ops_png`).

    python experiments/thesis_ready_ops.py [--size small|paper] [--graphs g2,g3] [--out figures/7_10]
"""

from __future__ import annotations

import argparse
import logging
import statistics
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from algorithms.placement import Placement
from orchestrator.context import build_cluster
from orchestrator.models import SyntheticGraph
from orchestrator.plots import executable_ops_png
from orchestrator.registry import instantiate, plain

CONF = Path(__file__).resolve().parent.parent / "conf"
PLACERS = ["hashing", "heft", "batch_split", "icp", "critical_path", "mite", "dfs"]
SCHEDULERS = ["fifo", "pct", "msr"]
log = logging.getLogger("thesis_ready_ops")


def _cfg(graph: str, size: str, placer: str, scheduler: str):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(
            "config",
            overrides=[
                "+experiment=thesis_synthetic_7dev",
                f"thesis_graph={graph}",
                f"thesis_size={size}",
                f"placer={placer}",
                f"scheduler={scheduler}",
            ],
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="small", choices=["small", "paper"])
    ap.add_argument("--graphs", default="g2,g3")
    ap.add_argument("--out", default=None, help="folder for the Figure 7.10 pictures (HEFT + PCT)")
    ap.add_argument("--experiment", default="thesis_ready_ops", help="MLflow experiment to log into")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    import mlflow

    mlflow.set_experiment(args.experiment)
    print(f"{'graph':6s} {'placer':14s} {'sched':6s} {'ready/decision':>15s} {'makespan s':>11s}")
    for gname in args.graphs.split(","):
        graph = cluster = None
        for placer in PLACERS:
            for sched in SCHEDULERS:
                cfg = _cfg(gname, args.size, placer, sched)
                if graph is None:
                    graph = SyntheticGraph(plain(cfg.model.generator), name=str(cfg.model.name)).graph()
                    cluster = build_cluster(cfg.cluster, "thesis_hetero")
                assert cluster is not None
                pl = instantiate(cfg.placer, "placer").place(graph, cluster)
                res = instantiate(cfg.scheduler, "scheduler").run(graph, cluster, Placement(pl.assignment))
                counts = [int(c) for _, _, c in res.decisions]
                mean = statistics.mean(counts) if counts else 0.0
                print(f"{gname:6s} {placer:14s} {sched:6s} {mean:15.2f} {res.makespan:11.4g}")
                with mlflow.start_run(run_name=f"{placer} · {sched} · {gname}"):
                    mlflow.log_params(
                        {"thesis_graph": gname, "placer": placer, "scheduler": sched, "thesis_size": args.size}
                    )
                    mlflow.log_metrics({"ready_ops_mean": mean, "predicted_step_s": res.makespan})
                    mlflow.set_tags({"status": "ok" if res.oom is None else "oom", "placer": placer})
                if args.out and placer == "heft" and sched == "pct":
                    Path(args.out).mkdir(parents=True, exist_ok=True)
                    p = executable_ops_png(
                        res.decisions,
                        Path(args.out) / f"figure_7_10_{gname}.png",
                        title=f"Figure 7.10: executable ops per decision, {gname}, HEFT + PCT, 7 devices",
                        devices=cluster.names,
                    )
                    log.info("wrote %s", p)


if __name__ == "__main__":
    main()
