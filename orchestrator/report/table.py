"""The report's table from its rows: cells, constant columns stated once, Markdown (with the noise notes and the
failed runs) and CSV (every column)."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from .rows import KEY, RESULT_STATUSES, _group, short_names


def noise_notes(rows: list[dict[str, Any]]) -> list[str]:
    """Per group: the measured medians that differ from the fastest measured one by no more than the larger of
    their two spreads (IQR). Those placements are not told apart by the measurement, whatever their order."""
    notes = []
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        if r["status"] == "ok" and r["measured_step_s"] is not None:
            groups.setdefault(_group(r), []).append(r)
    for members in groups.values():
        if len(members) < 2:
            continue
        best = min(members, key=lambda r: r["measured_step_s"])
        close = []
        for r in members:
            if r is best or best["measured_step_iqr_s"] is None or r["measured_step_iqr_s"] is None:
                continue
            if r["measured_step_s"] - best["measured_step_s"] <= max(
                r["measured_step_iqr_s"], best["measured_step_iqr_s"]
            ):
                close.append(r)
        if close:
            where = _where(best)
            names = ", ".join(_label(r) for r in close)
            notes.append(
                f"Measured{where}: {names} {'is' if len(close) == 1 else 'are'} within the spread (IQR) of the "
                f"fastest measured, {_label(best)} ({_fmt(best['measured_step_s'], 's')}): the measurement does "
                "not tell them apart."
            )
        spread_missing = [r for r in members if r["measured_step_iqr_s"] is None]
        if spread_missing and len(spread_missing) == len(members):
            notes.append(
                f"Measured{_where(best)}: no spread logged (measured_step_iqr_s), so differences between measured "
                "steps may be noise."
            )
    return notes


def measured_ranks(rows: list[dict[str, Any]]) -> dict[int, str]:
    """Per group, each measured row's rank by its measured median (keyed by `id(row)`), where medians that the
    spread does not tell apart share a rank, written "=k": walking up from the fastest, a row opens a new rank
    only when its median exceeds the median that opened the current rank by more than the larger of the two
    IQRs. Without a logged IQR a row opens its own rank (the notes say that no spread was logged). So the
    predicted rank sits beside what the measurement can and cannot order. O(rows log rows)."""
    out: dict[int, str] = {}
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        if r["status"] == "ok" and r["measured_step_s"] is not None:
            groups.setdefault(_group(r), []).append(r)
    for members in groups.values():
        members.sort(key=lambda r: r["measured_step_s"])
        lead: dict[str, Any] | None = None
        rank = 0
        shared: dict[int, list[dict[str, Any]]] = {}
        for k, r in enumerate(members, 1):
            spread = None
            if lead is not None and lead["measured_step_iqr_s"] is not None and r["measured_step_iqr_s"] is not None:
                spread = max(lead["measured_step_iqr_s"], r["measured_step_iqr_s"])
            if lead is None or spread is None or r["measured_step_s"] - lead["measured_step_s"] > spread:
                lead, rank = r, k
            shared.setdefault(rank, []).append(r)
        for k, rs in shared.items():
            for r in rs:
                out[id(r)] = f"={k}" if len(rs) > 1 else str(k)
    return out


def _label(r: dict[str, Any]) -> str:
    return r["placer"] or f"pipeline {r['pipeline']}"


def _where(r: dict[str, Any]) -> str:
    extra = ", ".join(f"{p}={v}" for p, v in r["params"].items() if p.split(".", 1)[0] != "placer")
    return f" ({extra})" if extra else ""


def _fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if unit == "x":
            return f"{v:.2f}x"
        if unit == "s":
            return f"{v * 1e3:.2f} ms" if v < 1 else f"{v:.3f} s"
        if unit == "B":
            for u, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
                if abs(v) >= f:
                    return f"{v / f:.2f} {u}"
            return f"{v:.0f} B"
        if unit == "r":
            return f"{v:.3f}"
    return str(v)


def _limit_cell(r: dict[str, Any]) -> str:
    """Device memory limit: one value when every device has the same, else min..max; `(0.3x need)` when the
    limit is a fraction of the model's need (need_fraction)."""
    lims = list(r["memory_limit_bytes"].values())
    finite = [v for v in lims if v is not None and not math.isinf(v)]
    if not lims:
        cell = "-"
    elif not finite:
        cell = "unlimited"
    elif min(finite) == max(finite) and len(finite) == len(lims):
        cell = _fmt(float(finite[0]), "B")
    else:
        top = _fmt(float(max(finite)), "B") if len(finite) == len(lims) else "inf"
        cell = f"{_fmt(float(min(finite)), 'B')}..{top}"
    if r["need_fraction"] is not None:
        need = f"{r['need_fraction']:g}x need"
        cell = need if cell == "-" else f"{cell} ({need})"
    return cell


def _columns(rows: list[dict[str, Any]]) -> tuple[list[str], dict[str, str]]:
    vary = list(rows[0]["params"]) if rows else []
    return vary, short_names(vary)


def _devices(rows: list[dict[str, Any]], field: str) -> list[str]:
    return sorted({d for r in rows for d in r[field]})


def _measured_cell(r: dict[str, Any]) -> str:
    m = _fmt(r["measured_step_s"], "s")
    if r["measured_step_s"] is not None and r["measured_step_iqr_s"] is not None:
        m += f" (IQR {_fmt(r['measured_step_iqr_s'], 's')})"
    return m


def _predicted_cell(r: dict[str, Any]) -> str:
    if r["status"] == "oom":
        return "OOM"
    if r["status"] not in RESULT_STATUSES:
        return "ERROR" if r["status"] == "error" else r["status"].upper()
    return _fmt(r["predicted_step_s"], "s")


def table(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The full table as strings: header and one list of cells per row (every column)."""
    vary, short = _columns(rows)
    devices = _devices(rows, "peak_memory_bytes")
    mdevices = _devices(rows, "measured_peak_memory_bytes")
    any_measured = any(r["measured_step_s"] is not None for r in rows)
    mranks = measured_ranks(rows)
    cols: list[tuple[str, Any]] = [
        ("rank", lambda r: str(r["rank"])),
        ("model", lambda r: r["model"] or "-"),
        ("cluster", lambda r: r["cluster"] or "-"),
        ("optimizer", lambda r: r["optimizer"] or "-"),
        ("placer", lambda r: r["placer"] or "-"),
        ("scheduler", lambda r: r["scheduler"] or "-"),
        ("pipeline", lambda r: r["pipeline"] or "-"),
    ]
    cols += [(short[p], lambda r, p=p: _fmt(r["params"][p])) for p in vary]
    cols += [
        ("memory limit", _limit_cell),
        ("predicted step", _predicted_cell),
        ("measured step", _measured_cell),
    ]
    if any_measured:
        cols.append(("measured rank", lambda r: mranks.get(id(r), "-")))
    cols += [
        ("vs single", lambda r: _fmt(r["speedup_vs_single"], "x")),
        ("vs expert", lambda r: _fmt(r["speedup_vs_expert"], "x")),
    ]
    if any_measured:
        cols += [
            ("measured vs single", lambda r: _fmt(r["measured_speedup_vs_single"], "x")),
            ("measured vs expert", lambda r: _fmt(r["measured_speedup_vs_expert"], "x")),
        ]
    cols += [
        ("placement time", lambda r: _fmt(r["placement_time_s"], "s")),
        ("traffic", lambda r: _fmt(r["traffic_bytes"], "B")),
        ("bubble rate", lambda r: _fmt(r["bubble_rate"], "r")),
        ("search time", lambda r: _fmt(r["search_time_s"], "s")),
    ]
    cols += [(f"peak {d}", lambda r, d=d: _fmt(r["peak_memory_bytes"].get(d), "B")) for d in devices]
    cols += [(f"measured peak {d}", lambda r, d=d: _fmt(r["measured_peak_memory_bytes"].get(d), "B")) for d in mdevices]
    head = [c for c, _ in cols]
    body = [[str(fn(r)) for _, fn in cols] for r in rows]
    for cells, r in zip(body, rows):
        if r["failures"] and r["status"] in RESULT_STATUSES:
            cells[head.index("predicted step")] += " †"  # its newest run failed: see the list below the table
    return head, body


#: Columns kept in the Markdown table even when every row has the same cell.
_ALWAYS = ("rank", "placer", "predicted step")


def split_constant(head: list[str], body: list[list[str]]) -> tuple[list[int], list[tuple[str, str]]]:
    """Indices of the columns to show, and (column, cell) of the columns whose cell is the same on every row
    (stated once above the table). With one row, only empty columns count as constant."""
    keep, same = [], []
    for j, name in enumerate(head):
        cells = {row[j] for row in body}
        empty = cells == {"-"}
        constant = len(cells) == 1 and (len(body) > 1 or empty)
        if not body or (constant and (name not in _ALWAYS or empty)):
            same.append((name, body[0][j] if body else "-"))
        else:
            keep.append(j)
    return keep, same


def markdown(rows: list[dict[str, Any]], experiment: str) -> str:
    vary, short = _columns(rows)
    head, body = table(rows)
    keep, same = split_constant(head, body)
    lines = [f"# {experiment}", ""]
    lines.append(
        "Ranked by predicted step (the simulator's, per group of model, cluster and swept settings; 1 = fastest). "
        "Measured step: median of the measured steps, with their inter-quartile range (IQR) where logged. Speed-ups "
        "(vs single, vs expert) are of the predicted step unless marked measured."
        + (
            ' Measured rank: the order of the measured medians, where "=k" marks placements whose medians lie '
            "within their spread (IQR) of each other: the measurement does not order them."
            if any(r["measured_step_s"] is not None for r in rows)
            else ""
        )
    )
    stated = [(n, c) for n, c in same if c != "-"]
    absent = [n for n, c in same if c == "-"]
    if stated:
        lines += ["", "Same on every row: " + ", ".join(f"{n} **{c}**" for n, c in stated) + "."]
    if absent:
        lines += ["", "Not recorded by any run: " + ", ".join(absent) + "."]
    lines += ["", "| " + " | ".join(head[j] for j in keep) + " |", "|" + "---|" * len(keep)]
    for cells in body:
        lines.append("| " + " | ".join(cells[j] for j in keep) + " |")
    if any(short[p] != p for p in vary):
        lines += ["", "Swept params: " + ", ".join(f"`{short[p]}` = `{p}`" for p in vary if short[p] != p) + "."]
    notes = noise_notes(rows)
    if notes:
        lines += [""] + notes
    fails = [(r, f) for r in rows for f in r["failures"]]
    if fails:

        def where(r: dict[str, Any]) -> str:
            extra = ", ".join(f"{short[p]}={r['params'][p]}" for p in vary)
            return f" ({extra})" if extra else ""

        def what(r: dict[str, Any]) -> str:
            return f"{r['placer']}/{r['scheduler']}" if r["placer"] else f"pipeline {r['pipeline']}"

        lines += ["", "Failed runs (never shown in place of a result; † marks a row whose newest run failed):"]
        for r, f in fails:
            shown = " (the row shows the run before it)" if r["status"] in RESULT_STATUSES else ""
            lines.append(
                f"- {what(r)} on {r['model']}{where(r)}, run {f['run_id'][:8]}{shown}: {f['error'] or f['status']}"
            )
    return "\n".join(lines) + "\n"


_CSV_FIELDS = [
    "rank",
    "status",
    "step_s",
    "predicted_step_s",
    "measured_step_s",
    "measured_step_iqr_s",
    "speedup_vs_single",
    "speedup_vs_expert",
    "measured_speedup_vs_single",
    "measured_speedup_vs_expert",
    "placement_time_s",
    "traffic_bytes",
    "bubble_rate",
    "search_time_s",
    "need_fraction",
    "memory_fraction",
    "run_id",
    "failed_runs",
]


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """Every column, in ranking order (a varying param named like a fixed column replaces it)."""
    vary, short = _columns(rows)
    dev_fields = [
        (f, _devices(rows, f)) for f in ("peak_memory_bytes", "measured_peak_memory_bytes", "memory_limit_bytes")
    ]
    cols = [c for c in _CSV_FIELDS if c not in short.values()]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            list(KEY) + [short[p] for p in vary] + cols + [f"{field}.{d}" for field, devs in dev_fields for d in devs]
        )
        for r in rows:
            extra = {"failed_runs": " ".join(x["run_id"] for x in r["failures"])}
            w.writerow(
                [r[k] for k in KEY]
                + [r["params"][p] for p in vary]
                + [extra[c] if c in extra else r.get(c) for c in cols]
                + [r[field].get(d) for field, devs in dev_fields for d in devs]
            )
