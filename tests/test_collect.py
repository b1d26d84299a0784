"""`labkit workshop collect`: every learner's notebooks into the layout `labkit course grade` reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from labkit.classroom.collect import MANIFEST, collect, homes_in


def _home(base, name, files):
    home = base / name
    for rel, text in files.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    return home


def test_each_learners_notebooks_land_in_their_folder_links_and_checkpoints_left_out(tmp_path):
    homes = tmp_path / "homes"
    _home(
        homes,
        "ana",
        {
            "workshop/notebooks/03_mem.ipynb": "ana 03",
            "workshop/notebooks/notes.txt": "x",
            "workshop/notebooks/.ipynb_checkpoints/03_mem-checkpoint.ipynb": "old",
        },
    )
    ben = _home(homes, "ben", {"workshop/notebooks/03_mem.ipynb": "ben 03", "old/03_mem.ipynb": "ben older"})
    os.utime(ben / "old" / "03_mem.ipynb", (1, 1))  # the older copy of the same name
    secret = tmp_path / "instructor_secret.ipynb"
    secret.write_text("the instructor's")
    (ben / "workshop" / "notebooks" / "05_x.ipynb").symlink_to(secret)  # a link out of ben's home
    out = tmp_path / "subs"
    manifest = collect(homes_in(homes), out)
    assert (out / "ana" / "03_mem.ipynb").read_text() == "ana 03"
    assert (out / "ben" / "03_mem.ipynb").read_text() == "ben 03"  # the newest of the name
    assert sorted(p.name for p in (out / "ben").iterdir()) == ["03_mem.ipynb"], "no link, no checkpoint"
    assert not (out / "ana" / "notes.txt").exists()
    skipped = {s["reason"] for s in manifest["learners"]["ben"]["skipped"]}
    assert skipped == {"a symbolic link", "an older copy"}
    assert json.loads((out / MANIFEST).read_text())["learners"]["ana"]["notebooks"][0]["notebook"] == "03_mem.ipynb"
    (homes / "ana" / "workshop" / "notebooks" / "03_mem.ipynb").unlink()
    collect(homes_in(homes), out)  # a second collection replaces the first
    assert not (out / "ana" / "03_mem.ipynb").exists()


def _collect(*args):
    argv = [sys.executable, "-m", "labkit.cli", "workshop", "collect", *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_collect_command_and_its_one_line_errors(tmp_path):
    _home(tmp_path / "homes", "ana", {"n/01_a.ipynb": "{}"})
    r = _collect("--homes", tmp_path / "homes", "--out", tmp_path / "subs")
    assert r.returncode == 0 and "collected 1 notebook(s) of 1 learner(s)" in r.stdout, r.stderr
    (tmp_path / "empty").mkdir()
    for source, says in (("--homes", "no learner folders"), ("--room", "no room here")):
        r = _collect(source, tmp_path / "empty", "--out", tmp_path / "s2")
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and says in r.stderr, r.stderr
