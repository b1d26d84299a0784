"""`labkit course grade SUBMISSIONS --out DIR`: a room's notebooks, graded per exercise.

SUBMISSIONS holds one folder per learner with the notebooks they saved (named as in the release; nested
folders are searched). Each learner notebook runs in its own process (`labkit.classroom.kernel`, which
drives the kernel through nbclient -- the engine under papermill -- with `allow_errors`, so a failed check
never stops the later exercises), in a temporary copy of the release (so `data_samples/` is there and
`runs/` lands in it), under a per-notebook time limit. Each exercise is then read from its check cell's
outputs:

* `pass` -- the check printed `✅ pass` and raised nothing;
* `fail` -- it printed `❌ fail: <hint>` / raised `ExerciseFailed` (the hint is kept);
* `not attempted` -- the exercise's cell still holds the placeholder `...  # YOUR CODE HERE`; a notebook whose code
  cells are all as released (a learner who never typed in it: collecting a home copies every notebook) is not run
  at all, and each of its rows says so;
* `error` -- the check cell raised something else (e.g. `NameError`: a cell above it broke);
* `not run` -- the time limit was reached, or the kernel died, before the check cell ran;
* `check edited` -- the check cell differs from the release's (its checksum in `.labkit-release.json`): it is
  put back as released and run, and its verdict is shown in the hint -- an edited check never counts as a pass;
* `check deleted` -- no cell of the notebook is that check;
* `invalid notebook` -- the file is not a notebook (not JSON, not nbformat 4);
* `not submitted` -- the learner has no such notebook (others have);
* `answered` -- a predict-then-run question (its check cell calls `reveal`): the learner predicted and the notebook
  measured; the row holds both. A prediction is never a pass or a fail (`labkit.exercises.predictions`).

A notebook the release does not hold is listed with the status `unknown notebook`. Nothing a learner wrote
can stop the grader: every problem becomes a row. Notebooks are graded `jobs` at once (default: the thread policy's
share, `labkit.classroom.sandbox.default_jobs`), each in a child with a minimal environment, a time limit and a
memory limit (`labkit.classroom.sandbox`); a notebook that runs out of either is stopped and its rows say why. The
learner's code still runs as the user who runs the grader -- grade untrusted submissions in a container or a
throw-away account. `DIR/grading.json` records each notebook's start, seconds, CPU seconds and peak memory.

Writes the gradebook (`labkit.classroom.gradebook`: `DIR/gradebook.csv`, `DIR/gradebook.html`) and
`DIR/executed/<learner>/<notebook>` (what each learner's notebook showed when graded). Why not nbgrader's autograder: docs/decisions.md.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from labkit.classroom import gradebook, kernel, sandbox
from labkit.classroom.gradebook import (
    ANSWERED,
    DELETED,
    EDITED,
    ERROR,
    FAIL,
    INVALID,
    NOT_ATTEMPTED,
    NOT_RUN,
    NOT_SUBMITTED,
    PASS,
    UNKNOWN,
    Row,
    exercise_key,
)
from labkit.classroom.release import STUB, cell_checksum, cell_source, grade_id, is_check, is_solution, read_marker
from labkit.atomic import atomic_write_text
from labkit.cli.errors import UsageError
from labkit.config import get_config
from labkit.paths import RELEASE_MARKER
from labkit.results import read_json

PASS_MARK, FAIL_MARK = "✅ pass", "❌ fail:"
MIN_LIMIT_S, LIMIT_PER_MINUTE_S = 120, 240  # default limit: 4x the notebook's minutes, at least 2 minutes
REVEAL_RE = re.compile(r"""\breveal\(\s*["'](\d+)["']""")  # a predict-then-run check: reveal("03", res)


@dataclass
class NotebookGrade:
    learner: str
    notebook: str
    rows: list[Row] = field(default_factory=list)
    seconds: float = 0.0
    note: str = ""
    started: float = 0.0  # time.time() when its child started
    usage: dict = field(default_factory=dict)  # the kernel tree's cpu_seconds and peak_rss_mb


def default_limit(minutes: float) -> int:
    """Seconds a notebook may run: 4x its `minutes` (the notebook's metadata), at least 2 minutes."""
    return int(max(MIN_LIMIT_S, LIMIT_PER_MINUTE_S * float(minutes or 0)))


def _stub_left(cell) -> bool:
    return any(line.strip() == STUB for line in cell_source(cell).splitlines())


def _released_notebook(release: Path, name: str):
    import nbformat

    return nbformat.read(release / "notebooks" / name, as_version=4)


def _released_checks(release: Path, name: str) -> dict[str, dict]:
    """grade_id -> the release's check cell (source and metadata), to put an edited check back."""
    return {grade_id(c): c for c in _released_notebook(release, name).cells if is_check(c)}


def _code_of(nb) -> list[str]:
    """The checksums of a notebook's code cells, in order (outputs, metadata and markdown aside)."""
    return [cell_checksum(cell_source(c)) for c in nb.cells if c.get("cell_type") == "code"]


def _verdict(ev: dict | None) -> tuple[str, str]:
    """(status, hint) from a check cell's outputs."""
    if ev is None:
        return NOT_RUN, ""
    text, error = ev.get("text", ""), ev.get("error")
    if FAIL_MARK in text:
        return FAIL, " ".join(text.split(FAIL_MARK, 1)[1].split())[:500]
    if error and error[0] in ("ExerciseFailed", "AssertionError"):
        return FAIL, error[1]
    if error:
        return ERROR, f"the check raised {error[0]}: {error[1]}".strip()
    if PASS_MARK in text:
        return PASS, ""
    return FAIL, "the check printed no verdict"


def _first_error(events: list[dict], skip: set[int]) -> str:
    for e in events:
        if e.get("error") and e.get("cell") not in skip:
            return f"first error: cell {e['cell']} {e['error'][0]}: {e['error'][1]}".strip()[:300]
    return ""


def _question(check_cell) -> str | None:
    """The predict-then-run question a check cell reveals ("03"), or None for a check with a right answer."""
    m = REVEAL_RE.search(cell_source(check_cell)) if check_cell is not None else None
    return m.group(1).zfill(2) if m else None


def _shown(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def grade_notebook(
    learner: str,
    path: Path,
    release: Path,
    checks: list[dict],
    limit: float,
    executed_dir: Path | None = None,
    memory: int | None = None,
) -> NotebookGrade:
    """Grade one learner notebook against the release's `checks` (the marker's entry for it), in a child limited
    to `limit` seconds and `memory` bytes of address space."""
    import nbformat

    name = path.name
    g = NotebookGrade(learner, name)

    def rows(status: str, hint: str = "", note: str = "") -> NotebookGrade:
        g.rows = [Row(learner, name, c["exercise"], status, hint, note) for c in checks]
        g.note = note
        return g

    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        if not isinstance(nb.get("cells"), list):
            raise ValueError("no cells")
    except Exception as exc:  # noqa: BLE001 -- not JSON, not a notebook, unreadable: all the same to the room
        return rows(INVALID, "", f"invalid notebook: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")

    if _code_of(nb) == _code_of(_released_notebook(release, name)):
        # nothing typed: every exercise still holds its placeholder; running it would cost the room minutes of CPU
        # (collecting a home copies every notebook of the release) to learn what the cells already say
        return rows(NOT_ATTEMPTED, "", "unchanged from the release: not run")
    released = _released_checks(release, name)
    found: dict[str, int] = {}  # exercise -> cell index in the learner's notebook
    tampered: dict[str, str] = {}
    for c in checks:
        by_id = [i for i, cell in enumerate(nb.cells) if is_check(cell) and grade_id(cell) == c["grade_id"]]
        by_sum = [
            i
            for i, cell in enumerate(nb.cells)
            if cell.get("cell_type") == "code" and cell_checksum(cell_source(cell)) == c["sha256"]
        ]
        same = [i for i in by_id if i in by_sum]
        idx = (same or by_id or by_sum or [None])[0]
        if idx is None:
            tampered[c["exercise"]] = DELETED
            continue
        found[c["exercise"]] = idx
        cell = nb.cells[idx]
        if cell_checksum(cell_source(cell)) != c["sha256"]:
            tampered[c["exercise"]] = EDITED
        orig = released.get(c["grade_id"])
        if orig is not None:  # run the check exactly as released (source, tags: no `skip-execution`)
            cell.source, cell.metadata = orig.source, orig.metadata
        cell.outputs, cell.execution_count = [], None

    work = Path(tempfile.mkdtemp(prefix="labkit-grade-"))
    try:
        for item in (RELEASE_MARKER, "data_samples", "README.md"):
            src = release / item
            if src.is_dir():
                shutil.copytree(src, work / item)
            elif src.is_file():
                shutil.copy2(src, work / item)
        (work / "notebooks").mkdir()
        nb_path = work / "notebooks" / name
        nbformat.write(nb, nb_path)
        events, status = work / "events.jsonl", work / "status.json"
        out_nb = (executed_dir / learner / name) if executed_dir else work / "executed.ipynb"
        out_nb.parent.mkdir(parents=True, exist_ok=True)
        # a minimal environment with the child-process policy of labkit.threads, for the model a learner's notebook
        # trains by default (its parameters cell: the smoke profile's)
        env = sandbox.learner_env(work, work / "runs", preset=get_config().model_preset)
        child = kernel.run(nb_path, work / "notebooks", env, events, status, out_nb, limit, memory)
        g.seconds, g.started, evs, end = child.seconds, child.started, child.events, child.end
        g.usage = {k: end[k] for k in ("cpu_seconds", "peak_rss_mb") if k in end}
        revealed = read_json(work / sandbox.REVEALED) or {}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    by_cell = {e["cell"]: e for e in evs if "cell" in e}
    check_cells = set(found.values())
    if end.get("status") == "time limit":
        note = f"time limit {limit:g} s reached" + (f" at cell {end['cell']}" if end.get("cell") is not None else "")
    elif end.get("status") in ("kernel died", "error"):
        note = f"{end['status']} at cell {end.get('cell')}: {end.get('error', '')}".strip()[:300]
    else:
        note = _first_error(evs, check_cells)
    # under RLIMIT_AS an allocation past the limit fails in the learner's cell (MemoryError) -- the kernel lives on
    memory_error = next((e for e in evs if (e.get("error") or [""])[0] == "MemoryError"), None)
    if memory and memory_error:
        note = f"memory limit {memory / 2**30:.3g} GiB reached at cell {memory_error['cell']} (MemoryError)"
    g.note = note
    for c in checks:
        ex = c["exercise"]
        if tampered.get(ex) == DELETED:
            g.rows.append(Row(learner, name, ex, DELETED, "no cell of the notebook is this check", note))
            continue
        idx = found[ex]
        status, hint = _verdict(by_cell.get(idx))
        sols = [cell for cell in nb.cells if is_solution(cell) and grade_id(cell) in c["solutions"]]
        if status != PASS and status != NOT_RUN and sols and all(_stub_left(s) for s in sols):
            status, hint = NOT_ATTEMPTED, ""
        qid = _question(released.get(c["grade_id"]))
        answer = revealed.get(qid) if qid and status in (PASS, FAIL) else None
        if answer is not None:  # predicted and measured: answered, whatever the distance
            status, hint = ANSWERED, "close" if answer.get("close") else "not close: the reveal explains why"
        if tampered.get(ex) == EDITED:
            hint = f"put back as released and run: {status}{': ' + hint if hint else ''}"
            status = EDITED
        row = Row(learner, name, ex, status, hint, note)
        if answer is not None:
            row.prediction, row.measured = _shown(answer.get("prediction")), _shown(answer.get("measured"))
        g.rows.append(row)
    return g


def check_release(release: str | Path) -> dict:
    """The release's marker; a UsageError (exit 2) when `release` is not a release."""
    try:
        return read_marker(release)
    except ValueError as exc:
        raise UsageError(
            f"--release {release}: {exc}; pass a folder written by `labkit course workshop --out`"
        ) from None


def learner_folders(submissions: str | Path) -> list[Path]:
    """The learners' folders in SUBMISSIONS (sorted); a UsageError (exit 2) when there are none."""
    subs = Path(submissions)
    if not subs.is_dir():
        raise UsageError(
            f"SUBMISSIONS {submissions}: no such directory; pass the folder holding one folder per learner"
        )
    learners = sorted(p for p in subs.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not learners:
        raise UsageError(
            f"SUBMISSIONS {submissions} holds no learner folders; put each learner's notebooks in a folder of their own"
        )
    return learners


def learner_notebooks(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts and p.is_file())


def grade(
    submissions: str | Path,
    out: str | Path,
    release: str | Path,
    limit: float | None = None,
    jobs: int | None = None,
    progress=print,
    memory: int | None = None,
) -> list[Row]:
    """Grade every learner folder of `submissions` against `release` (a folder `labkit course workshop` wrote)
    into `out` (gradebook.csv, gradebook.html, executed/, grading.json); returns the rows. `limit`: seconds per
    notebook (default `default_limit` of the notebook's minutes); `jobs`: notebooks graded at once (default
    `sandbox.default_jobs`); `memory`: bytes of address space per notebook (default `sandbox.default_memory`)."""
    jobs = jobs or sandbox.default_jobs(get_config().model_preset)
    memory = memory or sandbox.default_memory(jobs)
    out = Path(out)
    learners = learner_folders(submissions)
    rel = Path(release)
    marker = check_release(rel)
    index = marker["notebooks"]
    out.mkdir(parents=True, exist_ok=True)
    tasks, extra = [], []
    submitted: dict[str, set[str]] = {}
    for learner in learners:
        seen = set()
        for path in learner_notebooks(learner):
            if path.name in seen:
                continue
            seen.add(path.name)
            if path.name not in index:
                extra.append(Row(learner.name, path.name, "", UNKNOWN, "", "not a notebook of the release"))
                continue
            if not index[path.name]["checks"]:
                continue  # nothing to grade (e.g. 00)
            submitted.setdefault(path.name, set()).add(learner.name)
            tasks.append((learner.name, path))
    ordered = sorted(tasks, key=lambda t: (t[1].name, t[0]))

    def one(task):
        name, path = task
        entry = index[path.name]
        lim = limit if limit else default_limit(entry.get("minutes", 0))
        try:
            g = grade_notebook(name, path, rel, entry["checks"], lim, out / "executed", memory)
        except Exception as exc:  # noqa: BLE001 -- a grader bug on one notebook must not stop the room
            g = NotebookGrade(name, path.name, note=f"grader error: {type(exc).__name__}: {exc}"[:300])
            g.rows = [Row(name, path.name, c["exercise"], ERROR, "", g.note) for c in entry["checks"]]
        counts = ", ".join(f"{n} {s}" for s, n in Counter(r.status for r in g.rows).most_common())
        progress(f"{name}/{path.name}: {counts} ({g.seconds:.0f} s){' -- ' + g.note if g.note else ''}")
        return g

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(one, ordered))
    rows = [r for g in results for r in g.rows]
    runs = [
        {"learner": g.learner, "notebook": g.notebook, "started": g.started, "seconds": g.seconds, "note": g.note}
        | g.usage
        for g in results
    ]
    limits = {"jobs": jobs, "memory_bytes": memory, "time_limit_s": limit}
    atomic_write_text(out / "grading.json", json.dumps({"limits": limits, "notebooks": runs}, indent=2) + "\n")
    for nb_name, who in sorted(submitted.items()):
        for learner in learners:
            if learner.name not in who:
                rows += [Row(learner.name, nb_name, c["exercise"], NOT_SUBMITTED) for c in index[nb_name]["checks"]]
    rows += extra
    order = {name: i for i, name in enumerate(index)}
    rows.sort(key=lambda r: (r.learner, order.get(r.notebook, len(order)), r.notebook, exercise_key(r.exercise)))
    gradebook.write(out, rows, marker)
    return rows
