"""The thread policy (labkit.threads) and the shared-machine bench (labkit.course.bench)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import psutil
import pytest

from labkit import threads
from labkit.course.bench import ContentionRow, busy_processes, table


@pytest.fixture
def no_override(monkeypatch):
    monkeypatch.delenv(threads.ENV_OVERRIDE, raising=False)


def test_small_presets_get_one_thread_larger_ones_their_share(no_override, monkeypatch):
    monkeypatch.setattr(threads, "cores", lambda: 8)
    assert threads.threads_for("tiny") == 1 and threads.threads_for("t5-small", 4) == 1
    assert threads.threads_for("t5-base") == 8
    assert threads.threads_for("t5-large", 2) == 4  # ranks x threads <= cores
    assert threads.threads_for("t5-large", 16) == 1  # never 0
    assert threads.threads_for("tiny", setting=3) == 3  # an explicit --threads / Config.threads wins


def test_env_override(monkeypatch):
    monkeypatch.setattr(threads, "cores", lambda: 4)
    monkeypatch.setenv(threads.ENV_OVERRIDE, "0")
    assert threads.threads_for("tiny", 2) == 2  # 0: the cores' share, even for a small preset
    monkeypatch.setenv(threads.ENV_OVERRIDE, "3")
    assert threads.threads_for("tiny") == 3
    assert threads.threads_for("tiny", setting=1) == 1  # the explicit setting still wins
    monkeypatch.setenv(threads.ENV_OVERRIDE, "two")
    assert threads.threads_for("tiny") == 1  # not a number: ignored


def test_child_process_gets_the_policy(no_override, monkeypatch):
    """OpenMP reads its variables when torch loads: a child started with child_env must see them from the start."""
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    env = threads.child_env(1)
    code = (
        "import os, torch, json; print(json.dumps([torch.get_num_threads(), os.environ['OMP_WAIT_POLICY'], "
        "os.environ['TOKENIZERS_PARALLELISM'], os.environ['MKL_NUM_THREADS'], os.environ['OPENBLAS_NUM_THREADS']]))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [1, "PASSIVE", "false", "1", "1"]
    # a wait policy the user chose is kept
    assert threads.child_env(2, base={"OMP_WAIT_POLICY": "ACTIVE"})["OMP_WAIT_POLICY"] == "ACTIVE"


def test_child_env_follows_the_rule(no_override, monkeypatch):
    monkeypatch.setattr(threads, "cores", lambda: 8)
    assert threads.child_env(base={})["OMP_NUM_THREADS"] == "1"  # tiny: 1 per process
    assert threads.child_env(preset="t5-base", processes=2, base={})["MKL_NUM_THREADS"] == "4"  # its share
    assert threads.child_env(3, preset="t5-base", base={})["OPENBLAS_NUM_THREADS"] == "3"  # an explicit number wins


def test_servers_count_the_cores_they_may_use(monkeypatch):
    from labkit.serving.ort_generate import serving_threads
    from labkit.serving.process import server_env

    monkeypatch.setattr(threads, "cores", lambda: 3)  # e.g. `taskset -c 0-2` on a bigger machine
    assert serving_threads() == 2 and serving_threads(5) == 5
    assert server_env()["OMP_NUM_THREADS"] == "3" and server_env(1)["OMP_NUM_THREADS"] == "1"


def test_setup_reports_the_threads_in_force(no_override):
    import torch

    from labkit.config import setup

    before = torch.get_num_threads()
    try:
        cfg = setup("smoke", seed=0)
        assert cfg.threads == torch.get_num_threads() == 1  # the tiny preset: 1 thread
    finally:
        torch.set_num_threads(before)


def test_describe_names_the_policy(no_override):
    line = threads.describe("tiny")
    assert "1 torch thread(s) per process for tiny" in line and "OMP_WAIT_POLICY" in line


def test_busy_processes_burn_a_core_and_are_gone_after():
    with busy_processes(1) as procs:
        p = psutil.Process(procs[0].pid)
        c0 = sum(p.cpu_times()[:2])
        time.sleep(1.0)
        burned = sum(p.cpu_times()[:2]) - c0
        pids = [q.pid for q in procs]
    assert burned > 0.3, f"the busy process used {burned:.2f} CPU s in 1 s"
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)


def test_contention_verdicts():
    fast = ContentionRow("01_dirty_data", 40.0, 70.0, "passed", "passed", 1)
    slow = ContentionRow("06_exploding_gradients", 40.0, 90.0, "passed", "passed", 1)
    broken = ContentionRow("07_multitask_distributed_training", 40.0, 50.0, "passed", "failed", 1)
    assert fast.ok and round(fast.ratio, 2) == 1.75
    assert not slow.ok and not broken.ok
    text = table([fast, slow, broken])
    assert "1.75  ok" in text and "2.25  OVER" in text and "FAILED RUN" in text


def test_bench_course_cleans_up_and_its_json_says_profile_and_date(tmp_path, monkeypatch):
    """Without --out the executed notebooks live in a temporary folder that is gone afterwards; each JSON row says
    the profile and when it was measured, which `labkit course times` copies into the table."""
    import tempfile
    from datetime import datetime, timedelta, timezone

    import nbformat

    from labkit.cli import main
    from labkit.course.times import _bench_row

    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            'from labkit.results import Results\nr = Results("90_tiny")\nr.expect("ran", 1, True, "1")\nr.finish()'
        )
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, nb_dir / "90_tiny.ipynb")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    out = tmp_path / "rows.json"
    rc = main(["bench", "course", "--only", "90", "--notebooks", str(nb_dir), "--json", str(out)])
    (row,) = json.loads(out.read_text(encoding="utf-8"))
    assert (row["idle_status"], row["busy_status"]) == ("passed", "passed"), row
    assert rc in (0, 1)  # the ratio's verdict depends on the machine; the rows do not
    assert not list(scratch.iterdir()), "the executed notebooks' temporary folder was left behind"
    assert row["profile"] == "smoke"
    assert timedelta(0) <= datetime.now(timezone.utc) - datetime.fromisoformat(row["date"]) < timedelta(minutes=30)
    assert _bench_row(out, "90_tiny", "")["date"] == row["date"][:10]
