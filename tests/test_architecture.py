"""The package's import graph, drawn with `ast`, against the map in docs/architecture.md.

What counts as an edge A -> B (module A imports module B):
- every `import` / `from ... import` statement in A, at module level *or inside a function*: a lazy
  import is still a dependency (the function fails without B, and a circle through lazy imports still
  means neither module can be read, tested or replaced alone -- three of issue 19's four circles were
  lazy). Only the imports under `if TYPE_CHECKING:` are left out: they never run.
- `from labkit.x import y` is an edge to the module `labkit.x.y` when that is a module, else to `labkit.x`.
- relative imports are resolved; imports of anything outside `labkit` are ignored. Implicit parent
  packages (`labkit.a` being initialised before `labkit.a.b`) are not edges of their own.
- names looked up at run time (`importlib.import_module(name)`, the CLI's topic table) are not edges.

The map: every module is listed in the doc's module table with its layer; a module may import modules
of its own layer or of a layer listed before it in the doc's "Layers, lowest first" line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path


ROOT = Path(__file__).parents[1]
PKG = ROOT / "labkit"
DOC = ROOT / "docs" / "architecture.md"


def modules(pkg: Path = PKG) -> dict[str, Path]:
    """dotted name -> file, for every module of the package (a package is its __init__)."""
    out = {}
    for p in sorted(pkg.rglob("*.py")):
        parts = list(p.relative_to(pkg.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST):
    """Every Import/ImportFrom node that can run (those under `if TYPE_CHECKING:` cannot)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def import_graph(pkg: Path = PKG) -> dict[str, set[str]]:
    """module -> the labkit modules it imports."""
    mods = modules(pkg)

    def resolve(name: str) -> str | None:
        parts = name.split(".")
        while parts:
            if ".".join(parts) in mods:
                return ".".join(parts)
            parts.pop()
        return None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        package = m if path.name == "__init__.py" else m.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [resolve(a.name) for a in node.names if a.name.split(".")[0] == "labkit"]
            else:
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                if mod.split(".")[0] != "labkit":
                    continue
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else resolve(mod) for a in node.names]
            graph[m] |= {t for t in targets if t and t != m}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def cycle_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The edges inside a cycle: the ones to cut."""
    comp = {m: i for i, c in enumerate(cycles(graph)) for m in c}
    return {(a, b) for a, bs in graph.items() for b in bs if a in comp and comp.get(b) == comp[a]}


def documented() -> tuple[dict[str, str], list[str]]:
    """(module -> layer) from the doc's module table, and the layers, lowest first."""
    text = DOC.read_text(encoding="utf-8")
    table = dict(re.findall(r"^\|\s*`(labkit[\w.]*)`\s*\|\s*(\w+)\s*\|", text, re.M))
    m = re.search(r"^Layers, lowest first: (.+)$", text, re.M)
    assert m, "docs/architecture.md: the line 'Layers, lowest first: a < b < ...' is missing"
    return table, [x.strip().strip("`*") for x in m.group(1).split("<")]


def against_the_direction(graph, table, layers) -> set[tuple[str, str]]:
    rank = {name: i for i, name in enumerate(layers)}
    return {
        (a, b) for a, bs in graph.items() for b in bs if a in table and b in table and rank[table[b]] > rank[table[a]]
    }


def test_graph_reads_lazy_imports_and_skips_type_checking(tmp_path):
    pkg = tmp_path / "labkit"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from labkit.sub.b import f\n")
    (pkg / "sub" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from labkit.sub.b import T\nelse:\n    import json\n"
        "def g():\n    from . import b\n    from labkit import jsonl\n    import os\n"
    )
    (pkg / "sub" / "b.py").write_text("import labkit.sub.a\nfrom labkit.sub import a as _a, f\n")
    (pkg / "jsonl.py").write_text("from .sub.b import f\n")
    g = import_graph(pkg)
    assert g == {
        "labkit": set(),
        "labkit.jsonl": {"labkit.sub.b"},
        "labkit.sub": {"labkit.sub.b"},
        "labkit.sub.a": {"labkit.sub.b", "labkit.jsonl"},
        "labkit.sub.b": {"labkit.sub.a", "labkit.sub"},
    }
    assert cycles(g) == [["labkit.jsonl", "labkit.sub", "labkit.sub.a", "labkit.sub.b"]]
    assert ("labkit.sub.a", "labkit.jsonl") in cycle_edges(g)


def test_the_package_has_no_import_cycle():
    found = cycles(import_graph())
    assert not found, f"import cycles (lazy imports count): {found}"


def test_every_module_is_on_the_map_with_a_known_layer():
    table, layers = documented()
    mods = set(modules())
    assert not mods - set(table), f"docs/architecture.md does not name: {sorted(mods - set(table))}"
    assert not set(table) - mods, f"docs/architecture.md names modules that do not exist: {sorted(set(table) - mods)}"
    unknown = {m: layer for m, layer in table.items() if layer not in layers}
    assert not unknown, f"layers not in the 'Layers, lowest first' line: {unknown}"


def test_imports_follow_the_stated_direction():
    table, layers = documented()
    bad = against_the_direction(import_graph(), table, layers)
    assert not bad, "imports against docs/architecture.md's layers: " + ", ".join(
        f"{a} ({table[a]}) -> {b} ({table[b]})" for a, b in sorted(bad)
    )


# ---- old import paths (issue #28): they work for one release, and nothing here uses them -------------------------


def _deprecated_names() -> dict[str, dict[str, str]]:
    """package -> {old name it still answers: the module holding it now}, for the packages that kept an old
    module's name."""
    import labkit.cli
    import labkit.course

    return {"labkit.course": labkit.course._TABLE, "labkit.cli": dict.fromkeys(labkit.cli._OLD, "labkit.cli.commands")}


def deprecated_imports(source: str, filename: str) -> list[str]:
    """The imports in `source` of an old path: a moved module, or an old name of `labkit.course` / `labkit.cli`."""
    from labkit.deprecation import MOVED

    names = _deprecated_names()
    old = lambda mod: mod in MOVED or any(mod.startswith(o + ".") for o in MOVED)  # noqa: E731
    bad = []
    for node in _imports(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            bad += [f"import {a.name}" for a in node.names if old(a.name)]
        elif node.level == 0 and node.module:
            if old(node.module):
                bad.append(f"from {node.module} import ...")
            for a in node.names:
                if node.module == "labkit" and old(f"labkit.{a.name}"):
                    bad.append(f"from labkit import {a.name}")
                if a.name in names.get(node.module, {}):
                    bad.append(f"from {node.module} import {a.name}")
    return [f"{filename}:{node_text}" for node_text in bad]


def _code_cells(nb_path: Path) -> str:
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    # IPython's magics and shell escapes are not Python: left out of the parse
    return "\n".join(
        "\n".join(ln for ln in c.source.splitlines() if not ln.lstrip().startswith(("%", "!")))
        for c in nb.cells
        if c.cell_type == "code"
    )


def test_deprecated_import_finder_finds_each_spelling():
    src = (
        "import labkit.grading\nfrom labkit.sweep import sweep\nfrom labkit import workshop, paths\n"
        "from labkit.course import discover, runner\nfrom labkit.cli import main, build_parser\n"
        "def f():\n    from labkit.course_times import ct\n"
        "from labkit.cli.errors import UsageError\nfrom labkit.course.discovery import discover\n"
    )
    assert sorted(deprecated_imports(src, "x.py")) == sorted(
        [
            "x.py:import labkit.grading",
            "x.py:from labkit.sweep import ...",
            "x.py:from labkit import workshop",
            "x.py:from labkit.course import discover",
            "x.py:from labkit.cli import build_parser",
            "x.py:from labkit.course_times import ...",
        ]
    )


def test_nothing_in_the_repository_imports_an_old_path():
    from labkit.deprecation import MOVED

    shims = {PKG.parent / (old.replace(".", "/") + ".py") for old in MOVED}
    found = []
    for folder in ("labkit", "tests", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path not in shims and path.name != "test_architecture.py":
                found += deprecated_imports(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    for path in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        if ".ipynb_checkpoints" not in path.parts:
            found += deprecated_imports(_code_cells(path), str(path.relative_to(ROOT)))
    assert not found, "old import paths (use the new ones, labkit/deprecation.py): " + ", ".join(found)


def test_each_old_path_warns_and_gives_the_new_names():
    import importlib
    import sys

    import pytest

    from labkit.deprecation import MOVED

    for old, new in MOVED.items():
        sys.modules.pop(old, None)  # imported once already (by another test): its warning came then
        with pytest.warns(DeprecationWarning, match=rf"{re.escape(old)} is deprecated.*import {re.escape(new)}"):
            shim = importlib.import_module(old)
        target = importlib.import_module(new)
        public = [n for n in dir(target) if not n.startswith("_") and not isinstance(getattr(target, n), type(sys))]
        assert all(getattr(shim, n) is getattr(target, n) for n in public), old
    for package, table in _deprecated_names().items():
        pkg = importlib.import_module(package)
        for name, module in table.items():
            with pytest.warns(DeprecationWarning, match=rf"use {re.escape(module)}\.{re.escape(name)}$"):
                value = getattr(pkg, name)
            assert value is getattr(importlib.import_module(module), name)
    with pytest.raises(AttributeError):
        importlib.import_module("labkit.course").no_such_name  # noqa: B018


def test_the_folder_map_names_every_package_and_nothing_else():
    """The doc's "Where things are" picture: every package folder of labkit/ in it, every name in it real (a file
    on a folder's line is in that folder; `NN` stands for a notebook's number)."""
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"^## Where things are\n+```\n(.*?)\n```", text, re.M | re.S)
    assert m, "docs/architecture.md: the '## Where things are' folder map is missing"
    folders, missing = set(), []
    for line in m.group(1).splitlines():
        folder = re.match(r"^  (\w+)/", line)
        base = PKG / folder.group(1) if folder else PKG
        if folder:
            folders.add(folder.group(1))
        for name in re.findall(r"\b(\w+)\.py\b", line):
            if not list(base.glob(name.replace("NN", "[0-9][0-9]") + ".py")):
                missing.append(str((base / name).relative_to(PKG.parent)) + ".py")
    packages = {p.parent.name for p in PKG.glob("*/__init__.py")}
    assert folders == packages, (
        f"folder map vs labkit/: missing {sorted(packages - folders)}, extra {sorted(folders - packages)}"
    )
    assert not missing, f"the folder map names files labkit/ does not have: {missing}"
