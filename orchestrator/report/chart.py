"""The report's PNG chart: predicted and measured step side by side, speed-ups, peak memory per device against
its limit."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .table import _columns, _devices, _label, _predicted_cell, split_constant, table


def _chart_labels(rows: list[dict[str, Any]]) -> list[str]:
    vary, short = _columns(rows)
    head, body = table(rows)
    _, same = split_constant(head, body)
    constant = {n for n, _ in same}
    labels = []
    for r in rows:
        parts = [_label(r)]
        for col in ("scheduler", "optimizer", "model"):
            if col not in constant and r[col]:
                parts.append(r[col])
        parts += [f"{short[p]}={r['params'][p]}" for p in vary if short[p] not in constant]
        labels.append("\n".join(parts))
    return labels


def chart(rows: list[dict[str, Any]], path: Path, experiment: str) -> Path:
    """The report as a picture, rows in ranking order: (1) predicted and measured step side by side (measured
    with its IQR as an error bar; OOM/ERROR written where a bar is missing), (2) speed-up of the predicted step
    over the single-device and the expert placement (dashed line at 1x), (3) peak memory per device (simulated)
    with each row's device limit drawn as a black tick. Written with bbox_inches="tight", so nothing is clipped."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = _chart_labels(rows)
    n = len(rows)
    x = list(range(n))
    devices = _devices(rows, "peak_memory_bytes")
    show_speed = any(r["speedup_vs_single"] or r["speedup_vs_expert"] for r in rows)
    show_mem = bool(devices)
    panels = 1 + show_speed + show_mem
    width = max(7.0, 0.75 * n + 2.5)
    fig, axes = plt.subplots(panels, 1, figsize=(width, 3.2 * panels + 0.3 * max(lb.count("\n") for lb in labels)))
    axes = list(axes) if panels > 1 else [axes]
    ax = axes[0]
    w = 0.38
    pred = [r["predicted_step_s"] if r["status"] == "ok" and r["predicted_step_s"] else 0.0 for r in rows]
    meas = [r["measured_step_s"] if r["status"] == "ok" and r["measured_step_s"] else 0.0 for r in rows]
    iqr = [r["measured_step_iqr_s"] or 0.0 for r in rows]
    top = max(pred + [m + e for m, e in zip(meas, iqr)] + [1e-12])
    scale, unit = (1e3, "ms") if top < 1 else (1.0, "s")
    off = w / 2 if any(meas) else 0.0  # side by side with the measured bars, centred when nothing was measured
    ax.bar([i - off for i in x], [p * scale for p in pred], w, color="#8DA0CB", label="predicted (simulator)")
    if any(meas):
        ax.bar(
            [i + w / 2 for i in x],
            [m * scale for m in meas],
            w,
            yerr=[e * scale / 2 if m else 0.0 for e, m in zip(iqr, meas)],
            capsize=3,
            color="#4C72B0",
            label="measured (median; bar: IQR wide)",
        )
    for i, r in enumerate(rows):
        if r["status"] != "ok":
            ax.text(i, top * scale * 0.02, _predicted_cell(r), ha="center", va="bottom", color="#C44E52", rotation=90)
    ax.set_ylabel(f"step time ({unit})")
    ax.set_title("step time per placement, ranked by predicted step (lower is better)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", linewidth=0.3, alpha=0.6)
    k = 1
    if show_speed:
        ax = axes[k]
        k += 1
        for off, ref, color in ((-w / 2, "single", "#55A868"), (w / 2, "expert", "#DD8452")):
            vals = [r[f"speedup_vs_{ref}"] or 0.0 for r in rows]
            ax.bar(
                [i + off for i in x], vals, w, color=color, label=f"vs {ref} device" if ref == "single" else "vs expert"
            )
        ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8)
        ax.set_ylabel("speed-up (x)")
        ax.set_title("speed-up of the predicted step (higher is better; dashed: no gain)", fontsize=10)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.grid(axis="y", linewidth=0.3, alpha=0.6)
    if show_mem:
        ax = axes[k]
        peak = max([v for r in rows for v in r["peak_memory_bytes"].values()] + [1.0])
        mscale, munit = next(((f, u) for f, u in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")) if peak >= f), (1.0, "B"))
        bw = 0.8 / max(1, len(devices))
        palette = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]
        for j, d in enumerate(devices):
            xs = [i - 0.4 + bw * (j + 0.5) for i in x]
            ax.bar(
                xs, [(r["peak_memory_bytes"].get(d) or 0.0) / mscale for r in rows], bw, color=palette[j % 8], label=d
            )
            for xi, r in zip(xs, rows):
                lim = r["memory_limit_bytes"].get(d)
                if lim is not None and math.isfinite(lim) and lim <= 4 * peak:
                    ax.plot([xi - bw / 2, xi + bw / 2], [lim / mscale] * 2, color="black", linewidth=1.5)
        ax.plot([], [], color="black", linewidth=1.5, label="device limit")
        ax.set_ylabel(f"peak memory ({munit})")
        ax.set_title("simulated peak memory per device against its limit", fontsize=10)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), ncol=1 + len(devices) // 12)
        ax.grid(axis="y", linewidth=0.3, alpha=0.6)
    for a in axes:
        a.set_xticks(x)
        a.set_xticklabels(labels if a is axes[-1] else [""] * n, fontsize=8)
        a.set_xlim(-0.6, n - 0.4)
    fig.suptitle(f"{experiment}: which placement is best", fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def bar_chart(rows: list[dict[str, Any]], path: Path, experiment: str) -> None:
    """Older name of `chart`."""
    chart(rows, path, experiment)
