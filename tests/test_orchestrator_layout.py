"""The layout issue 15 asks for: no import circle in orchestrator/, the layering orchestrator -> backends ->
algorithms, and no module over about 500 lines in orchestrator/."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("algorithms", "backends", "orchestrator")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path, package: str) -> nx.DiGraph:
    """Module -> project modules it imports (any `import` or `from ... import` in the file, function-level
    ones included: a lazy import still closes a circle), read with `ast`; `from pkg import name` counts as an
    import of `pkg.name` when that is a module, else of `pkg`."""
    files = {_module_name(p, root): p for p in (root / package).rglob("*.py")}
    g = nx.DiGraph()
    g.add_nodes_from(files)
    for name, path in files.items():
        is_pkg = path.name == "__init__.py"
        base = name.split(".") if is_pkg else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    mod = ".".join(base[: len(base) - node.level + 1] + ([mod] if mod else []))
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in files else mod for a in node.names]
            for t in targets:
                while t and t not in files:
                    t = t.rpartition(".")[0]
                if t and t != name and not name.startswith(t + "."):  # a package's own parents are not edges
                    g.add_edge(name, t)
    return g


def test_the_cycle_finder_sees_a_circle(tmp_path):
    pkg = tmp_path / "orchestrator"
    (pkg / "stages").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "app.py").write_text("from .stages.run import x\n")
    (pkg / "stages" / "__init__.py").write_text("")
    (pkg / "stages" / "run.py").write_text("def f():\n    from ..app import y\n")
    cycles = list(nx.simple_cycles(import_graph(tmp_path, "orchestrator")))
    assert cycles and set(cycles[0]) == {"orchestrator.app", "orchestrator.stages.run"}


def test_orchestrator_imports_have_no_circle():
    g = import_graph(ROOT, "orchestrator")
    assert {"orchestrator.app", "orchestrator.context", "orchestrator.stages.place"} <= set(g)
    assert g.has_edge("orchestrator.app", "orchestrator.stages.place")
    cycles = list(nx.simple_cycles(g))
    assert cycles == [], f"import circles: {cycles}"


@pytest.mark.parametrize(
    "package,forbidden", [("algorithms", ("backends", "orchestrator")), ("backends", ("orchestrator",))]
)
def test_layering(package, forbidden):
    offenders = []
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            mods = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            offenders += [(str(path.relative_to(ROOT)), m) for m in mods if m.split(".")[0] in forbidden]
    assert offenders == []


def test_orchestrator_modules_stay_small():
    own = sorted((ROOT / "orchestrator").rglob("*.py"))
    assert {"app.py", "tracking.py", "place.py"} <= {p.name for p in own}
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in own}
    assert max(sizes.values()) <= 500, {k: v for k, v in sizes.items() if v > 500}
