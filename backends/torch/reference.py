"""The single-device reference of a placed step and the comparison with it: `reference_step` runs the captured
program op by op on one device (capture order); `compare_outputs` checks the loss and every gradient of two
flat output lists agree within tolerances (the correctness check of both torch runtimes); `tf32_in_effect` says
whether this process's CUDA kernels may compute in TF32, which the check's tolerance must then allow for.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import torch

from backends.base import agrees

from .program import Program, run_program


def compare_outputs(
    a: Sequence[Any], b: Sequence[Any], prog: Program, rtol: float = 1e-4, atol: float = 1e-6
) -> dict[str, Any]:
    """Loss and gradient agreement between two flat output lists (e.g. placed vs single device).

    A gradient agrees by `backends.base.agrees`: its largest elementwise difference is at most
    ``atol + rtol * max|b|``."""
    sa, sb = prog.split_outputs(a), prog.split_outputs(b)
    loss_a, loss_b = float(sa["loss"]), float(sb["loss"])
    worst, worst_name, ok = 0.0, None, math.isclose(loss_a, loss_b, rel_tol=rtol, abs_tol=atol)
    worst_rel = 0.0
    for name, ga, gb in zip(prog.param_names, sa["grads"], sb["grads"]):
        ga, gb = ga.detach().cpu(), gb.detach().cpu()
        diff = float((ga - gb).abs().max()) if ga.numel() else 0.0
        if diff > worst:
            worst, worst_name = diff, name
        scale = float(gb.abs().max()) if gb.numel() else 0.0
        if scale > 0.0:
            worst_rel = max(worst_rel, diff / scale)
        if not agrees(diff, scale, rtol, atol):
            ok = False
    return {
        "correct": ok,
        "loss": loss_a,
        "reference_loss": loss_b,
        "max_grad_abs_diff": worst,
        "worst_param": worst_name,
        # the largest gradient difference relative to its own tensor's largest magnitude: what rtol bounds
        "max_grad_rel_diff": worst_rel,
        "rtol": rtol,
    }


def tf32_in_effect() -> bool:
    """Whether this process's CUDA convolutions or matrix products may compute in TF32 (10 explicit mantissa
    bits, unit roundoff 2^-11, about 4.9e-4): PyTorch allows it for cuDNN's convolutions by default
    (``torch.backends.cudnn.allow_tf32``) and not for cuBLAS's products (``torch.backends.cuda.matmul``), and
    ``NVIDIA_TF32_OVERRIDE=0`` turns it off in the libraries whatever the flags say. False without CUDA."""
    if not torch.cuda.is_available() or os.environ.get("NVIDIA_TF32_OVERRIDE", "").strip() == "0":
        return False
    return bool(torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32)


def reference_step(prog: Program, flat: Sequence[torch.Tensor]) -> list[Any]:
    """The same step on one device, op by op in capture order (the single-device reference)."""
    return run_program(prog, flat)
