"""The reproduction scoreboard's scoring: ranks, Kendall's tau-b, verdicts, and an entry scored on given rows."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.reproduce import render, score_entry, select, summary
from orchestrator.reproduce.checks import Entry, _newest
from orchestrator.reproduce.papers import ENTRIES
from orchestrator.reproduce.score import NOT_RUN, kendall_tau_b, ranks, verdict, within_spread


def test_ranks_share_ties_and_put_oom_last():
    assert ranks({"a": 2.0, "b": 1.0, "c": 2.0, "d": None}) == {"a": 2.0, "b": 1.0, "c": 2.0, "d": 3.0}


def test_tau_by_hand():
    a = {"x": 1, "y": 2, "z": 3}
    assert kendall_tau_b(a, {"x": 1, "y": 2, "z": 3}) == pytest.approx(1.0)
    assert kendall_tau_b(a, {"x": 3, "y": 2, "z": 1}) == pytest.approx(-1.0)
    # one swap of three: C = 2, D = 1 -> 1/3
    assert kendall_tau_b(a, {"x": 2, "y": 1, "z": 3}) == pytest.approx(1 / 3)
    # tau-b with a tie in the second ordering: pairs (x,y) tied; C = 2, D = 0, n0 = 3, n1 = 0, n2 = 1
    assert kendall_tau_b(a, {"x": 1, "y": 1, "z": 3}) == pytest.approx(2 / math.sqrt(3 * 2))
    # only common keys count; fewer than two: undefined
    assert kendall_tau_b(a, {"x": 1, "q": 2}) is None
    assert kendall_tau_b({"x": 1, "y": 1}, {"x": 1, "y": 2}) is None


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=12, unique=True))
def test_tau_of_an_ordering_with_itself_is_one_and_reversed_minus_one(xs):
    a = {str(i): x for i, x in enumerate(xs)}
    assert kendall_tau_b(ranks(a), ranks(a)) == pytest.approx(1.0)
    assert kendall_tau_b(ranks(a), ranks({k: -v for k, v in a.items()})) == pytest.approx(-1.0)


@pytest.mark.parametrize(
    ("tau", "head", "has", "want"),
    [
        (0.9, True, True, "yes"),
        (0.9, None, True, "yes"),
        (0.9, False, True, "partly"),
        (0.5, False, True, "partly"),
        (0.1, True, True, "partly"),
        (0.1, False, True, "no"),
        (None, True, True, "yes"),
        (None, False, True, "no"),
        (None, None, True, NOT_RUN),
        (1.0, True, False, NOT_RUN),
    ],
)
def test_verdict_rules(tau, head, has, want):
    assert verdict(tau, head, has) == want


def _rows(values: dict[str, float | None]) -> pd.DataFrame:
    rows = []
    for i, (placer, v) in enumerate(values.items()):
        rows.append(
            {
                "start_time": pd.Timestamp("2026-11-23") + pd.Timedelta(minutes=i),
                "params.placer": placer,
                "params.regime": "baechi",
                "tags.status": "oom" if v is None else "ok",
                "metrics.predicted_step_s": float("nan") if v is None else v,
            }
        )
    return pd.DataFrame(rows).sort_values("start_time", ascending=False)


def test_an_entry_scored_on_given_rows():
    (gnmt4,) = select("baechi-t4-gnmt")
    same = score_entry(gnmt4, _rows({"single": None, "expert": 0.221, "m_topo": 0.272, "m_etf": 0.230, "m_sct": 0.212}))
    assert same.tau == pytest.approx(1.0) and same.headline is True and same.verdict == "yes"
    # m-SCT loses its lead and m-TOPO becomes the fastest: tau falls, headline fails
    off = score_entry(gnmt4, _rows({"single": None, "expert": 0.221, "m_topo": 0.1, "m_etf": 0.230, "m_sct": 0.3}))
    assert off.headline is False and off.tau is not None and off.tau < 0.4 and off.verdict == "no"
    # runs of another regime are not read
    here = _rows({"m_sct": 0.1}).assign(**{"params.regime": "here"})
    assert score_entry(gnmt4, here).verdict == NOT_RUN


def test_newest_run_wins_and_missing_store_is_not_run():
    df = _rows({"m_sct": 0.5})
    newer = _rows({"m_sct": 0.2}).assign(start_time=pd.Timestamp("2026-11-24"))
    both = pd.concat([newer, df]).sort_values("start_time", ascending=False)
    assert _newest(("placer",), "predicted_step_s")(both) == {"m_sct": 0.2}
    e = Entry("x", "P", "ref", "what", "head", {"a": 1.0}, experiments=("none",), lab_values=lambda d: {})
    assert score_entry(e, pd.DataFrame()).verdict == NOT_RUN


def test_table_4_reads_the_memory_limited_runs_not_their_sufficient_memory_baseline():
    """The memory-limited presets sweep need_fraction 0.7 with 2.0 (the baseline), the baseline's runs last: the
    Table 4 entries must read the limited runs, where the single device is out of memory."""
    (gnmt4,) = select("baechi-t4-gnmt")
    paper = {"single": None, "expert": 0.221, "m_topo": 0.272, "m_etf": 0.230, "m_sct": 0.212}
    limited = _rows(paper).assign(**{"params.need_fraction": "0.7"})
    baseline = _rows({k: 0.1 for k in paper}).assign(
        **{"params.need_fraction": "2.0", "start_time": pd.Timestamp("2026-11-24")}
    )
    both = pd.concat([baseline, limited]).sort_values("start_time", ascending=False)
    res = score_entry(gnmt4, both)
    assert res.lab["single"] is None and res.tau == pytest.approx(1.0) and res.verdict == "yes"


def test_every_entry_is_unique_and_renders():
    ids = [e.id for e in ENTRIES]
    assert len(ids) == len(set(ids))
    scored = [score_entry(e, None) for e in ENTRIES]
    text = render(scored, machine="test", when="today")
    assert "not run" in text and all(f"| {i} |" in text for i in ids)
    assert summary(scored)["counts"][NOT_RUN] == len(ENTRIES)


def test_paired_mean_drops_a_strategy_that_ran_out_of_memory_on_one_graph():
    from orchestrator.reproduce.lab import group_mean

    rows = []
    for i, (g, placer, v) in enumerate(
        [("g2", "heft", 1.0), ("g3", "heft", 2.0), ("g2", "mite", 5.0), ("g3", "mite", None)]
    ):
        rows.append(
            {
                "start_time": pd.Timestamp("2026-11-23") + pd.Timedelta(minutes=i),
                "params.thesis_graph": g,
                "params.placer": placer,
                "params.scheduler": "pct",
                "tags.status": "oom" if v is None else "ok",
                "metrics.predicted_step_s": float("nan") if v is None else v,
            }
        )
    df = pd.DataFrame(rows)
    assert group_mean(df, ("thesis_graph",), "predicted_step_s", ("placer", "scheduler")) == {"g2": 1.0, "g3": 2.0}
    assert group_mean(df, ("thesis_graph",), "predicted_step_s") == {"g2": 3.0, "g3": 2.0}


def _seeded(seed: str, runs: list[tuple[str, str, float | None]], **fields) -> tuple[Entry, pd.DataFrame]:
    """An entry over the newest predicted step per placer, averaged over param `seed`, and its runs
    [(seed value, placer, step or None for OOM)], the first run the oldest."""
    rows = [
        {
            "start_time": pd.Timestamp("2026-11-23") + pd.Timedelta(minutes=i),
            "params.placer": placer,
            f"params.{seed}": k,
            "tags.status": "oom" if v is None else "ok",
            "metrics.predicted_step_s": float("nan") if v is None else v,
        }
        for i, (k, placer, v) in enumerate(runs)
    ]
    df = pd.DataFrame(rows).sort_values("start_time", ascending=False)
    e = Entry("x", "P", "ref", "what", "head", experiments=("x",), seed=seed, **fields)
    return e, df


def test_seed_mean_and_spread():
    e, df = _seeded(
        "seed",
        [("0", "heft", 1.0), ("1", "heft", 3.0), ("0", "mite", 2.0), ("1", "mite", 2.0), ("0", "dfs", None)],
        paper_ranks={"mite": 1, "heft": 2},
        lab_values=_newest(("placer",), "predicted_step_s"),
    )
    s = score_entry(e, df)
    assert s.lab == {"heft": 2.0, "mite": 2.0, "dfs": None}
    assert s.spread == {"heft": pytest.approx(1.0), "mite": pytest.approx(0.0)}
    assert s.n_seeds == 2
    assert "spread over 2 seeds" in render([s], machine="m", when="w")


def test_pairs_within_the_spread_are_tied_in_tau():
    """Means no further apart than the larger standard deviation are not ordered by the lab: tied on its side of
    tau-b, whichever way the means fall."""
    paper = {"a": 1.0, "b": 2.0, "c": 3.0}
    lab = {"a": 1.02, "b": 1.0, "c": 3.0}  # a and b reversed against the paper, 2 % apart
    assert kendall_tau_b(paper, ranks(lab)) == pytest.approx(1 / 3)
    tied = within_spread(lab, {"a": 0.03, "b": 0.01, "c": 0.05})
    assert tied is not None and tied("a", "b") and not tied("a", "c")
    # (a, b) tied: C = 2, D = 0, n0 = 3, n2 = 1
    assert kendall_tau_b(paper, ranks(lab), tied) == pytest.approx(2 / math.sqrt(3 * 2))
    # narrower spreads order them again; no spread, no ties; an OOM item is never tied
    assert not within_spread(lab, {"a": 0.01, "b": 0.01})("a", "b")  # type: ignore[misc]
    assert within_spread(lab, {}) is None
    assert not within_spread({"a": 1.0, "b": None}, {"a": 5.0})("a", "b")  # type: ignore[misc]


def test_an_entry_over_profile_trials_ties_what_the_trials_do_not_order():
    """An entry read from measured profiles is scored over its trials (`profiler.trial`): two placers that swap
    places between trials are tied, and the reason says so; the preset runs the trials."""
    from orchestrator.reproduce import preset_runs
    from orchestrator.reproduce.score import PROFILE_TRIALS, TRIAL

    trials = {"0": {"m_etf": 1.00, "m_sct": 1.03, "m_topo": 2.0}, "1": {"m_etf": 1.04, "m_sct": 1.03, "m_topo": 2.1}}
    e, df = _seeded(
        TRIAL,
        [(k, placer, v) for k, vals in trials.items() for placer, v in vals.items()],
        paper_values={"m_sct": 1.0, "m_etf": 1.1, "m_topo": 1.2},
        lab_values=_newest(("placer",), "predicted_step_s"),
    )
    s = score_entry(e, df)
    assert s.n_seeds == 2 and s.lab["m_etf"] == pytest.approx(1.02) and s.lab["m_sct"] == pytest.approx(1.03)
    # m-ETF's mean is below m-SCT's, against the paper, but within its spread (0.02): tied; the other two pairs
    # agree with the paper
    assert s.tau == pytest.approx(2 / math.sqrt(3 * 2))
    assert "Within the spread" in s.reason and "m_sct/m_etf (1.0% apart)" in s.reason
    assert "spread over 2 profile trials" in render([s], machine="m", when="w")
    # one trial alone orders them, against the paper
    one = score_entry(e, df[df["params.profiler.trial"] == "0"])
    assert one.tau == pytest.approx(1 / 3)
    # the scoreboard's presets of measured-profile entries sweep the trials; the others do not
    trial_arg = f"{TRIAL}={','.join(map(str, range(PROFILE_TRIALS)))}"
    assert all(trial_arg in args for args in preset_runs("gnmt_mem_limited"))
    assert all(trial_arg in args for args in preset_runs("gnmt_sufficient_optimized"))
    assert not any(trial_arg in args for args in preset_runs("thesis_synthetic"))
    assert {x.id for x in ENTRIES if x.seed == TRIAL} >= {"baechi-t3-inception", "baechi-t4-gnmt", "celeritas-t4"}


def test_zero_bubble_start_and_monotone_check():
    from orchestrator.reproduce.checks import _monotone_to_zero, zero_bubble_from

    rows = []
    for i, (shape, nr, rate) in enumerate(
        [("v", 1, 0.5), ("v", 2, 0.2), ("v", 3, 0.0), ("m", 1, 0.6), ("m", 2, 0.7), ("m", 3, 0.1)]
    ):
        rows.append(
            {
                "start_time": pd.Timestamp("2026-11-23") + pd.Timedelta(minutes=i),
                "params.pipeline.shape": shape,
                "params.pipeline.max_repetend_micro": str(nr),
                "tags.status": "ok",
                "metrics.pipeline.window_bubble_rate": rate,
            }
        )
    df = pd.DataFrame(rows)
    assert zero_bubble_from(df, "pipeline.max_repetend_micro") == {"v": 3.0, "m": None}
    assert _monotone_to_zero(df, "pipeline.max_repetend_micro") is False  # m rises and never reaches zero
    assert _monotone_to_zero(df[df["params.pipeline.shape"] == "v"], "pipeline.max_repetend_micro") is True


def test_se_cdf_reads_the_fraction_at_a_deviation(tmp_path):
    import json

    from orchestrator.reproduce.checks import se_cdf

    cdf = [[0.0, 0.1], [0.05, 0.4], [0.1, 0.6], [0.3, 0.9], [1.0, 1.0]]
    (tmp_path / "standard_evaluation.json").write_text(json.dumps({"time": {"cdf": cdf}}))
    df = pd.DataFrame([{"params.model": "gnmt", "artifact_uri": str(tmp_path)}])
    assert se_cdf(df, "time", 0.05) == {"gnmt": 0.4}
    assert se_cdf(df, "time", 0.2) == {"gnmt": 0.6}
    assert se_cdf(df, "memory", 0.2) == {}


def test_measured_reason_names_the_reversed_pairs_and_the_regime():
    (gnmt4,) = select("baechi-t4-gnmt")
    df = _rows({"single": None, "expert": 0.221, "m_topo": 0.272, "m_etf": 0.23, "m_sct": 0.25}).assign(
        **{"params.model": "gnmt", "metrics.ccr": 18.63, "metrics.regime.ccr_here": 9.8}
    )
    s = score_entry(gnmt4, df)
    assert "gnmt CCR 18.6 (here 9.8" in s.reason
    assert (
        "reversed against the paper in 2 of 10 pairs: expert/m_sct (13% apart), m_etf/m_sct (8.7% apart)." in s.reason
    )
    assert s.reason.endswith(gnmt4.reason)  # the structural text follows the measured part
    same = score_entry(gnmt4, _rows({"single": None, "expert": 0.221, "m_topo": 0.272, "m_etf": 0.23, "m_sct": 0.2}))
    assert same.reason.startswith("No pair of the 5 items is ordered against the paper.")  # no regime line


def test_celeritas_t2_reads_the_ccr_on_the_papers_links():
    """Table 2 in the lab: CCR after scaling (the target) x compute scale = CCR of the profiled graph on the
    regime's links; the newest run per model, whatever its status; ccr_here goes to the reason."""
    from orchestrator.reproduce.checks import ccr_paper_links

    (t2,) = select("celeritas-t2")
    rows = [
        {"model": "transformer", "ccr": 111.957, "scale": 0.0286, "here": 3.65, "status": "oom"},
        {"model": "gnmt", "ccr": 18.63, "scale": 0.158, "here": 3.84, "status": "ok"},
        {"model": "gnmt", "ccr": 18.63, "scale": 0.5, "here": 9.0, "status": "ok"},  # older run
    ]
    df = pd.DataFrame(
        [
            {
                "params.model": r["model"],
                "params.regime": "celeritas",
                "metrics.ccr": r["ccr"],
                "metrics.regime.compute_scale": r["scale"],
                "metrics.regime.ccr_here": r["here"],
                "tags.status": r["status"],
                "start_time": 10 - i,
            }
            for i, r in enumerate(rows)
        ]
    )
    v = ccr_paper_links(df)
    assert v == pytest.approx({"transformer": 111.957 * 0.0286, "gnmt": 18.63 * 0.158})
    s = score_entry(t2, df)
    assert s.lab == pytest.approx(v)
    assert s.tau == pytest.approx(1.0) and s.headline is False  # ordered as the paper, far below CCR 10
    assert "regime.ccr_here): gnmt 3.84, transformer 3.65." in s.reason


def test_runs_from_the_fallback_store_are_named_on_the_page():
    (gnmt4,) = select("baechi-t4-gnmt")
    vals = {"single": None, "expert": 0.221, "m_topo": 0.272, "m_etf": 0.23, "m_sct": 0.2}
    new = score_entry(gnmt4, _rows(vals).assign(experiment_name="gnmt_mem_limited", store="main"))
    old = score_entry(gnmt4, _rows(vals).assign(experiment_name="gnmt_mem_limited", store="fallback"))
    assert new.old_runs == () and old.old_runs == ("gnmt_mem_limited",)
    assert new.verdict == old.verdict
    assert "older store" not in render([new])
    page = render([old])
    assert "Runs read from the older store (not re-run on this code): gnmt_mem_limited." in page
    assert "- runs: gnmt_mem_limited from the older store" in page


def test_se_time_by_size_splits_the_deviations_by_estimated_op_time(tmp_path):
    import json

    from orchestrator.reproduce.checks import se_time_by_size

    per_op = {"tiny1": 0.01, "tiny2": 0.5, "mid": 0.0, "big1": 0.02, "big2": 0.3, "big3": 0.9}
    dur = {"tiny1": 5e-6, "tiny2": 5e-5, "mid": 5e-4, "big1": 2e-3, "big2": 1e-3, "big3": 0.1}
    (tmp_path / "standard_evaluation.json").write_text(json.dumps({"time": {"per_op": per_op}}))
    (tmp_path / "timeline.json").write_text(
        json.dumps([{"op": k, "device": "cpu0", "start_s": 0.0, "end_s": v} for k, v in dur.items()])
    )
    df = pd.DataFrame([{"params.model": "gnmt", "artifact_uri": f"file://{tmp_path}"}])
    (small, large) = se_time_by_size(df, 0.05)["gnmt"]
    assert small == (0.5, 2)
    assert large[1] == 3 and large[0] == pytest.approx(1 / 3)
    (tmp_path / "timeline.json").unlink()
    assert se_time_by_size(df, 0.05) == {}


def test_run_logs_the_sweeps_where_the_page_reads(monkeypatch, tmp_path):
    """`--run --tracking-uri X` runs the presets' sweeps with MLFLOW_TRACKING_URI=X (their tracking.uri), so that
    the page scores the runs it just made, not an older store's."""
    import subprocess

    import orchestrator.reproduce as rp

    seen = []

    def fake_run(cmd, env=None, check=False):
        seen.append((cmd, env))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(rp.runs.subprocess, "run", fake_run)
    monkeypatch.setattr("orchestrator.reproduce.lab.job_runs", lambda *a, **k: pd.DataFrame())
    uri = f"sqlite:///{tmp_path}/runs.db"
    rp.main(["baechi-t4-gnmt", "--run", "--tracking-uri", uri, "--out", str(tmp_path / "r.md")])
    assert seen and all(env is not None and env["MLFLOW_TRACKING_URI"] == uri for _, env in seen)
    assert any("+experiment=gnmt_mem_limited" in cmd for cmd, _ in seen)


def test_placement_time_is_the_cpu_time_where_the_run_recorded_it():
    from orchestrator.reproduce.lab import PLACEMENT_TIME, newest

    new = _rows({"m_sct": 9.0}).assign(**{"metrics.placement_time_s": 9.0, "metrics.placement_cpu_s": 2.0})
    old = _rows({"celeritas": 5.0}).assign(**{"metrics.placement_time_s": 5.0, "metrics.placement_cpu_s": math.nan})
    both = pd.concat([new, old])
    assert newest(both, ("placer",), PLACEMENT_TIME) == {"m_sct": 2.0, "celeritas": 5.0}


def test_h100_entries_read_their_own_graphs_runs():
    """The H100 entries (celeritas_large_h100) read the runs of their model's graph file only; an entry's own id
    selects it alone."""
    assert [e.id for e in select("celeritas-t2")] == ["celeritas-t2"]
    (t3,) = select("celeritas-t3-nmt-h100")
    (t2,) = select("celeritas-t2-h100")
    from orchestrator.reproduce.papers import H100, H100_GRAPHS

    path = {m: f"{H100}/{g}.json.gz" for m, g in H100_GRAPHS.items()}
    rows = [("gnmt", "metis", 0.38, 75.7), ("gnmt", "celeritas", None, 75.7), ("transformer", "metis", 0.98, 46.0),
            ("inception_v3", "metis", 0.2, 78.4)]  # fmt: skip
    df = pd.DataFrame(
        [
            {
                "params.model": "graph_file",
                "params.model.path": path[m],
                "params.placer": pl,
                "params.regime": "celeritas",
                "metrics.predicted_step_s": step,
                "metrics.ccr": ccr,
                "tags.status": "ok" if step is not None else "oom",
                "start_time": 10 - i,
                "experiment_name": "celeritas_large_h100",
            }
            for i, (m, pl, step, ccr) in enumerate(rows)
        ]
    )
    s = score_entry(t3, df)
    # NMT's METIS (0.38 s), not the Transformer's (0.98 s); Celeritas ran out of memory there
    assert s.lab["metis"] == pytest.approx(0.38) and set(s.lab) <= {"metis", "celeritas"}
    assert s.lab.get("celeritas") is None
    s2 = score_entry(t2, df)
    assert s2.lab == pytest.approx({"gnmt": 75.7, "transformer": 46.0, "inception_v3": 78.4})
    assert s2.verdict == "partly"  # every CCR >= 10, the order against the paper's


def test_devices_used_names_a_multi_device_placer_that_left_devices_idle():
    from orchestrator.reproduce import devices_used_reason

    rows = pd.DataFrame(
        [
            {  # newest m_topo run: the model on gpu0, one 4-byte op on gpu1
                "params.placer": "m_topo",
                "params.regime": "baechi",
                "metrics.utilization.gpu0": 1.0,
                "metrics.utilization.gpu1": 7e-5,
                "metrics.utilization.gpu2": 0.0,
                "metrics.utilization.gpu3": 0.0,
                "metrics.placer.cap_bytes": 83.6e6,
                "metrics.memory_need_bytes": 89.9e6,
            },
            {  # an older m_topo run is not read
                "params.placer": "m_topo",
                "params.regime": "baechi",
                **{f"metrics.utilization.gpu{k}": 0.5 for k in range(4)},
            },
            {
                "params.placer": "m_etf",
                "params.regime": "baechi",
                **{f"metrics.utilization.gpu{k}": 0.4 for k in range(4)},
            },
            {"params.placer": "single", "params.regime": "baechi", "metrics.utilization.gpu0": 1.0},
            {"params.placer": "heft", "params.regime": "here", "metrics.utilization.gpu0": 1.0},
        ]
    )
    vals = {"m_topo": 0.079, "m_etf": 0.063, "single": 0.079, "heft": 0.05}
    txt = devices_used_reason(vals, rows)
    assert txt == (
        "Devices: m_topo used 2 of 4 devices, 1 of them busy under 1% of the step "
        "(its cap 83.6 MB per device against a single-device need of 89.9 MB)."
    )
    assert devices_used_reason({"m_etf": 0.063}, rows) == ""  # every device busy: nothing to say
    assert devices_used_reason({"m_topo": None}, rows) == ""  # out of memory: no placement to describe
