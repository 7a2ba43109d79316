"""How far a single-GPU placed step's gradients are from the correctness check's reference, with TF32 on or off.

The reference of `TorchDistributedRuntime`'s check runs in the parent process on the same GPU; cuDNN may choose
another convolution algorithm there than in the worker, and with TF32 (PyTorch's default for convolutions) two
algorithms round differently. This prints, per model and mode (eager, CUDA graph), the largest gradient
difference relative to its tensor's largest magnitude (`max_grad_rel_diff`), whether the check passed and the
tolerance it used (`runtime.rtol`, or `runtime.tf32_rtol` where the workers computed in TF32). Run it once as is
and once with ``NVIDIA_TF32_OVERRIDE=0`` to compare. Needs a GPU (on CPU it runs one small dry step).

    python experiments/tf32_check.py --models inception_v3 inception_v3_tiny
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["inception_v3", "inception_v3_tiny"])
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args(argv)

    import torch
    from omegaconf import OmegaConf

    from algorithms.cluster import Cluster
    from algorithms.placement import topological_schedule
    from backends.torch import TorchBackend
    from backends.torch.distributed import TorchDistributedRuntime
    from backends.torch.reference import tf32_in_effect
    from experiments.fidelity import compose_cfg

    cuda = torch.cuda.is_available()
    print(
        f"torch {torch.__version__}, {torch.cuda.get_device_name() if cuda else 'no GPU (dry run on cpu2)'}, "
        f"NVIDIA_TF32_OVERRIDE={os.environ.get('NVIDIA_TF32_OVERRIDE', '(unset)')}, TF32 in effect here: "
        f"{tf32_in_effect()}",
        flush=True,
    )
    cl_name = "gpu1" if cuda else "cpu2"
    backend = TorchBackend(threads=1)
    for name in args.models:
        cfg = compose_cfg(name, cl_name, "single")
        cluster = Cluster.from_dict(OmegaConf.to_container(cfg.cluster, resolve=True), cl_name)
        model = backend.build(OmegaConf.to_container(cfg.model, resolve=True))
        graph = backend.capture(model)
        one = {op: cluster.devices[0].name for op in graph.ops}
        for graphed in (False, True) if cuda else (False,):
            res = TorchDistributedRuntime(warmup=args.warmup, steps=args.steps, cuda_graph=graphed).run(
                backend, model, graph, one, topological_schedule(graph, one, cluster.names), cluster
            )
            x = res.extra
            print(
                f"{name} {'graph' if graphed else 'eager'}: correct={x.get('correct')} "
                f"max_grad_rel_diff={x.get('max_grad_rel_diff', float('nan')):.3g} "
                f"(abs {x.get('max_grad_abs_diff', float('nan')):.3g}, {x.get('worst_param')}) rtol={x.get('rtol')} "
                f"loss {x.get('loss')} vs {x.get('reference_loss')}",
                flush=True,
            )


if __name__ == "__main__":
    main()
