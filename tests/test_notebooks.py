"""Every course notebook, executed headless through the runner in the smoke profile."""

import json
from pathlib import Path

import pytest

from labkit.config import get_config
from labkit.course import discover, run_notebook
from labkit.junit import write_junit
from labkit.report import write_reports
from labkit.results import project_root

INFOS = discover(Path(__file__).parents[1] / "notebooks")
OUT = project_root() / "runs" / "pytest"  # 08 reads the model 07 saved here


@pytest.mark.notebook
@pytest.mark.parametrize("info", INFOS, ids=lambda i: i.stem)
def test_notebook_passes_in_smoke_profile(info):
    cfg = get_config("smoke")
    run = run_notebook(info, OUT, {"PROFILE": "smoke"}, "smoke", cfg.cell_timeout, progress=False)
    # before the verdict, so a failed notebook is in them too: the report, and every claim as a JUnit test case
    # (runs/pytest/junit.xml, which the CI pipelines publish)
    write_reports(OUT, INFOS, "smoke")
    write_junit(OUT / "junit.xml", OUT, INFOS, "smoke")
    if run.status == "skipped":
        pytest.skip(f"{info.stem}: {run.reason}")
    failed = [e for e in (run.results or {}).get("expectations", []) if not e["passed"]]
    assert run.status == "passed" and not failed, (
        f"{info.stem}: {run.reason}\nfailed: {json.dumps(failed, ensure_ascii=False)}"
    )
