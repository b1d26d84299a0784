"""`labkit course workshop --out DIR`: the learner's release of the course.

The instructor notebooks in `notebooks/` carry each exercise's solution between nbgrader's
`### BEGIN SOLUTION` / `### END SOLUTION` markers, in cells tagged `solution` (and marked as
nbgrader solution cells); the headless course runs them as they are, so every check is proven
to pass. The release is made with nbgrader's own preprocessors (the tool `nbgrader
generate_assignment` runs, without its course database): `ClearSolutions` replaces each solution
region with a placeholder (`...  # YOUR CODE HERE`) that its check cell then fails on,
`ClearOutput` strips outputs, `LockCells` keeps check cells read-only. Check cells stay as they
are. `data_samples/` (what the notebooks read besides what they generate) is copied alongside,
with a short README for the learner.

The release knows it is one: `.labkit-release.json` at its root (title, labkit version, date, and the
checksum of every check cell) makes `labkit.paths.project_root()` answer the release's folder, so a
notebook run anywhere inside it reads `<release>/data_samples/` and writes `<release>/runs/` -- with an
editable install or a plain wheel. `labkit course grade` checks learners' check cells against those
checksums. `--solutions` writes the same release with the instructor notebooks (outputs stripped).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Sequence

from labkit.atomic import atomic_write_text
from labkit.cli.errors import UsageError
from labkit.i18n import LANGUAGES, N_, SOURCE, _, using
from labkit.paths import RELEASE_MARKER

STUB = "...  # YOUR CODE HERE"
MARKER_VERSION = 1
README = N_("""# {title} -- {kind}

{intro}

## Where to start

Start with `notebooks/{first}`, then `notebooks/{second}`: the notebooks are numbered in the order
they build on each other. Set up once: labkit must be installed in the notebook's kernel (on the workshop's
JupyterHub / Binder it is; on your machine `pip install -e '.[lab]'` in the course repository), then start
`jupyter lab` in this folder.

## Exercises in the workshop

An exercise is named by its notebook and its number in that notebook: `05.1` is notebook 05's first exercise.
{agenda}

## Where results go

This folder is the course's root for the notebooks in it (the file `{marker}` marks it): wherever you
start Jupyter inside it, the notebooks read `data_samples/` here and write their results to `runs/` here
(`runs/<notebook>/results.json`, written by each notebook's last cell). To write them elsewhere, set
`LABKIT_RUNS_DIR=/some/folder` in the environment before starting Jupyter.

## "Run All" and the checks

{run_all}
""")
LEARNER_INTRO = N_("""Each notebook ends with exercises. In every cell that says `# YOUR CODE HERE`, replace the `...` with your
answer, run it, then run the check cell below it: it prints `✅ pass` or `❌ fail: <hint>`.""")
SOLUTIONS_INTRO = N_("""The solutions: the same notebooks with every exercise solved (the answer sits between `### BEGIN SOLUTION`
and `### END SOLUTION`). Read them after you tried the exercises yourself. `ANSWERS.md` is the instructor's part
of the workshop guide: what to point at in each notebook and the wrong answers each check names.""")
ANSWERS = "ANSWERS.md"  # the solutions release's copy of docs/[<lang>/]instructor/answers.md; never in a learner's
LEARNER_RUN_ALL = N_("""A check cell on an unsolved exercise fails on purpose: it prints `❌ fail: <hint>` and raises an error, and
Jupyter stops "Run All" there -- the cells below it, including the notebook's last cell (which writes
`runs/<notebook>/results.json`), do not run. Most exercises come after the lesson, so everything above them
has run by then. One exercise per notebook sits inside the lesson: *predict, then run* -- write your guess in
its cell before the cells that measure it; the reveal after the measurement compares and explains (a far guess
is not a failure), but with no guess written it fails like a check, and "Run All" stops there. To go on past an
unsolved exercise, select the cell after its check cell and use *Run > Run Selected Cell and All Below*. To run
only the lesson, select the first exercise cell after it and use *Run > Run All Above Selected Cell*.""")
SOLUTIONS_RUN_ALL = N_(
    """Every check passes here, so "Run All" runs each notebook to its end and writes `runs/<notebook>/results.json`."""
)
AGENDA_RE = re.compile(r"^##+ .*agenda.*\b3[ -]?h", re.IGNORECASE)
EXERCISE_RE = re.compile(r"\b(\d\d\.\d+)\b")


def _preprocessors():
    try:
        from nbgrader.preprocessors import ClearOutput, ClearSolutions, LockCells
    except ImportError as exc:
        raise UsageError(
            f"the workshop release needs nbgrader ({exc.name} is missing): pip install -e '.[dev]'"
        ) from None
    from traitlets.config import Config

    cfg = Config()
    cfg.ClearSolutions.code_stub = {"python": STUB}
    cfg.ClearSolutions.enforce_metadata = True
    cfg.LockCells.lock_grade_cells = True
    return [ClearSolutions(config=cfg), ClearOutput(config=cfg), LockCells(config=cfg)]


def learner_notebook(nb):
    """The learner's copy of one instructor notebook (an nbformat node; the input is not changed)."""
    import copy

    nb = copy.deepcopy(nb)
    resources = {"language": "python"}
    for pp in _preprocessors():
        nb, resources = pp.preprocess(nb, resources)
    return nb


def solutions_notebook(nb):
    """The solutions copy of one instructor notebook: the notebook as it is, outputs stripped."""
    import copy

    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


# ---- check cells: what the marker records and `labkit course grade` compares ----------------------------------


def _tags(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []) or [])


def _nbgrader(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def is_check(cell) -> bool:
    """A check cell: tagged `check`, or an nbgrader grade cell that is not a solution cell."""
    if cell.get("cell_type") != "code":
        return False
    g = _nbgrader(cell)
    return "check" in _tags(cell) or (bool(g.get("grade")) and not g.get("solution"))


def is_solution(cell) -> bool:
    """A learner's answer cell: tagged `solution`, or an nbgrader solution cell."""
    return cell.get("cell_type") == "code" and ("solution" in _tags(cell) or bool(_nbgrader(cell).get("solution")))


def grade_id(cell) -> str:
    return str(_nbgrader(cell).get("grade_id", ""))


def cell_source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def cell_checksum(source: str) -> str:
    """sha256 of a cell's source, line endings and trailing whitespace normalised (a re-saved cell still matches)."""
    text = "\n".join(line.rstrip() for line in source.replace("\r\n", "\n").strip().split("\n"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def exercise_label(gid: str, number: str, index: int) -> str:
    """`05.1` from the grade id `nb05_ex1_check`; else the notebook's number and the check's place in it."""
    m = re.fullmatch(r"nb(\d\d)_ex(\d+)(?:_check)?", gid)
    return f"{m.group(1)}.{m.group(2)}" if m else f"{number}.{index}"


def checks_of(nb, stem: str) -> list[dict]:
    """Each check cell of a notebook, in order: its exercise label, grade id, checksum and the grade ids of the
    solution cells it checks (those since the previous check)."""
    number = stem[:2] if stem[:2].isdigit() else stem
    out, solutions = [], []
    for cell in nb["cells"]:
        if is_solution(cell):
            solutions.append(grade_id(cell))
        elif is_check(cell):
            label = exercise_label(grade_id(cell), number, len(out) + 1)
            if any(c["exercise"] == label for c in out):
                label = grade_id(cell) or f"{number}.{len(out) + 1}"
            out.append(
                {
                    "exercise": label,
                    "grade_id": grade_id(cell),
                    "sha256": cell_checksum(cell_source(cell)),
                    "solutions": solutions,
                }
            )
            solutions = []
    return out


# ---- the README ----------------------------------------------------------------------------------------------


def agenda_exercises(guide: str) -> tuple[list[str], list[str]]:
    """(exercises done in the room, take-home exercises) named by the 3-hour agenda of the instructor's guide
    (`docs/workshop.md`): the table under its `## Agenda: 3 hours` heading; a `;`-separated part of a row that
    says "take-home" names take-home exercises."""
    in_room: list[str] = []
    take_home: list[str] = []
    inside = False
    for line in guide.splitlines():
        if line.startswith("#"):
            inside = bool(AGENDA_RE.match(line))
            continue
        if not inside or not line.lstrip().startswith("|"):
            continue
        for part in line.split(";"):
            dest = take_home if "take-home" in part.lower() or "take home" in part.lower() else in_room
            for ex in EXERCISE_RE.findall(part):
                if ex not in in_room and ex not in take_home:
                    dest.append(ex)
    return in_room, take_home


def _agenda_text(guide: Path | None) -> str:
    text = guide.read_text(encoding="utf-8") if guide and guide.is_file() else ""
    in_room, take_home = agenda_exercises(text)
    if not in_room and not take_home:
        return _("Your instructor tells you which exercises the workshop does; the others are for afterwards.")
    lines = []
    if in_room:
        lines.append(_("The 3-hour workshop does these in the room: {exercises}.").format(exercises=", ".join(in_room)))
    if take_home:
        lines.append(_("Take-home: {exercises}.").format(exercises=", ".join(take_home)))
    lines.append(_("Every other exercise is there for afterwards, at your own pace."))
    return "\n".join(lines)


def readme(notebooks: Sequence[str], guide: Path | None = None, solutions: bool = False, title: str = "") -> str:
    """The release's README.md: where to start, the agenda's exercises, where results go, "Run All"."""
    names = list(notebooks) or ["00_start_here.ipynb"]
    return _(README).format(
        title=title or "labkit course",
        kind=_("solutions") if solutions else _("workshop copy"),
        intro=_(SOLUTIONS_INTRO) if solutions else _(LEARNER_INTRO),
        first=names[0],
        second=names[1] if len(names) > 1 else names[0],
        agenda=_agenda_text(guide),
        marker=RELEASE_MARKER,
        run_all=_(SOLUTIONS_RUN_ALL) if solutions else _(LEARNER_RUN_ALL),
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("labkit")
    except PackageNotFoundError:
        import labkit

        return getattr(labkit, "__version__", "unknown")


def read_marker(release: str | Path) -> dict:
    """A release's marker (`.labkit-release.json`); ValueError when it is missing or not one."""
    path = Path(release) / RELEASE_MARKER
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a labkit release marker ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("notebooks"), dict):
        raise ValueError(f"{path}: not a labkit release marker (no `notebooks`)")
    return data


def write_release(
    out: str | Path,
    notebooks: Sequence[str | Path],
    data_dir: str | Path | None = None,
    solutions: bool = False,
    guide: str | Path | None = None,
    title: str = "labkit course",
    language: str | None = None,
    answers: str | Path | None = None,
) -> list[Path]:
    """Write the learner release of the instructor `notebooks` to `out`; returns the notebooks written.

    `solutions=True` writes the solutions release instead (the instructor notebooks, outputs stripped).
    `data_dir` (default: `data_samples/` beside the notebooks' folder, else the root's) is copied alongside; `guide` (default:
    `docs/workshop.md` beside the notebooks' folder) names the agenda's exercises in the README. The marker
    `.labkit-release.json` at `out`'s root makes `out` the course's root for the notebooks run inside it; its
    `language` (`language`, default English) is the language of the checks and reports run there. The solutions
    release also gets `ANSWERS.md` from `answers` (default: `docs/instructor/answers.md` beside the notebooks' folder,
    `docs/<language>/instructor/answers.md` for a translated edition): the guide's answers, which the learner
    release never carries."""
    import nbformat

    from labkit.paths import project_root

    out, paths = Path(out), [Path(p) for p in notebooks]
    for src_dir in {p.parent.resolve() for p in paths}:
        if out.resolve() == src_dir or src_dir in out.resolve().parents:
            raise UsageError(f"--out {out} is inside the instructor notebooks ({src_dir}): choose another directory")
    try:
        (out / "notebooks").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create it ({exc.strerror}); choose a writable directory") from None
    written, index = [], {}
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        released = solutions_notebook(nb) if solutions else learner_notebook(nb)
        dest = out / "notebooks" / path.name
        nbformat.write(released, dest)
        written.append(dest)
        meta = nb.metadata.get("labkit", {})
        index[path.name] = {"minutes": meta.get("minutes", 0), "checks": checks_of(released, path.stem)}
    nb_dir = paths[0].parent.resolve() if paths else None
    if nb_dir is not None and nb_dir.name in LANGUAGES:  # notebooks/<lang>/: the checkout is one more level up
        nb_dir = nb_dir.parent
    beside = nb_dir.parent if nb_dir is not None else project_root()  # the instructor's checkout
    if data_dir is None:
        data_dir = next((d for d in (beside / "data_samples", project_root() / "data_samples") if d.is_dir()), None)
    data = Path(data_dir) if data_dir else beside / "data_samples"
    if data.is_dir():
        shutil.copytree(data, out / "data_samples", dirs_exist_ok=True)
    if guide is None:
        guide = beside / "docs" / "workshop.md"
    with using(language):
        text = readme([p.name for p in paths], Path(guide) if guide else None, solutions, title)
    (out / "README.md").write_text(text, encoding="utf-8")
    if answers is None:
        edition = "" if language in (None, SOURCE) else language
        answers = beside / "docs" / edition / "instructor" / "answers.md"
    (out / ANSWERS).unlink(missing_ok=True)  # a learner release written over a solutions one loses it too
    if solutions and Path(answers).is_file():
        shutil.copyfile(answers, out / ANSWERS)
    marker = {
        "labkit_release": MARKER_VERSION,
        "kind": "solutions" if solutions else "learner",
        "title": title,
        "labkit_version": _version(),
        "created": datetime.date.today().isoformat(),
        "language": language or SOURCE,
        "notebooks": index,
    }
    atomic_write_text(out / RELEASE_MARKER, json.dumps(marker, ensure_ascii=False, indent=2) + "\n")
    return written
