"""What a TensorFlow placed step pays per message, by the kind of value sent (issue 16, session 44).

Reads a sweep of `experiments/fidelity_tf.py` run with ``--json`` and ``--save-cases`` (the runs' measured steps,
each run's profiled graph and placement) and, for every multi-device run, counts the cross-device values as the
simulator does (one message per producing op and destination device) by kind:

* ``const``: made by a ``Const`` op (its value exists from the step's start);
* ``control``: every edge to that device is a control dependency (TensorFlow sends a dummy tensor for it);
* ``variable``: made by a ``ReadVariableOp`` (a variable's value read on its own device);
* ``data``: the rest (activations, gradients, shapes).

It prints the measured step less the same model's measured single-device step, the step per message and per
non-constant message, the error of the sweep's in-step prediction (the case's costs), and the least-squares cost
per message of each kind over all runs and per model, with the median error of that count-only model (no
simulation: what the kinds alone explain), and the same fit of the workers' processor time per step (procfs,
both workers, beyond the single-device run's) on the constants' and the other messages. With ``--grid`` it also
searches one hop latency and one (send, receive) processor time per message for all runs (the simulator's
structure, every message alike) and prints the best points with each model's median error: whether any one set
of costs fits every model.

    python experiments/fidelity_tf.py --models mlp_tiny gnmt_tiny transformer_tiny inception_v3_tiny mlp \\
        --placers single expert m_topo m_etf m_sct celeritas heft hashing metis critical_path dfs order_place \\
        icp mite --steps 10 --warmup 3 --rounds 2 --save-cases CASES --json SWEEP.json
    python experiments/tf_message_kinds.py --json SWEEP.json --cases CASES [--grid]

Cost: reading the graphs; ``--grid``: 6 x 6 x 6 simulations of every multi-device run (about a minute for 50 runs).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from algorithms.cluster import Cluster  # noqa: E402
from algorithms.graph import OpGraph  # noqa: E402
from experiments.fidelity import simulate_case  # noqa: E402

KINDS = ("const", "control", "variable", "data")


def message_kinds(graph: OpGraph, placement: dict[str, str]) -> Counter[str]:
    """The cross-device messages of `placement` (one per producer and destination device), counted by kind
    (module docstring). O(E)."""
    control: dict[tuple[str, str], bool] = {}  # per message: whether every edge it serves is a control edge
    for u, v, data in graph.nx.edges(data=True):
        if placement[u] != placement[v]:
            key = (u, placement[v])
            control[key] = control.get(key, True) and bool(data.get("control"))
    out: Counter[str] = Counter()
    for (u, _), only_control in control.items():
        kind = graph.op(u).get("type")
        if kind == "Const":
            out["const"] += 1
        elif only_control:
            out["control"] += 1
        elif kind == "ReadVariableOp":
            out["variable"] += 1
        else:
            out["data"] += 1
    return out


def non_constant(kinds: Counter[str]) -> int:
    """How many of the counted messages (`message_kinds`) do not carry a constant's value."""
    return sum(kinds.values()) - kinds["const"]


def non_constant_messages(graph: OpGraph, placement: dict[str, str]) -> int:
    """The messages of `placement` (one per producing op and device) that do not carry a constant's value."""
    return non_constant(message_kinds(graph, placement))


def worker_cpu(row: dict[str, Any]) -> float | None:
    """Both workers' processor time per step of a run (`fidelity_tf.py`'s ``worker_cpu_per_step_s``, one
    {device: s} per round): the median over its rounds of the sum; None where it was not read."""
    per_round = [sum(d.values()) for d in row.get("worker_cpu_per_step_s") or [] if d]
    return float(statistics.median(per_round)) if per_round else None


def predicted(case: dict[str, Any], graph: OpGraph, **kw: Any) -> float:
    """The case's predicted step (its simulated makespan plus the empty step `fidelity_tf.py` adds); `kw`
    overrides the simulator's options, ``latency_s`` the hop latency."""
    case = dict(case)
    if "latency_s" in kw:
        cl = Cluster.from_dict(case["cluster"], case["cluster_name"])
        case["cluster"] = cl.with_comm(kw.pop("latency_s"), cl.bytes_per_s).to_dict()
    sim = simulate_case(case, graph, record_memory=False, **kw)
    return float(sim.makespan + case.get("step_overhead_s", 0.0))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path, required=True, help="fidelity_tf.py --json output")
    ap.add_argument("--cases", type=Path, required=True, help="fidelity_tf.py --save-cases folder")
    ap.add_argument("--cluster", default="cpu2")
    ap.add_argument("--grid", action="store_true", help="also search one latency and per-message cost for all runs")
    args = ap.parse_args(argv)

    rows = json.loads(args.json.read_text())
    single = {r["model"]: r["measured_step_s"] for r in rows if r["placer"] == "single"}
    graphs: dict[str, OpGraph] = {}
    runs: list[tuple[dict[str, Any], dict[str, Any], Counter[str]]] = []
    for r in rows:
        if r["devices_used"] < 2 or r["model"] not in single:
            continue
        name = r["model"]
        if name not in graphs:
            graphs[name] = OpGraph.load(args.cases / f"{name}_{args.cluster}.graph.json")
        case = json.loads((args.cases / f"{name}_{args.cluster}_{r['placer']}.case.json").read_text())
        runs.append((r, case, message_kinds(graphs[name], case["placement"])))

    print(
        f"{'model':<18}{'placer':<14}" + "".join(f"{k:>9}" for k in KINDS)
        + f"{'meas-1dev':>11}{'per msg':>9}{'per non-const':>15}{'pred err':>10}"
    )  # fmt: skip
    for r, case, kinds in runs:
        extra = r["measured_step_s"] - single[r["model"]]
        n = sum(kinds.values())
        non_const = non_constant(kinds)
        err = (predicted(case, graphs[r["model"]]) - r["measured_step_s"]) / r["measured_step_s"]
        print(
            f"{r['model']:<18}{r['placer']:<14}" + "".join(f"{kinds[k]:>9}" for k in KINDS)
            + f"{1e3 * extra:>9.2f}ms{1e6 * extra / max(n, 1):>7.1f}us{1e6 * extra / max(non_const, 1):>13.1f}us"
            + f"{100 * err:>+9.1f}%"
        )  # fmt: skip

    def fit(sel: list[int]) -> np.ndarray:
        a = np.array([[runs[i][2][k] for k in KINDS] for i in sel], float)
        y = np.array([runs[i][0]["measured_step_s"] - single[runs[i][0]["model"]] for i in sel])
        coef, *_ = np.linalg.lstsq(a, y, rcond=None)
        return np.asarray(coef)

    everything = list(range(len(runs)))
    coef = fit(everything)
    errs = [
        abs(single[r["model"]] + sum(c * kinds[k] for c, k in zip(coef, KINDS)) - r["measured_step_s"])
        / r["measured_step_s"]
        for r, _, kinds in runs
    ]
    print(
        "\nleast-squares step per message, all runs: "
        + ", ".join(f"{k} {1e6 * c:.1f} us" for k, c in zip(KINDS, coef))
        + f"; median |error| of the count-only model {100 * statistics.median(errs):.1f}% over {len(runs)} runs"
    )
    for name in graphs:
        sel = [i for i in everything if runs[i][0]["model"] == name]
        if len(sel) > len(KINDS):
            c = fit(sel)
            print(f"  {name}: " + ", ".join(f"{k} {1e6 * v:.1f} us" for k, v in zip(KINDS, c)))

    # the workers' processor time (procfs, both workers) beyond the single-device run's, on (constant, other) counts
    cpu1 = {r["model"]: worker_cpu(r) for r in rows if r["placer"] == "single"}
    sel = [(r, kinds) for r, _, kinds in runs if worker_cpu(r) is not None and cpu1.get(r["model"]) is not None]
    if len(sel) > 2:
        for name in [None, *graphs]:
            part = [(r, k) for r, k in sel if name is None or r["model"] == name]
            if len(part) < 3:
                continue
            a = np.array([[k["const"], non_constant(k), 1.0] for _, k in part])
            y = np.array([worker_cpu(r) - cpu1[r["model"]] for r, _ in part])
            c, *_ = np.linalg.lstsq(a, y, rcond=None)
            print(
                f"{'processor time per step, all runs' if name is None else '  ' + name}: "
                f"{1e6 * c[0]:.1f} us per constant's message, {1e6 * c[1]:.1f} us per other message"
                f" (and {1e3 * c[2]:+.2f} ms a step)"
            )

    if args.grid:
        grid = [0.0, 25e-6, 50e-6, 75e-6, 100e-6, 150e-6]
        costs = [10e-6, 20e-6, 30e-6, 45e-6, 60e-6, 80e-6]
        points = []
        for lat, s, rcv in itertools.product(grid, costs, costs):
            e = [
                (predicted(case, graphs[r["model"]], latency_s=lat, send_overhead_s=s, recv_overhead_s=rcv)
                 - r["measured_step_s"]) / r["measured_step_s"]
                for r, case, _ in runs
            ]  # fmt: skip
            per = {
                name: statistics.median(abs(x) for x, (r, _, _) in zip(e, runs) if r["model"] == name)
                for name in graphs
            }
            points.append((statistics.median(abs(x) for x in e), lat, s, rcv, per))
        points.sort(key=lambda p: p[0])
        print("\none latency and (send, receive) cost per message for all runs, the best points:")
        for med, lat, s, rcv, per in points[:5]:
            print(
                f"  {100 * med:.1f}% (latency {1e6 * lat:.0f} us, send {1e6 * s:.0f} us, receive {1e6 * rcv:.0f} us): "
                + ", ".join(f"{k} {100 * v:.0f}%" for k, v in per.items())
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
