"""Pipeline schedules executed by torch.distributed.pipelining: measured step and bubble beside the predicted ones.

Our schedules are searched / generated on the block model, exported to torch's per-rank action lists
(algorithms/pipeline/export.py) and run by torch's schedule runtime (``_PipelineScheduleRuntime._load_csv``) in
one pinned gloo process per rank (backends/torch/pipelining.py), on a small GPT:

- on the M shape (``tessel``, ``1f1b_plus``, ``gpipe``): the embedding is a stage of its own, then one decoder
  stage per rank (the head in the last). M's embedding is a tensor-parallel block on all devices in the schedule;
  torch runs each stage on one rank, so it is exported on rank 0 (the other ranks skip it);
- ``1f1b`` on the V shape (the embedding inside the first decoder stage);
- ``chimera`` (X shape: two pipelines, two model replicas) does not map onto torch's single chain: reported;
- torch's own schedules on the same GPT: ScheduleGPipe, Schedule1F1B (one stage per rank),
  ScheduleInterleavedZeroBubble (two stages per rank, looped), ScheduleZBVZeroBubble and ScheduleDualPipeV (two
  stages per rank in a V).

Columns: the block model's makespan in time units (the schedule as searched / as torch runs the export, with
the embedding on one rank), the predicted step (replay of the executed per-rank orders with the median measured
duration of each (stage, action type), no communication time), the measured step (slowest rank; median and IQR
over the timed steps), the fastest step against the replay with each (stage, type)'s fastest call, the
predicted and measured bubble, and the first step's loss against one process.
On this 2-core machine 2 ranks are pinned one per core; with --ranks 4 ranks share cores. The machine is shared
with other jobs: the load average is printed; measured steps include their interference.

    PYTHONPATH=. python experiments/pipeline_run.py [--ranks 2] [--n-micro 8] [--steps 7]
"""

from __future__ import annotations

import argparse
import logging
import os
import time

from algorithms.pipeline.baselines import ChimeraScheduler, GPipeScheduler, OneFOneBPlusScheduler, OneFOneBScheduler
from algorithms.pipeline.blocks import make_shape, reference_memory
from algorithms.pipeline.export import NotExportable, export_actions, projected_schedule
from algorithms.pipeline.tessel import TesselScheduler
from backends.torch.pipelining import GPTConfig, run_export, run_torch_schedule, summary_row

OURS = ("tessel", "1f1b_plus", "gpipe", "1f1b", "chimera")
TORCH = ("ScheduleGPipe", "Schedule1F1B", "ScheduleInterleavedZeroBubble", "ScheduleZBVZeroBubble", "ScheduleDualPipeV")


def our_schedule(name: str, D: int, N: int):
    if name == "tessel":
        return TesselScheduler().schedule(make_shape("m", D), None, reference_memory("m", D), N)
    if name == "1f1b_plus":
        return OneFOneBPlusScheduler().schedule(make_shape("m", D), None, None, N)
    if name == "gpipe":
        return GPipeScheduler().schedule(make_shape("m", D), None, None, N)
    if name == "1f1b":
        return OneFOneBScheduler().schedule(make_shape("v", D), None, None, N)
    if name == "chimera":
        return ChimeraScheduler().schedule(make_shape("x", D), None, None, N)
    raise SystemExit(f"unknown schedule {name!r}; choose from {OURS} or {TORCH}")


def fmt_row(label: str, units: str, row: dict) -> str:
    return (
        f"| {label} | {row['stages']} | {units} | {1e3 * row['predicted_step_s']:.1f} | "
        f"{1e3 * row['measured_step_s']:.1f} ({1e3 * row['measured_step_iqr_s']:.1f}) | "
        f"{1e3 * row['predicted_fastest_step_s']:.1f} / {1e3 * row['measured_min_step_s']:.1f} | "
        f"{100 * row['predicted_bubble']:.1f}% | {100 * row['measured_bubble']:.1f}% | "
        f"{abs(row['loss'] - row['reference_loss']):.1e} / {row['max_grad_diff']:.1e} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--n-micro", type=int, default=8)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--schedules", default=",".join(OURS + TORCH))
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    D, N = args.ranks, args.n_micro
    gpt = GPTConfig(args.vocab, args.d_model, 4, args.layers, args.seq_len, args.micro_batch)
    cores = len(os.sched_getaffinity(0))
    print(
        f"pipeline_run: {D} ranks on {cores} cores ({'one per core' if D <= cores else 'ranks share cores'}), "
        f"N={N} micro-batches of {gpt.micro_batch} x {gpt.seq_len} tokens, GPT d_model {gpt.d_model}, "
        f"{gpt.n_layers} layers, vocab {gpt.vocab}; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    print(
        "| schedule | torch stages | model units: searched / as run | predicted step ms | measured step ms "
        "median (IQR) | fastest: predicted / measured ms | predicted bubble | measured bubble | "
        "loss / grad diff vs 1 process |",
        flush=True,
    )
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    for name in args.schedules.split(","):
        t0 = time.perf_counter()
        if name in TORCH:
            try:
                run = run_torch_schedule(name, D, N, gpt, warmup=args.warmup, steps=args.steps)
            except Exception as e:  # a placement torch's schedule does not accept: say so and go on
                print(f"| torch {name} | - | - | not run: {type(e).__name__}: {str(e)[:120]} | | | | | |", flush=True)
                continue
            print(fmt_row(f"torch {name}", "-", summary_row(run)), flush=True)
            continue
        sched = our_schedule(name, D, N)
        try:
            exp = export_actions(sched)
        except NotExportable as e:
            print(
                f"| {name} ({sched.spec.name}) | - | {sched.makespan} / - | not exportable: {e} | | | | | |", flush=True
            )
            continue
        proj = projected_schedule(sched, exp)
        run = run_export(exp, gpt, warmup=args.warmup, steps=args.steps)
        if run.rank_orders != exp.ranks:
            raise SystemExit(f"{name}: torch did not run the exported order")
        label = f"{name} ({sched.spec.name})"
        print(fmt_row(label, f"{sched.makespan} / {proj.makespan}", summary_row(run)), flush=True)
        logging.getLogger(__name__).info("%s took %.1fs", name, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
