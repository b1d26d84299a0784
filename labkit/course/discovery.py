"""The course's notebooks: `NN_name.ipynb` in numbered order, each edition's folder, and what a notebook needs.

A notebook's `metadata.labkit` holds its title, its minutes and its needs (e.g. GPUs, per profile); a notebook whose
needs this machine cannot meet is run as *skipped* with the reason (`unmet_needs`) -- never as passed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from labkit.cli.errors import RunFailed, UsageError
from labkit.i18n import SOURCE, language
from labkit.paths import PACKAGED_COURSE, course_source, project_root

NB_PATTERN = re.compile(r"^(\d\d)_[\w-]+\.ipynb$")


@dataclass
class NotebookInfo:
    path: Path
    stem: str
    number: str
    title: str
    minutes: float

    def needs_for(self, profile: str) -> dict:
        meta = _labkit_meta(self.path)
        return {**meta.get("needs", {}), **meta.get(f"needs_{profile}", {})}


def _labkit_meta(path: Path) -> dict:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return nb.get("metadata", {}).get("labkit", {})


def default_notebooks_dir() -> Path:
    """The notebooks of the course language's edition (a Chinese kernel's `discover()` lists the Chinese ones)."""
    return edition_notebooks(language())


def edition_notebooks(lang: str) -> Path:
    """The notebooks of one edition: `notebooks/` (English, the source) or `notebooks/<lang>/` (generated); a
    workshop release holds one edition in `notebooks/` itself."""
    base = (course_source() or project_root()) / "notebooks"
    return base / lang if lang != SOURCE and (base / lang).is_dir() else base


class NotebooksMissing(UsageError, FileNotFoundError):
    """No course notebooks where they were looked for: a usage error (one line, exit 2), and a FileNotFoundError for
    callers that catch that."""


def discover(notebooks_dir: str | Path | None = None) -> list[NotebookInfo]:
    """The course's notebooks (`NN_name.ipynb`), in numbered order."""
    nb_dir = Path(notebooks_dir) if notebooks_dir else default_notebooks_dir()
    if not nb_dir.is_dir() and notebooks_dir:
        raise NotebooksMissing(
            f"notebooks directory not found: {nb_dir}; pass --notebooks DIR holding NN_name.ipynb files"
        )
    if not nb_dir.is_dir():
        raise NotebooksMissing(
            f"notebooks directory not found: {nb_dir}; this labkit install carries no course files "
            f"({PACKAGED_COURSE} is missing: install labkit from a wheel built from the course's checkout), so run "
            "from a checkout of the course or pass --notebooks DIR"
        )
    out = []
    for p in sorted(nb_dir.glob("*.ipynb")):
        m = NB_PATTERN.match(p.name)
        if not m:
            continue
        meta = _labkit_meta(p)
        out.append(
            NotebookInfo(
                path=p,
                stem=p.stem,
                number=m.group(1),
                title=meta.get("title", p.stem),
                minutes=meta.get("minutes", 0),
            )
        )
    return out


def gpu_count() -> int:
    """The GPUs this machine shows torch (counted via NVML: CUDA is not initialised).

    A torch that does not import is the run's failure, not "no GPU": counting it as 0 reported every GPU notebook
    as skipped on a machine whose GPUs were there all along."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 -- ImportError, or OSError from a missing CUDA library
        raise RunFailed(
            f"torch does not import ({type(exc).__name__}: {exc}), so the GPUs cannot be counted: "
            "run `labkit doctor env`, which names what is missing"
        ) from exc
    return torch.cuda.device_count()


def unmet_needs(needs: dict, gpus: int | None = None) -> str | None:
    """Why this machine cannot run a notebook with these needs, or None."""
    want = int(needs.get("gpus", 0) or 0)
    have = gpu_count() if gpus is None else gpus
    if want > have:
        return f"needs {want} GPU(s), this machine has {have}"
    return None


def select(infos: list[NotebookInfo], only: list[str] | None) -> list[NotebookInfo]:
    if not only:
        return infos
    wanted = [o.removesuffix(".ipynb") for o in only]
    chosen = [i for i in infos if any(i.number == w or i.stem == w or i.stem.startswith(w) for w in wanted)]
    missing = [w for w in wanted if not any(i.number == w or i.stem.startswith(w) for i in infos)]
    if missing:
        raise UsageError(f"no notebook matches --only {' '.join(missing)}; see `labkit course list` for the numbers")
    return chosen
