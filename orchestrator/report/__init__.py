"""Paper-style tables from the MLflow runs of an experiment: which placement is best, by how much, and why.

    python -m orchestrator.report                       # list the experiments in the store, with run counts
    python -m orchestrator.report EXPERIMENT [--tracking-uri URI] [--out DIR] [--latest-sweep]

Rows. One row per distinct configuration: the fixed KEY (model, cluster, optimizer, placer, scheduler, pipeline:
the jobs' config-group choices, logged as tags) plus every logged param that a sweep varies (`varying_params`:
e.g. `optimizer.passes.4.bound` in baechi_sensitivity, `pipeline.n_micro` in tessel_search_time, `need_fraction`
in the memory sweeps). A row shows the newest *successful* run of its configuration (status ok or oom: an
out-of-memory placement is a result); runs that failed (status error) never replace it and are listed under the
table, with the row marked when its newest run failed.

Ranking. Rows are grouped by what the placements are compared under (model, cluster and the varying params
outside the placer group: the memory fraction, the perturbation bound, ...) and
ranked within a group by the *predicted* step (the simulator's figure for the placement, deterministic), OOM
and failed rows last. The measured step (the median of the measured steps) sits beside it with its spread (the
inter-quartile range, where the run logged `measured_step_iqr_s`); where measured medians differ by less than
their spread the report says so instead of ordering them by noise. Speed-ups over the single-device and the
expert placement of the same model, cluster and varying params (Baechi Tables 3 and 4; see `_base`) are given
for the predicted step and, where both ran, the measured one.

Columns whose cell is the same on every row are stated once above the table. Also shown: the device memory
limit (Table 4's "insufficient memory"), placement time, traffic, bubble rate and search time (pipeline runs),
and the simulated and the measured peak memory per device. Written as Markdown and CSV (every column), plus a
PNG chart (predicted and measured step side by side, speed-ups, peak memory per device against its limit) into
`reports/<experiment>/` (or --out). Where runs were both predicted and measured (e.g. `+experiment=fidelity`),
the report adds per model and cluster the median |predicted - measured| / measured step and Kendall's tau
between the predicted and the measured order, and a predicted-against-measured scatter with the y = x line
(`orchestrator.report.fidelity`).
"""

from .chart import bar_chart, chart
from .cli import main
from .fidelity import fidelity_markdown, fidelity_summary, kendall_tau, scatter
from .rows import (
    IGNORED_LEAVES,
    IGNORED_NAMES,
    IGNORED_PREFIXES,
    IGNORED_SUFFIXES,
    KEY,
    RESULT_STATUSES,
    collect,
    ignored_param,
    rows_from_runs,
    short_names,
    varying_params,
)
from .store import list_experiments
from .sweep import best, summarize_sweep, write_report
from .table import markdown, noise_notes, split_constant, table, write_csv

__all__ = [
    "IGNORED_LEAVES",
    "IGNORED_NAMES",
    "IGNORED_PREFIXES",
    "IGNORED_SUFFIXES",
    "KEY",
    "RESULT_STATUSES",
    "bar_chart",
    "best",
    "chart",
    "collect",
    "fidelity_markdown",
    "fidelity_summary",
    "kendall_tau",
    "ignored_param",
    "list_experiments",
    "main",
    "markdown",
    "noise_notes",
    "rows_from_runs",
    "scatter",
    "short_names",
    "split_constant",
    "summarize_sweep",
    "table",
    "varying_params",
    "write_csv",
    "write_report",
]
