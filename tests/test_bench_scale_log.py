"""bench_scale's --from-log: tables printed by separate runs give one set of exponents (issue 22)."""

from __future__ import annotations

import math

from benchmarks.bench_scale import fit_exponent, read_log


def test_rows_of_two_runs_are_merged_and_failures_left_out(tmp_path):
    a = tmp_path / "a.txt"
    b = tmp_path / "b.txt"
    a.write_text(
        "# bench_scale 2026-11-24 06:37 UTC; vm x86_64, 2 cores; python 3.11.7; graph random\n"
        "      ops     edges stage                     wall_s     cpu_s   peak_MB  load\n"
        "    10000     30000 graph                      2.000     1.000    60.000   1.0 \n"
        "    10000     30000 place:heft                 4.000     2.000    70.000   1.0 \n"
        "   100000    300000 graph                     20.000    10.000   600.000   1.0 \n"
        "   100000    300000 place:heft                     -         -         -   5.4 timeout after 600 s\n"
        "\nfitted exponent (log time / log ops) over the sizes reached, of wall and CPU time:\n"
        "  graph                  wall  1.00  cpu  1.00  (2 sizes)\n"
    )
    b.write_text("  1000000   3000000 graph                    400.000   100.000  6000.000   6.0 separate run\n")
    res = read_log([str(b), str(a)])
    assert res["graph"] == [(10000, 2.0, 1.0, 60.0), (100000, 20.0, 10.0, 600.0), (1000000, 400.0, 100.0, 6000.0)]
    assert res["place:heft"] == [(10000, 4.0, 2.0, 70.0)]
    assert math.isclose(fit_exponent([(n, c) for n, _, c, _ in res["graph"]]), 1.0)
    assert math.isnan(fit_exponent([(n, c) for n, _, c, _ in res["place:heft"]]))
