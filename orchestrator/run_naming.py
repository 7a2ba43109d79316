"""Short params and run names of a job's MLflow run (see orchestrator.tracking for what a run holds).

params: every config-group choice (`placer=m_etf`, `model=gnmt`, ...), `seed`, `memory_fraction`,
`need_fraction`, and every other key the command line or the sweep overrode, taken from Hydra's choices and task
overrides (`short_params`); name: `m_etf · gnmt · cpu4` then `tail=value` for each overridden setting
(`run_name`). Also `flatten`, a nested config as dotted keys.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

MAX_PARAM_LEN = 500

#: Config-group choices logged as params, in this order (others Hydra reports follow, sorted).
CHOICE_PARAMS = (
    "placer",
    "model",
    "cluster",
    "backend",
    "scheduler",
    "optimizer",
    "profiler",
    "runtime",
    "pipeline",
    "experiment",
)
#: Choices not logged as params (the tracking choice is where the run is logged, not what it computed).
_CHOICES_SKIP = frozenset({"tracking"})
#: Short params read from the resolved config: name -> dotted key.
CONFIG_PARAMS = {
    "seed": "seed",
    "memory_fraction": "cluster.memory_fraction",
    "need_fraction": "cluster.need_fraction",
}
#: Overridden keys that are not logged as params: where things are written, not what is computed.
_OVERRIDE_SKIP = ("hydra.", "tracking.", "cache.")


def flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d, Mapping):
        for k, v in d.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif isinstance(d, (list, tuple)) and d and any(isinstance(x, (Mapping, list, tuple)) for x in d):
        for i, v in enumerate(d):
            out.update(flatten(v, f"{prefix}{i}."))
    else:
        out[prefix[:-1]] = d
    return out


def _select(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, (list, tuple)) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _scalar(v: Any) -> str:
    if isinstance(v, (Mapping, list, tuple)):
        return json.dumps(v, separators=(",", ":"), default=str)[:MAX_PARAM_LEN]
    return "None" if v is None else str(v)[:MAX_PARAM_LEN]


def task_overrides() -> list[str]:
    """The job's command-line and sweep overrides (Hydra's `overrides.task`); [] outside a Hydra job."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    except Exception:  # no Hydra job: no overrides
        return []


def short_params(
    config: Mapping[str, Any], choices: Mapping[str, Any], overrides: Sequence[str] | None = None
) -> dict[str, str]:
    """The params a job's run logs (see the module docstring): choices, seed/memory_fraction/need_fraction,
    then each overridden key (without `+`/`++`/`~`) that is neither a choice nor one of those, with its resolved
    value. `config` is the resolved config (plain containers), `overrides` Hydra's task overrides."""
    out: dict[str, str] = {}
    for k in CHOICE_PARAMS + tuple(sorted(set(choices) - set(CHOICE_PARAMS))):
        v = choices.get(k)
        if v is not None and not k.startswith("hydra/") and k not in _CHOICES_SKIP:
            out[k] = _scalar(v)
    for name, key in CONFIG_PARAMS.items():
        v = _select(config, key)
        if v is not None:
            out[name] = _scalar(v)
    covered = set(CONFIG_PARAMS.values()) | set(out)
    for ov in overrides or ():
        key, sep, raw = ov.lstrip("+~").partition("=")
        key = key.strip()
        if not sep or key in covered or key.startswith(_OVERRIDE_SKIP) or "/" in key:
            continue
        v = _select(config, key)
        out[key] = _scalar(v if v is not None else raw)
        covered.add(key)
    return out


def overridden(overrides: Sequence[str] | None) -> list[str]:
    """The param names (as `short_params` logs them) of the keys that `overrides` set, config-group choices
    excepted: `cluster.need_fraction=0.3` -> `need_fraction`, `+optimizer.passes.4.bound=0.4` -> the key."""
    short = {v: k for k, v in CONFIG_PARAMS.items()}
    out = []
    for ov in overrides or ():
        key, sep, _ = ov.lstrip("+~").partition("=")
        key = key.strip()
        if sep and "/" not in key and not key.startswith(_OVERRIDE_SKIP):
            out.append(short.get(key, key))
    return out


def run_name(
    choices: Mapping[str, Any], params: Mapping[str, str] | None = None, overrides: Sequence[str] | None = None
) -> str:
    """`m_etf · gnmt · cpu4` (placer, or the pipeline of a pipeline-only run; model; cluster), then
    `tail=value` for each setting the overrides set beyond the choices (`need_fraction=0.3`, `bound=0.4`,
    `seed=1`): what tells the runs of a sweep apart at a glance."""
    pipeline = choices.get("pipeline")
    first = choices.get("placer") or (pipeline if pipeline not in (None, "none") else None) or "run"
    parts = [str(first), str(choices.get("model") or "-"), str(choices.get("cluster") or "-")]
    if choices.get("placer") and pipeline not in (None, "none"):
        parts.append(str(pipeline))
    params = params or {}
    for k in overridden(overrides):
        if k in params and k not in choices:
            parts.append(f"{k.rsplit('.', 1)[-1]}={params[k]}")
    return " · ".join(parts)
