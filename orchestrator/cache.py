"""A small content-addressed store for stage outputs.

An entry's key is the SHA-256 of the canonical JSON of (stage name, the stage's resolved config, the keys of the
entries it was computed from, the code version). The code version hashes the sources of every plugin the
stage's config names (`_target_`), and of every module they import from the project or from their own package,
so editing a plugin outside the project (an installed package) also invalidates its entries.

An entry is a folder of files written by the stage plus a `.complete` manifest holding the SHA-256 of every
file. Writes go to a temporary folder that is renamed into place only when the stage has succeeded, so a failed
or killed stage never leaves a half-written entry; a `filelock` per key keeps two processes from computing the
same entry at once (the second waits, then reads what the first wrote). Every hit is checked against its
manifest: an entry whose files were edited, truncated or lost, or that fails to load, is reported (a warning),
recomputed and replaced atomically, so the cache never hands out a result its stage did not write.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
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

from algorithms.errors import CacheError
from algorithms.graph import atomic_write_json

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
#: Files hashed into every key (without following their imports): the stage runner itself, the job context,
#: the registry and every stage module.
_ALWAYS = (
    ROOT / "orchestrator" / "app.py",
    ROOT / "orchestrator" / "cache.py",
    ROOT / "orchestrator" / "context.py",
    ROOT / "orchestrator" / "registry.py",
    *sorted((ROOT / "orchestrator" / "stages").glob("*.py")),
)
_VERSIONS: dict[tuple[str, ...], str] = {}
PROJECT_PACKAGES = ("algorithms", "backends", "orchestrator")
#: Most files of one package outside the project that enter a code version (a plugin naming a class of a
#: large library, e.g. torch, hashes that class' module only beyond this).
MAX_FOREIGN_FILES = 300
MANIFEST = ".complete"


def _module_file(name: str) -> Path | None:
    """The source file of module `name`: under the project root, else (a plugin package installed or on the
    path) where the import system finds it; None for a class path, a C extension or an unknown module."""
    parts = name.split(".")
    base = ROOT.joinpath(*parts)
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    if parts[0] in PROJECT_PACKAGES:
        return None
    try:
        spec = importlib.util.find_spec(name)
    except Exception:  # a class path ("pkg.mod.Class"), or a parent that fails to import
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


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
    own = name.split(".")[0]  # a plugin package's modules import each other
    return {m for m in out if m.split(".")[0] in PROJECT_PACKAGES or m.split(".")[0] == own}


def module_closure(modules: tuple[str, ...]) -> list[Path]:
    """The files of `modules` and of every project module they import, transitively (parent packages'
    __init__ files included). O(size of the sources read)."""
    seen: dict[str, Path] = {}
    foreign: dict[str, int] = {}
    todo = list(modules)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        f = _module_file(m)
        if f is None:
            continue
        seen[m] = f
        top = m.split(".")[0]
        if top not in PROJECT_PACKAGES and top != "tests":
            foreign[top] = foreign.get(top, 0) + 1
            if foreign[top] > MAX_FOREIGN_FILES:
                continue
        try:
            todo.extend(_imports(m, f))
        except (OSError, SyntaxError, UnicodeDecodeError):  # hashed as bytes all the same
            pass
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
            h.update(str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p).encode())
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


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def entry_files(folder: Path) -> dict[str, str]:
    """SHA-256 of every file of an entry folder (relative path -> hex digest), the manifest excluded."""
    return {
        p.relative_to(folder).as_posix(): _file_digest(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }


def verify_entry(folder: Path, key: str) -> str | None:
    """Why the entry in `folder` cannot be trusted (None when its manifest matches its files exactly)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        return f"unreadable manifest: {exc}"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return "manifest without checksums"
    if manifest.get("key") != key:
        return f"manifest of another key ({manifest.get('key')!r})"
    try:
        actual = entry_files(folder)
    except OSError as exc:
        return f"unreadable file: {exc}"
    expected = manifest["files"]
    for name in sorted(set(expected) | set(actual)):
        if name not in actual:
            return f"{name} is missing"
        if name not in expected:
            return f"{name} was added"
        if actual[name] != expected[name]:
            return f"{name} does not match its checksum"
    return None


class StageCache:
    """Folder-per-entry cache under `root`; `enabled=False` computes everything and stores nothing."""

    def __init__(self, root: str | os.PathLike, enabled: bool = True):
        self.root = Path(root)
        self.enabled = enabled
        if enabled:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise CacheError(
                    f"cache.dir={str(self.root)!r} cannot be created ({exc.strerror or exc}); choose another "
                    f"folder with cache.dir=... (or LAB_CACHE_DIR), or run without a cache: cache.enabled=false"
                ) from None
            if not os.access(self.root, os.W_OK | os.X_OK):
                raise CacheError(
                    f"cache.dir={str(self.root)!r} is not writable; choose another folder with cache.dir=... "
                    f"(or LAB_CACHE_DIR), or run without a cache: cache.enabled=false"
                )

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
        """Return the stage's output: from the cache when a verified entry exists, else by `compute` (then saved
        atomically with its checksums). An entry that fails verification or loading is recomputed."""
        if not self.enabled:
            # no entry is looked up or written: the key only chains the stages, so the hash of the stage's
            # sources (`code_version`: an AST walk of the project's modules, about 1 s of every run whatever
            # its size, issue 22) is left out of it
            key = stage_key(stage, config, upstream, version="cache disabled")
            t0 = time.perf_counter()
            value = compute()
            return StageOutcome(value, key, False, time.perf_counter() - t0)
        key = stage_key(stage, config, upstream)
        final = self.path(key)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(final) + ".lock")
            lock.acquire()
        except OSError as exc:
            raise CacheError(f"cache.dir={str(self.root)!r}: cannot lock {final.name[:12]}: {exc}") from None
        try:
            if final.exists():
                t0 = time.perf_counter()
                problem = verify_entry(final, key)
                if problem is None:
                    try:
                        value = load(final)
                    except Exception as exc:
                        problem = f"cannot be loaded: {type(exc).__name__}: {exc}"
                    else:
                        log.info(
                            "stage %-9s cache hit  %s (%.2fs to check and load)",
                            stage,
                            key[:12],
                            time.perf_counter() - t0,
                        )
                        return StageOutcome(value, key, True, 0.0)
                log.warning("stage %s: cache entry %s is corrupt (%s); recomputing it", stage, final, problem)
            t0 = time.perf_counter()
            value = compute()
            seconds = time.perf_counter() - t0
            self._store(stage, key, final, value, save, seconds)
            log.info("stage %-9s computed   %s in %.2fs", stage, key[:12], seconds)
            return StageOutcome(value, key, False, seconds)
        finally:
            lock.release()

    def _store(self, stage: str, key: str, final: Path, value: Any, save: Callable, seconds: float) -> None:
        """Write the entry into a temporary folder with its manifest, then rename it into place (a corrupt
        entry there is first renamed aside, then removed)."""
        for stale in (*final.parent.glob(f".tmp-{key[:12]}-*"), *final.parent.glob(f".old-{key[:12]}-*")):
            shutil.rmtree(stale, ignore_errors=True)  # left by a writer that was killed (we hold the key's lock)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:12]}-", dir=final.parent))
        try:
            save(value, tmp)
            manifest = {
                "key": key,
                "stage": stage,
                "seconds": seconds,
                "created": time.time(),
                "files": entry_files(tmp),
            }
            atomic_write_json(tmp / MANIFEST, manifest)
            trash = None
            if final.exists():  # a corrupt entry, or a leftover from before manifests
                trash = Path(tempfile.mkdtemp(prefix=f".old-{key[:12]}-", dir=final.parent))
                os.replace(final, trash / "entry")
            os.replace(tmp, final)
            if trash is not None:
                shutil.rmtree(trash, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
