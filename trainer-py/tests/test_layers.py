"""The trainer's layers, as README.md's layout table writes them (highest row first): a module imports
only modules of its own row or of rows below it, no import cycle exists between modules, and no
module imports another module's private (`_name`) symbols. Imports inside functions count too."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TRAINER = Path(__file__).resolve().parent.parent
PACKAGE = TRAINER / "canary_trainer"
ROOT = "canary_trainer"


def _module(path: Path) -> str:
    parts = list(path.relative_to(TRAINER).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _files() -> dict[str, Path]:
    return {_module(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _rows() -> list[list[str]]:
    """Each layout row's entries (`file.py` or `folder/`), highest row first."""
    text = (TRAINER / "README.md").read_text()
    table = text[text.index("Layout (one concept per file)"):]
    rows = []
    for line in table.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            rows.append(re.findall(r"`([^`]+)`", first))
    return rows


def _rank_of() -> dict[str, int]:
    """Module -> layer, 0 the lowest."""
    rows = _rows()
    rank: dict[str, int] = {}
    for i, entries in enumerate(rows):
        for entry in entries:
            rank[entry] = len(rows) - 1 - i
    out = {}
    for module, path in _files().items():
        rel = path.relative_to(PACKAGE).as_posix()
        folder = rel.split("/")[0] + "/" if "/" in rel else None
        key = rel if rel in rank else folder if folder in rank else None
        if key is not None:
            out[module] = rank[key]
    return out


def _imports(module: str, path: Path, modules: set[str]) -> list[tuple[str, list[str]]]:
    """(imported module, names taken from it) for every import of the package inside `path`."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target != ROOT and not target.startswith(ROOT + "."):
                continue
            names = [a.name for a in node.names]
            submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
            found += [(s, []) for s in submodules]
            rest = [n for n in names if f"{target}.{n}" not in modules]
            if rest or not submodules:
                found.append((target, rest))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name == ROOT or a.name.startswith(ROOT + ".")]
    return found


def _graph() -> dict[str, set[str]]:
    files = _files()
    modules = set(files)
    return {m: {t for t, _ in _imports(m, p, modules) if t != m} for m, p in files.items()}


def test_every_module_has_a_row():
    rank = _rank_of()
    assert sorted(set(_files()) - set(rank)) == []


def test_no_import_goes_upward():
    rank, graph = _rank_of(), _graph()
    upward = [f"{m} (row {rank[m]}) imports {t} (row {rank[t]})"
              for m, targets in graph.items() for t in sorted(targets) if rank[t] > rank[m]]
    assert upward == []


def test_no_import_cycle():
    graph = _graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t, stack + [t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_no_private_symbol_crosses_a_module():
    files = _files()
    modules = set(files)
    private = re.compile(r"^_(?!_)")
    found = []
    for m, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        aliases = set()
        for target, names in _imports(m, path, modules):
            found += [f"{m} imports {target}.{n}" for n in names if private.match(n)]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level and node.module is None:
                aliases.update(a.asname or a.name for a in node.names)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases \
                    and private.match(node.attr):
                found.append(f"{m} uses {node.value.id}.{node.attr}")
    assert found == []


def test_the_checks_see_the_imports():
    """The graph is not empty by accident: run.py's imports are found, inside functions too."""
    graph = _graph()
    assert {"canary_trainer.train", "canary_trainer.backends", "canary_trainer.base_model"} <= graph["canary_trainer.run"]
    assert "canary_trainer.run" in graph["canary_trainer.cli"]  # imported inside main()
