"""Every course notebook, executed headless through the runner in the smoke profile."""
import json
from pathlib import Path

import pytest

from labkit.course import discover, run_notebook
from labkit.config import get_config
from labkit.results import project_root

INFOS = discover(Path(__file__).parents[1] / "notebooks")
OUT = project_root() / "runs" / "pytest"   # 08 reads the model 07 saved here


@pytest.mark.notebook
@pytest.mark.parametrize("info", INFOS, ids=lambda i: i.stem)
def test_notebook_passes_in_smoke_profile(info):
    cfg = get_config("smoke")
    run = run_notebook(info, OUT, {"PROFILE": "smoke"}, "smoke", cfg.cell_timeout, progress=False)
    if run.status == "skipped":
        pytest.skip(f"{info.stem}: {run.reason}")
    failed = [e for e in (run.results or {}).get("expectations", []) if not e["passed"]]
    assert run.status == "passed" and not failed, f"{info.stem}: {run.reason}\nfailed: {json.dumps(failed, ensure_ascii=False)}"
    from labkit.report import write_reports

    write_reports(OUT, INFOS, "smoke")
