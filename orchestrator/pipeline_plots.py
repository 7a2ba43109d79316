"""Pictures of pipeline schedules in the style of Tessel's Figure 8 (matplotlib, Agg backend).

Rows are devices (d0 on top), time runs to the right; forward blocks are blue, backward blocks orange, each
labelled with its micro-batch index; a block on several devices is drawn on each of its rows; the repetend is
marked by two red bars. Also a helper for search-time plots (Figure 3 / Figure 9).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from algorithms.pipeline.schedule import PipelineSchedule

COLORS = {"forward": "#4a7fc1", "backward": "#f0a04b"}


def _save(fig: Any, path: str | os.PathLike) -> None:
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    ext = os.path.splitext(path)[1] or ".png"
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=ext)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=120, bbox_inches="tight")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
        plt.close(fig)


def plot_schedule(
    schedule: PipelineSchedule,
    path: str | os.PathLike | None = None,
    title: str | None = None,
    max_width_in: float = 24.0,
) -> Any:
    """Draw a schedule (Figure 8 style); save it to ``path`` when given. Returns the figure (closed if saved)."""
    spec = schedule.spec
    D = len(spec.devices)
    ms = max(schedule.makespan, 1)
    width = min(max_width_in, max(6.0, 0.28 * ms))
    fig, ax = plt.subplots(figsize=(width, 0.55 * D + 1.2))
    font = max(5, min(9, int(200 / max(ms, 1) * width / 6)))
    for (b, n), s in schedule.start.items():
        blk = spec.block(b)
        for d in blk.devices:
            y = spec.devices.index(d)
            ax.barh(
                y, blk.time, left=s, height=0.8, color=COLORS.get(blk.kind, "#999999"), edgecolor="black", linewidth=0.4
            )
            ax.text(s + blk.time / 2, y, str(n), ha="center", va="center", fontsize=font)
    if schedule.repetend:
        r0, r1 = schedule.repetend
        for x in (r0, r1):
            ax.axvline(x, color="red", linewidth=2)
    ax.set_yticks(range(D))
    ax.set_yticklabels(spec.devices)
    ax.invert_yaxis()
    ax.set_xlim(0, ms)
    ax.set_xlabel("time (units)")
    ax.set_title(
        title or f"{spec.name}  N={schedule.n_micro}  makespan={schedule.makespan}  bubble={schedule.bubble_rate:.1%}",
        fontsize=10,
    )
    if path is not None:
        _save(fig, path)
    return fig


def plot_search_times(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike, title: str = "") -> None:
    """Search time against N (Figure 3 / 9): rows {"shape", "method", "n_micro", "time_s", "timeout"}."""
    fig, ax = plt.subplots(figsize=(7, 4))
    keys = sorted({(r["shape"], r["method"]) for r in rows})
    for shape, method in keys:
        pts = sorted(
            (r["n_micro"], r["time_s"], r.get("timeout", False))
            for r in rows
            if r["shape"] == shape and r["method"] == method
        )
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        (line,) = ax.plot(xs, ys, marker="o" if method != "tessel" else "s", label=f"{method} {shape}")
        for x, y, to in pts:
            if to:
                ax.plot([x], [y], marker="x", color="red", markersize=10)
    ax.set_yscale("log")
    ax.set_xlabel("micro-batches N")
    ax.set_ylabel("search time (s)")
    ax.set_title(title or "schedule search time (x: hit the time limit)")
    ax.legend(fontsize=7, ncol=2)
    _save(fig, path)


def write_pipeline_artifacts(
    schedule: PipelineSchedule, out_dir: str | os.PathLike, measured: Sequence[Mapping[str, Any]] | None = None
) -> dict[str, str]:
    """Write pipeline_schedule.json (docs/design.md), pipeline_schedule.png (Figure 8 style) and
    pipeline_trace.json (chrome://tracing) into ``out_dir``; returns their paths by kind."""
    from algorithms.pipeline.runtime import chrome_trace, save_chrome_trace

    out = os.fspath(out_dir)
    paths = {
        "json": os.path.join(out, "pipeline_schedule.json"),
        "png": os.path.join(out, "pipeline_schedule.png"),
        "trace": os.path.join(out, "pipeline_trace.json"),
    }
    schedule.save(paths["json"])
    plot_schedule(schedule, paths["png"])
    save_chrome_trace(paths["trace"], chrome_trace(schedule, measured=measured))
    return paths
