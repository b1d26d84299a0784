"""`labkit course grade`: a room's submissions -> a gradebook per exercise, hostile notebooks included.

The hostile cases run against a tiny release (one notebook, three multiple-choice exercises, a lesson cell that
reads the release's data_samples) so each learner notebook costs a kernel start, not a course notebook's
minutes; one test grades a real course notebook (03) with the first exercise solved.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from labkit.classroom.gradebook import Row, gradebook_html, pass_rates, summary
from labkit.classroom.grader import _verdict, default_limit
from labkit.classroom.release import write_release

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = "{'A': 'right', 'B': 'B misses the point', 'C': 'C is too slow', 'D': 'D is too late'}"


def _cell(kind: str, src: str, gid: str):
    nbg = {"grade": kind == "check", "grade_id": gid, "locked": kind == "check", "schema_version": 3}
    nbg |= {"solution": kind == "solution"} | ({"points": 1} if kind == "check" else {})
    return new_code_cell(src, metadata={"tags": [kind], "nbgrader": nbg})


def tiny_instructor_notebook():
    cells = [
        new_markdown_cell("# tiny"),
        new_code_cell("from labkit.paths import data_dir\nlesson = (data_dir() / 'lesson.txt').read_text()"),
        new_markdown_cell("## Exercises"),
    ]
    for k in (1, 2, 3):
        cells.append(
            _cell("solution", f"ans{k} = None\n### BEGIN SOLUTION\nans{k} = 'A'\n### END SOLUTION", f"nb01_ex{k}")
        )
        cells.append(
            _cell("check", f"from labkit.exercises import quiz\nquiz(ans{k}, 'A', {OPTIONS})", f"nb01_ex{k}_check")
        )
    cells.append(new_code_cell("print('the end')"))
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return new_notebook(cells=cells, metadata={"kernelspec": kernel, "labkit": {"minutes": 0.1, "title": "tiny"}})


NB = "01_tiny.ipynb"
SOL = {1: 3, 2: 5, 3: 7}  # exercise -> its solution cell's index; its check follows it


@pytest.fixture(scope="module")
def tiny_release(tmp_path_factory):
    base = tmp_path_factory.mktemp("tiny")
    (base / "notebooks").mkdir()
    (base / "data_samples").mkdir()
    (base / "data_samples" / "lesson.txt").write_text("from the release")
    nbformat.write(tiny_instructor_notebook(), base / "notebooks" / NB)
    write_release(base / "release", [base / "notebooks" / NB], data_dir=base / "data_samples")
    return base / "release"


def _submit(subs: Path, learner: str, release: Path, edit=None, text: str | None = None, name: str = NB):
    folder = subs / learner
    folder.mkdir(parents=True, exist_ok=True)
    if text is not None:
        (folder / name).write_text(text)
        return
    nb = copy.deepcopy(nbformat.read(release / "notebooks" / NB, as_version=4))
    if edit:
        edit(nb)
    nbformat.write(nb, folder / name)


def _answer(**answers):
    def edit(nb):
        for k, a in answers.items():
            nb.cells[SOL[int(k[1:])]].source = a

    return edit


def _read(out: Path) -> dict[tuple[str, str], dict]:
    with open(out / "gradebook.csv", encoding="utf-8") as f:
        return {(r["learner"], r["exercise"]): r for r in csv.DictReader(f)}


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_room_with_hostile_submissions_is_graded_to_the_end(tiny_release, tmp_path):
    subs = tmp_path / "submissions"
    _submit(subs, "alice", tiny_release, _answer(e1="ans1 = 'A'", e2="ans2 = 'B'"))  # 1 right, 1 wrong, 1 untouched
    _submit(subs, "bob", tiny_release, text='{"cells": [')  # not JSON
    _submit(subs, "carol", tiny_release, _answer(e1="ans1 = 'A'", e2="while True:\n    pass"))  # loops forever

    def tamper(nb):
        nb.cells[SOL[2]].source = "ans2 = 'B'"
        nb.cells[SOL[2] + 1].source = "print('✅ pass')"  # edits 01.2's check to pass anything
        del nb.cells[SOL[1] + 1]  # deletes 01.1's check

    _submit(subs, "dave", tiny_release, tamper)

    def broken_import(nb):
        nb.cells[1].source = "import labkit_no_such_module\n" + nb.cells[1].source
        nb.cells[SOL[3]].source = "ans3 = 'A'"

    _submit(subs, "erin", tiny_release, broken_import)  # raises at import; 01.3 does not need the lesson
    _submit(subs, "frank", tiny_release, text="{}", name="99_other.ipynb")  # a notebook the release lacks
    _submit(subs, "gus", tiny_release, _answer(e1="ans1 = 'A'", e2="import os\nos._exit(3)"))  # kills its kernel

    def ran_only(nb):  # opened and ran, typed nothing: outputs differ, code does not
        nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="ran\n")]
        nb.cells[1].execution_count = 1

    _submit(subs, "hal", tiny_release, ran_only)

    out = tmp_path / "grades"
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "labkit.cli", "course", "grade", str(subs), "--out", str(out)]
        + ["--release", str(tiny_release), "--timeout", "12", "--jobs", "2"],
        capture_output=True,
        text=True,
        timeout=360,
        cwd=tmp_path,
    )
    seconds = time.monotonic() - t0
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("graded 8 learner(s), 3 exercise(s):") and "gradebook.html" in last, r.stdout
    book = _read(out)
    status = {k: v["status"] for k, v in book.items()}

    assert status[("alice", "01.1")] == "pass"
    assert status[("alice", "01.2")] == "fail" and book[("alice", "01.2")]["hint"] == "B is not it. B misses the point"
    assert status[("alice", "01.3")] == "not attempted"
    assert [status[("bob", f"01.{k}")] for k in (1, 2, 3)] == ["invalid notebook"] * 3
    assert "not appear to be JSON" in book[("bob", "01.1")]["note"]
    assert status[("carol", "01.1")] == "pass", "what ran before the loop is graded"
    assert status[("carol", "01.2")] == status[("carol", "01.3")] == "not run"
    assert "time limit 12 s" in book[("carol", "01.3")]["note"]
    assert status[("dave", "01.1")] == "check deleted"
    assert status[("dave", "01.2")] == "check edited" and "fail: B is not it" in book[("dave", "01.2")]["hint"]
    assert status[("dave", "01.3")] == "not attempted"
    assert "ModuleNotFoundError" in book[("erin", "01.1")]["note"]
    assert status[("erin", "01.1")] == "not attempted" and status[("erin", "01.3")] == "pass"
    assert status[("frank", "")] == "unknown notebook" and status[("frank", "01.1")] == "not submitted"
    assert status[("gus", "01.1")] == "pass" and status[("gus", "01.3")] == "not run"
    assert "kernel died" in book[("gus", "01.3")]["note"]
    assert (out / "executed" / "alice" / NB).exists()
    assert [status[("hal", f"01.{k}")] for k in (1, 2, 3)] == ["not attempted"] * 3
    assert book[("hal", "01.1")]["note"] == "unchanged from the release: not run"
    assert not (out / "executed" / "hal").exists(), "a notebook nobody typed in was run"

    page = (out / "gradebook.html").read_text(encoding="utf-8")
    assert 'src="data:image/png;base64,' in page and "<script" not in page and "://" not in page  # no CDN
    assert "pass rate per exercise" in page.lower() and "B is not it. B misses the point" in page
    assert seconds < 300, f"the room took {seconds:.0f} s"


def test_bad_submissions_path_is_one_line_exit_2(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "labkit.cli", "course", "grade", str(tmp_path / "nope"), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "no such directory" in r.stderr and not (tmp_path / "o").exists()


def test_verdicts_from_check_outputs():
    assert _verdict({"text": "✅ pass: A. right\n", "error": None}) == ("pass", "")
    fail = {"text": "❌ fail: B is not it.\n  Read again.\n", "error": ["ExerciseFailed", "B is not it."]}
    assert _verdict(fail) == ("fail", "B is not it. Read again.")
    assert _verdict({"text": "", "error": ["NameError", "name 'nb04' is not defined"]}) == (
        "error",
        "the check raised NameError: name 'nb04' is not defined",
    )
    assert _verdict({"text": "✅ pass\n", "error": ["ValueError", "after"]})[0] == "error"  # a pass must not raise
    assert _verdict(None)[0] == "not run"
    assert default_limit(0) == 120 and default_limit(2) == 480


def test_gradebook_page_escapes_what_learners_wrote_and_counts_pass_rates():
    rows = [
        Row("<b>ann</b>", "01_x.ipynb", "01.1", "fail", "<script>alert(1)</script>"),
        Row("ben", "01_x.ipynb", "01.1", "pass"),
        Row("cy", "01_x.ipynb", "01.1", "not submitted"),
        Row("ben", "01_x.ipynb", "01.2", "not attempted"),
    ]
    assert pass_rates(rows) == {"01.1": (1, 2), "01.2": (0, 1)}
    page = gradebook_html(rows)
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;ann" in page
    assert summary(rows).startswith("graded 3 learner(s), 2 exercise(s): 1 pass, 1 fail, 1 not attempted")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_real_course_notebook_is_graded_per_exercise(tmp_path):
    """03 (one of the cheapest notebooks with exercises), its first exercise solved with the instructor's answer;
    no --release: the grader writes one from notebooks/ and checks against it."""
    name = "03_memory_and_accumulation.ipynb"
    instructor = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    release = tmp_path / "release"
    write_release(release, [ROOT / "notebooks" / name])
    learner = nbformat.read(release / "notebooks" / name, as_version=4)
    # exercise 03.1 solved (found by its grade id: 03's predict-then-run cell comes earlier in the notebook)
    sol = [i for i, c in enumerate(learner.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "nb03_ex1"]
    learner.cells[sol[0]].source = instructor.cells[sol[0]].source
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    nbformat.write(learner, tmp_path / "subs" / "ann" / name)
    r = subprocess.run(
        [sys.executable, "-m", "labkit.cli", "course", "grade", str(tmp_path / "subs"), "--out", str(tmp_path / "o")]
        + ["--timeout", "420"],
        capture_output=True,
        text=True,
        timeout=540,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    book = _read(tmp_path / "o")
    exercises = sorted(ex for (who, ex) in book if who == "ann")
    assert exercises[0] == "03.1" and len(exercises) >= 3
    assert book[("ann", "03.1")]["status"] == "pass", book[("ann", "03.1")]
    assert all(book[("ann", ex)]["status"] == "not attempted" for ex in exercises[1:]), book


# ---- a room graded in parallel, in limits, with a predict-then-run question ------------------------------------

PREDICT_NB = "03_tiny_predict.ipynb"


def tiny_predict_notebook():
    """03's predict-then-run shape: predict (a solution cell), measure, reveal (the check); then one quiz."""
    predict = "from labkit.exercises.predictions import predict\nguess = None\n"
    predict += "### BEGIN SOLUTION\nguess = 12\n### END SOLUTION\npredict('03', guess)"
    cells = [
        new_markdown_cell("# predict, then run"),
        _cell("solution", predict, "nb03_ex1"),
        new_code_cell("measured = 15.8  # what the notebook measures"),
        _cell("check", "from labkit.exercises.predictions import reveal\nreveal('03', measured)", "nb03_ex1_check"),
        _cell("solution", "ans2 = None\n### BEGIN SOLUTION\nans2 = 'A'\n### END SOLUTION", "nb03_ex2"),
        _cell("check", f"from labkit.exercises import quiz\nquiz(ans2, 'A', {OPTIONS})", "nb03_ex2_check"),
    ]
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return new_notebook(cells=cells, metadata={"kernelspec": kernel, "labkit": {"minutes": 0.1, "title": "tiny"}})


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_room_is_graded_in_parallel_within_limits_and_predictions_are_answered(tmp_path):
    base = tmp_path / "instructor"
    (base / "notebooks").mkdir(parents=True)
    nbformat.write(tiny_predict_notebook(), base / "notebooks" / PREDICT_NB)
    release = tmp_path / "release"
    write_release(release, [base / "notebooks" / PREDICT_NB])
    learner = nbformat.read(release / "notebooks" / PREDICT_NB, as_version=4)

    def submit(who, guess=None, ans2=None):
        nb = copy.deepcopy(learner)
        if guess is not None:
            nb.cells[
                1
            ].source = f"from labkit.exercises.predictions import predict\nguess = {guess}\npredict('03', guess)"
        if ans2 is not None:
            nb.cells[4].source = ans2
        (tmp_path / "subs" / who).mkdir(parents=True)
        nbformat.write(nb, tmp_path / "subs" / who / PREDICT_NB)

    submit("ana", guess=12, ans2="ans2 = 'A'\nimport os\nprint('canary:', os.environ.get('LABKIT_GRADER_CANARY'))")
    submit("ben", guess=40, ans2="ans2 = 'B'")  # a far one: answered all the same
    submit("cat", guess=15, ans2="blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 2**20))")  # memory
    submit("dan", guess=16, ans2="while True:\n    pass")  # never ends
    submit("eve")  # nothing done: listed, never run
    out = tmp_path / "grades"
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "labkit.cli", "course", "grade", str(tmp_path / "subs"), "--out", str(out)]
        + ["--release", str(release), "--timeout", "25", "--jobs", "3", "--memory", "1500M"],
        capture_output=True,
        text=True,
        timeout=360,
        cwd=tmp_path,
        env={**os.environ, "LABKIT_GRADER_CANARY": "the instructor's secret"},
    )
    wall = time.monotonic() - t0
    assert r.returncode == 0, r.stdout + r.stderr
    book = _read(out)
    status = {k: v["status"] for k, v in book.items()}
    for who, guess in (("ana", "12"), ("ben", "40"), ("cat", "15"), ("dan", "16")):
        row = book[(who, "03.1")]
        assert row["status"] == "answered" and row["prediction"] == guess and row["measured"] == "15.8", row
    assert book[("ana", "03.1")]["hint"] == "close" and book[("ben", "03.1")]["hint"].startswith("not close")
    assert status[("eve", "03.1")] == status[("eve", "03.2")] == "not attempted"
    assert status[("ana", "03.2")] == "pass" and status[("ben", "03.2")] == "fail"
    assert "memory limit 1.46 GiB reached at cell 4 (MemoryError)" in book[("cat", "03.2")]["note"], book[
        ("cat", "03.2")
    ]
    assert "time limit 25 s" in book[("dan", "03.2")]["note"] and status[("dan", "03.2")] == "not run"
    page = (out / "gradebook.html").read_text(encoding="utf-8")
    assert "predictions against the measurement" in page and "answered: 40 vs 15.8" in page

    runs = json.loads((out / "grading.json").read_text())["notebooks"]
    assert [n["learner"] for n in runs if n["note"] == "unchanged from the release: not run"] == ["eve"]
    runs = [n for n in runs if n["learner"] != "eve"]  # the 4 that ran
    spans = sorted((n["started"], n["started"] + n["seconds"]) for n in runs)
    overlapping = sum(1 for (a0, a1), (b0, _) in zip(spans, spans[1:]) if b0 < a1)
    assert overlapping >= 2, f"graded one after another: {spans}"
    assert wall < sum(n["seconds"] for n in runs), (wall, runs)  # the room took less than its notebooks' sum
    assert all(n.get("cpu_seconds", 0) > 0 and n.get("peak_rss_mb", 0) > 0 for n in runs), runs
    shown = (out / "executed" / "ana" / PREDICT_NB).read_text(encoding="utf-8")
    assert "labkit-revealed" not in shown and len(nbformat.reads(shown, as_version=4).cells) == len(learner.cells)
    assert "canary: None" in shown, "the grader's environment stays out of the learner's kernel"


def test_the_learner_environment_leaves_the_instructors_out(tmp_path, monkeypatch):
    from labkit.classroom.sandbox import learner_env

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    env = learner_env(tmp_path / "work", tmp_path / "work" / "runs")
    assert "AWS_SECRET_ACCESS_KEY" not in env and env["LANG"] == "zh_CN.UTF-8"
    assert env["HOME"].startswith(str(tmp_path)) and env["TMPDIR"].startswith(str(tmp_path))
    assert env["OMP_NUM_THREADS"] == "1" and env["LABKIT_RUNS_DIR"] == str(tmp_path / "work" / "runs")
