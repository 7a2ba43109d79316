"""Pictures of the thesis' evaluation: Figures 7.9 / 7.10 (orchestrator.plots) and the MLflow bar charts
(experiments/thesis_bars.py), drawn from real simulated runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import matplotlib.image as mpimg
import pytest

from algorithms.placers.thesis import CriticalPathPlacer, HashingPlacer, MITEPlacer
from algorithms.schedulers.thesis import FIFOScheduler, MSRScheduler, PCTScheduler
from algorithms.sendrecv import insert_send_recv
from algorithms.workloads.synthetic import level_dag, thesis_devices
from orchestrator.plots import device_utilization_png, executable_ops_png

ROOT = Path(__file__).resolve().parent.parent


def _case():
    g = level_dag(
        levels=10,
        min_nodes_per_level=3,
        max_nodes_per_level=6,
        colocated_fraction=0.2,
        compute_unit_s=1e-4,
        memory_unit_bytes=1e3,
        seed=1,
    )
    cl = thesis_devices(4, seed=0)
    return g, cl


def _png_ok(path: Path) -> tuple[int, int]:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = mpimg.imread(path)
    return img.shape[0], img.shape[1]


def test_device_utilization_has_a_row_per_device_and_gaps(tmp_path):
    g, cl = _case()
    pl = MITEPlacer().place(g, cl)
    res = PCTScheduler().run(g, cl, pl)
    h4, _ = _png_ok(Path(device_utilization_png(res, tmp_path / "util.png", title="MITE + PCT")))
    # more devices -> a taller picture (one row per device)
    cl7 = thesis_devices(7, seed=0)
    res7 = PCTScheduler().run(g, cl7, HashingPlacer().place(g, cl7))
    h7, _ = _png_ok(Path(device_utilization_png(res7, tmp_path / "util7.png")))
    assert h7 > h4
    # idle time exists in this run, so the bars cannot cover the whole makespan on every device
    assert any(res7.busy_s[d] < res7.makespan for d in res7.devices)


def test_executable_ops_plot_from_the_decision_log(tmp_path):
    g, cl = _case()
    pl = CriticalPathPlacer().place(g, cl)
    res = MSRScheduler().run(g, cl, pl)
    assert len(res.decisions) == len(g)
    assert all(k >= 1 for _, _, k in res.decisions)
    _png_ok(Path(executable_ops_png(res.decisions, tmp_path / "exe.png")))
    _png_ok(Path(executable_ops_png([], tmp_path / "empty.png")))


def _bars_module():
    spec = importlib.util.spec_from_file_location("thesis_bars", ROOT / "experiments" / "thesis_bars.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_bar_charts_from_mlflow_runs(tmp_path):
    """Log real simulated runs the way the orchestrator tags them, then draw Figures 7.1 - 7.3 from MLflow."""
    mlflow = pytest.importorskip("mlflow")
    import time

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("thesis_test")
    cl = thesis_devices(4, seed=0)
    graphs = {
        f"thesis_g{k}": level_dag(
            levels=6, min_nodes_per_level=2, max_nodes_per_level=5, seed=k, compute_unit_s=1e-4, memory_unit_bytes=1e3
        )
        for k in (1, 2)
    }
    placers = {"hashing": HashingPlacer, "critical_path": CriticalPathPlacer, "mite": MITEPlacer}
    scheds = {"fifo": FIFOScheduler, "pct": PCTScheduler}
    expect = {}
    for model, g in graphs.items():
        for pname, P in placers.items():
            t0 = time.perf_counter()
            pl = P().place(g, cl)
            dt = time.perf_counter() - t0
            g2, pl2 = insert_send_recv(g, pl)
            for sname, S in scheds.items():
                res = S().run(g2, cl, pl2, record_decisions=False)
                expect[(model, pname, sname)] = res.makespan
                with mlflow.start_run(
                    tags={
                        "placer": pname,
                        "scheduler": sname,
                        "model": "synthetic",
                        "model_name": model,
                        "cluster": "thesis_hetero",
                        "status": "ok",
                    }
                ):
                    mlflow.log_metrics(
                        {"predicted_step_s": res.makespan, "traffic_bytes": res.traffic_bytes, "placement_time_s": dt}
                    )
    with mlflow.start_run(tags={"status": "ok"}):  # a sweep parent run: no placer tag, ignored
        pass
    bars = _bars_module()
    df = bars.load_runs(uri, "thesis_test")
    assert len(df) == len(expect)
    for _, r in df.iterrows():
        assert r["predicted_step_s"] == pytest.approx(expect[(r["model"], r["placer"], r["scheduler"])])
    for fig in ("makespan", "traffic", "time"):
        _png_ok(Path(bars.bar_chart(df, fig, str(tmp_path / f"{fig}.png"))))
    bars.main(
        ["--tracking-uri", uri, "--experiment", "thesis_test", "--out", str(tmp_path / "cli"), "--schedulers", "pct"]
    )
    assert sorted(p.name for p in (tmp_path / "cli").iterdir()) == ["makespan.png", "time.png", "traffic.png"]
