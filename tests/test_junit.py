"""`labkit course run --junit`: the claims as JUnit XML, read back with a JUnit library (junitparser).

The XML is written with the standard library (labkit.course.junit) and parsed here by an independent reader,
the way CI dashboards read it: a failed claim must be a failure, a GPU-only demonstration a skip, a
crashed notebook an error naming its cell.
"""

import json
from pathlib import Path

import nbformat
import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from labkit.course.discovery import NotebookInfo, discover
from labkit.course.junit import write_junit
from labkit.course.runner import run_notebook

ROOT = Path(__file__).parents[1]


def _info(stem: str, title: str = "") -> NotebookInfo:
    return NotebookInfo(path=Path(f"{stem}.ipynb"), stem=stem, number=stem[:2], title=title or stem, minutes=1)


def _write(out: Path, stem: str, status: dict, results: dict | None = None, executed: dict | None = None) -> None:
    d = out / stem
    d.mkdir(parents=True)
    (d / "status.json").write_text(json.dumps({"stem": stem, "title": stem, **status}))
    if results is not None:
        (d / "results.json").write_text(json.dumps(results, ensure_ascii=False))
    if executed is not None:
        (d / f"{stem}.ipynb").write_text(json.dumps(executed))


def _cell(count, source, printed="", duration=0.5, raised=False) -> dict:
    """A code cell as papermill leaves it in the executed copy (its metadata.papermill record)."""
    outputs = [{"output_type": "stream", "name": "stdout", "text": printed}] if printed else []
    return {
        "cell_type": "code",
        "execution_count": count,
        "source": source,
        "outputs": outputs,
        "metadata": {
            "papermill": {"duration": duration, "exception": raised, "status": "failed" if raised else "completed"}
        },
    }


def _suites(path: Path) -> dict:
    return {s.name: s for s in JUnitXml.fromfile(str(path))}


def _cases(suite) -> dict:
    return {c.name: c for c in suite}


@pytest.fixture
def synthetic(tmp_path):
    """A results directory as the runner leaves it: one notebook passed, one failed a claim (and skipped a
    GPU-only demonstration), one skipped whole, one crashed; one more was not run in this run."""
    out = tmp_path / "runs"
    _write(
        out,
        "01_ok",
        {"status": "passed", "seconds": 10.0},
        {
            "notebook": "01_ok",
            "profile": "smoke",
            "seed": 3,
            "metrics": {"loss": 1.25, "rates": [0.1, 0.2]},
            "expectations": [
                {"name": "loss went down", "passed": True, "observed": 1.25, "expected": "< 2"},
                {"name": "titles written", "passed": True, "observed": 0.3, "expected": ">= 0.15"},
            ],
            "skipped": [],
        },
        {
            "cells": [
                _cell(1, "SEED = 0"),
                _cell(2, "train()", "[PASS] loss went down: observed 1.25; expected < 2\n", duration=6.0),
                _cell(3, "res.finish()", "[PASS] titles written: observed 0.3; expected >= 0.15\n", 1.0),
            ]
        },
    )
    _write(
        out,
        "03_fix_off",
        {
            "status": "failed",
            "seconds": 8.0,
            "reason": "ExpectationFailed: 03_fix_off: 1 of 2 expectations failed\n- grad diff: ...",
        },
        {
            "notebook": "03_fix_off",
            "profile": "smoke",
            "seed": 0,
            "metrics": {},
            "expectations": [
                {"name": "grad diff", "passed": False, "observed": 0.42, "expected": "<= 1e-5", "kind": "fix"},
                {"name": "OOM reproduced", "passed": True, "observed": True, "expected": "True", "kind": "pitfall"},
            ],
            "skipped": [{"name": "real OOM on a capped GPU", "reason": "needs a CUDA GPU: a CPU has no allocator cap"}],
        },
    )
    _write(out, "04_gpus", {"status": "skipped", "seconds": 0, "reason": "needs 2 GPU(s), this machine has 0"})
    _write(
        out,
        "05_crash",
        {
            "status": "failed",
            "seconds": 4.0,
            "reason": "AttributeError: 'NoneType' object has no attribute 'group'\x1b[0m",
        },
        None,
        {
            "cells": [
                _cell(1, "SEED = 0"),
                _cell(2, "m = re.search(pat, page)\nm.group(0)", duration=0.25, raised=True),
                _cell(None, "res.finish()", duration=None),
            ]
        },
    )
    infos = [_info("01_ok"), _info("02_not_run"), _info("03_fix_off"), _info("04_gpus"), _info("05_crash")]
    path = write_junit(tmp_path / "junit.xml", out, infos, "smoke")
    return path


def test_one_suite_per_notebook_that_ran_one_case_per_claim(synthetic):
    suites = _suites(synthetic)
    assert list(suites) == ["01_ok", "03_fix_off", "04_gpus", "05_crash"]  # 02 was not run: no suite
    ok = suites["01_ok"]
    assert (ok.tests, ok.failures, ok.errors, ok.skipped) == (2, 0, 0, 0)
    cases = _cases(ok)
    assert set(cases) == {"loss went down", "titles written"}
    assert all(c.classname == "01_ok" and c.is_passed for c in cases.values())
    assert cases["loss went down"].time == pytest.approx(6.0)  # the time of the cell that recorded it
    assert "recorded in cell In[2]" in cases["loss went down"].system_out


def test_metrics_profile_and_seed_are_properties(synthetic):
    props = {p.name: p.value for p in _suites(synthetic)["01_ok"].properties()}
    assert props["loss"] == "1.25" and json.loads(props["rates"]) == [0.1, 0.2]
    assert props["profile"] == "smoke" and props["seed"] == "3"


def test_a_failed_claim_is_a_failure_saying_expected_and_observed(synthetic):
    suite = _suites(synthetic)["03_fix_off"]
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (3, 1, 0, 1)  # no <error>: a claim stopped it
    cases = _cases(suite)
    [failure] = cases["grad diff"].result
    assert isinstance(failure, Failure)
    assert failure.message == "expected <= 1e-5, observed 0.42"
    assert "[fix] grad diff" in failure.text
    assert cases["OOM reproduced"].is_passed
    assert suite.time == pytest.approx(8.0)
    assert sum(c.time for c in cases.values()) <= 8.0 + 1e-6  # no cell records: the notebook's time, shared


def test_gpu_only_demonstrations_and_notebooks_are_skipped_with_their_reason(synthetic):
    suites = _suites(synthetic)
    [skip] = _cases(suites["03_fix_off"])["real OOM on a capped GPU"].result
    assert isinstance(skip, Skipped) and skip.message.startswith("needs a CUDA GPU")
    [case] = list(suites["04_gpus"])
    assert case.name == "runs on this machine" and case.is_skipped
    assert case.result[0].message == "needs 2 GPU(s), this machine has 0"


def test_a_crashed_notebook_is_an_error_naming_the_cell_and_the_exception(synthetic):
    suite = _suites(synthetic)["05_crash"]
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (1, 0, 1, 0)
    [case] = list(suite)
    [error] = case.result
    assert isinstance(error, Error) and error.type == "AttributeError"
    assert error.message.startswith("cell In[2] (m = re.search(pat, page))")
    assert "'NoneType' object has no attribute 'group'" in error.message
    assert "\x1b" not in synthetic.read_text()  # ANSI colour codes are not XML
    assert "m.group(0)" in error.text and case.time == pytest.approx(0.25)


def test_totals_on_the_root(synthetic):
    xml = JUnitXml.fromfile(str(synthetic))
    xml.update_statistics()
    assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (7, 1, 1, 2)


def test_a_real_crash_through_the_runner(tmp_path):
    """The runner on a notebook that raises in its third cell: the <error> names papermill's failed cell."""
    nb = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    )
    params = nbformat.v4.new_code_cell("SEED = 0")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        params,
        nbformat.v4.new_code_cell("import re"),
        nbformat.v4.new_code_cell("m = re.search('x', 'abc')\nm.group(0)"),
    ]
    (tmp_path / "nbs").mkdir()
    nbformat.write(nb, tmp_path / "nbs" / "01_crash.ipynb")
    [info] = discover(tmp_path / "nbs")
    run = run_notebook(info, tmp_path / "runs", {"SEED": 1}, "smoke", 120, progress=False)
    assert run.status == "failed"
    [case] = list(_suites(write_junit(tmp_path / "j.xml", tmp_path / "runs", [info], "smoke"))["01_crash"])
    [error] = case.result
    # In[4]: papermill's injected-parameters cell runs as In[2]
    assert isinstance(error, Error) and error.type == "AttributeError", error.message
    assert error.message.startswith("cell In[4] (m = re.search('x', 'abc')): AttributeError:"), error.message


def test_course_run_junit_option_and_ci_default(tmp_path, monkeypatch):
    """`--junit FILE` writes FILE; under CI=true the runner writes <out>/junit.xml unasked, and not otherwise."""
    from labkit.cli import main
    from labkit.course import runner

    fixtures = Path(__file__).parent / "fixtures" / "course"

    def fake_run(info, out, parameters, profile, cell_timeout, progress=True):
        _write(
            out,
            info.stem,
            {"status": "passed", "seconds": 1.0},
            {"notebook": info.stem, "expectations": [{"name": "c", "passed": True, "observed": 1, "expected": "1"}]},
        )
        return runner.NotebookRun(info.stem, info.title, "passed")

    monkeypatch.setattr(runner, "run_notebook", fake_run)
    monkeypatch.delenv("CI", raising=False)
    assert main(["course", "run", "--notebooks", str(fixtures), "--out", str(tmp_path / "a"), "--only", "01"]) == 0
    assert not (tmp_path / "a" / "junit.xml").exists()
    assert (
        main(
            [
                "course",
                "run",
                "--notebooks",
                str(fixtures),
                "--out",
                str(tmp_path / "b"),
                "--only",
                "01",
                "--junit",
                str(tmp_path / "mine.xml"),
            ]
        )
        == 0
    )
    assert list(_suites(tmp_path / "mine.xml")) == ["01_passes"]
    monkeypatch.setenv("CI", "true")
    assert main(["course", "run", "--notebooks", str(fixtures), "--out", str(tmp_path / "c"), "--only", "01"]) == 0
    assert list(_suites(tmp_path / "c" / "junit.xml")) == ["01_passes"]


def test_junit_to_a_directory_is_a_usage_error(tmp_path, capsys):
    from labkit.cli import main

    with pytest.raises(SystemExit) as exc:  # argparse rejects it before any kernel starts
        main(
            [
                "course",
                "run",
                "--notebooks",
                str(Path(__file__).parent / "fixtures" / "course"),
                "--out",
                str(tmp_path),
                "--junit",
                str(tmp_path),
            ]
        )
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "is a directory" in err and err.count("\n") == 1


@pytest.mark.notebook
def test_fix_off_run_shows_the_fix_claims_as_failures(tmp_path):
    """This session's `-p FIX False` run of 03 (tests/course_runs.py, the run tests/test_fix_switch.py pins) as JUnit:
    exactly 03's pinned fix claims are <failure>s, its pitfall claims pass, its GPU-only demonstration is <skipped>."""
    import torch
    from course_runs import course_run, infos, out_dir

    from test_fix_switch import FIX_CLAIMS

    stem, junit = "03_memory_and_accumulation", tmp_path / "junit.xml"
    run = course_run(stem, fix=False)
    assert run.status == "failed", run.reason[-3000:]
    write_junit(junit, out_dir(fix=False), [infos()[stem]], "smoke")
    suite = _suites(junit)[stem]
    failed = {c.name for c in suite if c.result and isinstance(c.result[0], Failure)}
    assert failed == FIX_CLAIMS[stem], run.reason[-3000:]
    assert suite.errors == 0 and suite.failures == len(FIX_CLAIMS[stem])
    for case in suite:
        if case.name in failed:
            assert case.result[0].message.startswith("expected ") and ", observed " in case.result[0].message
    skipped = [c for c in suite if c.is_skipped]
    if not torch.cuda.is_available():
        assert skipped and all(c.result[0].message.startswith("needs a CUDA GPU") for c in skipped)
    assert {p.name for p in suite.properties()} >= {"profile", "seed"}
