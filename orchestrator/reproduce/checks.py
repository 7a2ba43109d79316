"""The scoreboard's `Entry` and the helpers its entries use: how the lab's figures are read and how each paper's
headline relation is checked on them (the entries themselves, typed in from the papers: `papers`).

Every entry names what the paper compares (items: placers, schedules, graphs ...), the paper's figures (or, for
bar charts the text describes in words, its ordering as ranks with ties), the headline relation the paper draws
from them, where the lab's figures come from (presets = MLflow experiments, a filter, a reducer of
`orchestrator.reproduce.lab`), and a short reason for any difference, written from what the lab measured. An OOM
cell is None. Lower is better everywhere (an entry whose quantity is better when higher says so and is negated
by the scorer).

Items are named as the lab names them (placer / pipeline config choices, graph names), so that the paper's and the
lab's orderings compare key by key; the paper's learning-based baselines (HRL, Placeto) have no lab counterpart
and are left out of the orderings (their figures stay in `paper` for the table).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import lab

Values = dict[str, float | None]


@dataclass(frozen=True)
class Entry:
    id: str
    paper: str  # Baechi, Celeritas, Tessel, Thesis
    ref: str  # table / figure, section, page where the text gives one
    what: str  # the quantity compared
    headline: str  # the paper's main claim for this table, in words
    paper_values: Mapping[str, float | None] = field(default_factory=dict)
    paper_ranks: Mapping[str, float] | None = None  # when the paper gives an ordering in words only
    experiments: tuple[str, ...] = ()  # the presets whose runs are read (MLflow experiment names)
    lab_values: Callable[[Any], Values] | None = None  # frame of job runs -> {item: value}
    check: Callable[[Values, Any], bool | None] | None = None  # does the headline hold in the lab?
    higher_is_better: bool = False
    reason: str = ""  # why the lab differs (or what it needs), from what was measured
    why_not_run: str = ""  # for entries the lab cannot run
    script: str | None = None  # --run runs this script (repo-relative) instead of the presets' sweeps
    seed: str | None = None  # param naming the run's seed: lab values are the mean over seeds (spread reported)
    derive_reason: Callable[[Values, Any], str] | None = None  # reason text computed from the lab's figures
    rows: Callable[[Any], Any] | None = None  # the preset's runs this entry reads (default: all of them)


def _newest(
    item: tuple[str, ...], metric: str, any_status: bool = False, mem_limited: bool = False, **cond: str
) -> Callable[[Any], Values]:
    """The newest run's `metric` per item among the runs matching `cond` (`mem_limited`: only the runs under
    insufficient memory, `lab.memory_limited`)."""

    def f(df: Any) -> Values:
        rows = lab.where(df, cond)
        return lab.newest(lab.memory_limited(rows) if mem_limited else rows, item, metric, any_status)

    return f


def _norm(item: tuple[str, ...], metric: str, group: tuple[str, ...], **cond: str) -> Callable[[Any], Values]:
    def f(df: Any) -> Values:
        return lab.normalized_mean(lab.where(df, cond), item, metric, group)

    return f


def _mean(
    item: tuple[str, ...], metric: str, pair: tuple[str, ...] = ("placer", "scheduler"), **cond: str
) -> Callable[[Any], Values]:
    def f(df: Any) -> Values:
        return lab.group_mean(lab.where(df, cond), item, metric, pair)

    return f


def _fits(v: Values, k: str) -> bool:
    return k in v and v[k] is not None


def _best_of_fitting(v: Values, k: str, among: tuple[str, ...] | None = None) -> bool | None:
    fit = {a: x for a, x in v.items() if x is not None and (among is None or a in among)}
    if k not in fit:
        return False if v else None
    return fit[k] <= min(fit.values())


# ------------------------------------------------------------------------------------------------ Baechi (001)
def _baechi_t3_inception(v: Values, df: Any) -> bool | None:
    if not all(_fits(v, k) for k in ("single", "m_etf", "m_sct", "m_topo")):
        return False
    s = v["single"]
    assert s is not None
    return all(abs((v[k] or 0) / s - 1) <= 0.01 for k in ("m_etf", "m_sct")) and (v["m_topo"] or 0) > s


def _baechi_t3_gnmt(v: Values, df: Any) -> bool | None:
    if not all(_fits(v, k) for k in ("single", "m_etf", "m_sct", "m_topo")):
        return False
    s, etf, sct, topo = (v[k] or 0.0 for k in ("single", "m_etf", "m_sct", "m_topo"))
    return etf < s and sct < s and topo > max(etf, sct)


def _baechi_t4_inception(v: Values, df: Any) -> bool | None:
    return (
        v.get("single", 0) is None
        and v.get("expert", 0) is None
        and all(_fits(v, k) for k in ("m_topo", "m_etf", "m_sct"))
    )


def _baechi_t4_gnmt(v: Values, df: Any) -> bool | None:
    return (
        v.get("single", 0) is None
        and all(_fits(v, k) for k in ("expert", "m_topo", "m_etf", "m_sct"))
        and bool(_best_of_fitting(v, "m_sct"))
    )


def _baechi_t5(v: Values, df: Any) -> bool | None:
    rows = {o: lab.where(df, {"optimizer": o}) for o in ("none", "baechi")}
    if any(len(r) == 0 for r in rows.values()) or not all(_fits(v, k) for k in ("none", "baechi")):
        return None
    first = {o: r.iloc[0] for o, r in rows.items()}
    fewer = first["baechi"]["metrics.n_ops_placed"] < first["none"]["metrics.n_ops_placed"]
    faster_place = (lab.metric_value(first["baechi"], lab.PLACEMENT_TIME) or 0.0) < (
        lab.metric_value(first["none"], lab.PLACEMENT_TIME) or 0.0
    )
    return bool(fewer and faster_place and (v["baechi"] or 0) < (v["none"] or 0))


def _sensitivity(df: Any) -> Values:
    """Figure 8: each placer's largest mean step (over seeds) at a bound, relative to its bound-0 step."""
    out: Values = {}
    col = "params.optimizer.passes.4.bound"
    if col not in df or "metrics.predicted_step_s" not in df:
        return out
    for placer, d in df.groupby("params.placer"):
        means = d.groupby(col)["metrics.predicted_step_s"].mean()
        base = means.get("0.0", means.get("0"))
        if base is None or not base > 0:
            continue
        out[str(placer)] = float(max(abs(m / base - 1) for m in means))
    return out


def _sensitivity_check(v: Values, df: Any) -> bool | None:
    if not all(_fits(v, k) for k in ("m_etf", "m_sct")):
        return None
    return max(v["m_etf"] or 0, v["m_sct"] or 0) <= 0.30


def _memory_balance(df: Any) -> Values:
    """Figure 9: m-SCT under insufficient memory, spread of the per-device peak (coefficient of variation)."""
    out: Values = {}
    for model, d in lab.memory_limited(lab.where(df, {"placer": "m_sct"})).groupby("params.model"):
        row = d.iloc[0]
        peaks = [float(row[c]) for c in d.columns if c.startswith("metrics.peak_memory_bytes.") and "max" not in c]
        peaks = [p for p in peaks if p == p]
        if peaks and statistics.mean(peaks) > 0 and row.get("tags.status") == "ok":
            out[str(model)] = statistics.pstdev(peaks) / statistics.mean(peaks)
    return out


def _memory_balance_check(v: Values, df: Any) -> bool | None:
    d = lab.memory_limited(lab.where(df, {"placer": "m_sct"}))
    if len(d) == 0 or not all(_fits(v, k) for k in ("gnmt", "inception_v3")):
        return None
    for _, g in d.groupby("params.model"):
        row = g.iloc[0]
        for c in g.columns:
            if c.startswith("metrics.peak_memory_bytes.") and "max" not in c:
                lim = row.get(c.replace("peak_memory_bytes", "memory_limit_bytes"))
                if row[c] == row[c] and lim == lim and lim is not None and row[c] > lim:
                    return False
    return (v["gnmt"] or 0) < (v["inception_v3"] or 0)


# --------------------------------------------------------------------------------------------- Celeritas (002)
def _celeritas_best(v: Values, df: Any) -> bool | None:
    return _best_of_fitting(v, "celeritas")


def ccr_paper_links(df: Any) -> Values:
    """Celeritas Table 2 in the lab: per model (newest run that has the figures, whatever its status), the CCR
    (eq. 1) of the graph as profiled here on the paper's machine as a model: the regime's PCIe links for the
    c_ij, the compute times measured here for the w_i (the part of the paper's V100 machine the lab has no
    model of). Read from the regime's figures: the run's CCR after scaling (the target) times the compute scale,
    since scaling every w_i by s divides eq. 1 by s (`algorithms.ccr.compute_scale_for_ccr`)."""
    out: Values = {}
    for _, row in df.iterrows():
        model = str(row.get("params.model"))
        c, s = row.get("metrics.ccr"), row.get("metrics.regime.compute_scale")
        if model in out or model == "nan" or c is None or s is None or c != c or s != s:
            continue
        out[model] = float(c) * float(s)
    return out


def ccr_here_reason(v: Values, df: Any) -> str:
    """The other reading of Table 2: the CCR on the measured cluster (CPU compute, local links)."""
    here = lab.newest(df, ("model",), "regime.ccr_here", any_status=True)
    shown = ", ".join(f"{k} {x:.3g}" for k, x in sorted(here.items()) if x is not None)
    return f"On the measured cluster (CPU compute and local links, regime.ccr_here): {shown}." if shown else ""


def _ccr_check(v: Values, df: Any) -> bool | None:
    if not v:
        return None
    return all(x is not None and x >= 10 for x in v.values())


def _se_check(v: Values, df: Any) -> bool | None:
    if not v:
        return None
    return all(x is not None and x <= 0.15 for x in v.values())


def _cdf_at(cdf: list[list[float]], x: float) -> float | None:
    """The fraction of ops with deviation <= x from a CDF given as [[deviation, fraction], ...] points."""
    pts = [f for d, f in cdf if d <= x + 1e-12]
    return float(pts[-1]) if pts else None


def _se_json(row: Any) -> dict[str, Any] | None:
    """standard_evaluation.json of a celeritas_estimation run (its artifact folder), or None."""
    import json
    from pathlib import Path

    uri = str(row.get("artifact_uri") or "")
    path = Path(uri.removeprefix("file://")) / "standard_evaluation.json"
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


#: Figure 5's "accurate" time estimate, read here as a relative deviation of at most 5% (the first CDF point
#: above zero; a measured time is never reproduced exactly, the paper does not say where its bin ends)
SE_ACCURATE = 0.05


def se_cdf(df: Any, kind: str, at: float) -> Values:
    """Figure 5: per model (newest run), the fraction of ops whose `kind` ("time" / "memory") estimate deviates
    by at most `at` from the measurement, read from the run's standard_evaluation.json."""
    out: Values = {}
    for _, row in df.iterrows():
        model = str(row.get("params.model"))
        if model in out or model == "nan":
            continue
        data = _se_json(row)
        if data and kind in data and data[kind].get("cdf"):
            out[model] = _cdf_at(data[kind]["cdf"], at)
    return out


def _se_cdf_check(v: Values, df: Any) -> bool | None:
    """Figure 5's claims: memory within 20% for >= 90% of the ops and time within 30% for >= 80%, every model."""
    mem, tim = se_cdf(df, "memory", 0.2), se_cdf(df, "time", 0.3)
    if not mem or not tim:
        return None
    return all((x or 0) >= 0.9 for x in mem.values()) and all((x or 0) >= 0.8 for x in tim.values())


def _faster_everywhere(df: Any, a: str, b: str, metric: str) -> bool | None:
    """`a`'s metric below `b`'s on every model where both have a value (newest run each)."""
    models = {str(m) for m in df.get("params.model", [])} - {"nan"}
    seen = False
    for m in models:
        v = lab.newest(lab.where(df, {"model": m}), ("placer",), metric)
        x, y = v.get(a), v.get(b)
        if x is None or y is None:
            continue
        seen = True
        if x >= y:
            return False
    return True if seen else None


def se_cdf_reason(v: Values, df: Any) -> str:
    """Figure 5's other two readings, from the runs: the share of ops within 20% memory and 30% time deviation."""
    mem, tim = se_cdf(df, "memory", 0.2), se_cdf(df, "time", 0.3)
    if not mem and not tim:
        return ""

    def fmt(d: Values) -> str:
        return ", ".join(f"{k} {100 * x:.0f}%" for k, x in sorted(d.items()) if x is not None)

    text = f"Ops within 20% memory deviation: {fmt(mem)}; within 30% time deviation: {fmt(tim)} (paper: 90%, 80%)."
    by_size = se_time_by_size(df, SE_ACCURATE)
    if by_size:
        parts = []
        for model, (small, large) in sorted(by_size.items()):
            cells = [
                f"{name} {100 * f:.0f}% of {n}" for name, (f, n) in (("under 0.1 ms", small), ("1 ms+", large)) if n
            ]
            parts.append(f"{model} " + ", ".join(cells))
        text += (
            f" Time estimates within {SE_ACCURATE:.0%} by op size (the op's estimated time in the run's timeline): "
            + "; ".join(parts)
            + "."
        )
    return text


def se_time_by_size(df: Any, at: float) -> dict[str, tuple[tuple[float, int], tuple[float, int]]]:
    """Per model (newest run with the files): the share of ops whose time estimate deviates by at most `at`,
    among ops whose estimated time (their duration in the run's timeline.json, the placed estimated graph) is
    under 0.1 ms and among those of 1 ms or more, with the op counts. Tells whether the deviations come from
    timer-scale ops only. Empty when the runs lack the per-op deviations or the timeline."""
    import json
    from pathlib import Path

    out: dict[str, tuple[tuple[float, int], tuple[float, int]]] = {}
    for _, row in df.iterrows():
        model = str(row.get("params.model"))
        if model in out or model == "nan":
            continue
        data = _se_json(row)
        folder = Path(str(row.get("artifact_uri") or "").removeprefix("file://"))
        if not data or not (folder / "timeline.json").is_file():
            continue
        dev = (data.get("time") or {}).get("per_op") or {}
        dur = {r["op"]: r["end_s"] - r["start_s"] for r in json.loads((folder / "timeline.json").read_text())}
        small = [d for op, d in dev.items() if op in dur and dur[op] < 1e-4]
        large = [d for op, d in dev.items() if op in dur and dur[op] >= 1e-3]

        def share(xs: list[float]) -> tuple[float, int]:
            return (sum(x <= at for x in xs) / len(xs) if xs else 0.0, len(xs))

        out[model] = (share(small), share(large))
    return out


def _se_time_check(v: Values, df: Any) -> bool | None:
    """Figure 6: DFS-TOPO and Celeritas measure faster than m-TOPO on every model (m-TOPO OOM counts as slower)."""
    models = {str(m) for m in df.get("params.model", [])} - {"nan"}
    if not models:
        return None
    for m in models:
        step = lab.newest(lab.where(df, {"model": m}), ("placer",), "predicted_step_s")
        topo = step.get("m_topo", 0.0)
        for k in ("dfs_topo_seq", "celeritas"):
            x = step.get(k)
            if x is None or (topo is not None and x >= topo):
                return False
    return True


# ----------------------------------------------------------------------------------------------- Tessel (003)
def _tessel_check(v: Values, df: Any) -> bool | None:
    shapes = {k.split("/")[0] for k in v}
    ok = True
    for s in shapes:
        t, b = v.get(f"{s}/tessel"), v.get(f"{s}/1f1b_plus")
        if t is None:
            return False
        ok = ok and t <= 0.05 and (b is None or t < b)
    return ok if shapes else None


# Figures 11 and 12's bubble rate: the repetend laid end to end as the authors' search builds it (no compaction
# across instances; algorithms.pipeline.api.figures)
REPETEND_BUBBLE = "pipeline.window_bubble_rate"


def zero_bubble_from(df: Any, key: str) -> Values:
    """Figures 11 / 12: per shape, the smallest value of `key` (pipeline.max_repetend_micro or pipeline.memory)
    at which the repetend's bubble rate (`REPETEND_BUBBLE`) is zero; None when no run of the shape reaches zero."""
    out: Values = {}
    col = f"params.{key}"
    if col not in df or f"metrics.{REPETEND_BUBBLE}" not in df:
        return out
    for shape, d in df.groupby("params.pipeline.shape"):
        rates = lab.newest(d, (key,), REPETEND_BUBBLE)
        zero = [int(k) for k, r in rates.items() if k.isdigit() and r is not None and r <= 1e-9]
        out[str(shape)] = float(min(zero)) if zero else None
    return out


def bubble_by(df: Any, key: str) -> dict[str, Values]:
    """{shape: {value of key: repetend bubble rate (`REPETEND_BUBBLE`)}} (newest run of each)."""
    out: dict[str, Values] = {}
    if f"params.{key}" not in df or f"metrics.{REPETEND_BUBBLE}" not in df:
        return out
    for shape, d in df.groupby("params.pipeline.shape"):
        out[str(shape)] = lab.newest(d, (key,), REPETEND_BUBBLE)
    return out


def _mean_bubble_by_memory(df: Any) -> Values:
    """Figure 12: the mean repetend bubble rate over the shapes at each memory capacity (items: capacities)."""
    per = bubble_by(df, "pipeline.memory")
    caps = {k for v in per.values() for k in v if k.isdigit()}
    out: Values = {}
    for c in sorted(caps, key=int):
        xs = [v[c] for v in per.values() if v.get(c) is not None]
        if len(xs) == len(per):  # every shape ran (and fitted) at this capacity
            out[c] = sum(x for x in xs if x is not None) / len(xs)
    return out


def _monotone_to_zero(df: Any, key: str) -> bool | None:
    """Every shape's bubble rate is non-increasing in `key` and zero at its largest value."""
    per = bubble_by(df, key)
    if not per:
        return None
    for rates in per.values():
        xs = [rates[k] for k in sorted((k for k in rates if k.isdigit()), key=int)]
        if not xs or any(x is None for x in xs):
            return False
        if any((b or 0) > (a or 0) + 1e-9 for a, b in zip(xs, xs[1:], strict=False)) or (xs[-1] or 0) > 1e-9:
            return False
    return True


def _search_time(df: Any) -> Values:
    """Figure 9: TO's search time over Tessel's at each micro-batch count (items n_micro; higher = TO slower)."""
    out: Values = {}
    to = lab.newest(lab.where(df, {"pipeline": "to"}), ("pipeline.n_micro",), "search_time_s")
    te = lab.newest(lab.where(df, {"pipeline": "tessel"}), ("pipeline.n_micro",), "search_time_s")
    for n, t in to.items():
        b = te.get(n)
        if t is not None and b:
            out[n] = t / b
    return out


def _search_check(v: Values, df: Any) -> bool | None:
    if not v:
        return None
    big = [x for k, x in v.items() if k.isdigit() and int(k) >= 4 and x is not None]
    return bool(big) and all(x > 1 for x in big)


# ------------------------------------------------------------------------------------------------ Thesis (004)
def _worst(v: Values, ks: tuple[str, ...]) -> bool | None:
    others = [x for k, x in v.items() if k not in ks and x is not None]
    mine = [v[k] for k in ks if v.get(k) is not None]
    if not others or not mine:
        return None
    return min(x for x in mine if x is not None) >= statistics.median(others)


def _best(v: Values, ks: tuple[str, ...]) -> bool | None:
    others = [x for k, x in v.items() if k not in ks and x is not None]
    mine = [v[k] for k in ks if v.get(k) is not None]
    if not others or not mine:
        return None
    return max(x for x in mine if x is not None) <= statistics.median(others)


def per_placer_graphs(v: Values, df: Any) -> str:
    """Figure 7.7: which of graphs 2 and 3 each strategy ran faster (the mean hides it)."""
    faster: dict[str, list[str]] = {"g2": [], "g3": []}
    for placer, d in df.groupby("params.placer") if "params.placer" in df else []:
        m = lab.group_mean(d, ("thesis_graph",), "predicted_step_s", ("placer", "scheduler"))
        if m.get("g2") is not None and m.get("g3") is not None:
            faster["g3" if (m["g3"] or 0) < (m["g2"] or 0) else "g2"].append(str(placer))
    if not faster["g2"] and not faster["g3"]:
        return ""
    return (
        f"Graph 3 faster for {', '.join(sorted(faster['g3'])) or 'no strategy'}; "
        f"graph 2 faster for {', '.join(sorted(faster['g2'])) or 'no strategy'}."
    )


def _less(a: str, b: str, v: Values, df: Any) -> bool | None:
    if v.get(a) is None or v.get(b) is None:
        return None
    return (v[a] or 0) < (v[b] or 0)


def _argmax_is(k: str, v: Values, df: Any) -> bool | None:
    fit = {a: x for a, x in v.items() if x is not None}
    return None if not fit else max(fit, key=lambda a: fit[a]) == k


PARTITIONERS_TIME_1 = {  # Figure 7.1's text: HEFT, CP, ICP best, MITE ~2x on graphs 1-2, Batch Split and Hashing worst
    "heft": 1,
    "critical_path": 1,
    "icp": 1,
    "dfs": 2,
    "mite": 3,
    "batch_split": 4,
    "hashing": 4,
}
TRAFFIC_RANKS = {  # Figures 7.2 / 7.5: MITE, DFS (and Batch Split on TF graphs) best; Hashing, HEFT, CP worst
    "mite": 1,
    "dfs": 1,
    "batch_split": 2,
    "icp": 3,
    "critical_path": 4,
    "heft": 4,
    "hashing": 4,
}
