"""Every check cell runs alone: a learner (or the 3-hour agenda) may do exercise 04.2 without 04.1.

What a check cell may rely on is what the learner has run when they reach it: the notebook's content cells
above it (the lesson), its own exercise's solution cell, and the check cell itself -- never another exercise's
cells. Two tests prove it for every check cell of notebooks 01-08, cheaply (no notebook is executed, no
training re-runs):

- statically: every name the exercise's solution and check cells read is bound by a content cell above the
  check, by the solution cell or by the check cell itself (the check cell imports the `nbNN` it calls);
- by running: each exercise's solution cell and then its check cell run in a FRESH namespace holding only
  stand-ins for the content names the exercise reads (the stand-ins' names are proven, statically, to be
  bound by the notebook's content cells): the instructor's solution passes, and in the learner's copy
  (`labkit.classroom.release.learner_notebook`) the untouched placeholder fails the check with a hint -- neither
  raises NameError or ImportError. The run covers every kind of check (tests/exercise_helpers.py): the
  `labkit.exercises.nbNN` checks, 01's labelling check and the predict-then-run reveals (stand-ins for what the
  lesson measured); the find-and-fix checks (`labkit.exercises.transfer`) run the learner's script for ~20 s,
  so only their placeholders run here -- the instructor's repairs run in tests/test_exercises_transfer.py.

A check follows its solution cell with only markdown between, except a predict-then-run reveal: its
prediction (the solution cell) comes before the lesson cells that measure it, and the reveal after them.
"""

from __future__ import annotations

import builtins
import re
import symtable
from pathlib import Path

import nbformat
import pytest

from exercise_helpers import check_kind, lesson_standins
from labkit.exercises import UNANSWERED, ExerciseFailed

ROOT = Path(__file__).parents[1]
NOTEBOOKS = {p.name[:2]: p for p in sorted((ROOT / "notebooks").glob("0[1-9]_*.ipynb"))}
BUILTINS = set(dir(builtins)) | {"display", "get_ipython", "__file__", "__name__"}


def _context(number: str) -> dict:
    """Stand-ins for what notebook `number`'s content cells compute and its exercises read."""
    if number == "06":
        from labkit.corpus import generate
        from labkit.text.tokenizer import train_tokenizer
        from labkit.training.recipes import tokenizer_texts

        return {"tok": train_tokenizer(tokenizer_texts(generate(12, 0)))} | lesson_standins(number)
    if number == "07":
        return {"GLOBAL_BATCH": 16, "nproc": 2, "n_articles": 200} | lesson_standins(number)
    return lesson_standins(number)


def _python(source: str) -> str:
    """A cell's source as plain Python (IPython magics become calls)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def _walk(table):
    yield table
    for child in table.get_children():
        yield from _walk(child)


def _bound(source: str) -> set[str]:
    """Module-level names a cell binds (assignments, imports, def, class, for/with targets)."""
    top = symtable.symtable(_python(source), "<cell>", "exec")
    return {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}


def _reads(source: str) -> set[str]:
    """Names a cell reads from the notebook's namespace (module level, or global inside its functions)."""
    top = symtable.symtable(_python(source), "<cell>", "exec")
    out = set()
    for t in _walk(top):
        for s in t.get_symbols():
            if not s.is_referenced():
                continue
            if t is top or s.is_global():
                out.add(s.get_name())
    return out


def _tags(cell) -> set[str]:
    return set(cell.metadata.get("tags", []))


def _exercises(nb) -> list[tuple[int, int]]:
    """(solution index, check index) for every check cell: the solution cell is the one right before it."""
    out = []
    for i, c in enumerate(nb.cells):
        if "check" in _tags(c):
            j = max(k for k in range(i) if "solution" in _tags(nb.cells[k]))
            assert not any("check" in _tags(nb.cells[k]) for k in range(j + 1, i)), "one check per solution"
            if "predictions import reveal" in c.source:  # the measuring lesson cells sit between
                qid = re.search(r"\breveal\(\s*['\"](\d\d)['\"]", c.source).group(1)
                assert re.search(rf"\bpredict\(\s*['\"]{qid}['\"]", nb.cells[j].source), "a reveal follows its predict"
                assert any(_is_content(nb.cells[k]) for k in range(j + 1, i)), "the measurement runs in between"
            else:
                assert all(nb.cells[k].cell_type == "markdown" for k in range(j + 1, i)), "a check follows its solution"
            out.append((j, i))
    return out


def _is_content(cell) -> bool:
    return cell.cell_type == "code" and not ({"solution", "check"} & _tags(cell))


@pytest.mark.parametrize("number", sorted(NOTEBOOKS))
def test_every_check_reads_only_the_lesson_and_its_own_exercise(number):
    nb = nbformat.read(NOTEBOOKS[number], as_version=4)
    exercises = _exercises(nb)
    assert len(exercises) >= 3
    problems = []
    for j, i in exercises:
        sol, chk = nb.cells[j], nb.cells[i]
        lesson = set().union(*(_bound(c.source) for c in nb.cells[:i] if _is_content(c)))
        own = _bound(sol.source) | _bound(chk.source)
        needed = (_reads(sol.source) | _reads(chk.source)) - own - lesson - BUILTINS
        for name in sorted(needed):
            elsewhere = [
                k
                for k, c in enumerate(nb.cells)
                if c.cell_type == "code" and k not in (i, j) and name in _bound(c.source)
            ]
            problems.append(
                f"check cell {i} ({chk.source.splitlines()[-1]!r}) reads {name!r}, bound only by cells {elsewhere}"
            )
        for mod in set(re.findall(r"\b(nb\d\d|transfer|labelling)\.\w+\(", chk.source)):
            if mod not in _bound(chk.source):
                problems.append(f"check cell {i} calls {mod}.… without importing it itself")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("number", sorted(NOTEBOOKS))
def test_context_stands_in_only_for_content_names(number):
    nb = nbformat.read(NOTEBOOKS[number], as_version=4)
    lesson = set().union(*(_bound(c.source) for c in nb.cells if _is_content(c)))
    assert set(_context(number)) <= lesson, "the test's stand-ins must be names the notebook's content cells bind"


def _run_alone(nb, number: str, stem: str, kinds=("table", "labelling", "predict")):
    """Each (solution, check) of the given kinds, in a fresh namespace; yields (check source, error)."""
    context = _context(number)
    for j, i in _exercises(nb):
        sol, chk = nb.cells[j], nb.cells[i]
        if check_kind(chk.source, number) not in kinds:
            continue
        ns = dict(context)
        error = None
        try:
            exec(compile(_python(sol.source), f"{stem}:solution:{j}", "exec"), ns)
            exec(compile(_python(chk.source), f"{stem}:check:{i}", "exec"), ns)
        except Exception as exc:  # noqa: BLE001 -- the caller judges which errors are allowed
            error = exc
        yield chk.source.splitlines()[-1], error


@pytest.mark.parametrize("number", sorted(NOTEBOOKS))
def test_each_check_runs_alone_after_its_own_solution(number, capsys):
    path = NOTEBOOKS[number]
    nb = nbformat.read(path, as_version=4)
    results = list(_run_alone(nb, number, path.stem))
    assert len(results) >= 2
    bad = [f"{chk}: {type(e).__name__}: {e}" for chk, e in results if e is not None]
    assert not bad, "instructor solutions, each run alone:\n" + "\n".join(bad)


@pytest.mark.parametrize("number", sorted(NOTEBOOKS))
def test_each_learner_check_fails_alone_with_a_hint(number, capsys):
    from labkit.classroom.release import learner_notebook

    path = NOTEBOOKS[number]
    nb = learner_notebook(nbformat.read(path, as_version=4))
    results = list(_run_alone(nb, number, path.stem, kinds=("table", "labelling", "predict", "find-and-fix")))
    assert len(results) >= 2
    bad = [f"{chk}: {type(e).__name__}: {e}" for chk, e in results if not isinstance(e, ExerciseFailed)]
    assert not bad, "learner placeholders, each run alone, must fail the check with a hint:\n" + "\n".join(bad)
    # an untouched placeholder says so, except where the learner's cell starts from the broken code it must repair
    unrepaired = {"nb05.ex1(run_epochs)"}
    vague = [f"{chk}: {e}" for chk, e in results if chk not in unrepaired and not str(e).startswith(UNANSWERED)]
    assert not vague, "a placeholder should get the 'not answered yet' hint:\n" + "\n".join(vague)
    assert "❌ fail" in capsys.readouterr().out


@pytest.mark.parametrize(
    "cell",
    [
        "from labkit.exercises import nb04\nnb04.ex1('python train.py')",  # a check
        "from labkit.exercises.predictions import predict\npredict('02', 28)",  # a prediction in the wrong unit
        "from labkit.exercises import transfer\ntransfer.check_fix('04', None)",  # a find-and-fix placeholder
    ],
)
def test_a_failed_check_shows_its_hint_and_the_learners_line_not_labkits_traceback(cell, capfd):
    """In a notebook (IPython) a ❌ is the hint and, under it, the learner's own line -- no frames of labkit."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        result = shell.run_cell(cell)
    finally:
        InteractiveShell.clear_instance()
    assert isinstance(result.error_in_exec, ExerciseFailed)
    shown = [line for line in capfd.readouterr().out.splitlines() if line.strip()]
    assert shown[0].startswith("❌ fail: ") and len(shown) == 2, shown
    assert re.fullmatch(
        r"↳ the check that failed: Cell In\[\d+\], line 2: " + re.escape(cell.splitlines()[1]), shown[1]
    )
    assert not any("labkit/" in line or "Traceback" in line or "File " in line for line in shown), shown
