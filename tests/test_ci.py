"""The CI pipelines a team copies: .github/workflows/course.yml and ci/gitlab-ci.yml.

Checked by the ecosystem's own tools, offline, from the `dev` extra: actionlint (workflow syntax, expressions,
action inputs), zizmor (workflow security: pinned actions, least permissions, no credentials left in the
checkout, no template injection) and check-jsonschema with the GitHub and GitLab CI schemas it vendors.  Each tool
is also shown a broken copy, so a check that stopped checking would fail here.  Then what the issue asks of the
pipelines: `make test`, the JUnit results published, the artifacts, the nightly seed sweep.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "course.yml"
GITLAB = ROOT / "ci" / "gitlab-ci.yml"
# what `make test` leaves (tests/test_notebooks.py): the claims as JUnit, the report, the executed notebooks
CLAIMS_JUNIT, REPORT, EXECUTED = "runs/pytest/junit.xml", "runs/pytest/report.html", "runs/pytest/*/*.ipynb"


def tool(name: str) -> str:
    """A tool from the `dev` extra: beside this Python first (the venv), else on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    assert found, f"{name} is not installed: run `make setup` (or pip install -e '.[dev]')"
    return found


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=120, cwd=ROOT)


def actionlint(path: Path) -> subprocess.CompletedProcess:
    return run(tool("actionlint"), "-no-color", str(path))


def zizmor(path: Path) -> subprocess.CompletedProcess:
    # --offline: no GitHub API (the online audits compare pins with tags); the file is all there is to judge
    return run(tool("zizmor"), "--offline", "--no-progress", "--color", "never", str(path))


def schema(name: str, path: Path) -> subprocess.CompletedProcess:
    return run(tool("check-jsonschema"), "--builtin-schema", f"vendor.{name}", str(path))


def test_workflow_passes_actionlint():
    proc = actionlint(WORKFLOW)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_workflow_passes_zizmor():
    proc = zizmor(WORKFLOW)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("name", "path"), [("github-workflows", WORKFLOW), ("gitlab-ci", GITLAB)], ids=["github", "gitlab"]
)
def test_pipelines_match_their_ci_schema(name, path):
    proc = schema(name, path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_checks_reject_broken_pipelines(tmp_path):
    text = WORKFLOW.read_text(encoding="utf-8")
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    bad_expr = tmp_path / ".github" / "workflows" / "expr.yml"
    bad_expr.write_text(text.replace("${{ !cancelled() }}", "${{ !cancelled( }}", 1), encoding="utf-8")
    assert actionlint(bad_expr).returncode != 0
    unpinned = tmp_path / ".github" / "workflows" / "unpinned.yml"
    unpinned.write_text(re.sub(r"(mikepenz/action-junit-report)@[0-9a-f]{40}", r"\1@v5", text), encoding="utf-8")
    assert "unpinned-uses" in zizmor(unpinned).stdout
    leaky = tmp_path / ".github" / "workflows" / "leaky.yml"
    leaky.write_text(
        re.sub(
            r"    permissions:\n      contents: read\n      checks: write[^\n]*\n",
            "    permissions: write-all\n",
            text,
            count=1,
        ),
        encoding="utf-8",
    )
    assert "excessive-permissions" in zizmor(leaky).stdout
    bad_gitlab = tmp_path / "gitlab-ci.yml"
    bad_gitlab.write_text(
        GITLAB.read_text(encoding="utf-8").replace("timeout: 90m", "timeout: 90m\n  retry: 7"), encoding="utf-8"
    )
    assert schema("gitlab-ci", bad_gitlab).returncode != 0


def _steps(job: dict) -> list[dict]:
    return job.get("steps", [])


def test_workflow_runs_make_test_publishes_junit_and_keeps_the_artifacts():
    wf = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    test = wf["jobs"]["test"]
    steps = _steps(test)
    assert any(re.match(r"make test(\s|$)", s.get("run", "")) for s in steps)
    assert test["timeout-minutes"] and wf["concurrency"]["cancel-in-progress"] is True
    assert wf["permissions"] == {} and test["permissions"] == {"contents": "read", "checks": "write"}
    pins = [s["uses"] for job in wf["jobs"].values() for s in _steps(job) if "uses" in s]
    assert pins and all(re.fullmatch(r"[\w.-]+/[\w.-]+(/[\w.-]+)*@[0-9a-f]{40}", u) for u in pins), pins
    cache = next(s for s in steps if s.get("uses", "").startswith("actions/cache@"))
    assert "hashFiles('pyproject.toml')" in cache["with"]["key"]
    assert test["container"].startswith("python:") and "bookworm" in test["container"]  # Debian's packages
    apt = next(s["run"] for s in steps if "apt-get install" in s.get("run", ""))
    assert "fonts-wqy-microhei" in apt and "chromium" in apt
    assert wf["env"]["TORCH_BUILD"] == "cpu"
    publish = next(s for s in steps if s.get("uses", "").startswith("mikepenz/action-junit-report@"))
    assert CLAIMS_JUNIT in publish["with"]["report_paths"]
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    for path in (CLAIMS_JUNIT, REPORT, EXECUTED):
        assert path in upload["with"]["path"]
    assert publish["if"] == upload["if"] == "${{ !cancelled() }}"  # a red run still publishes its results


def test_workflow_runs_the_seed_sweep_nightly_and_keeps_its_table():
    wf = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    on = wf[True] if True in wf else wf["on"]  # YAML 1.1 reads the key `on` as True
    assert on["schedule"][0]["cron"]
    sweep = wf["jobs"]["seed-sweep"]
    assert "schedule" in sweep["if"] and "schedule" not in wf["jobs"]["test"]["if"].replace("!= 'schedule'", "")
    assert any(s.get("run", "").startswith("make test-seeds") for s in _steps(sweep))
    upload = next(s for s in _steps(sweep) if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["path"].rstrip("/") == "runs/seeds"


def test_gitlab_template_does_the_same_with_its_junit_report():
    gl = yaml.safe_load(GITLAB.read_text(encoding="utf-8"))
    course = gl["course"]
    assert any(re.match(r"make test(\s|$)", line) for line in course["script"])
    assert course["artifacts"]["when"] == "always" and course["timeout"]
    assert CLAIMS_JUNIT in course["artifacts"]["reports"]["junit"]
    for path in (CLAIMS_JUNIT, REPORT, EXECUTED):
        assert path in course["artifacts"]["paths"]
    assert gl["cache"]["key"]["files"] == ["pyproject.toml"] and gl["variables"]["TORCH_BUILD"] == "cpu"
    assert any("fonts-wqy-microhei" in line and "chromium" in line for line in gl["default"]["before_script"])
    sweep = gl["seed-sweep"]
    assert sweep["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "schedule"'}]
    assert any(line.startswith("make test-seeds") for line in sweep["script"])
    assert "runs/seeds/" in sweep["artifacts"]["paths"]


def test_the_pipelines_publish_the_file_make_test_writes():
    """tests/course_runs.py writes the English run's claims as JUnit where both pipelines look for it."""
    source = (ROOT / "tests" / "course_runs.py").read_text(encoding="utf-8")
    assert 'return RUNS / "pytest" if lang == "en"' in source and 'write_junit(out / "junit.xml"' in source
    assert (ROOT / ".ci" / "run").read_text(encoding="utf-8").rstrip().endswith("make test")  # ours stays make test
