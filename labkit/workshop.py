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
"""
from __future__ import annotations

import shutil
from pathlib import Path

from labkit.cli_errors import UsageError

STUB = "...  # YOUR CODE HERE"
TAGS = ("exercise", "solution", "check")
README = """# {title} -- workshop copy

Each notebook ends with exercises. In every cell that says `# YOUR CODE HERE`, replace the `...` with your
answer, run it, then run the check cell below it: it prints `✅ pass` or `❌ fail: <hint>`.

Set up once: `pip install -e '.[lab]'` in the course repository (or open this folder on the workshop's
JupyterHub / Binder, where it is installed), then `jupyter lab`.
"""


def _preprocessors():
    try:
        from nbgrader.preprocessors import ClearOutput, ClearSolutions, LockCells
    except ImportError as exc:
        raise UsageError(f"the workshop release needs nbgrader ({exc.name} is missing): pip install -e '.[dev]'") from None
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


def write_release(out: str | Path, notebooks_dir: str | Path | None = None, data_dir: str | Path | None = None) -> list[Path]:
    """Write the learner release to `out`; returns the notebooks written."""
    import nbformat

    from labkit.course import discover
    from labkit.results import project_root

    out = Path(out)
    infos = discover(notebooks_dir)
    src_dir = infos[0].path.parent.resolve() if infos else None
    if src_dir and (out.resolve() == src_dir or src_dir in out.resolve().parents):
        raise UsageError(f"--out {out} is inside the instructor notebooks ({src_dir}): choose another directory")
    try:
        (out / "notebooks").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create it ({exc.strerror}); choose a writable directory") from None
    written = []
    for info in infos:
        nb = nbformat.read(info.path, as_version=4)
        dest = out / "notebooks" / info.path.name
        nbformat.write(learner_notebook(nb), dest)
        written.append(dest)
    data = Path(data_dir) if data_dir else project_root() / "data_samples"
    if data.is_dir():
        shutil.copytree(data, out / "data_samples", dirs_exist_ok=True)
    (out / "README.md").write_text(README.format(title="labkit course"), encoding="utf-8")
    return written
