"""A small content-addressed store for stage outputs.

An entry's key is the SHA-256 of the canonical JSON of (stage name, the stage's resolved config, the keys of the
entries it was computed from, the code version). An entry is a folder of files written by the stage. Writes go
to a temporary folder that is renamed into place only when the stage has succeeded, so a failed or interrupted
stage never leaves a half-written entry; a `filelock` per key keeps two processes from computing the same entry
at once (the second waits, then reads what the first wrote).
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock

log = logging.getLogger(__name__)
T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent
#: Sources every stage of a kind depends on, besides the modules its plugins import (see `code_version`).
STAGE_SOURCES: dict[str, tuple[str, ...]] = {
    "graph": ("algorithms.graph", "algorithms.workloads.synthetic"),
    "profile": ("algorithms.graph",),
    "comm": ("algorithms.cluster",),
    "simulate": ("algorithms.simulator",),
}
#: Files hashed into every key (without following their imports): the stage runner itself.
_ALWAYS = (ROOT / "orchestrator" / "app.py", ROOT / "orchestrator" / "cache.py")
_VERSIONS: dict[tuple[str, ...], str] = {}


def _module_file(name: str) -> Path | None:
    parts = name.split(".")
    base = ROOT.joinpath(*parts)
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _imports(name: str, path: Path) -> set[str]:
    """Project modules imported by one module (absolute and relative `import` / `from` statements)."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return {m for m in out if m.split(".")[0] in ("algorithms", "backends", "orchestrator")}


def module_closure(modules: tuple[str, ...]) -> list[Path]:
    """The files of `modules` and of every project module they import, transitively (parent packages'
    __init__ files included). O(size of the sources read)."""
    seen: dict[str, Path] = {}
    todo = list(modules)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        f = _module_file(m)
        if f is None:
            continue
        seen[m] = f
        todo.extend(_imports(m, f))
        parent = m.rpartition(".")[0]
        if parent:
            todo.append(parent)
    return sorted(set(seen.values()))


def code_version(stage: str | None = None, targets: tuple[str, ...] = ()) -> str:
    """Hash of the sources a stage's output depends on: its plugins' modules (`targets`, dotted class or module
    paths) and everything they import from the project, plus the stage runner. Editing one placer re-runs
    only the placements that use it; cached profiles survive. Computed once per process and key."""
    mods = tuple(
        sorted(
            set(
                STAGE_SOURCES.get(stage or "", ())
                + tuple(t if _module_file(t) else t.rpartition(".")[0] for t in targets)
            )
        )
    )
    if mods not in _VERSIONS:
        h = hashlib.sha256()
        for p in sorted(set(module_closure(mods)) | set(_ALWAYS)):
            h.update(str(p.relative_to(ROOT)).encode())
            h.update(p.read_bytes())
        _VERSIONS[mods] = h.hexdigest()[:16]
    return _VERSIONS[mods]


def find_targets(config: Any) -> tuple[str, ...]:
    """Every `_target_` (and backend/profiler module) named anywhere in a stage's config."""
    found: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "_target_" and isinstance(v, str):
                    found.append(v)
                else:
                    walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(config)
    return tuple(found)


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def stage_key(stage: str, config: Any, upstream: list[str] | tuple[str, ...] = (), version: str | None = None) -> str:
    payload = {
        "stage": stage,
        "config": config,
        "upstream": list(upstream),
        "code": version if version is not None else code_version(stage, find_targets(config)),
    }
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


@dataclass
class StageOutcome:
    value: Any
    key: str
    hit: bool
    seconds: float


class StageCache:
    """Folder-per-entry cache under `root`; `enabled=False` computes everything and stores nothing."""

    def __init__(self, root: str | os.PathLike, enabled: bool = True):
        self.root = Path(root)
        self.enabled = enabled
        if enabled:
            self.root.mkdir(parents=True, exist_ok=True)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / key

    def run(
        self,
        stage: str,
        config: Any,
        upstream: list[str],
        compute: Callable[[], T],
        save: Callable[[T, Path], None],
        load: Callable[[Path], T],
    ) -> StageOutcome:
        """Return the stage's output, from the cache when an entry exists, else by `compute` (then saved)."""
        key = stage_key(stage, config, upstream)
        if not self.enabled:
            t0 = time.perf_counter()
            value = compute()
            return StageOutcome(value, key, False, time.perf_counter() - t0)
        final = self.path(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(final) + ".lock"):
            if (final / ".complete").exists():
                t0 = time.perf_counter()
                value = load(final)
                log.info("stage %-9s cache hit  %s (%.2fs to load)", stage, key[:12], time.perf_counter() - t0)
                return StageOutcome(value, key, True, 0.0)
            t0 = time.perf_counter()
            value = compute()
            seconds = time.perf_counter() - t0
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:12]}-", dir=final.parent))
            try:
                save(value, tmp)
                (tmp / ".complete").write_text(json.dumps({"stage": stage, "seconds": seconds, "created": time.time()}))
                if final.exists():  # an incomplete leftover from a crash before the marker was written
                    shutil.rmtree(final)
                os.replace(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            log.info("stage %-9s computed   %s in %.2fs", stage, key[:12], seconds)
            return StageOutcome(value, key, False, seconds)
