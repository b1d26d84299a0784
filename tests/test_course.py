"""The runner, on fixture notebooks: one passes, one fails on purpose, one needs 64 GPUs."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import course
from labkit.course import discover, parse_value, run_course, select, unmet_needs

FIXTURES = Path(__file__).parent / "fixtures" / "course"


def test_discover_orders_and_reads_metadata():
    infos = discover(FIXTURES)
    assert [i.number for i in infos] == ["01", "02", "03"]
    assert infos[2].needs == {"gpus": 64} and infos[1].title == "fails on purpose"


def test_select_by_number_or_stem_and_rejects_unknown():
    infos = discover(FIXTURES)
    assert [i.stem for i in select(infos, ["02", "01_passes"])] == ["01_passes", "02_fails"]
    with pytest.raises(SystemExit, match="99"):
        select(infos, ["99"])


def test_parse_value_types_like_papermill():
    assert [parse_value(v) for v in ("3", "0.5", "True", "None", "cpu")] == [3, 0.5, True, None, "cpu"]


def test_unmet_needs():
    assert unmet_needs({"gpus": 2}, gpus=1) == "needs 2 GPU(s), this machine has 1"
    assert unmet_needs({"gpus": 0}, gpus=0) is None and unmet_needs({}, gpus=0) is None


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    proc = subprocess.run(
        [sys.executable, "-m", "labkit.cli", "course", "run", "--notebooks", str(FIXTURES), "--out", str(out),
         "-p", "THRESHOLD", "2.0", "-p", "SEED", "4", "--no-progress"],
        capture_output=True, text=True, timeout=300)
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

    assert course._cmd_list(A()) == 0
    out = capsys.readouterr().out
    assert "64 GPU" in out and "[skipped here]" in out and "passes" in out
