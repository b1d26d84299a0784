"""`labkit workshop collect --out SUBMISSIONS`: every learner's notebooks, in the layout `labkit course grade` reads.

The learners' folders come from the hub (`labkit workshop hub` gives each learner a home holding their copy of
the release) or, for a room served some other way, from `--homes DIR` (one folder per learner, named by the
learner). Each learner's notebooks (`*.ipynb` anywhere in their folder, Jupyter's checkpoints left out) are
copied to `SUBMISSIONS/<learner>/`, keeping their modification times, and `SUBMISSIONS/collected.json` records
what came from where and when.

The collector reads other people's folders with the instructor's rights, so it copies only what the learner
could have written themselves: regular files, no symbolic link (a link in a learner's home could point at another
learner's work or at the instructor's files) and nothing over `MAX_BYTES` (a notebook is a few MB at most).
What is left out is listed in the manifest with the reason.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import stat
from pathlib import Path

from labkit.atomic import atomic_write_text
from labkit.cli.errors import UsageError

MANIFEST = "collected.json"
MAX_BYTES = 50 * 1024 * 1024
CHECKPOINTS = ".ipynb_checkpoints"


def homes_in(folder: str | Path) -> dict[str, Path]:
    """learner -> folder, one per subfolder of `folder` (hidden ones left out); a UsageError when there are none."""
    base = Path(folder)
    if not base.is_dir():
        raise UsageError(f"--homes {folder}: no such directory; pass the folder holding one folder per learner")
    homes = {
        p.name: p for p in sorted(base.iterdir()) if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
    }
    if not homes:
        raise UsageError(f"--homes {folder} holds no learner folders")
    return homes


def learner_notebooks(home: Path) -> tuple[list[Path], list[dict]]:
    """(the notebooks to copy, what was left out and why) in one learner's folder; symbolic links are never
    followed."""
    found, skipped = [], []
    for dirpath, dirnames, filenames in os.walk(home, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d != CHECKPOINTS and not d.startswith("."))
        for name in sorted(filenames):
            if not name.endswith(".ipynb"):
                continue
            path = Path(dirpath) / name
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                skipped.append({"path": str(path.relative_to(home)), "reason": "a symbolic link"})
            elif not stat.S_ISREG(st.st_mode):
                skipped.append({"path": str(path.relative_to(home)), "reason": "not a regular file"})
            elif st.st_size > MAX_BYTES:
                skipped.append({"path": str(path.relative_to(home)), "reason": f"{st.st_size} bytes > {MAX_BYTES}"})
            else:
                found.append(path)
    return found, skipped


def collect(homes: dict[str, Path], out: str | Path) -> dict:
    """Copy each learner's notebooks to `out/<learner>/`; returns the manifest (also written to `out/collected.json`).

    Two notebooks of one learner with the same name (e.g. a copy in another folder) keep the newest as the
    submission; the other is listed as skipped."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict = {"collected": datetime.datetime.now(datetime.timezone.utc).isoformat(), "learners": {}}
    for learner, home in sorted(homes.items()):
        found, skipped = learner_notebooks(home)
        chosen: dict[str, Path] = {}
        for path in sorted(found, key=lambda p: p.stat().st_mtime):  # the newest of a name wins
            if path.name in chosen:
                skipped.append({"path": str(chosen[path.name].relative_to(home)), "reason": "an older copy"})
            chosen[path.name] = path
        dest = out / learner
        if dest.exists():
            shutil.rmtree(dest)  # a second collection replaces the first, never mixes with it
        dest.mkdir(parents=True)
        files = []
        for name, path in sorted(chosen.items()):
            shutil.copy2(path, dest / name, follow_symlinks=False)
            files.append(
                {
                    "notebook": name,
                    "from": str(path),
                    "bytes": path.stat().st_size,
                    "modified": datetime.datetime.fromtimestamp(
                        path.stat().st_mtime, datetime.timezone.utc
                    ).isoformat(),
                }
            )
        manifest["learners"][learner] = {"home": str(home), "notebooks": files, "skipped": skipped}
    atomic_write_text(out / MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=2) + "\n")
    return manifest
