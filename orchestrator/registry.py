"""One registry for every stage choice: configs found on Hydra's search path, objects built by one helper.

Every group (model, backend, profiler, optimizer passes, placer, scheduler, pipeline, runtime) is a folder of
YAML files in `conf/` or in the `conf/` of a plugin package (entry-point group `placement_lab.plugins`, see
orchestrator.plugins); Hydra composes the chosen file, and `instantiate` below builds it. Models, profilers
and runtimes may instead *name* something the chosen backend provides (a config without `_target_`): the name
is looked up in `backend.capabilities` (backends.base.Capabilities) and the config's other keys become the
constructor's arguments. Unknown names fail with a ConfigError listing what exists (`orchestrator.catalog`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from algorithms.errors import ConfigError
from backends.base import Backend, GraphModel, Profiler, Runtime

#: The name a backend or runtime config gives to "none chosen".
NONE = "none"


def plain(node: Any) -> Any:
    """A config node as plain Python containers, interpolations resolved (anything else as it is)."""
    if isinstance(node, DictConfig) or OmegaConf.is_config(node):
        return OmegaConf.to_container(node, resolve=True)
    return node


def instantiate(node: Any, group: str, **kwargs: Any) -> Any:
    """Build the object a config node with `_target_` describes (`hydra.utils.instantiate`, containers passed
    as plain dicts and lists); every stage object of the lab is built here. Import and constructor errors
    become a ConfigError naming the group and the target. `kwargs` override the node's keys."""
    from hydra.utils import instantiate as hydra_instantiate

    if node is None or "_target_" not in node:
        shown = OmegaConf.to_yaml(node) if OmegaConf.is_config(node) else node
        raise ConfigError(f"config group {group!r} has no _target_: {shown}")
    try:
        return hydra_instantiate(node, _convert_="all", **kwargs)
    except ConfigError:
        raise
    except Exception as exc:  # hydra wraps import and constructor errors in its own exception types
        cause = exc.__cause__ or exc
        if isinstance(cause, ConfigError):
            raise cause from exc
        raise ConfigError(f"cannot build {group} from {node.get('_target_')!r}: {exc}") from exc


def available(group: str) -> list[str]:
    """Names of the configs of `group` on the search path (the project's conf/ and plugin packages')."""
    from .catalog import catalog

    return sorted({row[0] for row in catalog((group,)).get(group, [])})


def load_choice(group: str, name: str, **root: Any) -> DictConfig:
    """One config of a group read outside a composed Hydra app (scripts, tests): `conf/<group>/<name>.yaml` from
    the search path, with `root` (e.g. seed=0, model={...}) as the top-level keys its interpolations see.
    Unknown names raise a ConfigError listing the group's configs."""
    from .catalog import config_files

    files = config_files(group)
    if name not in files:
        raise ConfigError(f"unknown {group} config {name!r}; available: {sorted(files)}")
    cfg = OmegaConf.create(dict(root))
    cfg[group] = OmegaConf.load(files[name])
    node = cfg[group]
    assert isinstance(node, DictConfig)  # a group file is a mapping
    return node


def is_none(node: Any) -> bool:
    """True for a `name: none` config without `_target_` (no backend, no runtime)."""
    return node is None or ("_target_" not in node and node.get("name", NONE) == NONE)


def build_backend(node: Any) -> Backend | None:
    """The backend of a conf/backend config; None for `backend=none`."""
    if is_none(node):
        return None
    backend = instantiate(node, "backend")
    if not isinstance(backend, Backend):
        raise ConfigError(f"backend {node.get('_target_')!r} is not a backends.base.Backend")
    return backend


def _provided(node: Any, group: str, table: Mapping[str, str], backend: Backend | None, cls: type[Any]) -> Any:
    """Build a config without `_target_` from the class its backend provides under the config's `name`."""
    cfg = dict(plain(node))
    name = cfg.pop("name", None)
    if name is None:
        raise ConfigError(f"{group} config has neither _target_ nor name: {cfg}; configs: {available(group)}")
    if backend is None:
        raise ConfigError(
            f"{group}={name} is provided by a framework backend: choose backend=torch or backend=tensorflow "
            f"(or a {group} config with _target_)"
        )
    if name not in table:
        raise ConfigError(
            f"{group} {name!r} is not provided by backend {backend.name!r} (it provides {sorted(table)}); "
            f"{group} configs: {available(group)}"
        )
    obj = instantiate({"_target_": table[name], **cfg}, f"{group}={name}")
    if not isinstance(obj, cls):
        raise ConfigError(f"{group} {name!r} ({table[name]}) is not a {cls.__module__}.{cls.__name__}")
    obj.name = name
    return obj


def _targeted(node: Any, group: str, cls: type[Any]) -> Any:
    cfg = dict(plain(node))
    name = cfg.pop("name", None)
    obj = instantiate(cfg, group)
    if not isinstance(obj, cls):
        raise ConfigError(f"{group} {cfg['_target_']!r} is not a {cls.__module__}.{cls.__name__}")
    if name is not None:
        obj.name = name
    return obj


def build_profiler(node: Any, backend: Backend | None) -> Profiler:
    """The profiler of a conf/profiler config: its `_target_`, or the backend's profiler of that `name`."""
    if "_target_" in node:
        return _targeted(node, "profiler", Profiler)
    table = backend.capabilities.profilers if backend is not None else {}
    return _provided(node, "profiler", table, backend, Profiler)


def build_runtime(node: Any, backend: Backend | None) -> Runtime | None:
    """The runtime of a conf/runtime config: its `_target_`, or the backend's runtime of that `name`; None for
    `runtime=none` (simulate only)."""
    if is_none(node):
        return None
    if "_target_" in node:
        return _targeted(node, "runtime", Runtime)
    table = backend.capabilities.runtimes if backend is not None else {}
    return _provided(node, "runtime", table, backend, Runtime)


def runs_in_workers(node: Any, backend: Backend | None) -> bool:
    """Whether the runtime of a conf/runtime config is one the backend declares as one pinned OS process per
    device (`backend.capabilities.worker_runtimes`): by its `name`, or by a `_target_` naming the class of such
    a runtime. False for `runtime=none`, for no backend, and for any runtime the backend does not declare."""
    return backend is not None and _runtime_among(node, backend, backend.capabilities.worker_runtimes)


def posts_receives_up_front(node: Any, backend: Backend | None) -> bool:
    """Whether the runtime of a conf/runtime config holds every receive buffer from the step's start on CPU
    devices (`backend.capabilities.receives_up_front`), matched as in `runs_in_workers`, unless the config posts
    receives within the memory limit (`posts_receives_within_limit`)."""
    return (
        backend is not None
        and _runtime_among(node, backend, backend.capabilities.receives_up_front)
        and not posts_receives_within_limit(node)
    )


def posts_receives_within_limit(node: Any) -> bool:
    """Whether a conf/runtime config asks the worker runtime to post each receive as early as the device's
    memory limit allows (``post_receives: within_limit``, the runtime's default, `backends.torch.distributed`)."""
    return not is_none(node) and node.get("post_receives", "within_limit") == "within_limit"


def _runtime_among(node: Any, backend: Backend, names: tuple[str, ...]) -> bool:
    if is_none(node):
        return False
    caps = backend.capabilities
    if "_target_" in node:
        return node["_target_"] in {caps.runtimes[n] for n in names if n in caps.runtimes}
    return node.get("name") in names


def build_graph_model(node: Any) -> GraphModel:
    """A model config with `_target_`: a GraphModel (the graph without a framework)."""
    model = instantiate(node, "model")
    if not isinstance(model, GraphModel):
        raise ConfigError(f"model {node.get('_target_')!r} is not a backends.base.GraphModel")
    return model


def check_framework_model(model_cfg: Mapping[str, Any], backend: Backend | None, choice: str | None) -> None:
    """A model config without `_target_` is built by the backend's zoo: its `family` must be one the backend
    declares."""
    family = model_cfg.get("family")
    if family is None:
        raise ConfigError(
            f"model={choice or model_cfg.get('name')} has neither _target_ nor family (model=none has no graph: "
            f"it is for pipeline-only runs); models: {available('model')}"
        )
    if backend is None:
        raise ConfigError(f"model={choice} is a framework model: choose backend=torch or backend=tensorflow")
    if family not in backend.capabilities.models:
        raise ConfigError(
            f"model family {family!r} is not in backend {backend.name!r}'s zoo "
            f"(families: {sorted(backend.capabilities.models)})"
        )
