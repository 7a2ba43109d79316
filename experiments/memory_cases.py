"""Per-device memory of saved fidelity cases: the simulator's peak against the workers' count, and what crosses.

The fidelity sweep (`experiments/fidelity.py --save-cases DIR`) writes, per run, the placement, the schedule and
the options of its prediction. This script takes such cases, runs each placement again on the process-per-device
runtime (a few steps; memory does not depend on the host's speed), and prints per device the simulated peak
(`fidelity.simulate_case`) beside the workers' live-byte peak, and per placement the messages the workers send
(`StepAnalysis.sends`, gloo's storage sharing on) against the simulator's count (a transfer per op and device,
each of ``send_tensors`` messages). A case saved by older code is replayed with this code's schedule rules
(`items_follow_their_producer`) and with the ``items_of`` / ``send_tensors`` attributes of a fresh capture.

    python experiments/fidelity.py --models inception_v3_tiny --clusters cpu2 --save-cases /tmp/cases ...
    python experiments/memory_cases.py --cases /tmp/cases --model inception_v3_tiny --placers m_topo celeritas

Session 29 (28 Nov 2026, 2-vCPU VM, session 28's cases of transformer_tiny and inception_v3_tiny): before the
storage sharing, inception_v3_tiny m-TOPO's cpu1 was predicted 1,001,480 B against 1,093,648 B counted (four
ReLU outputs received twice, with their ``detach``); after it, every device of the eight multi-device cases was
within +0.0 to +1.6 % (docs/fidelity.md). Cost per case: one run of ``--warmup`` + ``--steps`` steps.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "experiments") not in sys.path:
    sys.path.insert(0, str(ROOT / "experiments"))


def messages(prog: Any, model: Any, graph: Any, case: dict[str, Any]) -> tuple[int, float]:
    """(the workers' messages per step, the simulator's) for one case, parameters' moves to their readers included."""
    import torch

    from backends.torch.analysis import StepAnalysis
    from backends.torch.devices import PhysDevice

    flat = prog.flat_inputs(model)
    P, S = prog.n_params, prog.n_params * prog.n_state
    names = list(case["schedule"])
    a = StepAnalysis(
        prog, case["placement"], case["schedule"], [PhysDevice(n, torch.device("cpu")) for n in names],
        flat[:P], flat[P : P + S], flat[P + S :], share_storages=True,
    )  # fmt: skip
    sent = sum(len(dests) for dests in a.sends.values())
    idx, pl = graph.index(), case["placement"]
    simulated = sum(
        idx.copy_tensors[i] * len({pl[idx.names[j]] for j, _ in idx.succ[i]} - {pl[n]}) for i, n in enumerate(idx.names)
    )
    return sent, simulated


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", required=True, help="the folder `fidelity.py --save-cases` wrote")
    ap.add_argument("--model", required=True)
    ap.add_argument("--cluster", default="cpu2")
    ap.add_argument("--placers", nargs="+", required=True)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()

    from fidelity import simulate_case

    from algorithms.cluster import Cluster
    from algorithms.graph import OpGraph
    from algorithms.placement import items_follow_their_producer
    from backends.torch import TorchBackend
    from backends.torch.capture import program_matching
    from backends.torch.config import load_model_cfg
    from backends.torch.distributed import TorchDistributedRuntime

    backend = TorchBackend(threads=1)
    model = backend.build(load_model_cfg(args.model, {}))
    captured = backend.capture(model)
    prog = program_matching(model, captured, "operator", model.batch_size, ["cpu"])
    folder = Path(args.cases)
    rows = []
    graph = None
    for placer in args.placers:
        case = json.loads((folder / f"{args.model}_{args.cluster}_{placer}.case.json").read_text())
        if graph is None:
            graph = OpGraph.load(folder / case["graph"])  # the mean profile the prediction used
            for op in graph.ops:  # attributes a case from older code lacks
                for key in ("items_of", "send_tensors"):
                    value = captured.op(op).get(key)
                    if value is not None:
                        graph.op(op)[key] = value
            for u, v, d in graph.nx.edges(data=True):  # and edge sizes (0 into an op of a tuple's items)
                d["bytes"] = captured.nx.edges[u, v]["bytes"]
            graph.invalidate()
        case["schedule"] = items_follow_their_producer(graph, case["schedule"])
        sim = simulate_case(case, graph)
        cluster = Cluster.from_dict(case["cluster"], case["cluster_name"])
        res = TorchDistributedRuntime(warmup=args.warmup, steps=args.steps).run(
            backend, model, captured, case["placement"], case["schedule"], cluster
        )
        sent, simulated = messages(prog, model, graph, case)
        print(
            f"{args.model} {placer}: correct {res.extra.get('correct')}; messages sent {sent}, simulated {simulated:g}"
        )
        for d in sorted(sim.peak_memory):
            measured = res.peak_memory_bytes.get(d, 0.0)
            err = (sim.peak_memory[d] - measured) / measured if measured else 0.0
            print(f"  {d}: simulated {sim.peak_memory[d]:,.0f} B, workers {measured:,.0f} B ({100 * err:+.2f} %)")
            rows.append(
                {
                    "model": args.model,
                    "placer": placer,
                    "device": d,
                    "simulated_peak": sim.peak_memory[d],
                    "measured_peak": measured,
                    "messages_sent": sent,
                    "messages_simulated": simulated,
                    "correct": res.extra.get("correct"),
                }
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
