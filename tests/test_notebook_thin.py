"""Notebooks stay thin: no code cell reaches into a private name (`obj._name`) of a labkit object.

A notebook that needs `Trainer._order` is doing the library's work; the library gets a public function
(with tests) instead. "Of a labkit object" is followed through the cells in order: a name is labkit's when
it is imported from `labkit`, or bound (assignment, loop, `with ... as`, `def`) from code that mentions a
labkit name -- so `big = trainer(16, 1)` is labkit's when `def trainer` builds a labkit `Trainer`.
Private names of other libraries are not this test's business.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def _root(node: ast.AST) -> str | None:
    """`a` for `a.b.c`, `a(...).b`, `a[0].b`."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _targets(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def private_uses(cells: list[str]) -> list[str]:
    """`cell N line L: <expr>` for every private name of a labkit object the cells use, in order."""
    labkit: set[str] = set()
    found = []
    for k, src in enumerate(cells):
        code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in src.splitlines())
        tree = ast.parse(code)
        for node in ast.walk(tree):  # bindings first, so a use later in the same cell is seen (cells are short)
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "labkit":
                for a in node.names:
                    labkit.add(a.asname or a.name)
                    if _private(a.name):
                        found.append(f"cell {k} line {node.lineno}: from {node.module} import {a.name}")
            elif isinstance(node, ast.Import):
                labkit.update(
                    (a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "labkit"
                )
        changed = True
        while changed:  # bindings from labkit code, to a fixed point (a def may come before what it calls)
            before = len(labkit)
            for node in ast.walk(tree):
                if (
                    isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                    and node.value is not None
                    and _mentions(node.value, labkit)
                ):
                    for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                        labkit |= _targets(t)
                elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and _mentions(node.iter, labkit):
                    labkit |= _targets(node.target)
                elif (
                    isinstance(node, ast.withitem)
                    and node.optional_vars is not None
                    and _mentions(node.context_expr, labkit)
                ):
                    labkit |= _targets(node.optional_vars)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and any(
                    _mentions(b, labkit) for b in node.body
                ):
                    labkit.add(node.name)
            changed = len(labkit) != before
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr) and _root(node.value) in labkit:
                found.append(f"cell {k} line {node.lineno}: {ast.unparse(node)}")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and _private(node.args[1].value)
                and _root(node.args[0]) in labkit
            ):
                found.append(f"cell {k} line {node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_notebook_uses_a_private_name_of_labkit(path):
    nb = nbformat.read(path, as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code"]
    found = private_uses(cells)
    assert not found, (
        f"{path.name} reaches into private names of labkit objects -- give labkit a public "
        f"function (with a test) and call that: " + "; ".join(found)
    )


def test_the_scan_follows_labkit_objects_through_the_cells():
    # notebook 03 before issue 19: a notebook function builds a Trainer, the cells call its private methods
    old_03 = [
        "from labkit.training.trainer import TrainConfig, Trainer\n"
        "def trainer(bs, acc):\n    return Trainer(None, [], None, TrainConfig(batch_size=bs, grad_accum=acc))\n",
        "big, acc = trainer(16, 1), trainer(4, 4)\nidx = big._order(0)[:16]\n"
        "for t in (acc,):\n    t.backward([t._collate(idx[i:i + 4]) for i in range(0, 16, 4)])\n",
    ]
    assert private_uses(old_03) == ["cell 1 line 2: big._order", "cell 1 line 4: t._collate"]
    assert private_uses(["from labkit.text.tasks import _squeeze\n"]) == [
        "cell 0 line 1: from labkit.text.tasks import _squeeze"
    ]
    assert private_uses(["import labkit.training.trainer as tr\nx = getattr(tr.Trainer, '_collate')\n"]) == [
        "cell 0 line 2: getattr(tr.Trainer, '_collate')"
    ]
    # other libraries' private names, dunders and strings naming a private function are not flagged
    assert (
        private_uses(
            [
                "import pandas as pd\ndf = pd.DataFrame()\nhtml = df._repr_html_()\n",
                "from labkit.viz.source import source\ns = source('labkit.training.trainer:Trainer._order')\n"
                "n = s.__class__.__name__\n",
            ]
        )
        == []
    )
