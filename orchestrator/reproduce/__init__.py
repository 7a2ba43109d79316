"""The reproduction scoreboard (issue 21): every table and figure of the four papers against the lab's runs.

    python -m orchestrator.reproduce [all | <entry id> | <paper> | <preset>] [--run] [--tracking-uri URI]
                                     [--out docs/reproduction.md] [--list]

For each entry of `papers.ENTRIES` (Baechi, Celeritas, Tessel, the thesis; one per table or figure, some tables
split by model) the scoreboard reads the job runs of the entry's presets from the MLflow store (or, with --run,
first runs each preset's sweep: `python -m orchestrator +experiment=NAME -m`, at nice 19 and the preset's default
size), reduces them to one value per item (`lab`), ranks both sides, computes Kendall's tau-b and the verdict
(`score`: yes = tau >= 0.8 and the headline relation holds; partly = tau >= 0.4 or the headline holds; no =
neither; not run = no lab figures), and writes docs/reproduction.md with the date, the machine, one row per entry
and a summary (counts of each verdict, median tau). Illustrative figures that measure nothing are listed, not
scored.

Baechi and Celeritas presets run in the papers' regime by default (conf/regime/, orchestrator/stages/regime.py);
their entries read only runs of that regime.
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checks import Entry
from .papers import ENTRIES, ILLUSTRATIONS
from .runs import PRESET_RUNS, preset_runs, run_presets
from .score import NOT_RUN, PROFILE_TRIALS, TRIAL, kendall_tau_b, median, ranks, verdict, within_spread

log = logging.getLogger(__name__)

__all__ = [
    "ENTRIES",
    "PRESET_RUNS",
    "Scored",
    "main",
    "preset_runs",
    "render",
    "run_presets",
    "score_entry",
    "select",
    "summary",
]


@dataclass
class Scored:
    entry: Entry
    lab: dict[str, float | None]
    tau: float | None
    headline: bool | None
    verdict: str
    spread: dict[str, float] | None = None  # per item: standard deviation over the seeds (entries with `seed`)
    n_seeds: int = 0
    reason: str = ""  # the entry's reason, with the derived part computed from the lab's figures
    old_runs: tuple[str, ...] = ()  # presets whose runs came from the fallback store (`lab.job_runs`)


def seed_values(entry: Entry, df: Any) -> tuple[dict[str, float | None], dict[str, float], int]:
    """An entry's lab values as the mean over the seeds of its runs (param `entry.seed`): the entry's reducer is
    applied to each seed's runs, and each item's mean and population standard deviation are taken over the seeds
    where it has a value; an item out of memory (None) on every seed stays None. Without a seed column: the
    reducer on all runs, no spread."""
    assert entry.lab_values is not None
    col = f"params.{entry.seed}"
    if entry.seed is None or col not in df or df[col].isna().all():
        return entry.lab_values(df), {}, 1
    per_seed = [entry.lab_values(d) for _, d in df.groupby(col)]
    per_seed = [v for v in per_seed if v]
    items = {k for v in per_seed for k in v}
    mean: dict[str, float | None] = {}
    spread: dict[str, float] = {}
    for k in items:
        xs = [v[k] for v in per_seed if v.get(k) is not None]
        if not xs:
            mean[k] = None
            continue
        m = sum(x for x in xs if x is not None) / len(xs)
        mean[k] = m
        spread[k] = (sum((x - m) ** 2 for x in xs if x is not None) / len(xs)) ** 0.5
    return mean, spread, len(per_seed)


def _oriented(values: dict[str, float | None], higher_is_better: bool) -> dict[str, float | None]:
    return {k: (-v if (v is not None and higher_is_better) else v) for k, v in values.items()}


def _gap(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "one of them OOM"
    lo, hi = sorted((abs(a), abs(b)))
    if lo <= 0:
        return "one of them zero"
    pct = 100 * (hi / lo - 1)
    return f"{pct:.1f}% apart" if pct < 10 else f"{pct:.0f}% apart"


def measured_reason(
    entry: Entry, lab_vals: dict[str, float | None], df: Any, tied: Callable[[str, str], bool] | None = None
) -> str:
    """The part of an entry's reason computed from its runs: the CCR of the runs (papers' regime), the pairs
    in which the lab's ordering differs from the paper's, with how far apart the lab's two values are (the
    three largest differences), and the pairs the lab leaves unordered because their values lie within the
    spread over seeds or trials (`tied`, `score.within_spread`)."""
    parts: list[str] = []
    if df is not None and "metrics.ccr" in df and "params.model" in df:
        ccr = []
        rows = df.dropna(subset=["metrics.ccr"])
        # the papers' regime only (the runs the Baechi and Celeritas entries read)
        papers = rows["params.regime"].isin(["baechi", "celeritas"]) if "params.regime" in rows else None
        rows = rows[papers] if papers is not None else rows.iloc[0:0]
        for model, d in rows.groupby("params.model"):
            row = d.iloc[0]
            here = row.get("metrics.regime.ccr_here")
            scale = row.get("metrics.regime.compute_scale")
            txt = f"{model} CCR {row['metrics.ccr']:.3g}"
            n_ops = row.get("metrics.n_ops_placed")
            if n_ops == n_ops and n_ops is not None:
                txt += f", {int(n_ops):,} ops placed"
            if here == here and here is not None:
                txt += f" (here {here:.3g}" + (f", compute x {scale:.3g})" if scale == scale and scale else ")")
            ccr.append(txt)
        if ccr:
            parts.append("Regime: " + "; ".join(ccr) + ".")
    paper_r = (
        dict(entry.paper_ranks)
        if entry.paper_ranks is not None
        else ranks(_oriented(dict(entry.paper_values), entry.higher_is_better))
    )
    lab_r = ranks(_oriented(lab_vals, entry.higher_is_better))
    keys = [k for k in paper_r if k in lab_r]
    pairs = []
    close = []  # pairs within the spread (not ordered by the lab)
    split = 0  # pairs the paper ties and the lab orders
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            dp, dl = paper_r[a] - paper_r[b], lab_r[a] - lab_r[b]
            if dl != 0 and tied is not None and tied(a, b):
                close.append(f"{a}/{b} ({_gap(lab_vals.get(a), lab_vals.get(b))})")
                continue
            split += dp == 0 and dl != 0
            if dp != 0 and dl != 0 and (dp > 0) != (dl > 0):
                va, vb = lab_vals.get(a), lab_vals.get(b)
                w = abs(math.log(abs(va) / abs(vb))) if va and vb else math.inf
                first, second = (a, b) if dl < 0 else (b, a)
                pairs.append((w, f"{first}/{second} ({_gap(va, vb)})"))
    n = len(keys) * (len(keys) - 1) // 2
    if keys and n:
        if pairs:
            pairs.sort(key=lambda x: -x[0])
            shown = ", ".join(p for _, p in pairs[:3])
            more = f" and {len(pairs) - 3} more" if len(pairs) > 3 else ""
            parts.append(f"Lab order reversed against the paper in {len(pairs)} of {n} pairs: {shown}{more}.")
        else:
            parts.append(f"No pair of the {len(keys)} items is ordered against the paper.")
        if split:
            parts.append(f"{split} pair(s) the paper ties are ordered in the lab.")
        if close:
            parts.append(
                f"Within the spread, so not ordered by the lab (tied in tau): {len(close)} of {n} pairs "
                f"({', '.join(close[:3])}{' and more' if len(close) > 3 else ''})."
            )
    return " ".join(parts)


#: a device counts as used by a placement when its predicted utilization (busy share of the step) passes this
USED_UTILIZATION = 0.01


def devices_used_reason(lab_vals: dict[str, float | None], df: Any) -> str:
    """The placers among the entry's items whose newest run left devices idle: "m_topo used 1 of 4 devices
    (cap 83.6 MB per device against a need of 89.9 MB)", read from the runs' ``utilization.<device>`` metrics
    (busy share of the predicted step: a device with any is used, one under `USED_UTILIZATION` is named as
    nearly idle) and, where the placer
    logged it, its load-balancing cap (``placer.cap_bytes``, m-TOPO's Baechi 2.2 cap) against the model's
    single-device need. A multi-device placer that keeps the model on one device explains an order the paper
    does not have (the paper's m-TOPO split GNMT over four GPUs, 5.3). Single-device placers are left out, and
    so are runs outside the papers' regime (the thesis' 50-100 devices are not meant to be all busy)."""
    if df is None or "params.placer" not in df or "params.regime" not in df:
        return ""
    df = df[df["params.regime"].isin(["baechi", "celeritas"])]
    notes: list[str] = []
    seen: set[str] = set()
    util_cols = [c for c in df.columns if c.startswith("metrics.utilization.")]
    if not util_cols:
        return ""
    for _, row in df.iterrows():  # newest first
        placer = row.get("params.placer")
        if placer in seen or placer not in lab_vals or placer == "single" or lab_vals.get(placer) is None:
            continue
        seen.add(placer)
        utils = [row.get(c) for c in util_cols]
        utils = [float(u) for u in utils if u is not None and u == u]
        if not utils:
            continue
        used = sum(u > 0 for u in utils)
        busy = sum(u > USED_UTILIZATION for u in utils)
        if busy >= len(utils):
            continue
        txt = f"{placer} used {used} of {len(utils)} devices"
        if busy < used:
            txt += f", {used - busy} of them busy under {USED_UTILIZATION:.0%} of the step"
        cap, need = row.get("metrics.placer.cap_bytes"), row.get("metrics.memory_need_bytes")
        if cap is not None and cap == cap and need is not None and need == need and need > 0:
            txt += f" (its cap {cap / 1e6:.3g} MB per device against a single-device need of {need / 1e6:.3g} MB)"
        notes.append(txt)
    return ("Devices: " + "; ".join(notes) + ".") if notes else ""


def score_entry(entry: Entry, df: Any) -> Scored:
    """Score one entry on a frame of its presets' job runs (`lab.job_runs`)."""
    if df is not None and entry.rows is not None:
        df = entry.rows(df)
    if entry.lab_values is None or df is None or len(df) == 0:
        return Scored(entry, {}, None, None, NOT_RUN, reason=entry.reason)
    lab_vals, spread, n_seeds = seed_values(entry, df)
    if not lab_vals:
        return Scored(entry, {}, None, None, NOT_RUN, reason=entry.reason)
    paper_r = (
        dict(entry.paper_ranks)
        if entry.paper_ranks is not None
        else ranks(_oriented(dict(entry.paper_values), entry.higher_is_better))
    )
    lab_r = ranks(_oriented(lab_vals, entry.higher_is_better))
    tied = within_spread(lab_vals, spread)
    tau = kendall_tau_b(paper_r, lab_r, tied)
    head = entry.check(lab_vals, df) if entry.check is not None else None
    derived = [measured_reason(entry, lab_vals, df, tied), devices_used_reason(lab_vals, df)]
    if entry.derive_reason is not None:
        derived.append(entry.derive_reason(lab_vals, df))
    reason = " ".join(x for x in [*derived, entry.reason] if x).strip()
    old: tuple[str, ...] = ()
    if "store" in df and "experiment_name" in df:
        old = tuple(sorted(set(df.loc[df["store"] == "fallback", "experiment_name"])))
    return Scored(entry, lab_vals, tau, head, verdict(tau, head, True), spread or None, n_seeds, reason, old)


def select(which: str) -> list[Entry]:
    """Entries by id (that entry alone), id prefix, paper name or preset name; every entry for "all"."""
    if which in ("all", ""):
        return list(ENTRIES)
    w = which.lower()
    exact = [e for e in ENTRIES if e.id == w]
    if exact:  # an entry's own id names it alone (celeritas-t2, not celeritas-t2-h100 too)
        return exact
    out = [
        e
        for e in ENTRIES
        if e.id == w or e.id.startswith(w + "-") or e.paper.lower() == w or w in e.experiments or e.id.startswith(w)
    ]
    if not out:
        from algorithms.errors import ConfigError

        raise ConfigError(f"no scoreboard entry matches {which!r}; ids: {', '.join(e.id for e in ENTRIES)}")
    return out


def summary(scored: list[Scored]) -> dict[str, Any]:
    counts = {v: 0 for v in ("yes", "partly", "no", NOT_RUN)}
    for s in scored:
        counts[s.verdict] = counts.get(s.verdict, 0) + 1
    taus = [s.tau for s in scored if s.tau is not None and s.verdict != NOT_RUN]
    return {"counts": counts, "median_tau": median(taus), "n_tau": len(taus)}


def _fmt(v: float | None) -> str:
    if v is None:
        return "OOM"
    a = abs(v)
    return f"{v:.3g}" if a >= 1e-3 or a == 0 else f"{v:.2e}"


def _ordering(values: dict[str, float | None] | None, r: dict[str, float] | None, higher: bool) -> str:
    """Items best first, with values where given, ties joined by '='."""
    if r is None:
        assert values is not None
        r = ranks(_oriented(dict(values), higher))
    groups: dict[float, list[str]] = {}
    for k, x in r.items():
        groups.setdefault(x, []).append(k)
    parts = []
    for x in sorted(groups):
        names = sorted(groups[x])
        if values:
            parts.append(" = ".join(f"{n} {_fmt(values.get(n))}" for n in names))
        else:
            parts.append(" = ".join(names))
    return " < ".join(parts) if not higher else " > ".join(parts)


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def render(scored: list[Scored], machine: str | None = None, when: str | None = None) -> str:
    """docs/reproduction.md: summary, one row per entry, then the details and the unscored illustrations."""
    when = when or _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine = machine or f"{platform.node()} ({platform.machine()}, {os.cpu_count()} CPU cores, {platform.system()})"
    sm = summary(scored)
    c = sm["counts"]
    med = "n/a" if sm["median_tau"] is None else f"{sm['median_tau']:.2f}"
    lines = [
        "# Reproduction scoreboard",
        "",
        f"Generated by `python -m orchestrator.reproduce` on {when}, machine: {machine}.",
        "Rules (orchestrator/reproduce/score.py): **yes** = Kendall's tau-b >= 0.8 between the paper's and the lab's",
        "ordering and the paper's headline relation holds in the lab's figures; **partly** = tau >= 0.4 or the",
        "headline holds; **no** = neither; **not run** = no runs of the preset in the store (or no preset).",
        "Orderings list items best first (lower is better unless marked `>`); OOM ranks last. Baechi and Celeritas",
        "entries read runs in the papers' regime (conf/regime/: the paper's machine as a model, compute scaled to",
        "the paper's CCR); the step times are the simulator's predictions; placement times are the placing",
        "process's CPU time (wall clock for runs older than that figure). Entries over several seeds (graph",
        f"seeds, or {PROFILE_TRIALS} independent profiles for the entries read from profiles measured here) order",
        "the items by the mean and give the standard deviation; two items whose means are no further apart than",
        "the larger of their standard deviations are not ordered by the lab and count as tied in tau. Each reason",
        "starts with the part",
        "computed from the runs (regime, ops placed, the pairs ordered against the paper and how far apart, the",
        "multi-device placers that left devices idle); the rest names the known structural cause.",
        "",
        f"**Summary: {c['yes']} yes, {c['partly']} partly, {c['no']} no, {c[NOT_RUN]} not run "
        f"({len(scored)} entries); median tau {med} over {sm['n_tau']} scored orderings.**",
        "",
        "| entry | paper, reference | tau | headline holds | verdict |",
        "|---|---|---|---|---|",
    ]
    for s in scored:
        tau = "" if s.tau is None else f"{s.tau:.2f}"
        head = {True: "yes", False: "no", None: ""}[s.headline]
        lines.append(f"| {s.entry.id} | {_cell(s.entry.paper + ': ' + s.entry.ref)} | {tau} | {head} | {s.verdict} |")
    lines += ["", "## Entries", ""]
    for s in scored:
        e = s.entry
        higher = e.higher_is_better
        lines += [f"### {e.id}: {e.paper}, {e.ref}", "", f"- quantity: {e.what}", f"- headline: {e.headline}"]
        if e.paper_ranks is not None or e.paper_values:
            pv = dict(e.paper_values) if e.paper_values else None
            pr = dict(e.paper_ranks) if e.paper_ranks is not None else None
            lines.append(f"- paper: {_ordering(pv, pr, higher)}")
        if s.lab:
            lines.append(f"- lab ({', '.join(e.experiments)}): {_ordering(s.lab, None, higher)}")
            if s.old_runs:
                lines.append(f"- runs: {', '.join(s.old_runs)} from the older store (not re-run on this code)")
            if s.spread:
                sd = ", ".join(f"{k} {_fmt(s.spread[k])}" for k in sorted(s.spread))
                what = "profile trials" if e.seed == TRIAL else "seeds"
                lines.append(
                    f"- spread over {s.n_seeds} {what} (standard deviation; the ordering uses the mean, and pairs "
                    f"within the larger of their two spreads count as tied): {sd}"
                )
            tau = "undefined" if s.tau is None else f"{s.tau:.2f}"
            head = {True: "holds", False: "does not hold", None: "not checkable"}[s.headline]
            lines.append(f"- tau {tau}; headline {head}; **{s.verdict}**")
        else:
            why = e.why_not_run or f"no runs of {', '.join(e.experiments)} in the store"
            lines.append(f"- lab: not run ({why})")
        if s.reason:
            lines.append(f"- reason: {s.reason}")
        lines.append("")
    old = sorted({x for s in scored for x in s.old_runs})
    if old:
        i = lines.index("| entry | paper, reference | tau | headline holds | verdict |")
        lines[i:i] = [f"Runs read from the older store (not re-run on this code): {', '.join(old)}.", ""]
    lines += ["## Not scored (illustrations, no measurement)", ""]
    lines += [f"- {p}: {t}" for p, t in ILLUSTRATIONS.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    from .lab import job_runs

    ap = argparse.ArgumentParser(prog="python -m orchestrator.reproduce", description=__doc__.split("\n\n")[0])
    ap.add_argument("which", nargs="?", default="all", help="all, an entry id, a paper or a preset name")
    ap.add_argument("--run", action="store_true", help="run the entries' presets (their sweeps) first")
    ap.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI"))
    ap.add_argument(
        "--fallback-tracking-uri",
        default=None,
        help="an older store read for presets that have no runs in --tracking-uri (the page names them)",
    )
    ap.add_argument("--out", default="docs/reproduction.md")
    ap.add_argument("--machine", default=None, help="machine description for the page (default: this host)")
    ap.add_argument("--list", action="store_true", help="list the entries and exit")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    entries = select(args.which)
    if args.list:
        for e in entries:
            print(f"{e.id:28s} {e.paper}: {e.ref}  [{', '.join(e.experiments) or 'no preset'}]")
        return 0
    if args.run:  # the sweeps log where the page reads (the presets' tracking.uri follows MLFLOW_TRACKING_URI)
        env = dict(os.environ)
        if args.tracking_uri:
            env["MLFLOW_TRACKING_URI"] = args.tracking_uri
        run_presets(entries, env)
    scored = [
        score_entry(
            e, job_runs(e.experiments, args.tracking_uri, args.fallback_tracking_uri) if e.experiments else None
        )
        for e in entries
    ]
    text = render(scored, machine=args.machine)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    sm = summary(scored)
    print(
        f"{sm['counts']} median tau {sm['median_tau']} -> {args.out}",
    )
    return 0
