"""The runner, on fixture notebooks: one passes, one fails on purpose, one needs 64 GPUs."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.course import cli as course_cli, runner
from labkit.cli.errors import UsageError
from labkit.cli.options import parse_value
from labkit.course.discovery import discover, select, unmet_needs

FIXTURES = Path(__file__).parent / "fixtures" / "course"


def test_discover_orders_and_reads_metadata():
    infos = discover(FIXTURES)
    assert [i.number for i in infos] == ["01", "02", "03"]
    assert infos[2].needs_for("smoke") == {"gpus": 64} and infos[1].title == "fails on purpose"


def test_select_by_number_or_stem_and_rejects_unknown():
    infos = discover(FIXTURES)
    assert [i.stem for i in select(infos, ["02", "01_passes"])] == ["01_passes", "02_fails"]
    with pytest.raises(UsageError, match="99"):
        select(infos, ["99"])


def test_parse_value_types_like_papermill():
    assert [parse_value(v) for v in ("3", "0.5", "True", "None", "cpu")] == [3, 0.5, True, None, "cpu"]


def test_unmet_needs():
    assert unmet_needs({"gpus": 2}, gpus=1) == "needs 2 GPU(s), this machine has 1"
    assert unmet_needs({"gpus": 0}, gpus=0) is None and unmet_needs({}, gpus=0) is None


def test_a_broken_torch_fails_the_run_instead_of_skipping_the_gpu_notebooks(monkeypatch):
    from labkit.cli.errors import RunFailed

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError, as a broken install does
    with pytest.raises(RunFailed, match="torch does not import .*labkit doctor env"):
        unmet_needs({"gpus": 1})


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "labkit.cli",
            "course",
            "run",
            "--notebooks",
            str(FIXTURES),
            "--out",
            str(out),
            "-p",
            "THRESHOLD",
            "2.0",
            "-p",
            "SEED",
            "4",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc, out


def test_runner_exits_nonzero_when_an_expectation_fails(fixture_run):
    proc, out = fixture_run
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED: 02_fails" in proc.stderr


def test_report_names_failed_expectation_with_observed_value(fixture_run):
    _, out = fixture_run
    md = (out / "report.md").read_text()
    assert "1 passed, 1 failed, 1 skipped" in md
    assert "| FAIL | loss went down | 2.5 | below THRESHOLD |" in md
    assert "needs 64 GPU(s)" in md  # skipped with the reason, never passed
    html = (out / "report.html").read_text()
    assert "loss went down" in html and "skipped" in html


def test_parameters_reach_every_notebook_and_results_are_recorded(fixture_run):
    _, out = fixture_run
    res = json.loads((out / "01_passes" / "results.json").read_text())
    assert res["seed"] == 4 and res["metrics"]["threshold"] == 2.0
    assert (out / "01_passes" / "01_passes.ipynb").exists()  # the executed copy
    status = json.loads((out / "03_needs_gpus" / "status.json").read_text())
    assert status["status"] == "skipped" and not (out / "03_needs_gpus" / "results.json").exists()


def test_list_shows_needs(capsys):
    class A:  # argparse namespace stand-in
        notebooks = str(FIXTURES)

    assert course_cli._cmd_list(A()) == 0
    out = capsys.readouterr().out
    assert "64 GPU" in out and "[skipped here]" in out and "passes" in out


@pytest.mark.parametrize("how", ["--profile", "-p"])
def test_p_profile_full_is_the_same_as_profile_full(monkeypatch, tmp_path, how):
    """`-p PROFILE full` is documented as `--profile full`: full's cell timeout and needs, not smoke's."""
    from labkit.cli import main
    from labkit.config import get_config

    seen = []
    monkeypatch.setattr(
        runner,
        "run_notebook",
        lambda info, out, parameters, profile, cell_timeout, progress=True: (
            seen.append((parameters["PROFILE"], profile, cell_timeout))
            or runner.NotebookRun(info.stem, info.title, "passed")
        ),
    )
    argv = ["--profile", "full"] if how == "--profile" else ["-p", "PROFILE", "full"]
    assert main(["course", "run", "--notebooks", str(FIXTURES), "--out", str(tmp_path), "--only", "01", *argv]) == 0
    assert seen == [("full", "full", get_config("full").cell_timeout)]


def test_conflicting_profiles_are_a_usage_error(tmp_path, capsys):
    from labkit.cli import main

    rc = main(
        [
            "course",
            "run",
            "--notebooks",
            str(FIXTURES),
            "--out",
            str(tmp_path),
            "--profile",
            "smoke",
            "-p",
            "PROFILE",
            "full",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "PROFILE" in err and "--profile" in err
