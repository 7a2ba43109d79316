"""Execute a pipeline schedule for real with PyTorch (Tessel section IV-D, runtime instantiation).

A small GPT-style model (token + position embedding, pre-norm decoder layers with causal self-attention, final
norm and LM head) is split into S consecutive stages, one per device. The schedule's per-device action lists
(``algorithms.pipeline.runtime.build_actions``) are run by one worker thread per device:

- ``compute`` of a forward block runs the stage on the micro-batch (stage 0 reads the tokens; the others the
  activation received from the previous stage, as a leaf that requires grad); the last stage also computes the
  micro-batch's loss, scaled by 1/N so that the summed gradients equal those of the whole batch;
- ``compute`` of a backward block back-propagates the stage: the last stage from its loss, the others from the
  gradient received from the next stage; the gradient of the stage input is what is sent back;
- ``send`` puts a real copy of the tensor on the receiving device (``Tensor.to(dst, copy=True)``) into that
  tensor's queue and returns at once; ``recv`` is posted and returns at once; a ``compute`` waits on the queues
  of the tensors it consumes before it starts (the paper's message manager, non-blocking semantics).

Devices are virtual CPU devices (all threads on the CPU) unless CUDA devices are present and asked for; then
stage k runs on ``cuda:k % n_gpu`` (each on its default stream; copies are synchronous device-to-device copies
issued by the sending thread, so the overlap of communication with computation is at host level).

Supported schedules: those whose spec puts one forward and one backward block on each device, chained through
the devices (the V shape, or ``blocks_from_placement`` of a placement into consecutive stages). Imports only
torch and algorithms.pipeline.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from algorithms.pipeline.runtime import Action, build_actions
from algorithms.pipeline.schedule import PipelineSchedule

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------------ model stages
class Embedding(nn.Module):
    """Token + learned position embedding."""

    def __init__(self, vocab: int, d_model: int, seq_len: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq_len, d_model)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        return self.tok(tokens) + self.pos(pos)[None]


class DecoderLayer(nn.Module):
    """Pre-norm transformer decoder layer: causal self-attention and a 4x MLP, each with a residual."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + a
        return x + self.mlp(self.ln2(x))


class Head(nn.Module):
    """Final layer norm and the LM head (logits over the vocabulary)."""

    def __init__(self, d_model: int, vocab: int):
        super().__init__()
        self.ln = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.ln(x))


def build_gpt_stages(
    n_stages: int,
    vocab: int = 64,
    d_model: int = 32,
    n_heads: int = 2,
    n_layers: int = 4,
    seq_len: int = 16,
    seed: int = 0,
) -> list[nn.Sequential]:
    """A GPT-style model split into ``n_stages`` consecutive stages (embedding in the first, head in the last,
    decoder layers spread as evenly as possible)."""
    torch.manual_seed(seed)
    mods: list[nn.Module] = [Embedding(vocab, d_model, seq_len)]
    mods += [DecoderLayer(d_model, n_heads) for _ in range(n_layers)]
    mods.append(Head(d_model, vocab))
    if n_stages > len(mods):
        raise ValueError(f"{n_stages} stages for {len(mods)} modules")
    cuts = [round(k * len(mods) / n_stages) for k in range(n_stages + 1)]
    return [nn.Sequential(*mods[cuts[k] : cuts[k + 1]]) for k in range(n_stages)]


# ------------------------------------------------------------------------------------------------ the runner
@dataclass
class RunResult:
    loss: float
    time_s: float
    records: list[dict[str, Any]]


class PipelineRunner:
    """Runs a schedule's action lists on real stages, one worker thread per device (see the module docstring)."""

    def __init__(self, schedule: PipelineSchedule, stages: Sequence[nn.Module], use_cuda: bool = True):
        self.schedule = schedule
        spec = schedule.spec
        fwd = [b for b in spec.blocks if b.kind != "backward"]
        bwd = [b for b in spec.blocks if b.kind == "backward"]
        if len(fwd) != len(stages) or len(bwd) != len(stages):
            raise ValueError(
                f"schedule has {len(fwd)} forward / {len(bwd)} backward blocks for {len(stages)} "
                f"stages; need one forward and one backward block per stage"
            )
        self.stage_of: dict[str, int] = {}
        self.dev_of_stage: list[str] = []
        for k, b in enumerate(fwd):
            if len(b.devices) != 1:
                raise ValueError(
                    f"block {b.name} runs on several devices; tensor parallel blocks are not executed by this runtime"
                )
            self.stage_of[b.name] = k
            self.dev_of_stage.append(b.devices[0])
        for b in bwd:
            if len(b.devices) != 1 or b.devices[0] not in self.dev_of_stage:
                raise ValueError(f"backward block {b.name} is not on a stage's device")
            self.stage_of[b.name] = self.dev_of_stage.index(b.devices[0])
        ngpu = torch.cuda.device_count() if use_cuda else 0
        self.torch_dev = {
            d: (torch.device(f"cuda:{i % ngpu}") if ngpu else torch.device("cpu")) for i, d in enumerate(spec.devices)
        }
        self.stages = [st.to(self.torch_dev[self.dev_of_stage[k]]) for k, st in enumerate(stages)]
        self.actions = build_actions(schedule)

    def run(self, micro_batches: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> RunResult:
        """One training iteration (forward + backward of every micro-batch; gradients accumulate)."""
        spec, N = self.schedule.spec, self.schedule.n_micro
        if len(micro_batches) != N:
            raise ValueError(f"schedule is for {N} micro-batches, got {len(micro_batches)}")
        S = len(self.stages)
        queues: dict[tuple, queue.Queue] = {}
        for acts in self.actions.values():
            for a in acts:
                if a.tag is not None:
                    queues.setdefault(a.tag, queue.Queue(maxsize=1))
        saved: dict[tuple[int, int], tuple[torch.Tensor | None, torch.Tensor]] = {}
        losses: dict[int, torch.Tensor] = {}
        records: list[dict[str, Any]] = []
        lock = threading.Lock()
        errors: list[BaseException] = []
        t0 = time.perf_counter()

        def inbox(block: str, micro: int, device: str) -> torch.Tensor | None:
            for p in spec.block(block).deps:
                if device not in spec.block(p).devices:
                    return queues[(p, micro, device)].get(timeout=300)
            return None

        def worker(device: str, acts: list[Action]):
            try:
                dev = self.torch_dev[device]
                for a in acts:
                    if a.kind == "recv":
                        continue  # posted; the consuming compute waits on the queue
                    k = self.stage_of[a.block]
                    if a.kind == "send":
                        if spec.block(a.block).kind == "backward":
                            t = saved[(k, a.micro)][0].grad
                        else:
                            t = saved[(k, a.micro)][1].detach()
                        queues[a.tag].put(t.to(self.torch_dev[a.peer], copy=True))
                        continue
                    got = inbox(a.block, a.micro, device)
                    ts = time.perf_counter()
                    if spec.block(a.block).kind != "backward":
                        tokens, targets = micro_batches[a.micro]
                        if k == 0:
                            x = None
                            out = self.stages[0](tokens.to(dev))
                        else:
                            x = got.requires_grad_(True)
                            out = self.stages[k](x)
                        if k == S - 1:
                            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), targets.to(dev).reshape(-1)) / N
                            with lock:
                                losses[a.micro] = loss.detach()
                            out = loss
                        saved[(k, a.micro)] = (x, out)
                    else:
                        x, out = saved[(k, a.micro)]
                        if k == S - 1:
                            out.backward()
                        else:
                            out.backward(got)
                    if dev.type == "cuda":
                        torch.cuda.synchronize(dev)
                    te = time.perf_counter()
                    with lock:
                        records.append(
                            {
                                "device": device,
                                "name": f"{a.block} #{a.micro}",
                                "block": a.block,
                                "micro": a.micro,
                                "kind": spec.block(a.block).kind,
                                "start_s": ts - t0,
                                "end_s": te - t0,
                            }
                        )
            except BaseException as e:  # surface worker failures in the caller
                errors.append(e)
                for q in queues.values():  # unblock peers waiting on this device
                    try:
                        q.put_nowait(None)
                    except queue.Full:
                        pass

        threads = [
            threading.Thread(target=worker, args=(d, list(acts)), daemon=True) for d, acts in self.actions.items()
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        if errors:
            raise RuntimeError(f"pipeline worker failed: {errors[0]!r}") from errors[0]
        dt = time.perf_counter() - t0
        total = sum(float(v.cpu()) for v in losses.values())
        return RunResult(total, dt, sorted(records, key=lambda r: r["start_s"]))


def seconds_per_unit(records: Sequence[dict[str, Any]], schedule: PipelineSchedule) -> float:
    """Calibrate the schedule's time unit from measured block durations (median of seconds / units)."""
    vals = sorted((r["end_s"] - r["start_s"]) / schedule.spec.block(r["block"]).time for r in records)
    return vals[len(vals) // 2] if vals else float("nan")


def run_schedule(
    schedule: PipelineSchedule,
    *,
    vocab: int = 64,
    d_model: int = 32,
    n_heads: int = 2,
    n_layers: int = 4,
    seq_len: int = 16,
    micro_batch: int = 4,
    iterations: int = 3,
    seed: int = 0,
    use_cuda: bool = True,
) -> dict[str, Any]:
    """Build the stages, run ``iterations`` iterations of the schedule, compare with one device.

    Returns the pipeline loss, the single-device loss of the same batch, the largest gradient difference,
    the measured time per iteration (median) and the schedule's prediction (makespan x calibrated unit).
    """
    spec = schedule.spec
    S = sum(1 for b in spec.blocks if b.kind != "backward")
    stages = build_gpt_stages(S, vocab, d_model, n_heads, n_layers, seq_len, seed)
    reference = build_gpt_stages(S, vocab, d_model, n_heads, n_layers, seq_len, seed)
    g = torch.Generator().manual_seed(seed + 1)
    N = schedule.n_micro
    data = torch.randint(0, vocab, (N * micro_batch, seq_len + 1), generator=g)
    micro = [
        (data[m * micro_batch : (m + 1) * micro_batch, :-1], data[m * micro_batch : (m + 1) * micro_batch, 1:])
        for m in range(N)
    ]
    runner = PipelineRunner(schedule, stages, use_cuda=use_cuda)
    times, res = [], None
    for _ in range(iterations):
        for st in runner.stages:
            st.zero_grad(set_to_none=True)
        res = runner.run(micro)
        times.append(res.time_s)
    # single device: the whole model on the whole batch, loss = mean over micro-batches of their mean CE
    ref_loss = 0.0
    for tokens, targets in micro:
        x = tokens
        for st in reference:
            x = st(x)
        loss = F.cross_entropy(x.reshape(-1, x.shape[-1]), targets.reshape(-1)) / N
        loss.backward()
        ref_loss += float(loss.detach())
    max_grad_diff = 0.0
    for st, rf in zip(runner.stages, reference):
        for p, q in zip(st.parameters(), rf.parameters()):
            if p.grad is not None and q.grad is not None:
                max_grad_diff = max(max_grad_diff, float((p.grad.cpu() - q.grad).abs().max()))
    unit = seconds_per_unit(res.records, schedule)
    measured = sorted(times)[len(times) // 2]
    out = {
        "loss": res.loss,
        "reference_loss": ref_loss,
        "max_grad_diff": max_grad_diff,
        "measured_step_s": measured,
        "predicted_step_s": schedule.makespan * unit,
        "seconds_per_unit": unit,
        "records": res.records,
        "devices": {d: str(v) for d, v in runner.torch_dev.items()},
    }
    log.info(
        "pipeline run: loss %.5f (single device %.5f), %.4fs per iteration, predicted %.4fs",
        res.loss,
        ref_loss,
        measured,
        out["predicted_step_s"],
    )
    if not math.isfinite(res.loss):
        raise RuntimeError("pipeline loss is not finite")
    return out
