"""`labkit course grade SUBMISSIONS --out DIR`: a room's notebooks, graded per exercise.

SUBMISSIONS holds one folder per learner with the notebooks they saved (named as in the release; nested
folders are searched). Each learner notebook runs in its own process (`python -m labkit.classroom.grading`, which
drives the kernel through nbclient -- the engine under papermill -- with `allow_errors`, so a failed check
never stops the later exercises), in a temporary copy of the release (so `data_samples/` is there and
`runs/` lands in it), under a per-notebook time limit. Each exercise is then read from its check cell's
outputs:

* `pass` -- the check printed `✅ pass` and raised nothing;
* `fail` -- it printed `❌ fail: <hint>` / raised `ExerciseFailed` (the hint is kept);
* `not attempted` -- the exercise's cell still holds the placeholder `...  # YOUR CODE HERE`;
* `error` -- the check cell raised something else (e.g. `NameError`: a cell above it broke);
* `not run` -- the time limit was reached, or the kernel died, before the check cell ran;
* `check edited` -- the check cell differs from the release's (its checksum in `.labkit-release.json`): it is
  put back as released and run, and its verdict is shown in the hint -- an edited check never counts as a pass;
* `check deleted` -- no cell of the notebook is that check;
* `invalid notebook` -- the file is not a notebook (not JSON, not nbformat 4);
* `not submitted` -- the learner has no such notebook (others have).

A notebook the release does not hold is listed with the status `unknown notebook`. Nothing a learner wrote
can stop the grader: every problem becomes a row. The learner's code runs as the user who runs the grader --
grade untrusted submissions in a container or a throw-away account.

Writes `DIR/gradebook.csv` (one row per learner x exercise), `DIR/gradebook.html` (the pass rate per exercise
as an embedded PNG chart, and the learner x exercise table) and `DIR/executed/<learner>/<notebook>` (what
each learner's notebook showed when graded). Why not nbgrader's autograder: docs/decisions.md.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from labkit.atomic import atomic_write_text
from labkit.cli.errors import UsageError
from labkit.config import get_config
from labkit.paths import RELEASE_MARKER
from labkit.procs import stop_group
from labkit.results import read_json
from labkit.threads import child_env
from labkit.classroom.release import STUB, cell_checksum, cell_source, grade_id, is_check, is_solution, read_marker

PASS, FAIL, NOT_ATTEMPTED, ERROR, NOT_RUN = "pass", "fail", "not attempted", "error", "not run"
EDITED, DELETED, INVALID, NOT_SUBMITTED, UNKNOWN = (
    "check edited",
    "check deleted",
    "invalid notebook",
    "not submitted",
    "unknown notebook",
)
STATUSES = (PASS, FAIL, NOT_ATTEMPTED, ERROR, NOT_RUN, EDITED, DELETED, INVALID, NOT_SUBMITTED)
FIELDS = ("learner", "notebook", "exercise", "status", "hint", "note")
PASS_MARK, FAIL_MARK = "✅ pass", "❌ fail:"
MIN_LIMIT_S, LIMIT_PER_MINUTE_S = 120, 240  # default limit: 4x the notebook's minutes, at least 2 minutes
GRACE_S = 30  # the child's own cleanup (kernel shutdown) before the grader kills it
TEXT_MAX = 4000


@dataclass
class Row:
    learner: str
    notebook: str
    exercise: str
    status: str
    hint: str = ""
    note: str = ""  # the notebook's problem, if any (time limit, first error, invalid file ...)


@dataclass
class NotebookGrade:
    learner: str
    notebook: str
    rows: list[Row] = field(default_factory=list)
    seconds: float = 0.0
    note: str = ""


def default_limit(minutes: float) -> int:
    """Seconds a notebook may run: 4x its `minutes` (the notebook's metadata), at least 2 minutes."""
    return int(max(MIN_LIMIT_S, LIMIT_PER_MINUTE_S * float(minutes or 0)))


# ---- one notebook, in a child process ------------------------------------------------------------------------


class _TimeLimit(Exception):
    pass


def _outputs(cell) -> dict:
    """What a cell showed: its stream text and its error (ename, evalue), both truncated."""
    text, error = [], None
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream":
            text.append(str(out.get("text", "")))
        elif kind == "error" and error is None:
            error = [str(out.get("ename", "")), str(out.get("evalue", ""))[:TEXT_MAX]]
    return {"text": "".join(text)[:TEXT_MAX], "error": error}


def execute(notebook: str, cwd: str, events: str, status: str, executed: str, limit: float) -> None:
    """Run `notebook` with its kernel's cwd at `cwd`, errors allowed, until done or `limit` seconds: each
    executed code cell's outputs are appended to `events` (JSON lines, as they happen: a grader that has to
    kill this process still has them), the end to `status`, the executed notebook to `executed`."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    t0 = time.monotonic()
    deadline = t0 + limit
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name="python3",
        allow_errors=True,
        interrupt_on_timeout=False,
        startup_timeout=int(max(10, min(120, limit))),
        resources={"metadata": {"path": cwd}},
        timeout_func=lambda cell: max(1, int(deadline - time.monotonic()) + 1),
    )
    state = {"cell": -1}
    log = open(events, "a", encoding="utf-8")

    def on_start(notebook):
        pid = getattr(client.km.provisioner, "pid", None) if client.km else None
        log.write(json.dumps({"kernel_pid": pid}) + "\n")
        log.flush()

    def on_cell_start(cell, cell_index):
        state["cell"] = cell_index
        if time.monotonic() > deadline:
            raise _TimeLimit()

    def on_cell_executed(cell, cell_index, execute_reply):
        log.write(json.dumps({"cell": cell_index, **_outputs(cell)}, ensure_ascii=False) + "\n")
        log.flush()

    client.on_notebook_start = on_start
    client.on_cell_start = on_cell_start
    client.on_cell_executed = on_cell_executed
    end = {"status": "done"}
    try:
        client.execute()
    except (_TimeLimit, CellTimeoutError):
        end = {"status": "time limit", "cell": state["cell"]}
    except DeadKernelError as exc:
        end = {"status": "kernel died", "cell": state["cell"], "error": str(exc)[:TEXT_MAX]}
    except Exception as exc:  # noqa: BLE001 -- a kernel that never started, a notebook nbclient rejects ...
        end = {"status": "error", "cell": state["cell"], "error": f"{type(exc).__name__}: {exc}"[:TEXT_MAX]}
    finally:
        log.close()
    end["seconds"] = round(time.monotonic() - t0, 1)
    try:
        nbformat.write(nb, executed)
    except Exception:  # noqa: BLE001 -- the grade does not depend on the copy
        pass
    atomic_write_text(status, json.dumps(end, ensure_ascii=False))


def _kill_kernel(events: Path) -> None:
    """The backstop: the kernel leads its own process group (jupyter_client starts it so); SIGKILL it."""
    try:
        pids = [e["kernel_pid"] for e in _read_events(events) if e.get("kernel_pid")]
    except OSError:
        return
    for pid in pids:
        try:
            os.killpg(int(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError, ValueError):
            pass


def _read_events(path: Path) -> list[dict]:
    """The child's events; a line cut short by a kill is skipped (never a crash)."""
    out = []
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


# ---- the grader ----------------------------------------------------------------------------------------------


def _stub_left(cell) -> bool:
    return any(line.strip() == STUB for line in cell_source(cell).splitlines())


def _released_checks(release: Path, name: str) -> dict[str, dict]:
    """grade_id -> the release's check cell (source and metadata), to put an edited check back."""
    import nbformat

    nb = nbformat.read(release / "notebooks" / name, as_version=4)
    return {grade_id(c): c for c in nb.cells if is_check(c)}


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


def grade_notebook(
    learner: str, path: Path, release: Path, checks: list[dict], limit: float, executed_dir: Path | None = None
) -> NotebookGrade:
    """Grade one learner notebook against the release's `checks` (the marker's entry for it)."""
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
        # the kernel (started by the child) inherits the child-process policy of labkit.threads, for the model a
        # learner's notebook trains by default (its parameters cell: the smoke profile's)
        env = {
            **child_env(preset=get_config().model_preset),
            "LABKIT_RUNS_DIR": str(work / "runs"),
            "MPLBACKEND": "Agg",
        }
        argv = [sys.executable, "-m", "labkit.classroom.grading", str(nb_path), str(work / "notebooks")]
        argv += [str(events), str(status), str(out_nb), str(limit)]
        t0 = time.monotonic()
        proc = subprocess.Popen(
            argv,
            cwd=work / "notebooks",
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        killed = False
        try:
            _, err = proc.communicate(timeout=limit + GRACE_S)
        except subprocess.TimeoutExpired:
            killed = True
            stop_group(proc, grace=2, kill_wait=5)
            _kill_kernel(events)
            _, err = proc.communicate()
        g.seconds = round(time.monotonic() - t0, 1)
        evs = _read_events(events)
        end = read_json(status)
        if end is None:  # the child never wrote its end (killed, or it crashed)
            end = {"status": "time limit" if killed else "error", "cell": None}
            if not killed:
                tail = (err or b"").decode("utf-8", "replace").strip().splitlines()
                end["error"] = f"the grading process exited {proc.returncode}: {(tail or [''])[-1][:200]}"
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
        if tampered.get(ex) == EDITED:
            hint = f"put back as released and run: {status}{': ' + hint if hint else ''}"
            status = EDITED
        g.rows.append(Row(learner, name, ex, status, hint, note))
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
    jobs: int = 1,
    progress=print,
) -> list[Row]:
    """Grade every learner folder of `submissions` against `release` (a folder `labkit course workshop` wrote)
    into `out` (gradebook.csv, gradebook.html, executed/); returns the rows. `limit`: seconds per notebook
    (default `default_limit` of the notebook's minutes); `jobs`: notebooks graded at once."""
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
            g = grade_notebook(name, path, rel, entry["checks"], lim, out / "executed")
        except Exception as exc:  # noqa: BLE001 -- a grader bug on one notebook must not stop the room
            g = NotebookGrade(name, path.name, note=f"grader error: {type(exc).__name__}: {exc}"[:300])
            g.rows = [Row(name, path.name, c["exercise"], ERROR, "", g.note) for c in entry["checks"]]
        counts = ", ".join(f"{n} {s}" for s, n in Counter(r.status for r in g.rows).most_common())
        progress(f"{name}/{path.name}: {counts} ({g.seconds:.0f} s){' -- ' + g.note if g.note else ''}")
        return g

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(one, ordered))
    rows = [r for g in results for r in g.rows]
    for nb_name, who in sorted(submitted.items()):
        for learner in learners:
            if learner.name not in who:
                rows += [Row(learner.name, nb_name, c["exercise"], NOT_SUBMITTED) for c in index[nb_name]["checks"]]
    rows += extra
    order = {name: i for i, name in enumerate(index)}
    rows.sort(key=lambda r: (r.learner, order.get(r.notebook, len(order)), r.notebook, _ex_key(r.exercise)))
    write_csv(out / "gradebook.csv", rows)
    atomic_write_text(out / "gradebook.html", gradebook_html(rows, marker))
    return rows


def _ex_key(ex: str):
    return tuple(int(p) if p.isdigit() else 0 for p in ex.split(".")) if ex else (999,)


def write_csv(path: Path, rows: list[Row]) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(FIELDS)
    for r in rows:
        w.writerow([getattr(r, f) for f in FIELDS])
    return atomic_write_text(path, buf.getvalue())


def pass_rates(rows: list[Row]) -> dict[str, tuple[int, int]]:
    """exercise -> (passed, learners who submitted its notebook), in course order."""
    out: dict[str, list[int]] = {}
    for r in rows:
        if not r.exercise or r.status == NOT_SUBMITTED:
            continue
        n = out.setdefault(r.exercise, [0, 0])
        n[0] += r.status == PASS
        n[1] += 1
    return {ex: (p, n) for ex, (p, n) in sorted(out.items(), key=lambda kv: _ex_key(kv[0]))}


def summary(rows: list[Row]) -> str:
    learners = sorted({r.learner for r in rows})
    counts = Counter(r.status for r in rows if r.exercise)
    parts = [f"{counts[s]} {s}" for s in STATUSES if counts[s]]
    rates = pass_rates(rows)
    stuck = [ex for ex, (p, n) in rates.items() if n and p / n < 0.5]
    text = f"graded {len(learners)} learner(s), {len(rates)} exercise(s): {', '.join(parts) or 'nothing to grade'}"
    unknown = sum(r.status == UNKNOWN for r in rows)
    if unknown:
        text += f"; {unknown} notebook(s) not in the release"
    if stuck:
        text += f"; under half passed: {', '.join(stuck)}"
    return text


def _chart_png(rates: dict[str, tuple[int, int]]) -> str:
    """The pass rate per exercise as a horizontal bar chart: a base64 PNG (no CDN, no script)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    labels = list(rates) or ["-"]
    values = [100 * p / n if n else 0 for p, n in rates.values()] or [0]
    fig, ax = plt.subplots(figsize=(7, 0.32 * len(labels) + 1.2))
    ax.barh(range(len(labels)), values, color=["#2e7d32" if v >= 50 else "#c62828" for v in values])
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("learners who passed (%)")
    for i, (p, n) in enumerate(rates.values()):
        ax.text(min(values[i] + 1, 88), i, f"{p}/{n}", va="center", fontsize=8)
    ax.set_title("pass rate per exercise")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


COLORS = {PASS: "#c8e6c9", FAIL: "#ffcdd2", NOT_ATTEMPTED: "#eeeeee", NOT_SUBMITTED: "#fafafa"}


def gradebook_html(rows: list[Row], marker: dict | None = None) -> str:
    """The instructor's page: summary, the chart, the learner x exercise table (hints on hover and below)."""
    esc = html.escape
    rates = pass_rates(rows)
    exercises = list(rates)
    learners = sorted({r.learner for r in rows})
    cell = {(r.learner, r.exercise): r for r in rows if r.exercise}
    head = "".join(f"<th>{esc(ex)}</th>" for ex in exercises)
    body = []
    for learner in learners:
        tds = []
        for ex in exercises:
            r = cell.get((learner, ex))
            if r is None:
                tds.append("<td></td>")
                continue
            color = COLORS.get(r.status, "#ffe0b2")
            title = esc(r.hint or r.note or r.status, quote=True)
            tds.append(f'<td style="background:{color}" title="{title}">{esc(r.status)}</td>')
        body.append(f"<tr><th>{esc(learner)}</th>{''.join(tds)}</tr>")
    details = [
        f"<tr><td>{esc(r.learner)}</td><td>{esc(r.notebook)}</td><td>{esc(r.exercise)}</td>"
        f"<td>{esc(r.status)}</td><td>{esc(r.hint)}</td><td>{esc(r.note)}</td></tr>"
        for r in rows
        if r.status not in (PASS, NOT_SUBMITTED)
    ]
    release = marker or {}
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>gradebook</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:3px 6px;font-size:13px;text-align:left;vertical-align:top}}</style></head>
<body><h1>Gradebook</h1>
<p>{esc(summary(rows))}</p>
<p>Release: {esc(str(release.get("title", "")))}, labkit {esc(str(release.get("labkit_version", "")))},
written {esc(str(release.get("created", "")))}.</p>
<h2>Pass rate per exercise</h2>
<img alt="pass rate per exercise" src="data:image/png;base64,{_chart_png(rates)}">
<h2>Learners x exercises</h2>
<table><tr><th>learner</th>{head}</tr>
{"".join(body)}
</table>
<h2>Every exercise not passed, with the hint the learner saw</h2>
<table><tr><th>learner</th><th>notebook</th><th>exercise</th><th>status</th><th>hint</th><th>note</th></tr>
{"".join(details)}
</table>
</body></html>
"""


if __name__ == "__main__":  # the child process: python -m labkit.classroom.grading NB CWD EVENTS STATUS EXECUTED LIMIT
    nb_, cwd_, events_, status_, executed_, limit_ = sys.argv[1:7]
    execute(nb_, cwd_, events_, status_, executed_, float(limit_))
