"""One child-process policy (labkit.threads.child_env) for every starter of the course.

The distributed launcher (its ranks), the servers (`ServerProcess`), the grader (its notebook kernel) and the
course runner (its notebook kernel) each start a real child here, on one core as under `taskset -c 0`; each child
writes down what it got -- its thread variables, torch's threads, its cores -- and the four must agree.  On a
2-core machine the servers used to count `os.cpu_count()` and the launcher to skip the MKL/OpenBLAS/tokenizers
variables; pinned to one core, every child must compute with one thread.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from labkit import threads

DUMP = textwrap.dedent(
    '''
    """What this process got from its starter: thread variables, torch's threads, its cores."""
    import json
    import os
    import sys

    VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY", "TOKENIZERS_PARALLELISM")


    def dump(path):
        import torch

        facts = {
            "env": {k: os.environ.get(k) for k in VARS},
            "torch_threads": torch.get_num_threads(),
            "cores": sorted(os.sched_getaffinity(0)),
        }
        with open(path, "w") as f:
            json.dump(facts, f)


    if __name__ == "__main__":
        dump(sys.argv[1])
        if len(sys.argv) > 2:  # started as a server: answer the readiness probe until stopped
            from http.server import BaseHTTPRequestHandler, HTTPServer

            class Ok(BaseHTTPRequestHandler):
                def do_GET(self):
                    self.send_response(200)
                    self.end_headers()

                def log_message(self, *args):
                    pass

            HTTPServer(("127.0.0.1", int(sys.argv[2])), Ok).serve_forever()
    '''
)


@pytest.fixture
def one_core(monkeypatch, tmp_path):
    """This test process on one core (as `taskset -c 0` would start it), with no thread settings of the user's."""
    for var in (*threads.THREAD_VARS, "OMP_WAIT_POLICY", "TOKENIZERS_PARALLELISM", threads.ENV_OVERRIDE):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "policy_dump.py").write_text(DUMP, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))  # the launcher imports the module it launches (its preflight)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p))
    before = os.sched_getaffinity(0)
    core = 0 if 0 in before else min(before)
    os.sched_setaffinity(0, {core})  # children inherit the mask of the thread that starts them: this one
    try:
        yield core
    finally:
        os.sched_setaffinity(0, before)


def _dump_notebook(path: Path, dump_to: Path, typed: str = "") -> Path:
    """A notebook whose one cell dumps its process's policy; `typed`: what a learner added (the grader runs only a
    notebook whose code differs from the release's)."""
    nb = nbformat.v4.new_notebook()
    # the grader hands a learner's kernel a minimal environment (no PYTHONPATH): the cell finds the dumper itself
    here = str(dump_to.parent)  # policy_dump.py is written beside the dump
    nb.cells = [
        nbformat.v4.new_code_cell(
            f"import sys\nsys.path.insert(0, {here!r})\nimport policy_dump\npolicy_dump.dump({str(dump_to)!r}){typed}"
        )
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _launcher(tmp_path: Path) -> dict:
    from labkit.distributed import launch

    dump = tmp_path / "launcher.json"
    res = launch(
        [str(dump)], 1, out_dir=tmp_path / "launch", module="policy_dump", device="cpu", check=False, echo=None
    )
    assert res.returncode == 0, res.tail()
    return json.loads(dump.read_text())


def _server(tmp_path: Path) -> dict:
    from labkit.procs import free_port
    from labkit.serving.process import ServerProcess

    dump, port = tmp_path / "server.json", free_port()
    argv = [sys.executable, str(tmp_path / "policy_dump.py"), str(dump), str(port)]
    with ServerProcess(argv, f"http://127.0.0.1:{port}/", timeout=60, name="dump", log_path=tmp_path / "srv.log"):
        pass
    return json.loads(dump.read_text())


def _grader(tmp_path: Path) -> dict:
    from labkit.classroom.grader import grade_notebook

    dump = tmp_path / "grader.json"
    release = tmp_path / "release"
    _dump_notebook(release / "notebooks" / "90_dump.ipynb", dump)
    learner = _dump_notebook(tmp_path / "subs" / "ada" / "90_dump.ipynb", dump, typed="\n# ada was here")
    g = grade_notebook("ada", learner, release, [], limit=120, executed_dir=tmp_path / "graded")
    assert dump.is_file(), g.note
    return json.loads(dump.read_text())


def _course_runner(tmp_path: Path) -> dict:
    from labkit.course.discovery import NotebookInfo
    from labkit.course.runner import run_notebook

    dump = tmp_path / "course.json"
    nb = _dump_notebook(tmp_path / "course_nb" / "90_dump.ipynb", dump)
    run = run_notebook(NotebookInfo(nb, nb.stem, "90", "dump", 1), tmp_path / "runs", {}, "smoke", 120, False)
    assert dump.is_file(), run.reason
    return json.loads(dump.read_text())


def test_every_starter_hands_its_child_the_same_policy(one_core, tmp_path):
    got = {
        "launcher": _launcher(tmp_path),
        "server": _server(tmp_path),
        "grader": _grader(tmp_path),
        "course runner": _course_runner(tmp_path),
    }
    one = {var: "1" for var in threads.THREAD_VARS}
    expected = {
        "env": {**one, "OMP_WAIT_POLICY": "PASSIVE", "TOKENIZERS_PARALLELISM": "false"},
        "torch_threads": 1,
        "cores": [one_core],
    }
    assert got == dict.fromkeys(got, expected)
