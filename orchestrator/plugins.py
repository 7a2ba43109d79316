"""Third-party algorithm plugins.

A separate package exposes its plugins through the entry-point group ``placement_lab.plugins``; each entry
point names a module (or package) with a `conf/` folder of Hydra groups (placer/, scheduler/, optimizer/,
profiler/, model/, ...) whose YAML files point at the package's classes with `_target_`. At start-up the
orchestrator adds each such folder to Hydra's search path, so `placer=<their name>` just works.
"""

from __future__ import annotations

import importlib
import logging
from importlib.metadata import entry_points
from pathlib import Path

log = logging.getLogger(__name__)

GROUP = "placement_lab.plugins"


def plugin_conf_dirs() -> list[tuple[str, Path]]:
    out = []
    for ep in entry_points(group=GROUP):
        try:
            mod = importlib.import_module(ep.value.split(":")[0])
        except Exception as exc:  # a broken plugin must not stop the lab
            log.warning("plugin %s (%s) failed to import: %s", ep.name, ep.value, exc)
            continue
        if mod.__file__ is None:  # a namespace package has no folder of its own
            continue
        folder = Path(mod.__file__).resolve().parent / "conf"
        if folder.is_dir():
            out.append((ep.name, folder))
    return out


def register_search_path() -> None:
    """Add every plugin's conf/ folder to Hydra's search path (through a SearchPathPlugin-free hook)."""
    dirs = plugin_conf_dirs()
    if not dirs:
        return
    from hydra.core.config_search_path import ConfigSearchPath
    from hydra.core.plugins import Plugins
    from hydra.plugins.search_path_plugin import SearchPathPlugin

    class _LabPluginSearchPath(SearchPathPlugin):
        def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
            for name, folder in dirs:
                search_path.append(provider=f"lab-plugin-{name}", path=f"file://{folder}")

    Plugins.instance().register(_LabPluginSearchPath)
