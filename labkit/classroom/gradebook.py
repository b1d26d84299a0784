"""The gradebook: one row per learner x exercise with the status the grader gave it, written for the instructor.

`DIR/gradebook.csv` (one row per learner x exercise) and `DIR/gradebook.html` (the pass rate per exercise as an
embedded PNG chart, the learner x exercise table, and every exercise not passed with the hint the learner saw).

A predict-then-run question has no right answer: a learner who predicted and ran the measurement is `answered`, with
the prediction and the measured value in the row (`prediction`, `measured`), never a pass or a fail; the page shows
the room's predictions against the measurement per question instead of a pass rate.
"""

from __future__ import annotations

import base64
import csv
import html
import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from labkit.atomic import atomic_write_text

PASS, FAIL, NOT_ATTEMPTED, ERROR, NOT_RUN = "pass", "fail", "not attempted", "error", "not run"
EDITED, DELETED, INVALID, NOT_SUBMITTED, UNKNOWN = (
    "check edited",
    "check deleted",
    "invalid notebook",
    "not submitted",
    "unknown notebook",
)
ANSWERED = "answered"  # a predict-then-run question: predicted, then measured (not a pass or a fail)
STATUSES = (PASS, FAIL, ANSWERED, NOT_ATTEMPTED, ERROR, NOT_RUN, EDITED, DELETED, INVALID, NOT_SUBMITTED)
FIELDS = ("learner", "notebook", "exercise", "status", "hint", "note", "prediction", "measured")


@dataclass
class Row:
    learner: str
    notebook: str
    exercise: str
    status: str
    hint: str = ""
    note: str = ""  # the notebook's problem, if any (time limit, first error, invalid file ...)
    prediction: str = ""  # a predict-then-run answer: the learner's prediction ...
    measured: str = ""  # ... and what their run measured (in the question's unit)


def exercise_key(ex: str):
    """Sorts exercises in course order ("05.2" after "05.1", "05.10" after "05.9"); no exercise last."""
    return tuple(int(p) if p.isdigit() else 0 for p in ex.split(".")) if ex else (999,)


def write_csv(path: Path, rows: list[Row]) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(FIELDS)
    for r in rows:
        w.writerow([getattr(r, f) for f in FIELDS])
    return atomic_write_text(path, buf.getvalue())


def predicted_exercises(rows: list[Row]) -> set[str]:
    """The predict-then-run exercises: those some learner answered."""
    return {r.exercise for r in rows if r.status == ANSWERED}


def pass_rates(rows: list[Row]) -> dict[str, tuple[int, int]]:
    """exercise -> (passed, learners who submitted its notebook), in course order; predict-then-run questions
    have no pass rate."""
    out: dict[str, list[int]] = {}
    predicted = predicted_exercises(rows)
    for r in rows:
        if not r.exercise or r.status == NOT_SUBMITTED or r.exercise in predicted:
            continue
        n = out.setdefault(r.exercise, [0, 0])
        n[0] += r.status == PASS
        n[1] += 1
    return {ex: (p, n) for ex, (p, n) in sorted(out.items(), key=lambda kv: exercise_key(kv[0]))}


def summary(rows: list[Row]) -> str:
    learners = sorted({r.learner for r in rows})
    counts = Counter(r.status for r in rows if r.exercise)
    parts = [f"{counts[s]} {s}" for s in STATUSES if counts[s]]
    rates = pass_rates(rows)
    stuck = [ex for ex, (p, n) in rates.items() if n and p / n < 0.5]
    exercises = len({r.exercise for r in rows if r.exercise})
    text = f"graded {len(learners)} learner(s), {exercises} exercise(s): {', '.join(parts) or 'nothing to grade'}"
    unknown = sum(r.status == UNKNOWN for r in rows)
    if unknown:
        text += f"; {unknown} notebook(s) not in the release"
    if stuck:
        text += f"; under half passed: {', '.join(stuck)}"
    return text


def _png(fig) -> str:
    """A matplotlib figure as a base64 PNG (no CDN, no script), closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


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
    return _png(fig)


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _predictions_png(rows: list[Row]) -> str:
    """Per predict-then-run question, each learner's prediction (dots) against what their runs measured (the
    line: the median), on a log scale when the values span over 10x: a base64 PNG."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    by_ex: dict[str, list[Row]] = {}
    for r in rows:
        if r.status == ANSWERED and _float(r.prediction) is not None and _float(r.measured) is not None:
            by_ex.setdefault(r.exercise, []).append(r)
    exercises = sorted(by_ex, key=exercise_key)
    fig, axes = plt.subplots(1, max(1, len(exercises)), figsize=(3.2 * max(1, len(exercises)), 3), squeeze=False)
    for ax, ex in zip(axes[0], exercises):
        preds = [_float(r.prediction) for r in by_ex[ex]]
        measured = sorted(_float(r.measured) for r in by_ex[ex])
        ax.scatter(range(len(preds)), preds, color="#1565c0", label="predicted", zorder=3)
        ax.axhline(measured[len(measured) // 2], color="#c62828", label="measured")
        values = [v for v in preds + measured if v > 0]
        if values and len(values) == len(preds) + len(measured) and max(values) / min(values) > 10:
            ax.set_yscale("log")
        ax.set_xticks(range(len(preds)), [r.learner for r in by_ex[ex]], rotation=45, fontsize=7)
        ax.set_title(ex)
    if exercises:
        axes[0][0].legend(fontsize=7)
    fig.suptitle("predict, then run: the room's predictions against the measurement")
    return _png(fig)


COLORS = {PASS: "#c8e6c9", FAIL: "#ffcdd2", ANSWERED: "#bbdefb", NOT_ATTEMPTED: "#eeeeee", NOT_SUBMITTED: "#fafafa"}


def gradebook_html(rows: list[Row], marker: dict | None = None) -> str:
    """The instructor's page: summary, the chart, the learner x exercise table (hints on hover and below)."""
    esc = html.escape
    rates = pass_rates(rows)
    exercises = sorted({r.exercise for r in rows if r.exercise}, key=exercise_key)
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
            shown = f"{r.status}: {r.prediction} vs {r.measured}" if r.status == ANSWERED else r.status
            tds.append(f'<td style="background:{color}" title="{title}">{esc(shown)}</td>')
        body.append(f"<tr><th>{esc(learner)}</th>{''.join(tds)}</tr>")
    details = [
        f"<tr><td>{esc(r.learner)}</td><td>{esc(r.notebook)}</td><td>{esc(r.exercise)}</td>"
        f"<td>{esc(r.status)}</td><td>{esc(r.hint)}</td><td>{esc(r.note)}</td></tr>"
        for r in rows
        if r.status not in (PASS, ANSWERED, NOT_SUBMITTED)
    ]
    predicted = ""
    if predicted_exercises(rows):
        predicted = (
            "<h2>Predict, then run</h2>\n<p>Answered is answered: a prediction has no right answer. Each learner's "
            "prediction against what their run measured.</p>\n"
            f'<img alt="predictions against the measurement" src="data:image/png;base64,{_predictions_png(rows)}">'
        )
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
{predicted}
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


def write(out: Path, rows: list[Row], marker: dict | None = None) -> None:
    """`out/gradebook.csv` and `out/gradebook.html` (`marker`: the release's, named on the page)."""
    write_csv(out / "gradebook.csv", rows)
    atomic_write_text(out / "gradebook.html", gradebook_html(rows, marker))
