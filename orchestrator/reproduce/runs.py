"""Which sweeps the scoreboard runs for each preset (`python -m orchestrator.reproduce --run`): a preset's own
sweep, the argument lists of `PRESET_RUNS` where a preset is run as variants or as several sweeps, and the profile
trials of the presets that entries read from measured profiles (`score.TRIAL`)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from .checks import Entry
from .papers import ENTRIES, H100
from .score import PROFILE_TRIALS, TRIAL

log = logging.getLogger(__name__)

#: the H100-profiled graphs (papers.H100, relative to the repository's root) on the paper's machine, unscaled
_H100_RUN = [
    "+experiment=celeritas_large",
    "experiment_name=celeritas_large_h100",
    "model=graph_file",
    "backend=none",
    "profiler=file",
    "regime.compute_scale=1",
]

#: Baechi's three placers, which the Celeritas tables run after Baechi's optimizer
_BAECHI = "m_sct,m_etf,m_topo"
#: Celeritas Table 3's three models, the paper-size graphs profiled on an H100
_H100_TABLE3 = "model.path=" + ",".join(
    f"{H100}/{g}.json.gz" for g in ("transformer_b128", "gnmt_b512", "inception_v3_b128")
)

#: presets the scoreboard runs with overrides (--run): an experiment name that is a variant of a preset, or a
#: preset run as several sweeps (one argument list each)
PRESET_RUNS = {
    # Celeritas Tables 2 and 3: METIS, Order-Place and Celeritas on the preset's graphs (Transformer, GNMT,
    # Inception-V3) with TensorFlow's gradient colocation (the preset's optimizer=tf_colocation); Baechi's placers
    # as Baechi ships them, after its optimizer (the same pairs co-placed, and fusion, Baechi 3.2-3.3, as the
    # Baechi tables here run them: the Celeritas paper compares Baechi, with its Standard Evaluation in place of
    # Baechi's profile, 6.2.2)
    "celeritas_large": [
        ["+experiment=celeritas_large", "placer=metis,order_place,celeritas"],
        ["+experiment=celeritas_large", f"placer={_BAECHI}", "optimizer=baechi"],
    ],
    # Celeritas Tables 2 and 3 on the paper-size models profiled on an H100 (experiments/data/h100/, run from the
    # repository's root): the compute as measured (regime.compute_scale=1) on the paper's machine as a model;
    # Baechi's placers after Baechi's optimizer, as above
    "celeritas_large_h100": [
        [*_H100_RUN, _H100_TABLE3, "placer=metis,order_place,celeritas"],
        [*_H100_RUN, _H100_TABLE3, f"placer={_BAECHI}", "optimizer=baechi"],
    ],
    # Celeritas Table 3 on the synthetic graph of the Transformer's size: Baechi's placers after Baechi's
    # optimizer, as above
    "celeritas_large_synthetic": [
        ["+experiment=celeritas_large_synthetic", "placer=metis,order_place,celeritas"],
        ["+experiment=celeritas_large_synthetic", f"placer={_BAECHI}", "optimizer=baechi"],
    ],
    # Baechi Table 3, GNMT: Baechi's placers with Baechi's optimizer (5.5: the paper's placers see 542 fused ops),
    # the single device and the expert on gnmt_sufficient's un-optimized graph (the expert's name rules)
    "gnmt_sufficient_optimized": [
        [
            "+experiment=gnmt_sufficient",
            "experiment_name=gnmt_sufficient_optimized",
            "optimizer=baechi",
            "runtime=none",
            "placer=m_topo,m_etf,m_sct",
        ]
    ],
    # Tessel Figure 12 at Figure 11's starting N_R per placement (V 4; M and NN 6, the preset's default)
    "tessel_memory": [
        ["+experiment=tessel_memory", "pipeline.shape=v", "pipeline.max_repetend_micro=4"],
        ["+experiment=tessel_memory", "pipeline.shape=m,nn"],
    ],
    # Thesis Figures 7.7 / 7.8 over three seeds (graphs and partitioners' order; the 7 devices stay)
    "thesis_synthetic_7dev": [["+experiment=thesis_synthetic_7dev", "seed=0,1,2"]],
    # Celeritas Table 4: the paper's exploration range R = 200 for Celeritas and Order-Place (R=auto would run
    # Adjusting Placement five times and time all five); m-SCT has no R
    "celeritas_placement_time": [
        ["+experiment=celeritas_placement_time", "placer=order_place,celeritas", "placer.R=200"],
        ["+experiment=celeritas_placement_time", "placer=m_sct"],
    ],
    # Thesis Figures 7.1 - 7.3 at the thesis' sizes (7,475 to 36,319 nodes, 100 devices), every partitioner with
    # every scheduler, over three seeds (graph draws and partitioners' order; the thesis averages 10 executions):
    # 378 jobs of about 5 s each, which write about 16 GB (each job's trace.json and timeline.json, in its folder
    # and as MLflow artifacts)
    "thesis_synthetic_paper": [
        [
            "+experiment=thesis_synthetic",
            "thesis_size=paper",
            "experiment_name=thesis_synthetic_paper",
            "seed=0,1,2",
        ]
    ],
    # Thesis Figure 7.7 at the thesis' sizes: the preset's sweep (graphs 2 and 3, every partitioner with every
    # scheduler; at this size each job takes seconds: 0.2 s PCT, 2 s MSR, 4 s FIFO on graph 2 after Hashing)
    "thesis_synthetic_7dev_paper": [
        ["+experiment=thesis_synthetic_7dev", "thesis_size=paper", "experiment_name=thesis_synthetic_7dev_paper"]
    ],
}


def preset_runs(name: str) -> list[list[str]]:
    """The command lines (overrides, before ``-m``) that run preset `name` for the scoreboard: its
    `PRESET_RUNS`, else the preset's own sweep; a preset that an entry scored over profile trials reads
    (`score.TRIAL`) sweeps ``profiler.trial`` over `score.PROFILE_TRIALS` independent profiles as well."""
    runs = PRESET_RUNS.get(name, [[f"+experiment={name}"]])
    if any(e.seed == TRIAL and name in e.experiments for e in ENTRIES):
        trials = ",".join(str(k) for k in range(PROFILE_TRIALS))
        runs = [[*args, f"{TRIAL}={trials}"] for args in runs]
    return runs


def run_presets(entries: list[Entry], env: dict[str, str] | None = None) -> dict[str, int]:
    """Run each distinct preset of the entries as its sweep, or the entry's script (nice 19); returns
    {preset or script: exit code}."""
    codes: dict[str, int] = {}
    root = Path(__file__).resolve().parent.parent.parent
    for e in entries:
        if e.script is not None:
            if e.script not in codes:
                cmd = ["nice", "-n", "19", sys.executable, str(root / e.script)]
                log.info("running %s", " ".join(cmd))
                codes[e.script] = subprocess.run(cmd, env=env or dict(os.environ), check=False).returncode
            continue
        for name in e.experiments:
            if name in codes:
                continue
            for args in preset_runs(name):
                cmd = ["nice", "-n", "19", sys.executable, "-m", "orchestrator", *args, "-m"]
                log.info("running %s", " ".join(cmd))
                rc = subprocess.run(cmd, env=env or dict(os.environ), check=False).returncode
                codes[name] = max(codes.get(name, 0), rc)
    return codes
