"""The single-device reference of a placed step and the comparison with it: `reference_step` runs the captured
program op by op on one device (capture order); `compare_outputs` checks the loss and every gradient of two
flat output lists agree within tolerances (the correctness check of both torch runtimes).
"""

from __future__ import annotations

import math
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
    for name, ga, gb in zip(prog.param_names, sa["grads"], sb["grads"]):
        ga, gb = ga.detach().cpu(), gb.detach().cpu()
        diff = float((ga - gb).abs().max()) if ga.numel() else 0.0
        if diff > worst:
            worst, worst_name = diff, name
        scale = float(gb.abs().max()) if gb.numel() else 0.0
        if not agrees(diff, scale, rtol, atol):
            ok = False
    return {
        "correct": ok,
        "loss": loss_a,
        "reference_loss": loss_b,
        "max_grad_abs_diff": worst,
        "worst_param": worst_name,
    }


def reference_step(prog: Program, flat: Sequence[torch.Tensor]) -> list[Any]:
    """The same step on one device, op by op in capture order (the single-device reference)."""
    return run_program(prog, flat)
