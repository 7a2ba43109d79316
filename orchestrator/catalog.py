"""List every registered algorithm and component with its one-line description.

    python -m orchestrator.catalog [GROUP ...]

Reads the project's conf/ groups and those of installed plugin packages (entry-point group
`placement_lab.plugins`). For a config with a `_target_`, the description is the first line of the class
docstring; otherwise the YAML's first comment line. For each backend it also prints what the backend provides
(`capabilities`: model families, profilers and runtimes by name), which configs without `_target_` refer to.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

import yaml

from .plugins import plugin_conf_dirs

CONF = Path(__file__).resolve().parent.parent / "conf"
GROUPS = (
    "model",
    "backend",
    "cluster",
    "profiler",
    "optimizer",
    "placer",
    "scheduler",
    "pipeline",
    "runtime",
    "experiment",
)


def _describe(path: Path) -> tuple[str, str]:
    text = path.read_text()
    comment = next(
        (ln.lstrip("# ").strip() for ln in text.splitlines() if ln.startswith("#") and not ln.startswith("# @package")),
        "",
    )
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        data = {}
    target = data.get("_target_") if isinstance(data, dict) else None
    if target:
        mod, _, cls = target.rpartition(".")
        try:
            obj = getattr(importlib.import_module(mod), cls)
            doc = (obj.__doc__ or "").strip().splitlines()
            return target, doc[0] if doc else comment
        except Exception as exc:  # still list it, with why it cannot be loaded
            return target, f"(cannot import: {exc})"
    return "", comment


def roots() -> list[tuple[str, Path]]:
    """(source, conf folder): the project's first, then each plugin package's (Hydra's search path order)."""
    return [("project", CONF)] + [(f"plugin:{n}", d) for n, d in plugin_conf_dirs()]


def config_files(group: str) -> dict[str, Path]:
    """{name: YAML file} of a group; a name the project defines is not replaced by a plugin's."""
    out: dict[str, Path] = {}
    for _source, root in roots():
        for p in sorted((root / group).glob("*.yaml")):
            out.setdefault(p.stem, p)
    return out


def catalog(groups: tuple[str, ...] = GROUPS) -> dict[str, list[tuple[str, str, str, str]]]:
    """{group: [(name, source, target, description)]} for every config file found."""
    out: dict[str, list[tuple[str, str, str, str]]] = {}
    for group in groups:
        rows = []
        for source, root in roots():
            for p in sorted((root / group).glob("*.yaml")):
                target, desc = _describe(p)
                rows.append((p.stem, source, target, desc))
        if rows:
            out[group] = rows
    return out


def _load(target: str) -> Any:
    mod, _, name = target.rpartition(".")
    return getattr(importlib.import_module(mod), name)


def backend_capabilities() -> dict[str, dict[str, list[str]] | str]:
    """{backend config name: {"models": [...], "profilers": [...], "runtimes": [...]}}, or why it cannot be
    loaded (e.g. its framework is not installed)."""
    out: dict[str, dict[str, list[str]] | str] = {}
    for name, _source, target, _desc in catalog(("backend",)).get("backend", []):
        if not target:
            continue
        try:
            caps = _load(target).capabilities
        except Exception as exc:
            out[name] = f"(cannot import: {exc})"
            continue
        out[name] = {
            "models": sorted(caps.models),
            "profilers": sorted(caps.profilers),
            "runtimes": sorted(caps.runtimes),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m orchestrator.catalog", description=__doc__.splitlines()[0])
    ap.add_argument("groups", nargs="*", default=list(GROUPS), help=f"groups to list (default: {' '.join(GROUPS)})")
    args = ap.parse_args(argv)
    for group, rows in catalog(tuple(args.groups)).items():
        print(f"{group}:")
        width = max(len(r[0]) for r in rows)
        for name, source, _target, desc in rows:
            tag = "" if source == "project" else f" [{source}]"
            print(f"  {name:<{width}}  {desc}{tag}")
        print()
    if "backend" in args.groups:
        print("provided by backends (configs without _target_ name these):")
        for name, caps in backend_capabilities().items():
            if isinstance(caps, str):
                print(f"  {name}: {caps}")
                continue
            for kind, names in caps.items():
                print(f"  {name}.{kind}: {' '.join(names)}")
        print()


if __name__ == "__main__":
    main()
