"""The exercises, both ways: the instructor notebooks pass every check, the learner release fails every check.

Only the exercise cells run here (solution, then check, in notebook order), in a namespace holding the few
objects those cells take from the notebook above them -- seconds, not the notebooks' minutes. The whole
notebooks (solutions included) run headless in tests/test_notebooks.py and `labkit course run`. A find-and-fix
check runs the learner's script (~20 s): here only its placeholder fails; the instructor's repair passes in
tests/test_exercises_transfer.py (slow).
"""

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from exercise_helpers import check_kind, lesson_standins

from labkit.course.discovery import discover
from labkit.exercises import ExerciseFailed, nb03

ROOT = Path(__file__).parents[1]
INFOS = [i for i in discover(ROOT / "notebooks") if i.number != "00"]


class _Hist:  # notebook 06's run histories: a total grad norm per step
    grad_norm = [2.1, 1.8, 1.5, 1.2, 9.5, 1.1, 0.9, 1.0, 0.8, 14.0, 0.9, 0.7]


def _tok():
    from labkit.corpus import generate
    from labkit.text.tokenizer import train_tokenizer
    from labkit.training.recipes import tokenizer_texts

    return train_tokenizer(tokenizer_texts(generate(12, 0)))


def _context(number: str) -> dict:
    """What each notebook's exercise cells use from the cells above them."""
    if number == "06":
        return {"hists": {"+ lr 3e-3": _Hist()}, "tok": _tok()} | lesson_standins(number)
    if number == "07":
        return {"GLOBAL_BATCH": 16, "nproc": 2, "n_articles": 200} | lesson_standins(number)
    return lesson_standins(number)


def _cells(nb, tag):
    return [c for c in nb.cells if tag in c.metadata.get("tags", [])]


def _exercise_code(nb):
    """(solution cell, check cell) pairs, in notebook order."""
    code = [c for c in nb.cells if c.cell_type == "code" and {"solution", "check"} & set(c.metadata.get("tags", []))]
    pairs = list(zip(code[::2], code[1::2]))
    for s, c in pairs:
        assert "solution" in s.metadata["tags"] and "check" in c.metadata["tags"], (
            "each solution cell is followed by its check"
        )
    return pairs


@pytest.mark.parametrize("info", INFOS, ids=lambda i: i.stem)
def test_every_notebook_has_tagged_exercises(info):
    nb = nbformat.read(info.path, as_version=4)
    for tag in ("exercise", "solution", "check"):
        assert len(_cells(nb, tag)) >= 2, f"{info.stem}: fewer than 2 cells tagged {tag!r}"
    for s in _cells(nb, "solution"):
        assert "### BEGIN SOLUTION" in s.source and "### END SOLUTION" in s.source
        assert s.metadata["nbgrader"]["solution"] is True
    for c in _cells(nb, "check"):
        assert c.metadata["nbgrader"]["grade"] is True and "BEGIN SOLUTION" not in c.source
    head = nb.cells[0].source
    assert "**Time:**" in head and "What you will learn" in head


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    out = tmp_path_factory.mktemp("release")
    r = subprocess.run(
        [sys.executable, "-m", "labkit.cli", "course", "workshop", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.parametrize("info", INFOS, ids=lambda i: i.stem)
def test_instructor_solutions_pass_and_learner_placeholders_fail(info, release, capsys):
    nb = nbformat.read(info.path, as_version=4)
    ns = _context(info.number)
    for sol, chk in _exercise_code(nb):
        exec(compile(sol.source, f"{info.stem}:solution", "exec"), ns)
        if check_kind(chk.source, info.number) != "find-and-fix":  # those run a script for ~20 s: slow tests
            exec(compile(chk.source, f"{info.stem}:check", "exec"), ns)  # raises if a solution is wrong
    learner = nbformat.read(release / "notebooks" / info.path.name, as_version=4)
    assert not any("BEGIN SOLUTION" in c.source for c in learner.cells), "a solution leaked into the release"
    ns = _context(info.number)
    pairs = _exercise_code(learner)
    assert len(pairs) == len(_exercise_code(nb))
    for sol, chk in pairs:
        assert "# YOUR CODE HERE" in sol.source
        exec(compile(sol.source, f"{info.stem}:placeholder", "exec"), ns)
        with pytest.raises(ExerciseFailed):
            exec(compile(chk.source, f"{info.stem}:check", "exec"), ns)
    assert "❌ fail" in capsys.readouterr().out


def test_release_keeps_checks_and_data_and_strips_outputs(release):
    assert (release / "data_samples" / "articles.jsonl").exists() and (release / "README.md").exists()
    for p in (release / "notebooks").glob("*.ipynb"):
        nb = nbformat.read(p, as_version=4)
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")


def test_bad_out_is_one_line_exit_2(tmp_path):
    f = tmp_path / "a_file"
    f.write_text("x")
    for bad in (str(f / "sub"), str(ROOT / "notebooks" / "release")):
        r = subprocess.run(
            [sys.executable, "-m", "labkit.cli", "course", "workshop", "--out", bad],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (ROOT / "notebooks" / "release").exists()


def test_checks_reject_wrong_answers_with_hints(capsys):
    with pytest.raises(ExerciseFailed, match="plain mean"):
        nb03.ex2(lambda losses, tokens: sum(losses) / len(losses))
    with pytest.raises(ExerciseFailed, match="not answered"):
        nb03.ex3(None)
    with pytest.raises(ExerciseFailed, match="batch x sequence"):
        nb03.ex3("A, B, C, D")
    from labkit.exercises import nb04, nb05, nb06

    with pytest.raises(ExerciseFailed, match="local_rank"):
        nb04.ex1("python train.py --local_rank=0")
    with pytest.raises(ExerciseFailed, match="LOCAL_RANK"):
        nb04.ex2(lambda env: f"cuda:{env['RANK']}")
    with pytest.raises(ExerciseFailed, match="set_epoch"):
        nb05.ex1(lambda s, e: [list(s) for _ in range(e)])
    with pytest.raises(ExerciseFailed, match="never acts"):
        nb06.ex1(100.0, _Hist.grad_norm)
    assert "❌ fail" in capsys.readouterr().out


def test_write_release_takes_notebook_paths(tmp_path):
    """`write_release` gets the notebooks to release (workshop.py needs nothing from course.py)."""
    from labkit.classroom.release import write_release

    data = tmp_path / "data"
    data.mkdir()
    (data / "x.txt").write_text("x")
    written = write_release(tmp_path / "out", [INFOS[0].path], data_dir=data)
    assert [p.name for p in written] == [INFOS[0].path.name]
    assert sorted(p.name for p in (tmp_path / "out" / "notebooks").iterdir()) == [INFOS[0].path.name]
    assert (tmp_path / "out" / "data_samples" / "x.txt").exists()
