"""Every course notebook, executed headless through the runner in the smoke profile.

The run is this session's one English run of the notebook (tests/course_runs.py): the report, the JUnit file, the
Chinese edition's comparison and the site read the same executed copy.  Longest first, so that two pytest-xdist
workers finish together; 08 waits for the model 07 saves (course_runs.NEEDS).
"""

import json

import pytest
from course_runs import course_run, infos

from labkit.course import times as course_times
from labkit.paths import project_root

TIMES = course_times.load(project_root() / course_times.TABLE)["notebooks"]
# the measured idle seconds of each run (docs/times.json), longest first; a new notebook first of all
ORDER = sorted(infos(), key=lambda stem: -(course_times.seconds(TIMES.get(stem[:2], {}), "idle") or 1e9))


@pytest.mark.notebook
@pytest.mark.parametrize("stem", ORDER)
def test_notebook_passes_in_smoke_profile(stem):
    run = course_run(stem)
    if run.status == "skipped":
        pytest.skip(f"{stem}: {run.reason}")
    failed = [e for e in (run.results or {}).get("expectations", []) if not e["passed"]]
    assert run.status == "passed" and not failed, (
        f"{stem}: {run.reason}\nfailed: {json.dumps(failed, ensure_ascii=False)}"
    )
