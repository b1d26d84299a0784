"""Committed notebooks: no outputs, a papermill parameters cell first, kernelspec, results written last.

"Committed" means what git would commit (the index), not the working copy: running the course in
JupyterLab saves outputs there, and that must not fail `make test`.
"""

import json
import subprocess
from pathlib import Path

import pytest

from labkit.course.params_check import parameters_cell_problem

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))


def committed_notebook(path: Path) -> dict:
    """The notebook as git would commit it: the index (HEAD plus anything staged), after any clean
    filter (nbstripout).  Outputs a learner's JupyterLab saved into the working copy do not count.
    Outside a git checkout, or for a notebook not tracked yet, the working copy is what would be committed."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(path.parent), "show", f":./{path.name}"], capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        proc = None
    if proc is not None and proc.returncode == 0:
        return json.loads(proc.stdout.decode("utf-8"))
    return json.loads(path.read_text(encoding="utf-8"))


def carries_outputs(nb: dict) -> bool:
    return any(
        c.get("outputs") or c.get("execution_count") is not None for c in nb["cells"] if c["cell_type"] == "code"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebook_is_clean_and_follows_the_course_shape(path):
    nb = committed_notebook(path)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert not carries_outputs(nb), (
        f"{path.name} would be committed with outputs: run `make strip` (`pre-commit install` once, and the nbstripout hook stops such a commit)"
    )
    problem = parameters_cell_problem(nb)  # the pre-commit hook's check (labkit.course.params_check)
    assert problem is None, f"{path.name}: {problem}"
    assert "res.finish()" in "".join(code[-1]["source"]), (
        f"{path.name}: last code cell must write results (res.finish())"
    )
    meta = nb["metadata"]
    assert meta["kernelspec"]["name"] == "python3", "JupyterLab asks for a kernel without kernelspec metadata"
    lab = meta["labkit"]
    assert lab["title"] and lab["minutes"] >= 0 and "gpus" in lab["needs"]


def test_outputs_in_a_learners_working_copy_pass_but_staged_outputs_fail(tmp_path):
    """Running a notebook in JupyterLab saves its outputs into the working copy; that must not break
    `make test`.  What git would commit (the index) is what must be clean."""
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True, text=True)  # noqa: E731
    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    git("config", "filter.nbstripout.clean", "cat")  # a filter configured elsewhere must not hide the test's point
    nb = repo / "notebooks" / "01_x.ipynb"
    clean = {
        "cells": [{"cell_type": "code", "source": ["1 + 1"], "metadata": {}, "outputs": [], "execution_count": None}],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    nb.write_text(json.dumps(clean))
    git("add", "notebooks/01_x.ipynb")
    git("commit", "-q", "-m", "clean")
    ran = json.loads(json.dumps(clean))
    ran["cells"][0].update(
        outputs=[
            {"output_type": "execute_result", "data": {"text/plain": ["2"]}, "metadata": {}, "execution_count": 1}
        ],
        execution_count=1,
    )
    nb.write_text(json.dumps(ran))
    assert carries_outputs(json.loads(nb.read_text()))  # the working copy has outputs ...
    assert not carries_outputs(committed_notebook(nb))  # ... what git would commit does not
    git("add", "notebooks/01_x.ipynb")
    assert carries_outputs(committed_notebook(nb))  # staged outputs are caught


def test_the_course_starts_at_00():
    assert NOTEBOOKS and NOTEBOOKS[0].name == "00_start_here.ipynb"
