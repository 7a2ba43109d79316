"""Where a GPU worker's allocator peak exceeds the tensors' peak (issue 16's open memory point), measured.

Session 25 found the full-size models' allocator peaks on one H100 11.7-12.4 MB above the tensors' peak plus
cuBLAS's workspaces (mlp 1.1 MB), with the tensors' own peak predicted to the byte. Candidates: the
allocator's rounding (blocks of 512-byte multiples, unsplit blocks), memory an aten op allocates and frees
inside itself (no output shows it), and the gradients the first step keeps for the correctness check. This
script separates them, per model, on one GPU:

1. ``runtime``: the placed single-device step in the process-per-device runtime
   (`TorchDistributedRuntime`, eager), once with the correctness check and once without; each run's
   `extra["allocator_peaks_bytes"]` gives the allocator's allocated and requested peaks of the first step (the
   one that keeps the gradients when the check is on) and of the later steps, beside `tensor_peak_bytes` and
   `framework_reserve_bytes`.
2. ``walk``: the captured step executed node by node in this process (program order, each value freed after
   its last use, as the worker does), with the allocator's peak statistics reset before each node: per node the
   bytes it requested and freed inside itself (requested peak during the node less the larger of before and
   after), and at the step's peak the allocated bytes less the requested ones (the rounding).

    python experiments/cuda_memory_gap.py --models mlp gnmt transformer inception_v3 --json gap.json

Needs CUDA; prints one block per model. Measures, changes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "experiments") not in sys.path:
    sys.path.insert(0, str(ROOT / "experiments"))


def walk(prog: Any, flat: list[Any], top: int = 8) -> dict[str, Any]:
    """Execute `prog` node by node on the inputs' GPU; see the module docstring (2). O(N) nodes, each with two
    allocator-statistics reads."""
    import torch

    from backends.torch.program import resolve

    dev = flat[0].device
    env: dict[int, Any] = {}
    for r in prog.nodes:
        if r.kind == "placeholder":
            env[r.nid] = flat[r.index]
    for nid, c in prog.consts.items():
        env[nid] = c.to(dev)
    keep = set(prog.outputs[:1]) | set(prog.outputs[1 + prog.n_params :])  # the loss, new parameters and state
    last: dict[int, int] = {}
    calls = [r for r in prog.nodes if r.kind == "call"]
    for k, r in enumerate(calls):
        for i in r.inputs:
            last[i] = k
    frees: dict[int, list[int]] = {}
    for i, k in last.items():
        if i not in keep and prog.nodes[i].kind == "call":
            frees.setdefault(k, []).append(i)

    def stats() -> tuple[float, float, float, float]:
        s = torch.cuda.memory_stats(dev)
        return (
            float(s["allocated_bytes.all.current"]),
            float(s["requested_bytes.all.current"]),
            float(s["allocated_bytes.all.peak"]),
            float(s["requested_bytes.all.peak"]),
        )

    get = env.__getitem__
    torch.cuda.synchronize(dev)
    base_alloc, base_req, _, _ = stats()
    live = 0.0  # the worker's accounting: bytes of storage the step's nodes allocated and still hold
    tensor_peak = 0.0
    step_alloc_peak = step_req_peak = 0.0
    at_peak: dict[str, float] = {}
    inner: list[tuple[float, str, str]] = []
    for k, r in enumerate(calls):
        _, q0, _, _ = stats()
        torch.cuda.reset_peak_memory_stats(dev)
        env[r.nid] = r.target(*resolve(r.args, get), **resolve(r.kwargs, get))
        torch.cuda.synchronize(dev)
        _, q1, ap, qp = stats()
        live += r.alloc_bytes
        tensor_peak = max(tensor_peak, live)
        extra_req = qp - max(q0, q1)
        if extra_req > 0:
            inner.append((extra_req, prog.op_of.get(r.nid, "?"), getattr(r.target, "__name__", str(r.target))))
        if ap - base_alloc > step_alloc_peak:
            step_alloc_peak = ap - base_alloc
            at_peak = {"node": r.nid, "op": prog.op_of.get(r.nid, "?"), "requested": qp - base_req, "live": live}
        step_req_peak = max(step_req_peak, qp - base_req)
        for i in frees.get(k, ()):
            if env.pop(i, None) is not None:
                live -= prog.nodes[i].alloc_bytes
    torch.cuda.synchronize(dev)
    inner.sort(reverse=True)
    return {
        "tensor_peak_bytes": tensor_peak,
        "allocated_peak_bytes": step_alloc_peak,
        "requested_peak_bytes": step_req_peak,
        "at_allocated_peak": at_peak,
        "inner_bytes_largest": [{"bytes": b, "op": op, "node": t} for b, op, t in inner[:top]],
        "nodes_with_inner": len(inner),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["mlp", "gnmt", "transformer", "inception_v3"])
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--skip-runtime", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    import torch
    from fidelity import compose_cfg
    from omegaconf import OmegaConf

    from algorithms.cluster import Cluster
    from algorithms.placement import topological_schedule
    from backends.torch import TorchBackend
    from backends.torch.capture import trace_program
    from backends.torch.distributed import TorchDistributedRuntime

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure", file=sys.stderr)
        return 2
    backend = TorchBackend(threads=1)
    out: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "models": {}}
    for name in args.models:
        cfg = compose_cfg(name, "gpu1", "single")
        cluster = Cluster.from_dict(OmegaConf.to_container(cfg.cluster, resolve=True), "gpu1")
        model = backend.build(OmegaConf.to_container(cfg.model, resolve=True))
        graph = backend.capture(model)
        row: dict[str, Any] = {"ops": len(graph.ops)}
        if not args.skip_runtime:
            dev0 = cluster.names[0]
            assignment = {op: dev0 for op in graph.ops}
            schedule = topological_schedule(graph, assignment, cluster.names)
            for check in (True, False):
                t0 = time.perf_counter()
                rt = TorchDistributedRuntime(warmup=args.warmup, steps=args.steps, check_correctness=check)
                res = rt.run(backend, model, graph, assignment, schedule, cluster)
                row[f"runtime_check_{check}"] = {
                    "peak": res.peak_memory_bytes[dev0],
                    "tensor_peak": res.extra["tensor_peak_bytes"][dev0],
                    "reserve": res.extra["framework_reserve_bytes"][dev0],
                    "allocator_peaks": res.extra["allocator_peaks_bytes"][dev0],
                    "seconds": time.perf_counter() - t0,
                }
        gpu = torch.device("cuda", 0)
        prog = trace_program(model, backend.granularity, model.batch_size, device=gpu)
        flat = [t.to(gpu) for t in prog.flat_inputs(model)]
        for _ in range(2):  # the first walk creates cuBLAS handles and workspaces; the second is measured
            w = walk(prog, flat)
        row["walk"] = w
        out["models"][name] = row
        print(f"== {name} ({row['ops']} ops)")
        for key in ("runtime_check_True", "runtime_check_False"):
            if key in row:
                r = row[key]
                ap_ = r["allocator_peaks"]
                print(
                    f"  {key}: peak {r['peak']:.0f}, tensors {r['tensor_peak']:.0f}, reserve {r['reserve']:.0f}, "
                    f"gap {r['peak'] - r['tensor_peak'] - r['reserve']:.0f}; first step alloc/req "
                    f"{ap_['first_step']['allocated']:.0f}/{ap_['first_step']['requested']:.0f}, later "
                    f"{ap_['later_steps']['allocated']:.0f}/{ap_['later_steps']['requested']:.0f}"
                )
        print(
            f"  walk: tensors {w['tensor_peak_bytes']:.0f}, requested {w['requested_peak_bytes']:.0f}, allocated "
            f"{w['allocated_peak_bytes']:.0f} (at {w['at_allocated_peak']}); {w['nodes_with_inner']} nodes "
            f"allocate inside themselves, largest: {w['inner_bytes_largest'][:5]}",
            flush=True,
        )
        del prog, flat
        torch.cuda.empty_cache()
        if args.json:  # after every model: a run cut short keeps what it measured
            args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
