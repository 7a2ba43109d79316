"""Where a placed step's time goes: one saved fidelity case, predicted against measured, op by op (issue 16).

The fidelity sweep (`experiments/fidelity.py --save-cases DIR`) writes, per run, what its prediction used: the
placement, the schedule, the cluster with its fitted links and the per-message costs. This script takes such
cases for one model, profiles the model again in the workers' setting (`profile_in_worker`) right before each
run, so that profile and run see the same host, predicts the step with the case's options
(`fidelity.simulate_case`) and runs it on the process-per-device runtime with the debug trace on. Per run it
prints:

- the predicted step, the measured step (median; the slowest worker per step) and where the median step's
  last op ended (``ops end``, from `extra["op_timeline"]`);
- per worker, the step's tail after its last op (posting the next step's receives, the waits for sends, the
  parameter moves), the time in ``isend`` calls per message and the time blocked in receive waits
  (`distributed.trace_summary`);
- the hops to a worker already waiting for the value, from the sender's ``isend`` to the end of the wait,
  split by whether the two workers share a host core (`distributed.trace_hops`; session 35 on cpu4: 0.66-0.77 ms
  on a shared core, 63-88 us across cores);
- ``local ops``: the ops that neither receive nor send (every input and consumer on their own device), their
  measured time in the median step against their profiled cost, as a ratio of the sums and the median of the
  per-op ratios. Their spans hold no message work, so a ratio above 1 is compute that ran slower in the placed
  step than in the profile. A single-device case gives the reference (every op is local there).

    python experiments/fidelity.py --models transformer_tiny --clusters cpu2 --save-cases /tmp/cases ...
    python experiments/step_anatomy.py --cases /tmp/cases --model transformer_tiny --placers single celeritas

Session 18 (26 Nov 2026, quiet 2-vCPU VM, transformer_tiny on cpu2, the cases of session 17's second sweep):
the ops of celeritas' placement ended 2-11 % after the predicted step's end, but the step went on 0.6-0.7 ms after its
last op, posting about 50 receives for the next step (about 13 us each), which the simulator charges inside
the receiving ops instead; local ops ran 1.3-1.5 times their profiled cost (view ops too), m-TOPO's 1.1-1.35,
the single-device run's 0.94-1.0 (docs/fidelity.md). Cost per case and round: one profile (two workers) and
one run of ``--warmup`` + ``--steps`` steps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def local_ops(graph: Any, placement: dict[str, str]) -> set[str]:
    """Ops whose every predecessor and successor is on their own device (no message work in their span)."""
    return {
        o
        for o in graph.ops
        if all(placement[p] == placement[o] for p in graph.predecessors(o))
        and all(placement[s] == placement[o] for s in graph.successors(o))
    }


def local_ratio(timeline: list[dict[str, Any]], cost: dict[str, float], local: set[str]) -> tuple[float, float]:
    """(measured / profiled over the local ops' sums, median of their per-op ratios); NaN where none."""
    spans = [(x["end_s"] - x["start_s"], cost[x["op"]]) for x in timeline if x["op"] in local and cost[x["op"]] > 0]
    if not spans:
        return float("nan"), float("nan")
    return sum(m for m, _ in spans) / sum(p for _, p in spans), statistics.median(m / p for m, p in spans)


def per_op_rows(
    graph: Any, placement: dict[str, str], sim: Any, timeline: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One row per op of the measured median step, in measured start order: its device, the simulated and
    the measured [start, end] (seconds from the step's start), its profiled cost, whether it reads a value
    from another device (``R``) and sends its own to one (``S``), and ``lag``, how much later it started than
    simulated. Where the lag grows along a device's ops, that device's work took longer than predicted there.
    O(V log V)."""
    measured = {x["op"]: x for x in timeline}
    rows = []
    for i, op in enumerate(sim.names):
        m = measured.get(op)
        if m is None:
            continue
        rows.append(
            {
                "op": op,
                "device": sim.devices[sim.device_of[i]],
                "sim_start_s": sim.start[i],
                "sim_end_s": sim.end[i],
                "start_s": m["start_s"],
                "end_s": m["end_s"],
                "profiled_s": float(graph.op(op)["compute_s"]),
                "receives": any(placement[p] != placement[op] for p in graph.predecessors(op)),
                "sends": any(placement[q] != placement[op] for q in graph.successors(op)),
                "lag_s": m["start_s"] - sim.start[i],
            }
        )
    rows.sort(key=lambda r: (r["start_s"], r["device"]))
    return rows


def print_per_op(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        flags = ("R" if r["receives"] else " ") + ("S" if r["sends"] else " ")
        took = r["end_s"] - r["start_s"]
        print(
            f"      {r['device']} {r['op'][:48]:48s} simulated {1e3 * r['sim_start_s']:7.3f}-"
            f"{1e3 * r['sim_end_s']:7.3f} measured {1e3 * r['start_s']:7.3f}-{1e3 * r['end_s']:7.3f} ms "
            f"({1e6 * took:6.1f} us, profiled {1e6 * r['profiled_s']:6.1f}) {flags} lag {1e3 * r['lag_s']:+.3f} ms",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    from omegaconf import OmegaConf

    from algorithms.cluster import Cluster
    from backends.torch import TorchBackend
    from backends.torch.distributed import TorchDistributedRuntime
    from backends.torch.profiler import profile_in_worker, worker_setting
    from experiments.fidelity import compose_cfg, simulate_case

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=Path, required=True, help="a folder fidelity.py --save-cases wrote")
    ap.add_argument("--model", required=True)
    ap.add_argument("--cluster", default="cpu2")
    ap.add_argument("--placers", nargs="+", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--json", type=Path, default=None, help="write every round's figures here")
    ap.add_argument("--per-op", action="store_true", help="also print every op, simulated against measured")
    args = ap.parse_args(argv)

    backend = TorchBackend(threads=1)
    cfg = compose_cfg(args.model, args.cluster, "single")
    model = backend.build(OmegaConf.to_container(cfg.model, resolve=True))
    graph = backend.capture(model)
    rows = []
    for placer in args.placers:
        path = args.cases / f"{args.model}_{args.cluster}_{placer}.case.json"
        case = json.loads(path.read_text())
        cluster = Cluster.from_dict(case["cluster"], args.cluster)
        local = local_ops(graph, case["placement"])
        for rnd in range(args.rounds):
            g, _check = profile_in_worker(
                model, graph, setting=worker_setting(cluster), warmup=args.warmup, steps=args.steps
            )
            sim = simulate_case(case, g)
            res = TorchDistributedRuntime(warmup=args.warmup, steps=args.steps, trace=True).run(
                backend, model, graph, case["placement"], case["schedule"], cluster
            )
            tl = res.extra.get("op_timeline") or []
            cost = {o: float(g.op(o)["compute_s"]) for o in g.ops}
            ratio_sum, ratio_med = local_ratio(tl, cost, local)
            ops_end = max((x["end_s"] for x in tl), default=float("nan"))
            row = {
                "placer": placer,
                "round": rnd,
                "predicted_s": sim.makespan,
                "measured_s": res.measured_step_s,
                "ops_end_s": ops_end,
                "local_ops": len(local),
                "local_ratio_sum": ratio_sum,
                "local_ratio_median": ratio_med,
                "workers": res.extra.get("trace", {}),
                "hops": res.extra.get("trace_hops", {}),
            }
            if args.per_op:
                row["ops"] = per_op_rows(g, case["placement"], sim, tl)
            rows.append(row)
            print(
                f"{placer:10s} round {rnd}: predicted {1e3 * sim.makespan:7.2f} ms  "
                f"measured {1e3 * res.measured_step_s:7.2f} ms "
                f"({100 * (sim.makespan / res.measured_step_s - 1):+5.1f}%)  ops end {1e3 * ops_end:7.2f} ms  "
                f"local ops ({len(local)}) measured/profiled {ratio_sum:.2f} (median op {ratio_med:.2f})",
                flush=True,
            )
            for dev, t in sorted(row["workers"].items()):
                sends = max(t.get("sends", 0.0), 1.0)
                print(
                    f"    {dev}: step {1e3 * t['step_s']:.2f} ms, tail: post {1e3 * t['tail_post_s']:.3f} ms "
                    f"({t['receives']:.0f} receives), send waits {1e3 * t['tail_send_wait_s']:.3f}, moves "
                    f"{1e3 * t['tail_moves_s']:.3f}; isend {1e6 * t['send_s'] / sends:.1f} us per message, "
                    f"receive waits {1e3 * t['recv_wait_s']:.3f} ms",
                    flush=True,
                )
            for kind, h in sorted(row["hops"].items()):
                print(
                    f"    hops to a waiting worker, {kind.replace('_', ' ')}: {h['count']}, median "
                    f"{1e6 * h['median_s']:.1f} us (p25 {1e6 * h['p25_s']:.1f}, p75 {1e6 * h['p75_s']:.1f})",
                    flush=True,
                )
            if args.per_op:
                print_per_op(row["ops"])
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
