"""Shared pytest setup: the course's notebook runs first (longest first), the unit tests after them, the tests that
read every run (the site) last -- so that two pytest-xdist workers (`make test`) finish together."""

import os
import uuid

import pytest

# Tests start child processes; one thread each keeps 2 cores usable.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# tests that read runs the notebook tests make: after them (they wait for a run in progress, tests/course_runs.py)
READERS = ("test_site.py", "test_no_answer_before_question.py")
# notebook tests by file: the English runs, then FIX=False, then the Chinese edition (compared with the English)
NOTEBOOK_FILES = ("test_notebooks.py", "test_fix_switch.py", "test_notebooks_zh.py")


def pytest_configure(config):
    # one id per test session, shared by the xdist workers: a notebook folder marked with it was run in this session
    workerinput = getattr(config, "workerinput", None)
    os.environ["LABKIT_TEST_SESSION"] = workerinput["testrunuid"] if workerinput else uuid.uuid4().hex


def _rank(item) -> tuple[int, int]:
    name = item.path.name
    if name in READERS:
        return (3, 0)
    if item.get_closest_marker("notebook") is not None:
        return (0, NOTEBOOK_FILES.index(name) if name in NOTEBOOK_FILES else len(NOTEBOOK_FILES))
    return (1 if item.get_closest_marker("slow") or item.get_closest_marker("browser") else 2, 0)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_rank)  # stable: the order within each rank is the files' own
    for item in items:
        # a module-scoped fixture (a server, a release, an export) is built once per worker that runs its module's
        # tests: keep those tests on one worker (`--dist loadgroup`)
        defs = getattr(item, "_fixtureinfo", None)
        scopes = {d[-1].scope for d in defs.name2fixturedefs.values()} if defs else set()
        if "module" in scopes and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


# ---- the time of each part (CI prints it: issue 28) ------------------------------------------------------------
PARTS = {"notebook": "notebook runs", "browser": "browser", "slow": "multi-process and servers"}
_spent: dict[str, float] = {}
_started = [0.0]


def pytest_sessionstart(session):
    import time

    _started[0] = time.monotonic()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With LABKIT_TEST_CPU_LOG set, one JSON line per test: its wall and CPU seconds, the CPU of the child
    processes it waited for included (a notebook's kernel, a torchrun job) -- where a 2-core suite's time goes."""
    import time

    log = os.environ.get("LABKIT_TEST_CPU_LOG")
    t0, c0, started = time.monotonic(), os.times(), time.time()
    yield
    if log:
        import json

        c1 = os.times()
        cpu = sum(getattr(c1, k) - getattr(c0, k) for k in ("user", "system", "children_user", "children_system"))
        with open(log, "a", encoding="utf-8") as f:
            f.write(
                json.dumps(
                    {
                        "test": item.nodeid,
                        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
                        "start": round(started, 2),  # epoch seconds: the log is also a timeline of the workers
                        "wall": round(time.monotonic() - t0, 2),
                        "cpu": round(cpu, 2),
                    }
                )
                + "\n"
            )


def pytest_runtest_logreport(report):
    part = next((name for marker, name in PARTS.items() if marker in report.keywords), "unit")
    _spent[part] = _spent.get(part, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    import time

    if not _spent:
        return
    wall = time.monotonic() - _started[0]
    parts = ", ".join(
        f"{name} {seconds / 60:.1f} min" for name, seconds in sorted(_spent.items(), key=lambda kv: -kv[1])
    )
    terminalreporter.write_line(f"time by part (summed over workers): {parts}; wall {wall / 60:.1f} min")
