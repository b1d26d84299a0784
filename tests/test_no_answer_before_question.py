"""No answer before its question: a predict-then-run question is asked before the cells that measure its number, so
nothing a learner reads before it -- the prose above it, the outputs of the cells above it, the workshop guide --
may state that number or choice.

For each question of `labkit.exercises.predictions` the answer is the instructor's solution in the notebook's predict
cell (and, for an executed copy, the value its run measured), and "stating it" means a number in the question's
unit inside the question's own "close" window around the answer (a share as `28%`, `0.28` or 三成, a percentage, a
multiplier as `3x` / `3 倍` / `3 times`, a world size as `world size 1` / `one process` / `1 个进程`), the right
choice of a choice question, or one of the few phrasings that say a number in words (`TELLS`).

The markdown part needs no run and always runs, for the English notebooks and the Chinese edition. The output part
reads the executed copies a test session's notebook runs leave in runs/pytest/<stem>/ and runs/pytest/zh_CN/<stem>/
(marked `notebook`; a notebook with no executed copy, or one older than its source, is skipped). The guide keeps
its answers in docs/instructor/answers.md, which only the solutions release carries (as ANSWERS.md).
"""

from __future__ import annotations

import ast
import html
import json
import re
from pathlib import Path

import nbformat
import pytest

from labkit.exercises.predictions import QUESTIONS, Question, measured_value
from labkit.paths import project_root

ROOT = Path(__file__).parents[1]
RUNS = project_root() / "runs" / "pytest"
EDITIONS = {"en": ROOT / "notebooks", "zh_CN": ROOT / "notebooks" / "zh_CN"}
NUM = r"(\d+(?:\.\d+)?)"
CN_DIGITS = "一二三四五六七八九"

# answers said in words rather than as a number in the question's unit (qid -> patterns, English and Chinese)
TELLS = {
    "05": [r"same work \w+ times", r"identical batches", r"the same batches", r"活干了\s*\w+\s*遍", r"一模一样的批次"],
    "06": [r"layer[ _-]?norm", r"层归一化"],
}


# ---- the questions, their cells and their answers ------------------------------------------------------------


def predict_index(cells, qid: str) -> int:
    """The predict cell of question `qid`: the code cell that calls predict("qid", ...)."""
    pattern = re.compile(rf"\bpredict\(\s*[\"']{qid}[\"']")
    hits = [i for i, c in enumerate(cells) if c.cell_type == "code" and pattern.search(c.source)]
    assert len(hits) == 1, f"question {qid}: {len(hits)} predict cells"
    return hits[0]


def question_index(cells, qid: str) -> int:
    """Where the question is asked: the exercise prompt right above its predict cell (else the predict cell)."""
    i = predict_index(cells, qid)
    above = cells[i - 1] if i else None
    return i - 1 if above is not None and "exercise" in above.metadata.get("tags", []) else i


def solution(cells, qid: str):
    """The instructor's answer: the value the predict cell's solution region assigns."""
    src = cells[predict_index(cells, qid)].source
    region = src.split("### BEGIN SOLUTION", 1)[1].split("### END SOLUTION", 1)[0]
    value = ast.literal_eval(region.split("=", 1)[1].strip())
    return value.strip().lower() if isinstance(value, str) else float(value)


def window(q: Question, value) -> tuple[float, float] | str:
    """The values the question counts as close to `value` (a choice: the choice itself)."""
    kind = q.tolerance[0]
    if kind == "choice":
        return q.classify(value) if q.classify and value not in q.choices else str(value)
    v = float(value)
    if kind == "abs":
        return v - q.tolerance[1], v + q.tolerance[1]
    if kind == "factor":
        return v / q.tolerance[1], v * q.tolerance[1]
    return v, v


def stated(q: Question, text: str) -> list[tuple[float, str]]:
    """(number, where) for each number `text` states in the question's unit, converted to that unit."""
    unit = q.unit.lower()
    rules: list[tuple[str, float | None]] = []  # (pattern whose group 1 is the number, scale); None: the number is 1
    if "share" in unit:
        rules += [(NUM + r"\s*(?:%|％|percent)", 0.01), (r"(?<![\d.])(0\.\d+)", 1.0), (f"([{CN_DIGITS}])成", 0.1)]
    elif unit == "%":
        rules += [(NUM + r"\s*(?:%|％|percent)", 1.0)]
    elif unit == "x":
        rules += [(NUM + r"\s*(?:[x×](?![A-Za-z0-9])(?!\s*\d)|倍|times\b)", 1.0)]
    elif "process" in unit:
        rules += [
            (r"world (?:had )?size(?: of| is| was| =)?\s*" + NUM, 1.0),
            (r"world size\s*(?:却|就|只)?(?:为|是)\s*" + NUM, 1.0),
            (NUM + r"\s*(?:ordinary\s+)?process\b(?!es|\s*group)", 1.0),
            (NUM + r"\s*个(?:普通)?进程(?!组)", 1.0),
            (r"\b(?:one|a single)\s+(?:ordinary\s+)?process\b(?!\s*group)|[一单]个(?:普通)?进程(?!组)", None),
        ]
    else:
        raise AssertionError(f"question {q.id}: no way to read its unit {q.unit!r} in prose -- add one here")
    out = []
    for pattern, scale in rules:
        for m in re.finditer(pattern, text):
            if scale is None:
                value = 1.0
            elif m.group(1) in CN_DIGITS:
                value = (CN_DIGITS.index(m.group(1)) + 1) * scale
            else:
                value = float(m.group(1)) * scale
            out.append((value, text[max(0, m.start() - 40) : m.end() + 20]))
    return out


def tells(q: Question, answers: list, text: str) -> list[str]:
    """What in `text` states one of `answers` to question `q`."""
    out = []
    for answer in answers:
        span = window(q, answer)
        if isinstance(span, str):  # a choice question: the right choice named
            if re.search(re.escape(span), text, re.I):
                out.append(f"names the right choice {span!r}")
            continue
        lo, hi = span
        out += [
            f"states {v:g} (close to the answer {answer:g}: {lo:g}..{hi:g}) in {_short(where)!r}"
            for v, where in stated(q, text)
            if lo <= v <= hi
        ]
    for pattern in TELLS.get(q.id, []):
        out += [f"says it in words: {m.group()!r}" for m in re.finditer(pattern, text, re.I)]
    return out


def _short(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def output_text(cell) -> str:
    """What a learner reads of a code cell's outputs: streams, plain text, markdown, HTML without its tags."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        data = out.get("data", {})
        for mime in ("text/markdown", "text/plain"):
            if mime in data:
                parts.append(data[mime] if isinstance(data[mime], str) else "".join(data[mime]))
        if "text/html" in data:
            raw = data["text/html"] if isinstance(data["text/html"], str) else "".join(data["text/html"])
            parts.append(html.unescape(re.sub(r"<[^>]+>", " ", raw)))
    return "\n".join(parts)


def notebook_path(edition: str, q: Question) -> Path:
    return EDITIONS[edition] / f"{q.notebook}.ipynb"


CASES = [pytest.param(e, q, id=f"{e}-{q}") for e in EDITIONS for q in QUESTIONS]
GUIDE_CASES = [pytest.param(e, q, id=f"{e}-{q}") for e in ("en", "zh_CN") for q in QUESTIONS]


# ---- the prose above each question (no run needed) -----------------------------------------------------------


@pytest.mark.parametrize("edition,qid", CASES)
def test_no_markdown_above_a_question_states_its_answer(edition, qid):
    q = QUESTIONS[qid]
    cells = nbformat.read(notebook_path(edition, q), as_version=4).cells
    # the instructor's English notebook holds the solution; the edition's copy carries the same code
    answer = solution(nbformat.read(notebook_path("en", q), as_version=4).cells, qid)
    found = [
        f"cell {c.id}: {t}: {_short(c.source)}"
        for c in cells[: question_index(cells, qid)]
        if c.cell_type == "markdown"
        for t in tells(q, [answer], c.source)
    ]
    assert not found, f"{q.notebook} ({edition}) answers question {qid} before asking it:\n" + "\n".join(found)


# ---- the outputs above each question (an executed copy) ------------------------------------------------------


@pytest.mark.notebook
@pytest.mark.parametrize("edition,qid", CASES)
def test_no_output_above_a_question_states_its_answer(edition, qid):
    q = QUESTIONS[qid]
    runs = RUNS if edition == "en" else RUNS / edition
    executed = runs / q.notebook / f"{q.notebook}.ipynb"
    source = notebook_path(edition, q)
    if not executed.is_file() or executed.stat().st_mtime < source.stat().st_mtime:
        pytest.skip(f"no executed copy of {source.name} ({edition}) newer than its source under {runs}")
    cells = nbformat.read(executed, as_version=4).cells
    answers = [solution(nbformat.read(notebook_path("en", q), as_version=4).cells, qid)]
    results = executed.parent / "results.json"
    if results.is_file():
        raw = measured_value(q, json.loads(results.read_text(encoding="utf-8")))
        answers.append(raw if q.tolerance[0] == "choice" else float(raw) * q.scale)
    found = [
        f"output of cell {c.id}: {t}: {_short(output_text(c))}"
        for c in cells[: question_index(cells, qid)]
        if c.cell_type == "code"
        for t in tells(q, answers, output_text(c))
    ]
    assert not found, f"{q.notebook} ({edition}) prints the answer to {qid} before asking it:\n" + "\n".join(found)


# ---- the detectors themselves ----------------------------------------------------------------------------------


def test_the_detectors_find_the_answers_as_prose_and_outputs_state_them():
    q02, q03, q04, q05, q06, q09 = (QUESTIONS[k] for k in ("02", "03", "04", "05", "06", "09"))
    assert tells(q02, [0.28], "a correct cleaner keeps 945 and rejects 28%")
    assert tells(q02, [0.28], "on the cleaned set (~30% fewer records)") and tells(q02, [0.28], "拒收约三成")
    assert not tells(q02, [0.28], "1308 records in 674 files, 1.7 MB; precision >= 0.9")
    assert tells(q03, [12.0], "about 15.8 倍") and tells(q03, [12.0], "needs 16x the memory")
    assert not tells(q03, [12.0], "batch 16 and 4×4 accumulation on a 16 GB card")
    assert tells(q04, [1.0], "so the world had size 1.") and tells(q04, [1.0], "you get one ordinary process")
    assert not tells(q04, [1.0], "where 2 processes were asked for")
    assert tells(q05, [100.0], "N processes did the same work N times") and tells(q05, [100.0], "overlap 100 %")
    assert tells(q06, ["layer norm"], "the first spike is a layer norm") and not tells(q06, ["layer norm"], "attention")
    assert tells(q09, [3.0], "FSDP is about 3x slower") and not tells(q09, [3.0], "ddp x2: 117 ms")
    q08 = QUESTIONS["08"]  # 08's batching claim, printed above its question until 08's predict moved before step 3
    assert tells(q08, [2.5], "expected 16 batched requests/s > 2x one-at-a-time int8")
    assert tells(q08, [2.5], "逐个处理的 int8 的 2 倍") and not tells(q08, [2.5], "int8/fp32 size < 0.6")


# ---- the guide ---------------------------------------------------------------------------------------------------


QUESTION_TITLE = re.compile(r"Predict, then run:[^?]*\?|先预测，再运行：[^？]*？")


def blocks(markdown: str) -> list[str]:
    """A document's paragraphs, list items and table rows, each one string (a wrapped line joins its item)."""
    out: list[str] = []
    for line in markdown.splitlines():
        if not line.strip() or line.lstrip().startswith(("* ", "- ", "|", "#")) or not out:
            out.append(line)
        else:
            out[-1] += " " + line.strip()
    return [b for b in out if b.strip()]


def guide_tells(text: str, questions=tuple(QUESTIONS.values())) -> list[str]:
    """Each answer a document states about its question's notebook: a block (item, row, paragraph) that names the
    notebook (`02`, `02.5`, its stem) and states the answer. A question's own title is not its answer."""
    found = []
    for q in questions:
        answer = solution(nbformat.read(notebook_path("en", q), as_version=4).cells, q.id)
        about = re.compile(rf"(?<![\d.]){q.id}(?:\.\d)?(?![\d.])|{q.notebook}")
        for block in blocks(QUESTION_TITLE.sub(" ", text)):
            if about.search(block):
                found += [f"{q.id}: {t}" for t in tells(q, [answer], block)]
    return found


@pytest.mark.parametrize("edition,qid", GUIDE_CASES)
def test_the_guide_a_learner_may_read_states_no_answer(edition, qid):
    guide = ROOT / "docs" / ("" if edition == "en" else edition) / "workshop.md"
    found = guide_tells(guide.read_text(encoding="utf-8"), [QUESTIONS[qid]])
    assert not found, f"{guide.relative_to(ROOT)} answers predict-then-run question {qid}:\n" + "\n".join(found)


@pytest.mark.parametrize("edition", ["en", "zh_CN"])
def test_the_instructors_answers_would_fail_that_check(edition):
    """The guide's old sections, now instructor-only: the same check finds the answers in them."""
    answers = ROOT / "docs" / ("" if edition == "en" else edition) / "instructor" / "answers.md"
    found = guide_tells(answers.read_text(encoding="utf-8"))
    assert {t.split(":")[0] for t in found} >= {"02", "04", "06"}, found


@pytest.mark.parametrize("language", [None, "zh_CN"])
def test_only_the_solutions_release_carries_the_answers(tmp_path, language):
    from labkit.classroom.release import ANSWERS, write_release

    folder = EDITIONS["en" if language is None else language]
    answers = ROOT / "docs" / (language or "") / "instructor" / "answers.md"
    assert "## Common wrong answers" in (ROOT / "docs" / "instructor" / "answers.md").read_text(encoding="utf-8")
    notebooks = [folder / "05_samplers_and_seeds.ipynb"]
    learner = write_release(tmp_path / "learner", notebooks, language=language)
    assert learner and not (tmp_path / "learner" / ANSWERS).exists()
    assert not any(p.name == "answers.md" for p in (tmp_path / "learner").rglob("*.md"))
    write_release(tmp_path / "solutions", notebooks, solutions=True, language=language)
    assert (tmp_path / "solutions" / ANSWERS).read_text(encoding="utf-8") == answers.read_text(encoding="utf-8")
    write_release(tmp_path / "solutions", notebooks, language=language)  # a learner release written over it
    assert not (tmp_path / "solutions" / ANSWERS).exists()


def test_the_course_website_leaves_the_answers_out(tmp_path):
    from labkit.course.site import editions, page_names

    for ed in editions(ROOT, tmp_path):
        names = page_names(ed, [])
        assert not [n for n in names if "answers" in n or "instructor" in n], names
