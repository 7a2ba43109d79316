"""Does the graphed GPU profile's layout of plain and timed replays move its step? (issue 16, session 24)

Per model and round, in shuffled order: a graph-mode profile whose plain replays alternate with the timed ones
(`profile_in_worker` setting ``untimed: alternate``), one with them in one block first (``block``), and the
graphed single-device run (`runtime.cuda_graph`); each profile's plain-replay median against the runs' median.
Then the allocator's peak of an eager and a graphed run with a 4 MiB cuBLAS workspace, against
`backends.torch.cuda_memory`. On a host without CUDA it runs the same logic on CPU workers (a dry run).

    python experiments/cuda_graph_layout.py ROUNDS

Figures of 27 Nov 2026 on an H100: `experiments/data/h100/probe_s24.txt`, docs/fidelity.md."""

import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rounds", type=int, help="rounds per model (profiles and runs in a new random order each)")
    args = ap.parse_args(argv)
    import torch
    from omegaconf import OmegaConf

    from algorithms.cluster import Cluster
    from algorithms.placement import topological_schedule
    from backends.torch import TorchBackend
    from backends.torch.distributed import TorchDistributedRuntime
    from backends.torch.profiler import profile_in_worker, worker_setting
    from experiments.fidelity import compose_cfg

    print("torch", torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu", flush=True)
    rounds, warmup, steps = args.rounds, 5, 30
    dry = not torch.cuda.is_available()  # a CPU dry run of the script's logic
    cl_name = "cpu2" if dry else "gpu1"
    if dry:
        warmup, steps = 1, 3
    backend = TorchBackend(threads=1)
    rng = random.Random(0)
    for name in ["mlp_tiny", "gnmt_tiny", "transformer_tiny", "inception_v3_tiny"]:
        cfg = compose_cfg(name, cl_name, "single")
        cluster = Cluster.from_dict(OmegaConf.to_container(cfg.cluster, resolve=True), cl_name)
        model = backend.build(OmegaConf.to_container(cfg.model, resolve=True))
        graph = backend.capture(model)
        base = worker_setting(cluster, cuda=not dry, cuda_graph=not dry)
        dev = cluster.devices[0].name
        one = {op: dev for op in graph.ops}
        got: dict[str, list[float]] = {"alternate": [], "block": [], "run": [], "timed": []}
        for rnd in range(rounds):
            kinds = ["alternate", "block", "run"]
            rng.shuffle(kinds)
            for kind in kinds:
                t0 = time.perf_counter()
                if kind == "run":
                    res = TorchDistributedRuntime(warmup=warmup, steps=steps, cuda_graph=not dry).run(
                        backend, model, graph, one, topological_schedule(graph, one, cluster.names), cluster
                    )
                    got["run"].append(res.measured_step_s)
                    extra = f"iqr {res.step_iqr_s * 1e3:.4f} ms peak {max(res.peak_memory_bytes.values()) / 1e6:.1f} MB"
                else:
                    _, chk = profile_in_worker(
                        model, graph, setting={**base, "untimed": kind}, warmup=warmup, steps=steps
                    )
                    got[kind].append(chk["step_median_s"])
                    extra = f"sum of op medians {chk['sum_op_median_s'] * 1e3:.4f} ms"
                print(
                    f"{name} r{rnd} {kind:9s} {got[kind][-1] * 1e3:.4f} ms  {extra}  "
                    f"({time.perf_counter() - t0:.1f} s)",
                    flush=True,
                )
        run = statistics.median(got["run"])
        for kind in ("alternate", "block"):
            m = statistics.median(got[kind])
            print(
                f"SUMMARY {name} {kind}: profile {m * 1e3:.4f} ms, run {run * 1e3:.4f} ms, "
                f"error {100 * (m - run) / run:+.2f} %",
                flush=True,
            )
    # the allocator's peak with a smaller cuBLAS workspace
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:1"
    for name in ["mlp_tiny", "gnmt_tiny"]:
        cfg = compose_cfg(name, cl_name, "single")
        cluster = Cluster.from_dict(OmegaConf.to_container(cfg.cluster, resolve=True), cl_name)
        model = backend.build(OmegaConf.to_container(cfg.model, resolve=True))
        graph = backend.capture(model)
        dev = cluster.devices[0].name
        for cg in (False, True) if not dry else (False,):
            one = {op: dev for op in graph.ops}
            res = TorchDistributedRuntime(warmup=warmup, steps=10, cuda_graph=cg).run(
                backend, model, graph, one, topological_schedule(graph, one, cluster.names), cluster
            )
            peak, tensors = max(res.peak_memory_bytes.values()), max(res.extra["tensor_peak_bytes"].values())
            print(
                f"WORKSPACE 4MiB {name} graph={cg}: allocator peak {peak / 1e6:.1f} MB, tensor peak "
                f"{tensors / 1e6:.2f} MB, reserve {max(res.extra['framework_reserve_bytes'].values()) / 1e6:.2f} MB",
                flush=True,
            )


if __name__ == "__main__":
    main()
