"""A workshop release works wherever it is copied (issue 18 item 1), and the solutions release (item 5).

`labkit course workshop --out DIR` writes `DIR/.labkit-release.json`; `labkit.paths.project_root()` stops at
the nearest release or checkout above the cwd, so a notebook run anywhere inside the release reads
`DIR/data_samples/` and writes `DIR/runs/` -- proven here with an editable install (the unit tests) and with a
wheel installed into a fresh venv outside any checkout (the slow test).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from labkit import paths
from labkit.paths import RELEASE_MARKER, data_dir, project_root, runs_dir
from labkit.classroom.release import agenda_exercises, cell_checksum, checks_of, read_marker

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "workshop.md"


def _cli(*args, cwd=ROOT, python=sys.executable, timeout=300):
    return subprocess.run([python, "-m", "labkit.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout)


def test_project_root_is_the_nearest_release_or_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv("LABKIT_RUNS_DIR", raising=False)
    checkout = tmp_path / "checkout"
    (checkout / "labkit").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("")
    release = checkout / "workshop"  # a release written inside a checkout: the release is nearer
    (release / "notebooks" / "deep").mkdir(parents=True)
    (release / RELEASE_MARKER).write_text("{}")
    monkeypatch.chdir(release / "notebooks" / "deep")
    assert project_root() == release.resolve()
    assert data_dir() == release.resolve() / "data_samples" and runs_dir() == release.resolve() / "runs"
    monkeypatch.setenv("LABKIT_RUNS_DIR", str(tmp_path / "elsewhere"))
    assert runs_dir() == tmp_path / "elsewhere"  # the environment still wins
    monkeypatch.chdir(checkout / "labkit")
    assert project_root() == checkout.resolve()


def test_project_root_never_answers_site_packages(tmp_path, monkeypatch):
    """A wheel install: the package's parent is site-packages; outside any root the cwd is the answer."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "labkit").mkdir(parents=True)
    monkeypatch.setattr(paths, "__file__", str(site / "labkit" / "paths.py"))
    (tmp_path / "somewhere").mkdir()
    monkeypatch.chdir(tmp_path / "somewhere")
    assert project_root() == (tmp_path / "somewhere").resolve()
    monkeypatch.setattr(paths, "__file__", str(ROOT / "labkit" / "paths.py"))  # an editable install
    assert project_root() == ROOT


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    out = tmp_path_factory.mktemp("releases")
    for kind, extra in (("learner", ()), ("solutions", ("--solutions",))):
        r = _cli("course", "workshop", "--out", str(out / kind), *extra)
        assert r.returncode == 0, r.stderr
        assert ("solutions release" if extra else "learner release") in r.stdout
    return out


def test_release_marker_names_every_check_cell_with_its_checksum(releases):
    marker = read_marker(releases / "learner")
    assert marker["kind"] == "learner" and marker["labkit_version"] and marker["created"] and marker["title"]
    for name, entry in marker["notebooks"].items():
        nb = nbformat.read(releases / "learner" / "notebooks" / name, as_version=4)
        checks = [c for c in nb.cells if "check" in c.metadata.get("tags", [])]
        assert [c["sha256"] for c in entry["checks"]] == [cell_checksum(c.source) for c in checks], name
        instructor = nbformat.read(ROOT / "notebooks" / name, as_version=4)
        assert checks_of(instructor, Path(name).stem) == entry["checks"], "check cells are released as they are"
    labels = [c["exercise"] for c in marker["notebooks"]["05_samplers_and_seeds.ipynb"]["checks"]]
    assert labels == ["05.5", "05.1", "05.2", "05.3", "05.4"]  # the predict-then-run reveal sits in the lesson


def test_release_readme_says_where_to_start_what_to_do_where_results_go_and_how_run_all_stops(releases):
    text = (releases / "learner" / "README.md").read_text(encoding="utf-8")
    assert "notebooks/00_start_here.ipynb" in text and "notebooks/01_dirty_data.ipynb" in text
    in_room, take_home = agenda_exercises(GUIDE.read_text(encoding="utf-8"))
    assert len(in_room) >= 4, "the guide's 3-hour agenda names its exercises (NN.K)"
    assert f"in the room: {', '.join(in_room)}." in text  # the agenda's list, read from the guide
    if take_home:
        assert f"Take-home: {', '.join(take_home)}." in text
    assert "`runs/` here" in text and "LABKIT_RUNS_DIR" in text and RELEASE_MARKER in text
    assert '"Run All"' in text and "Run Selected Cell and All Below" in text and "Run All Above Selected Cell" in text


def test_agenda_exercises_reads_the_3_hour_table_and_its_take_home_part():
    guide = """# guide
## Agenda: 3 hours
| time | block |
|---|---|
| 0:10 | 01 + 02 + exercises 01.1, 02.1 |
| 2:35 | 07 as a demo; 08.1 as take-home |
## Agenda: full day (6 h)
| 9:00 | 03.3 |
"""
    assert agenda_exercises(guide) == (["01.1", "02.1"], ["08.1"])


def test_solutions_release_is_the_instructor_notebooks_without_outputs(releases):
    sol, learner = releases / "solutions", releases / "learner"
    assert read_marker(sol)["kind"] == "solutions"
    assert (sol / "data_samples" / "articles.jsonl").exists()
    assert "solutions" in (sol / "README.md").read_text(encoding="utf-8")
    for p in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(sol / "notebooks" / p.name, as_version=4)
        instructor = nbformat.read(p, as_version=4)
        assert [c.source for c in nb.cells] == [c.source for c in instructor.cells], p.name
        assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code")
    a, b = read_marker(sol)["notebooks"], read_marker(learner)["notebooks"]
    assert {k: v["checks"] for k, v in a.items()} == {k: v["checks"] for k, v in b.items()}, "same check cells"


# ---- a wheel in a fresh venv, outside any checkout -------------------------------------------------------------

NOTEBOOK = "05_samplers_and_seeds.ipynb"  # reads data_samples/scripts; one of the cheapest with exercises
PROBE = """
import json, sys, labkit
from labkit.paths import project_root, runs_dir
json.dump({"labkit": labkit.__file__, "python": sys.executable, "root": str(project_root()),
           "runs": str(runs_dir()), "scripts": str(globals().get("scripts"))}, open(PROBE_PATH, "w"))
"""
EXECUTE = """
import sys, papermill as pm
try:
    pm.execute_notebook(sys.argv[1], sys.argv[2], kernel_name="labkit-fresh", cwd=sys.argv[3],
                        allow_errors=True, progress_bar=False)
except pm.PapermillExecutionError as exc:   # the release's unsolved checks: raised after the whole run
    print("errors allowed:", exc.ename)
"""


COURSE_FILES = (
    "notebooks",
    "data_samples",
    "docs/workshop.md",
    "docs/instructor/answers.md",
    "docs/zh_CN/workshop.md",
    "docs/zh_CN/instructor/answers.md",
    "docs/times.json",
)


def test_setup_py_packs_what_the_release_writer_reads():
    """setup.py's list is the release writer's inputs: the notebooks, the data, the guide and the answers."""
    import ast

    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    listed = next(
        ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "COURSE_FILES"
    )
    assert tuple(listed) == COURSE_FILES and all((ROOT / rel).exists() for rel in COURSE_FILES)


def test_an_install_without_the_course_files_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    from labkit.cli import main

    monkeypatch.setattr(paths, "PACKAGED_COURSE", tmp_path / "site-packages" / "labkit" / "course_files")
    monkeypatch.setattr(paths, "__file__", str(tmp_path / "site-packages" / "labkit" / "paths.py"))
    monkeypatch.chdir(tmp_path)
    assert paths.course_source() is None
    assert main(["course", "workshop", "--out", str(tmp_path / "release")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "carries no course files" in err[0] and "--notebooks" in err[0], err


def _build_wheel(tmp: Path) -> Path:
    """A wheel of this project, built from a copy of its sources (the checkout is never written to)."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "labkit", src / "labkit", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for rel in COURSE_FILES:  # what setup.py's build_py puts in the wheel, as a checkout holds them
        if (ROOT / rel).is_dir():
            shutil.copytree(ROOT / rel, src / rel, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        else:
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(src), "-w", str(tmp)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp,
    )
    assert r.returncode == 0, r.stderr
    (wheel,) = tmp.glob("labkit-*.whl")
    return wheel


def _fresh_venv(tmp: Path, wheel: Path) -> Path:
    """A venv whose labkit is the wheel; its dependencies come from this venv's site-packages (a .pth file,
    read as a plain path: this venv's editable-install hook is not run)."""
    fresh = tmp / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True, timeout=60)
    py = fresh / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    deps = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "zz_labkit_deps.pth").write_text("\n".join(deps) + "\n")
    r = subprocess.run(
        [str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp,
    )
    assert r.returncode == 0, r.stderr
    return py


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_wheel_install_release_reads_and_writes_inside_the_release(tmp_path):
    t0 = time.time()
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_RUNS_DIR", "PYTHONPATH")}
    wheel = _build_wheel(tmp_path)
    py = _fresh_venv(tmp_path, wheel)
    where = subprocess.check_output(
        [str(py), "-c", "import labkit; print(labkit.__file__)"], text=True, cwd=tmp_path, env=env
    )
    assert str(tmp_path / "fresh") in where and str(ROOT) not in where, where

    release = tmp_path / "release"
    r = subprocess.run(
        [
            str(py.parent / "labkit"),
            "course",
            "workshop",
            "--out",
            str(release),
        ],  # no --notebooks: the wheel's own copy of the course (labkit/course_files)
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr
    assert (release / RELEASE_MARKER).is_file() and (release / "data_samples" / "scripts" / "story_broken.py").is_file()
    assert sorted(p.name for p in (release / "notebooks").glob("*.ipynb")) == sorted(
        p.name for p in (ROOT / "notebooks").glob("*.ipynb")
    ), "every notebook released from the wheel's copy"
    assert "in the room:" in (release / "README.md").read_text(encoding="utf-8"), "the guide's agenda came along"
    zh = tmp_path / "release_zh"
    r = subprocess.run(
        [str(py.parent / "labkit"), "course", "workshop", "--out", str(zh), "--lang", "zh_CN", "--solutions"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [str(py.parent / "labkit"), "workshop", "plan", "--learners", "20", "--cores", "16", "--memory", "64G"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0 and "09_sharding" in r.stdout, r.stdout + r.stderr  # the wheel's docs/times.json
    zh_nb = nbformat.read(zh / "notebooks" / NOTEBOOK, as_version=4)
    zh_src = nbformat.read(ROOT / "notebooks" / "zh_CN" / NOTEBOOK, as_version=4)
    assert [c.source for c in zh_nb.cells] == [c.source for c in zh_src.cells], "the Chinese edition, from the wheel"
    assert (zh / "ANSWERS.md").read_text(encoding="utf-8") == (ROOT / "docs/zh_CN/instructor/answers.md").read_text(
        encoding="utf-8"
    )
    token = f"release copy {tmp_path.name}"
    with open(release / "data_samples" / "scripts" / "story_broken.py", "a", encoding="utf-8") as f:
        f.write(f"# {token}\n")  # only the release's copy says this
    nb_path = release / "notebooks" / NOTEBOOK
    nb = nbformat.read(nb_path, as_version=4)
    probe = tmp_path / "probe.json"
    nb.cells.append(
        nbformat.v4.new_code_cell(PROBE.replace("PROBE_PATH", repr(str(probe))))
    )  # the test's copy, not the course's
    nbformat.write(nb, nb_path)
    subprocess.run(
        [str(py), "-m", "ipykernel", "install", "--prefix", str(py.parents[1]), "--name", "labkit-fresh"],
        check=True,
        capture_output=True,
        timeout=60,
        env=env,
    )
    executed = tmp_path / "executed.ipynb"
    r = subprocess.run(
        [str(py), "-c", EXECUTE, str(nb_path), str(executed), str(nb_path.parent)],
        capture_output=True,
        text=True,
        cwd=nb_path.parent,
        env=env,
        timeout=330,
    )
    assert executed.exists(), r.stdout + r.stderr

    seen = json.loads(probe.read_text())
    assert seen["labkit"].startswith(str(tmp_path / "fresh")) and not seen["labkit"].startswith(str(ROOT)), seen
    assert seen["python"].startswith(str(tmp_path / "fresh")), seen  # the kernel is the fresh venv
    assert Path(seen["root"]) == release.resolve() and Path(seen["runs"]) == release.resolve() / "runs"
    assert Path(seen["scripts"]) == release.resolve() / "data_samples" / "scripts"
    shown = "".join(json.dumps(c.get("outputs", [])) for c in nbformat.read(executed, as_version=4).cells)
    assert token in shown, "the notebook showed the release's copy of the script"
    res = json.loads((release / "runs" / "05_samplers_and_seeds" / "results.json").read_text())
    assert res["notebook"] == "05_samplers_and_seeds" and res["expectations"]
    assert "ExerciseFailed" in shown, "the unsolved checks failed (and the run went on past them)"
    mine = ROOT / "runs" / "05_samplers_and_seeds"
    assert not [p for p in mine.rglob("*") if p.stat().st_mtime >= t0] if mine.exists() else True
