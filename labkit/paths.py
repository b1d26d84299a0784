"""Where the course lives: its root (a checkout or a workshop release), its shipped data, where results go."""

from __future__ import annotations

import os
from pathlib import Path

RELEASE_MARKER = ".labkit-release.json"  # written at a workshop release's root by `labkit course workshop`
# the course's files a wheel carries (setup.py's build_py copies them there, laid out as in the checkout)
PACKAGED_COURSE = Path(__file__).resolve().parent / "course_files"


def _is_checkout(p: Path) -> bool:
    return (p / "pyproject.toml").is_file() and (p / "labkit").is_dir()


def _is_root(p: Path) -> bool:
    return (p / RELEASE_MARKER).is_file() or _is_checkout(p)


def project_root() -> Path:
    """The folder the course lives in: the nearest one, from the cwd up, that is a workshop release (it holds
    `.labkit-release.json`) or a checkout (`pyproject.toml` beside `labkit/`).

    Outside both: the checkout the package was imported from (an editable install), else the cwd -- never the
    install's `site-packages`, which holds no data and is no place for results."""
    here = Path.cwd().resolve()
    for p in (here, *here.parents):
        if _is_root(p):
            return p
    pkg_parent = Path(__file__).resolve().parents[1]
    return pkg_parent if _is_checkout(pkg_parent) else here


def course_source() -> Path | None:
    """The folder whose `notebooks/` (and `data_samples/`, `docs/`) the course's commands read: the course's root
    (`project_root`) when it holds `notebooks/`, else the copy an installed wheel carries (`PACKAGED_COURSE`),
    else None (an install without the course's files: the caller says so in one line)."""
    root = project_root()
    if (root / "notebooks").is_dir():
        return root
    return PACKAGED_COURSE if (PACKAGED_COURSE / "notebooks").is_dir() else None


def data_dir() -> Path:
    """The course's shipped inputs: `<root>/data_samples` (in a release, the release's copy)."""
    return project_root() / "data_samples"


def runs_dir() -> Path:
    """Where results go: $LABKIT_RUNS_DIR (set by the course runner) or `<root>/runs` (see `project_root`)."""
    env = os.environ.get("LABKIT_RUNS_DIR")
    return Path(env) if env else project_root() / "runs"
