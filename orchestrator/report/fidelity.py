"""Predicted against measured (issue 16): how well the simulator's step matches the real run, per model and cluster.

For every group of rows compared together (`rows._group`: model, cluster and the swept settings outside the
placer) whose runs were both predicted and measured (status ok): the median relative error
|predicted - measured| / measured over the group's placements, Kendall's tau between the predicted and the
measured order of those placements (tau-b, so ties count as neither agreeing nor disagreeing; Kendall 1945), and
the median relative error of the predicted peak memory per device. The goal of issue 16 on pinned CPU workers is
a median error <= 10 % and tau >= 0.8 (Proteus' anchor: 3 % and the same order). Written below the report's
table, as `fidelity.csv`, and as a scatter of predicted against measured step with the y = x line
(`predicted_vs_measured.png`).
"""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path
from typing import Any

from .rows import _group
from .table import _fmt, _where


def kendall_tau(a: list[float], b: list[float]) -> float | None:
    """Kendall's tau-b between two equally long sequences: (concordant - discordant pairs) /
    sqrt((pairs not tied in a) x (pairs not tied in b)). None with fewer than two items or when either sequence
    is constant (the order is then undefined). O(n^2), fine for the placers of one group."""
    if len(a) != len(b):
        raise ValueError(f"kendall_tau needs sequences of one length, got {len(a)} and {len(b)}")
    n = len(a)
    conc = disc = untied_a = untied_b = 0
    for i in range(n):
        for j in range(i + 1, n):
            da = (a[i] > a[j]) - (a[i] < a[j])
            db = (b[i] > b[j]) - (b[i] < b[j])
            untied_a += da != 0
            untied_b += db != 0
            conc += da * db > 0
            disc += da * db < 0
    if untied_a == 0 or untied_b == 0:
        return None
    return (conc - disc) / math.sqrt(untied_a * untied_b)


def resolved_order(members: list[dict[str, Any]]) -> tuple[float | None, int, int, int]:
    """How the predicted order agrees with the pairs the measurement orders. A pair of placements is resolved
    when their measured medians differ by more than the larger of their two IQRs (the rule of the report's noise
    notes); returns (C - D) / R over the R resolved pairs, C of them ordered the same way by the prediction and D
    the other way (a predicted tie is neither; None when no pair is resolved), then R, C and D.

    The plain tau (`kendall_tau` of the medians) is the issue's figure and stays the headline; this one says
    whether its shortfall comes from pairs the measurement cannot order or from pairs it orders the other way.
    With wide spreads few pairs are resolved and the figure says little, so R is printed beside it. A pair
    without a logged IQR counts as resolved. O(n^2) for n members."""
    resolved = conc = disc = 0
    for i, a in enumerate(members):
        for b in members[i + 1 :]:
            gap = abs(a["measured_step_s"] - b["measured_step_s"])
            spreads = [r["measured_step_iqr_s"] for r in (a, b) if r.get("measured_step_iqr_s") is not None]
            if gap == 0 or (spreads and gap <= max(spreads)):
                continue
            resolved += 1
            dp = a["predicted_step_s"] - b["predicted_step_s"]
            dm = a["measured_step_s"] - b["measured_step_s"]
            conc += dp * dm > 0
            disc += dp * dm < 0
    return ((conc - disc) / resolved if resolved else None), resolved, conc, disc


def _compared(r: dict[str, Any]) -> bool:
    return r["status"] == "ok" and bool(r.get("predicted_step_s")) and bool(r.get("measured_step_s"))


def step_error(r: dict[str, Any]) -> float:
    """(predicted - measured) / measured of one row (negative: under-predicted)."""
    return (r["predicted_step_s"] - r["measured_step_s"]) / r["measured_step_s"]


def memory_error(r: dict[str, Any]) -> float | None:
    """The median over devices of |predicted - measured| / measured peak memory (devices measured above 0); a
    GPU worker's prediction adds what its allocator holds beside the tensors (`framework_reserve_bytes`)."""
    pred, meas = r.get("peak_memory_bytes") or {}, r.get("measured_peak_memory_bytes") or {}
    reserve = r.get("framework_reserve_bytes") or {}
    errs = [abs(pred[d] + reserve.get(d, 0.0) - v) / v for d, v in meas.items() if v and pred.get(d) is not None]
    return statistics.median(errs) if errs else None


def fidelity_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per group with predicted and measured runs: `model`, `cluster`, `where` (the swept settings),
    `runs`, `median_abs_error`, `kendall_tau` (None with one run or a constant order), `kendall_tau_resolved`,
    `pairs`, `pairs_resolved`, `pairs_discordant` (`resolved_order`: the order the measurement's spread supports),
    `median_abs_memory_error` (None when no peak was measured), `placers` (in measured order). O(rows^2) at
    worst (tau)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        if _compared(r):
            groups.setdefault(_group(r), []).append(r)
    out = []
    for members in groups.values():
        mem = [e for e in (memory_error(r) for r in members) if e is not None]
        first = members[0]
        tau_resolved, resolved, _, disc = resolved_order(members)
        out.append(
            {
                "model": first["model"],
                "cluster": first["cluster"],
                "where": _where(first).strip(),
                "runs": len(members),
                "median_abs_error": statistics.median(abs(step_error(r)) for r in members),
                "kendall_tau": kendall_tau(
                    [r["predicted_step_s"] for r in members], [r["measured_step_s"] for r in members]
                ),
                "kendall_tau_resolved": tau_resolved,
                "pairs": len(members) * (len(members) - 1) // 2,
                "pairs_resolved": resolved,
                "pairs_discordant": disc,
                "median_abs_memory_error": statistics.median(mem) if mem else None,
                "placers": [r["placer"] for r in sorted(members, key=lambda r: r["measured_step_s"])],
            }
        )
    return out


DISTURBED = 0.05  # others' share of the workers' cores above which a measured run is called disturbed


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f} %"


def fidelity_markdown(rows: list[dict[str, Any]]) -> str:
    """The section below the report's table ('' when no run was both predicted and measured)."""
    summary = fidelity_summary(rows)
    if not summary:
        return ""
    lines = [
        "",
        "## Predicted against measured",
        "",
        "Per model and cluster: median |predicted - measured| / measured step over the placements, Kendall's tau "
        "between the predicted and the measured order (1: same order), median |error| of the predicted peak memory "
        "per device. Issue 16's goal on pinned CPU workers: median error <= 10 % and tau >= 0.8. 'Pairs the "
        "measurement orders': pairs of placements whose measured medians differ by more than the larger of their "
        "two IQRs, how many of them the prediction orders the other way, and (agreeing - reversed) / resolved.",
        "",
        "| model | cluster | runs | median abs. step error | Kendall's tau | pairs the measurement orders "
        "(reversed) | tau over them | median abs. memory error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        tau = "-" if s["kendall_tau"] is None else f"{s['kendall_tau']:+.2f}"
        tau_r = "-" if s["kendall_tau_resolved"] is None else f"{s['kendall_tau_resolved']:+.2f}"
        cluster = f"{s['cluster']} {s['where']}".strip()
        lines.append(
            f"| {s['model']} | {cluster} | {s['runs']} | {_pct(s['median_abs_error'])} | {tau} | "
            f"{s['pairs_resolved']} of {s['pairs']} ({s['pairs_discordant']}) | {tau_r} | "
            f"{_pct(s['median_abs_memory_error'])} |"
        )
    lines += [
        "",
        "| model | cluster | placer | predicted step | measured step (IQR) | error | others' share of the cores |",
        "|---|---|---|---|---|---|---|",
    ]
    disturbed = 0
    for r in rows:
        if _compared(r):
            iqr = "" if r.get("measured_step_iqr_s") is None else f" ({_fmt(r['measured_step_iqr_s'], 's')})"
            share = r.get("host_interference")
            disturbed += share is not None and share > DISTURBED
            lines.append(
                f"| {r['model']} | {r['cluster']}{_where(r)} | {r['placer']} | {_fmt(r['predicted_step_s'], 's')} | "
                f"{_fmt(r['measured_step_s'], 's')}{iqr} | {100 * step_error(r):+.0f} % | {_pct(share)} |"
            )
    if disturbed:
        lines += [
            "",
            f"{disturbed} measured run(s) shared their workers' cores with other processes for more than "
            f"{100 * DISTURBED:.0f} % of the measured steps, after their retries (runtime.max_interference): their "
            "measured steps say as much about the host's load as about the placement.",
        ]
    return "\n".join(lines) + "\n"


def write_fidelity_csv(rows: list[dict[str, Any]], path: Path) -> Path:
    """The per-group summary as CSV."""
    fields = [
        "model",
        "cluster",
        "where",
        "runs",
        "median_abs_error",
        "kendall_tau",
        "median_abs_memory_error",
        "kendall_tau_resolved",
        "pairs",
        "pairs_resolved",
        "pairs_discordant",
    ]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(fields)
        for s in fidelity_summary(rows):
            w.writerow([s[k] for k in fields])
    return path


def scatter(rows: list[dict[str, Any]], path: Path, experiment: str) -> Path | None:
    """Predicted (y) against measured (x) step per run on log-log axes, the measured IQR as a horizontal bar, the
    y = x line (a perfect prediction) and dotted +-10 % lines; one colour per model, one marker per cluster.
    None (nothing drawn) when no run was both predicted and measured."""
    pts = [r for r in rows if _compared(r)]
    if not pts:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted({str(r["model"]) for r in pts})
    clusters = sorted({str(r["cluster"]) for r in pts})
    palette = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]
    markers = ["o", "s", "^", "D", "v", "P", "X", "*"]
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    for r in pts:
        m, c = models.index(str(r["model"])), clusters.index(str(r["cluster"]))
        iqr = r.get("measured_step_iqr_s") or 0.0
        ax.errorbar(
            r["measured_step_s"] * 1e3,
            r["predicted_step_s"] * 1e3,
            xerr=[[min(iqr / 2, 0.999 * r["measured_step_s"]) * 1e3], [iqr / 2 * 1e3]],
            fmt=markers[c % len(markers)],
            color=palette[m % len(palette)],
            capsize=2,
            markersize=6,
        )
    vals = [v * 1e3 for r in pts for v in (r["predicted_step_s"], r["measured_step_s"])]
    lo, hi = min(vals) / 1.5, max(vals) * 1.5
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=1, label="y = x (predicted = measured)")
    for f in (0.9, 1.1):
        ax.plot([lo, hi], [lo * f, hi * f], color="black", linewidth=0.6, linestyle=":")
    for m, name in enumerate(models):
        ax.plot([], [], "o", color=palette[m % len(palette)], label=f"model {name}")
    for c, name in enumerate(clusters):
        ax.plot([], [], markers[c % len(markers)], color="#555555", label=f"cluster {name}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured step (ms; median, bar: IQR)")
    ax.set_ylabel("predicted step (ms)")
    ax.set_title(f"{experiment}: predicted against measured (dotted: +-10 %)", fontsize=10)
    ax.grid(linewidth=0.3, alpha=0.6, which="both")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
