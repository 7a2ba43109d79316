"""Run pipeline schedules on ``torch.distributed.pipelining``'s own runtime, one worker process per rank (issue 18).

What runs
---------
A small GPT (token + position embedding, pre-norm decoder layers, final norm + LM head; the modules of
``backends/torch/pipeline.py``) is cut into torch ``PipelineStage``s. Each rank is a process started with
``torch.multiprocessing`` (spawn), joined into a gloo group on a free local port and pinned with
``os.sched_setaffinity`` to one host core (rank r on core r mod #cores; with more ranks than cores, ranks share
cores, which ``PipelineRun.oversubscribed`` reports), one intra-op thread each, as ``backends/torch/distributed.py``
does. Every rank builds the whole model from the same seed and keeps its stages' modules.

Schedules:

- ``custom``: a schedule of ours exported by ``algorithms.pipeline.export`` (pipeline_actions.csv), loaded with
  ``_PipelineScheduleRuntime._load_csv(path, "compute_only")`` -- torch infers the stage -> rank map from the
  file and inserts the sends and receives itself; the order of the compute actions is exactly ours.
- torch's schedules as baselines: ``ScheduleGPipe`` and ``Schedule1F1B`` (one stage per rank),
  ``ScheduleInterleaved1F1B`` and ``ScheduleInterleavedZeroBubble`` (two stages per rank, stage s on rank
  s mod R), ``ScheduleZBVZeroBubble`` and ``ScheduleDualPipeV`` (two stages per rank in a V: rank r holds
  stages r and 2R-1-r).

Stage layout: with ``embedding_stage`` (our M-shape exports, whose stage 0 is the embedding block ``emb``) the
embedding is a stage of its own and the decoder layers are split evenly over the other stages; otherwise the
layers are split evenly over all stages, the embedding joining the first and the head the last.

Measured
--------
Warm-up steps (torch infers shapes on the first), then ``steps`` timed steps: each starts at a barrier; a rank's
step time runs until its ``step()`` returns; the step time is the slowest rank's (median, IQR and minimum
reported; on a loaded host the minimum is the least disturbed).
Every call of a stage's ``forward_one_chunk`` / ``backward_one_chunk`` / ``backward_weight_one_chunk`` is timed
(F, B, or I and W for split backwards). Measured bubble = 1 - (sum over ranks of compute time in the step) /
(ranks x step time). Predicted step = ``algorithms.pipeline.export.replay`` of the schedule's compute-only lists
(torch's own ``pipeline_order`` for its schedules) with each (stage, action type)'s median measured duration and
no communication time; predicted bubble from the same replay. The same replay with each (stage, type)'s fastest
call predicts the fastest step. On shared cores the durations include the time
slicing between ranks. The first step's loss (mean over micro-batches) and gradients are checked against a
single-process execution of the same model on the whole batch (``reference_step``).

Imports torch (CPU/gloo); the schedule side (export, replay) is pure Python.
"""

from __future__ import annotations

import logging
import os
import statistics
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from algorithms.errors import ConfigError
from algorithms.pipeline.export import TorchExport

from .pipeline import DecoderLayer, Embedding, Head
from .worker import WorkerError, free_port, lower_transport_threads, spawn_and_collect

log = logging.getLogger(__name__)

TORCH_SCHEDULES = {
    "ScheduleGPipe": "single",
    "Schedule1F1B": "single",
    "ScheduleInterleaved1F1B": "loop",
    "ScheduleInterleavedZeroBubble": "loop",
    "ScheduleZBVZeroBubble": "v",
    "ScheduleDualPipeV": "v",
}


@dataclass(frozen=True)
class GPTConfig:
    """The small GPT: sizes, micro-batch rows and the seed of its weights and data."""

    vocab: int = 256
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 4
    seq_len: int = 32
    micro_batch: int = 4
    seed: int = 0


def gpt_modules(cfg: GPTConfig) -> list[nn.Module]:
    """[embedding, decoder layer x n_layers, head], weights from ``cfg.seed``."""
    torch.manual_seed(cfg.seed)
    mods: list[nn.Module] = [Embedding(cfg.vocab, cfg.d_model, cfg.seq_len)]
    mods += [DecoderLayer(cfg.d_model, cfg.n_heads) for _ in range(cfg.n_layers)]
    mods.append(Head(cfg.d_model, cfg.vocab))
    return mods


def stage_module_ranges(n_layers: int, n_stages: int, embedding_stage: bool) -> list[tuple[int, int]]:
    """Per stage, the [lo, hi) range of ``gpt_modules`` indices it holds (module docstring's layout)."""
    layer_stages = n_stages - 1 if embedding_stage else n_stages
    if layer_stages < 1 or n_layers % layer_stages:
        raise ConfigError(
            f"gpt n_layers={n_layers} cannot be split evenly over {layer_stages} decoder stage(s) "
            f"({n_stages} stages, embedding_stage={embedding_stage}); choose a multiple"
        )
    per = n_layers // layer_stages
    out: list[tuple[int, int]] = []
    if embedding_stage:
        out.append((0, 1))
    for k in range(layer_stages):
        lo, hi = 1 + k * per, 1 + (k + 1) * per
        if k == 0 and not embedding_stage:
            lo = 0
        if k == layer_stages - 1:
            hi += 1  # the head
        out.append((lo, hi))
    return out


def make_batch(cfg: GPTConfig, n_micro: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens and next-token targets of the whole batch (n_micro x micro_batch rows)."""
    g = torch.Generator().manual_seed(cfg.seed + 1)
    data = torch.randint(0, cfg.vocab, (n_micro * cfg.micro_batch, cfg.seq_len + 1), generator=g)
    return data[:, :-1].contiguous(), data[:, 1:].contiguous()


def lm_loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


def reference_step(cfg: GPTConfig, n_micro: int) -> tuple[float, dict[str, torch.Tensor]]:
    """Single-process loss and gradients of the whole model on the whole batch (names ``<module>.<param>``)."""
    mods = gpt_modules(cfg)
    x, y = make_batch(cfg, n_micro)
    h = x
    for m in mods:
        h = m(h)
    loss = lm_loss(h, y)
    loss.backward()
    grads = {f"{i}.{n}": p.grad.detach().clone() for i, m in enumerate(mods) for n, p in m.named_parameters()}
    return float(loss.detach()), grads


@dataclass
class PipelineJob:
    """What every worker needs (picklable)."""

    schedule: str  # "custom" or a key of TORCH_SCHEDULES
    n_ranks: int
    n_stages: int
    n_micro: int
    gpt: GPTConfig
    embedding_stage: bool = False
    csv_path: str | None = None
    warmup: int = 2
    steps: int = 5
    port: int = 0
    cores: list[list[int]] = field(default_factory=list)


@dataclass
class PipelineRun:
    """The outcome of ``run_pipeline_job``."""

    schedule: str
    step_s: list[float]
    rank_orders: dict[int, list[str]]  # per rank, the compute actions of the last timed step in executed order
    durations: dict[tuple[int, str], float]  # median seconds per (stage, action type)
    busy_s: list[float]  # per timed step, compute seconds summed over ranks
    loss: float
    reference_loss: float
    max_grad_diff: float
    n_ranks: int
    n_stages: int
    oversubscribed: float
    cores: list[list[int]]
    durations_min: dict[tuple[int, str], float] = field(default_factory=dict)  # fastest call per (stage, type)

    @property
    def step_median_s(self) -> float:
        return statistics.median(self.step_s)

    @property
    def step_iqr_s(self) -> float:
        if len(self.step_s) < 2:
            return 0.0
        q = statistics.quantiles(self.step_s, n=4, method="inclusive")
        return q[2] - q[0]

    @property
    def measured_bubble(self) -> float:
        """1 - compute / (ranks x step), per timed step, median."""
        vals = [1.0 - b / (self.n_ranks * s) for b, s in zip(self.busy_s, self.step_s) if s > 0]
        return statistics.median(vals) if vals else float("nan")

    def predicted(self, fastest: bool = False) -> tuple[float, float]:
        """(step seconds, bubble) of the replay of ``rank_orders`` with the median measured durations (with
        ``fastest``: each (stage, type)'s fastest call, the prediction to hold against the fastest step)."""
        from algorithms.pipeline.export import replay

        step, busy = replay(self.rank_orders, self.durations_min if fastest else self.durations, self.n_stages)
        return step, (1.0 - sum(busy.values()) / (self.n_ranks * step) if step > 0 else float("nan"))


def _stage_indices(kind: str, rank: int, n_ranks: int, n_stages: int, job: PipelineJob) -> list[int]:
    if kind == "custom":
        return []  # filled from the CSV
    style = TORCH_SCHEDULES[kind]
    if style == "single":
        return [rank]
    if style == "loop":
        return [s for s in range(n_stages) if s % n_ranks == rank]
    return [rank, 2 * n_ranks - 1 - rank]


def _custom_stage_ranks(csv_path: str) -> dict[int, int]:
    from algorithms.pipeline.export import parse_action

    out: dict[int, int] = {}
    with open(csv_path) as f:
        for r, line in enumerate(f.read().splitlines()):
            for a in line.split(","):
                if a.strip():
                    out.setdefault(parse_action(a)[0], r)
    return out


def _backward_kind(kwargs: dict[str, Any]) -> str:
    """B for a full backward, I for the input-gradient half of a split one (torch's naming)."""
    return "B" if kwargs.get("full_backward", True) else "I"


def _worker(rank: int, job: PipelineJob, results: Any) -> None:
    try:
        if os.environ.get("PIPELINING_DEBUG"):
            import faulthandler

            faulthandler.dump_traceback_later(float(os.environ["PIPELINING_DEBUG"]), exit=True)
            logging.basicConfig(level=logging.DEBUG, format=f"rank {rank} %(asctime)s %(message)s")
        log.debug("started")
        from torch.distributed.pipelining import PipelineStage
        from torch.distributed.pipelining import schedules as sch

        cores = job.cores[rank] if job.cores else []
        if cores and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, set(cores))
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{job.port}", rank=rank, world_size=job.n_ranks)
        lower_transport_threads()  # see its docstring: gloo's loop thread must not spin on the worker's core
        log.debug("joined the group")
        S, N = job.n_stages, job.n_micro
        if job.schedule == "custom":
            assert job.csv_path is not None
            mine = sorted(s for s, r in _custom_stage_ranks(job.csv_path).items() if r == rank)
        else:
            mine = _stage_indices(job.schedule, rank, job.n_ranks, S, job)
        mods = gpt_modules(job.gpt)
        ranges = stage_module_ranges(job.gpt.n_layers, S, job.embedding_stage)
        records: list[tuple[int, str, int, float, float]] = []

        def timed(fn: Any, stage_index: int, kind: Any) -> Any:
            def wrapper(mb: int, *a: Any, **k: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return fn(mb, *a, **k)
                finally:
                    typ = kind(k) if callable(kind) else kind
                    records.append((stage_index, typ, int(mb), t0, time.perf_counter()))

            return wrapper

        stages = []
        for s in mine:
            lo, hi = ranges[s]
            sub = nn.Sequential(*mods[lo:hi])
            st = PipelineStage(sub, s, S, torch.device("cpu"))
            # instance attributes shadow the methods the schedules call: every chunk is timed
            st.forward_one_chunk = timed(st.forward_one_chunk, s, "F")
            st.backward_one_chunk = timed(st.backward_one_chunk, s, _backward_kind)
            st.backward_weight_one_chunk = timed(st.backward_weight_one_chunk, s, "W")
            stages.append(st)
        if job.schedule == "custom":
            schedule: Any = sch._PipelineScheduleRuntime(stages, N, loss_fn=lm_loss)
            schedule._load_csv(job.csv_path, "compute_only")
        else:
            cls = getattr(sch, job.schedule)
            schedule = cls(stages[0] if TORCH_SCHEDULES[job.schedule] == "single" else stages, N, loss_fn=lm_loss)
        x, y = make_batch(job.gpt, N)
        has_first, has_last = 0 in mine, S - 1 in mine
        steps, busy = [], []
        loss = float("nan")
        grads: dict[str, Any] = {}
        timed_records: list[tuple[int, str, int, float, float]] = []
        for k in range(job.warmup + job.steps):
            log.debug("step %d", k)
            for st in stages:
                st.submod.zero_grad(set_to_none=True)
            losses: list[torch.Tensor] = []
            dist.barrier()
            records.clear()
            t0 = time.perf_counter()
            schedule.step(
                *((x,) if has_first else ()),
                target=y if has_last else None,
                losses=losses if has_last else None,
                return_outputs=False,
            )
            t1 = time.perf_counter()
            if k == 0:
                if has_last:
                    loss = float(torch.stack([v.detach() for v in losses]).mean())
                for s, st in zip(mine, stages):
                    lo, _ = ranges[s]
                    for i, m in enumerate(st.submod):
                        for n, p in m.named_parameters():
                            if p.grad is not None:
                                grads[f"{lo + i}.{n}"] = p.grad.detach().numpy().copy()
            if k >= job.warmup:
                steps.append(t1 - t0)
                busy.append(sum(e - b for _, _, _, b, e in records))
                timed_records.extend(records)
                executed = [f"{s}{t}{mb}" for s, t, mb, _, _ in records]
        results.put(
            (
                rank,
                {
                    "steps": steps,
                    "busy": busy,
                    "records": [(s, t, e - b) for s, t, _, b, e in timed_records],
                    "loss": loss,
                    "grads": grads,
                    "executed": executed,
                },
            )
        )
        dist.barrier()
        dist.destroy_process_group()
    except BaseException as exc:
        results.put((rank, {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}))
        raise


def run_pipeline_job(job: PipelineJob, timeout_s: float = 600.0) -> PipelineRun:
    """Spawn one pinned process per rank, run the job, compare the first step with one process."""
    if job.schedule != "custom" and job.schedule not in TORCH_SCHEDULES:
        raise ConfigError(f"pipelining schedule {job.schedule!r}: choose custom or one of {sorted(TORCH_SCHEDULES)}")
    stage_module_ranges(job.gpt.n_layers, job.n_stages, job.embedding_stage)  # fail before spawning
    host = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    job.cores = [[host[r % len(host)]] for r in range(job.n_ranks)]
    job.port = free_port()
    over = job.n_ranks / len(host)
    if over > 1:
        log.warning("%d ranks on %d cores: ranks share cores (%.1f per core)", job.n_ranks, len(host), over)
    reps = spawn_and_collect(_worker, (job,), job.n_ranks, f"pipelining workers of {job.schedule}", timeout_s)
    R = job.n_ranks
    steps = [max(reps[r]["steps"][k] for r in range(R)) for k in range(job.steps)]
    busy = [sum(reps[r]["busy"][k] for r in range(R)) for k in range(job.steps)]
    per: dict[tuple[int, str], list[float]] = {}
    for r in range(R):
        for s, t, d in reps[r]["records"]:
            per.setdefault((int(s), str(t)), []).append(float(d))
    durations = {k: statistics.median(v) for k, v in per.items()}
    ref_loss, ref_grads = reference_step(job.gpt, job.n_micro)
    grads: dict[str, torch.Tensor] = {}
    for r in range(R):
        grads.update({k: torch.from_numpy(v) for k, v in reps[r]["grads"].items()})
    if set(grads) != set(ref_grads):
        missing = sorted(set(ref_grads) - set(grads))[:3]
        raise WorkerError(f"{job.schedule}: gradients missing for {missing}")
    diff = max(float((grads[k] - ref_grads[k]).abs().max()) for k in ref_grads)
    loss = next(reps[r]["loss"] for r in range(R) if reps[r]["loss"] == reps[r]["loss"])
    return PipelineRun(
        job.schedule,
        steps,
        {r: list(reps[r]["executed"]) for r in range(R)},
        durations,
        busy,
        loss,
        ref_loss,
        diff,
        R,
        job.n_stages,
        over,
        job.cores,
        {k: min(v) for k, v in per.items()},
    )


def run_export(
    exp: TorchExport,
    gpt: GPTConfig,
    *,
    embedding_stage: bool | None = None,
    warmup: int = 2,
    steps: int = 5,
    workdir: str | None = None,
) -> PipelineRun:
    """Execute an exported schedule (``algorithms.pipeline.export``) on torch's runtime (``custom``)."""
    if embedding_stage is None:
        embedding_stage = exp.stages[0].forward == "emb"
    with tempfile.TemporaryDirectory(dir=workdir) as d:
        path = os.path.join(d, "pipeline_actions.csv")
        exp.to_csv(path)
        job = PipelineJob(
            "custom", len(exp.devices), exp.n_stages, exp.n_micro, gpt, embedding_stage, path, warmup, steps
        )
        return run_pipeline_job(job)


def run_torch_schedule(
    name: str, n_ranks: int, n_micro: int, gpt: GPTConfig, *, warmup: int = 2, steps: int = 5
) -> PipelineRun:
    """Execute one of torch's own schedules (``TORCH_SCHEDULES``) on the same GPT."""
    if name not in TORCH_SCHEDULES:
        raise ConfigError(f"torch schedule {name!r}: choose one of {sorted(TORCH_SCHEDULES)}")
    S = n_ranks if TORCH_SCHEDULES[name] == "single" else 2 * n_ranks
    return run_pipeline_job(PipelineJob(name, n_ranks, S, n_micro, gpt, False, None, warmup, steps))


def summary_row(run: PipelineRun) -> dict[str, Any]:
    """The figures experiments/pipeline_run.py prints."""
    pstep, pbub = run.predicted()
    fstep, _ = run.predicted(fastest=True)
    return {
        "predicted_fastest_step_s": fstep,
        "measured_min_step_s": min(run.step_s),
        "schedule": run.schedule,
        "ranks": run.n_ranks,
        "stages": run.n_stages,
        "predicted_step_s": pstep,
        "measured_step_s": run.step_median_s,
        "measured_step_iqr_s": run.step_iqr_s,
        "predicted_bubble": pbub,
        "measured_bubble": run.measured_bubble,
        "loss": run.loss,
        "reference_loss": run.reference_loss,
        "max_grad_diff": run.max_grad_diff,
        "oversubscribed": run.oversubscribed,
    }
