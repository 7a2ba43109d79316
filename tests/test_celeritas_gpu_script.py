"""experiments/celeritas_gpu.py's protocol on the CPU at tiny sizes: profiles at the target batch and its 1/8,
1/4, 1/2, Standard Evaluation's deviations, the CCR on the paper's links, and the saved profiles."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")


@pytest.mark.slow
def test_protocol_on_a_tiny_gnmt(tmp_path):
    from algorithms.ccr import graph_ccr
    from algorithms.graph import OpGraph
    from experiments.celeritas_gpu import main, paper_cluster

    out, graphs = tmp_path / "cg.json", tmp_path / "graphs"
    assert main(["--device", "cpu", "--small", "--models", "gnmt", "--all-batches", "--json", str(out),
                 "--graphs", str(graphs)]) == 0  # fmt: skip
    r = json.loads(out.read_text())["models"]["gnmt"]
    assert r["target_batch"] == 16 and r["small_batches"] == [2, 4, 8]
    assert sorted(p.name for p in graphs.iterdir()) == [f"gnmt_b{b}.json.gz" for b in (16, 2, 4, 8)]
    g = OpGraph.load(graphs / "gnmt_b16.json.gz")
    assert len(g.ops) == r["ops"] and {g.op(o)["profiled_batch"] for o in g.ops} == {16}
    assert r["ccr_paper_links"] == pytest.approx(graph_ccr(g, paper_cluster()), rel=1e-9) and r["ccr_paper_links"] > 0
    # memory is linear in the batch by construction; time deviations are real numbers in [0, inf)
    assert r["se_memory"]["mean"] < 1e-6 and r["se_memory"]["within_20"] == 1.0
    assert r["se_time"]["mean"] >= 0 and 0 <= r["se_time"]["within_5"] <= r["se_time"]["within_30"] <= 1
    assert all(v > 0 for v in r["compute_sum_s"].values())
