"""The papers' regime: run a preset on a model of the paper's machine (issue 21).

Baechi and Celeritas measured their placements on 4 GPUs behind PCIe, where a training graph's
communication-to-computation ratio (CCR, Celeritas eq. 1, `algorithms.ccr`) is 18.6 to 112 (Celeritas Table 2).
Profiled here on CPU cores with a local communication fit, the same graphs have a CCR of a few units, so splitting
a model pays differently and the placers' ordering changes. A regime (conf/regime/*.yaml, key `regime`) states
the paper's machine as a model:

* ``cluster``: the paper's devices and links (device list and comm as in conf/cluster/; the preset's
  `cluster.memory_fraction` and `cluster.need_fraction` still apply to it), replacing the measured cluster after
  profiling and the communication fit;
* ``target_ccr``: the paper's CCR of each model ({model choice or model name: CCR}; Celeritas Table 2), and
  ``compute_scale``: ``auto`` (the factor s that gives the graph the target CCR on the regime's cluster:
  s = CCR(graph, regime cluster) / target, `algorithms.ccr.compute_scale_for_ccr`) or a number (then no
  target is looked up and result.json's ``target_ccr`` is null: ``compute_scale=1`` keeps a profile measured on
  the paper's kind of device, e.g. experiments/data/h100/'s GPU profiles, as it is);
* every op's measured compute time is multiplied by s (memory and tensor bytes stay as measured);
* ``run_model: false``: the placed model is not run here (the measured step would be this machine's, not the
  paper machine's); the step is the simulator's prediction.

`regime: here` (name ``here``), or no `regime` key, leaves the job as measured here. result.json gets ``regime``:
{name, target_ccr, compute_scale, ccr_here (the profiled graph on the measured cluster), ccr (after scaling)},
and the metrics ``regime.compute_scale`` and ``regime.ccr_here``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from algorithms.ccr import compute_scale_for_ccr, graph_ccr, scale_compute
from algorithms.cluster import Cluster
from algorithms.errors import ConfigError
from algorithms.graph import OpGraph, atomic_write_json

from ..context import JobContext, build_cluster
from ..registry import plain

log = logging.getLogger("orchestrator")

#: regime names that leave the job as measured here
HERE = ("here", None, "none")


def regime_cfg(cfg: Any) -> dict[str, Any] | None:
    """The job's regime config, or None when it runs as measured here."""
    r = cfg.get("regime") if hasattr(cfg, "get") else None
    if r is None:
        return None
    d = dict(plain(r))
    return None if d.get("name") in HERE else d


def runs_model(cfg: Any) -> bool:
    """False when the job's regime forbids running the placed model here (`regime.run_model: false`)."""
    r = regime_cfg(cfg)
    return r is None or bool(r.get("run_model", False))


def target_for(r: dict[str, Any], model_choice: str | None, model_name: str | None) -> float:
    """The regime's target CCR for the model (by the model's config choice, then its name)."""
    targets = r.get("target_ccr")
    if isinstance(targets, (int, float)):
        return float(targets)
    if not isinstance(targets, dict):
        raise ConfigError(f"regime {r.get('name')!r}: target_ccr must be a number or {{model: CCR}}, got {targets!r}")
    for key in (model_choice, model_name):
        if key is not None and key in targets:
            return float(targets[key])
    raise ConfigError(
        f"regime {r.get('name')!r}: no target_ccr for model {model_choice or model_name!r}; "
        f"it has {sorted(targets)} (add regime.target_ccr.{model_choice or model_name}=<CCR> or use regime=here)"
    )


def regime_cluster(r: dict[str, Any], cluster_cfg: Any) -> Cluster:
    """The regime's cluster, with the preset's `cluster.memory_fraction` applied."""
    spec = r.get("cluster")
    if not isinstance(spec, dict) or not spec.get("devices"):
        raise ConfigError(f"regime {r.get('name')!r}: key 'cluster' needs a device list and comm")
    d = dict(spec)
    frac = cluster_cfg.get("memory_fraction") if hasattr(cluster_cfg, "get") else None
    if frac is not None:
        d["memory_fraction"] = float(frac)
    return build_cluster(d, f"regime:{r.get('name')}")


def apply_regime(
    ctx: JobContext, graph: OpGraph, pkey: str, cluster: Cluster, result: dict[str, Any], metrics: dict[str, Any]
) -> tuple[OpGraph, str, Cluster]:
    """The graph (compute times scaled), its cache key and the cluster of the job's regime; unchanged when the
    job runs as measured here. O(V + E + V * D)."""
    r = regime_cfg(ctx.cfg)
    if r is None:
        return graph, pkey, cluster
    paper = regime_cluster(r, ctx.cfg.cluster)
    scale_cfg = r.get("compute_scale", "auto")
    # a fixed factor needs no target (e.g. 1: compute as profiled, a GPU's profile on the paper's links)
    target = target_for(r, ctx.choices.get("model"), ctx.cfg.model.get("name")) if scale_cfg == "auto" else None
    ccr_here = graph_ccr(graph, cluster)
    if target is not None:
        scale = compute_scale_for_ccr(graph, paper, target)
    else:
        try:
            scale = float(scale_cfg)
        except (TypeError, ValueError):
            raise ConfigError(f"regime.compute_scale must be 'auto' or a number, got {scale_cfg!r}") from None

    def compute() -> tuple[OpGraph, dict[str, Any]]:
        return scale_compute(graph, scale), {"compute_scale": scale}

    def save(v: tuple[OpGraph, dict[str, Any]], p: Path) -> None:
        v[0].save(p / "graph.json")
        atomic_write_json(p / "regime.json", v[1])

    def load(p: Path) -> tuple[OpGraph, dict[str, Any]]:
        return OpGraph.load(p / "graph.json"), json.loads((p / "regime.json").read_text())

    res = ctx.stage("regime", {"compute_scale": scale}, [pkey], compute, save, load)
    scaled = res.value[0]
    info = {
        "name": r.get("name"),
        "target_ccr": target,
        "compute_scale": scale,
        "ccr_here": ccr_here,
        "ccr": graph_ccr(scaled, paper),
    }
    result["regime"] = info
    metrics["regime.compute_scale"] = scale
    metrics["regime.ccr_here"] = ccr_here
    log.info(
        "regime %s: CCR here %.4g on %s; compute x %.4g gives CCR %.4g on the paper's machine (target %s)",
        info["name"],
        ccr_here,
        cluster.name,
        scale,
        info["ccr"],
        "none: a fixed factor" if target is None else f"{target:.4g}",
    )
    return scaled, res.key, paper
