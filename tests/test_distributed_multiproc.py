"""Real multi-process runs of `labkit.train` through `labkit.distributed.launch` (gloo on CPU).

2 nodes on 127.0.0.1, a crash restarted by torchrun from the last checkpoint,
a hung rank named by the timeout, mismatched configs, the wrong launch -- and
after each, no process of the job may survive.
"""

from __future__ import annotations

import re
import threading
import time

import psutil
import pytest

from labkit.distributed import audit
from labkit.distributed.launcher import LaunchFailed, LaunchTimeout, free_port, launch

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    from labkit.corpus import generate
    from labkit.train import prepare_data

    arts = generate(24, seed=0)
    return prepare_data(arts[:20], arts[20:], tmp_path_factory.mktemp("data"))


def _drill(data_dir, steps: int, fault: str, rank: int, step: int, *extra: str) -> list[str]:
    """Entry-point arguments for a short run with an injected fault."""
    return [
        "--data",
        str(data_dir),
        "--steps",
        str(steps),
        "--batch-size",
        "4",
        "--no-grad-monitor",
        "--fault",
        fault,
        "--fault-rank",
        str(rank),
        "--fault-step",
        str(step),
        *extra,
    ]


def _survivors(out_dir) -> list[int]:
    """Processes still running with this job's LABKIT_OUT in their environment."""
    alive = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get("LABKIT_OUT") == str(out_dir):
                alive.append(p.pid)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return alive


@pytest.mark.timeout(120)
def test_wrong_launch_is_one_process_and_torchrun_is_two(tmp_path):
    wrong = launch(["--steps", "0", "--local_rank=0"], 2, out_dir=tmp_path / "wrong", launcher="python", echo=None)
    a = audit.launch_audit(wrong.ranks)
    assert a["world_size"] == 1 and not a["distributed"] and "ONE process" in a["legacy_warnings"][0]
    right = launch(["--steps", "0"], 2, out_dir=tmp_path / "right", echo=None)
    b = audit.launch_audit(right.ranks)
    assert b["world_size"] == 2 and b["distributed"] and b["backend"] == ["gloo"] and b["distinct_pids"] == 2
    assert not _survivors(tmp_path / "right")


def _two_nodes(out, args0, args1, **kw):
    """Two torchrun invocations (one per "node") joining one c10d rendezvous on 127.0.0.1."""
    port, results = free_port(), {}

    def node(rank, args):
        try:
            results[rank] = launch(
                args,
                1,
                out_dir=out,
                nnodes=2,
                node_rank=rank,
                port=port,
                run_id=f"t{port}",
                fresh=False,
                echo=None,
                **kw,
            )
        except Exception as exc:  # noqa: BLE001 - handed to the test thread
            results[rank] = exc

    threads = [threading.Thread(target=node, args=(r, a)) for r, a in ((0, args0), (1, args1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@pytest.mark.timeout(170)
def test_two_node_job_on_localhost_trains_one_model(tmp_path, data_dir):
    args = ["--data", str(data_dir), "--steps", "2", "--batch-size", "4", "--no-grad-monitor"]
    res = _two_nodes(tmp_path, args, args, timeout_s=150)
    for r in res.values():
        assert not isinstance(r, Exception), r
        assert r.ok and r.world_size == 2
    ranks = res[0].ranks
    assert sorted(ranks) == [0, 1] and {v["env"]["local_rank"] for v in ranks.values()} == {0}  # one rank per node
    assert audit.replica_audit(ranks)["identical"]["final"]
    assert audit.data_audit(ranks)["overlap_pct"] == 0.0
    assert not _survivors(tmp_path)


@pytest.mark.timeout(120)
def test_mismatched_configs_across_ranks_fail_clearly(tmp_path, data_dir):
    base = ["--data", str(data_dir), "--steps", "0"]
    res = _two_nodes(tmp_path, base + ["--lr", "0.001"], base + ["--lr", "0.5"], timeout_s=100)
    assert all(isinstance(r, LaunchFailed) and not isinstance(r, LaunchTimeout) for r in res.values()), res
    log = "\n".join(res[0].result.log + res[1].result.log)
    assert "different configurations" in log and "['lr']" in log
    assert not _survivors(tmp_path)


@pytest.mark.timeout(200)
def test_crashed_rank_is_restarted_from_last_checkpoint(tmp_path, data_dir):
    r = launch(
        _drill(data_dir, 4, "crash", 1, 3, "--ckpt-every", "2"),
        2,
        out_dir=tmp_path,
        max_restarts=1,
        timeout_s=180,
        echo=None,
    )
    assert r.ok and r.completed
    assert any("injected fault: rank 1 crashes at step 3" in line for line in r.log)
    for rep in r.ranks.values():
        assert rep["env"]["restart_count"] == 1
        assert rep["resumed_from"] and rep["history"]["steps"] == [3, 4]  # steps 1-2 came from the checkpoint
    assert audit.replica_audit(r.ranks)["identical"]["final"]
    assert not _survivors(tmp_path)


@pytest.mark.timeout(150)
def test_without_restarts_a_crash_is_a_failure(tmp_path, data_dir):
    with pytest.raises(LaunchFailed, match=r"ranks without recorded completion: \[0, 1\]") as exc:
        launch(_drill(data_dir, 3, "crash", 0, 2), 2, out_dir=tmp_path, timeout_s=130, echo=None)
    assert exc.value.result.attempts == 1  # a real failure is never retried or hidden
    assert not _survivors(tmp_path)


@pytest.mark.timeout(150)
def test_hung_rank_is_stopped_naming_it_and_leaves_no_orphans(tmp_path, data_dir):
    """Rank 1 hangs at step 1, rank 0 waits for it in the gradient all-reduce.  With `stall_s` the launcher stops
    the job once nothing has moved for 15 s (heartbeats frozen, processes asleep), long before the 120 s limit."""
    t0 = time.monotonic()
    with pytest.raises(
        LaunchTimeout, match=r"no rank having moved for 15 s.*rank\(s\) \[1\] stopped making progress"
    ) as exc:
        launch(_drill(data_dir, 4, "hang", 1, 1), 2, out_dir=tmp_path, timeout_s=120, stall_s=15, echo=None)
    assert time.monotonic() - t0 < 60
    assert exc.value.hung_ranks == [1]
    pids = [b["pid"] for b in exc.value.result.progress.values()]
    assert pids and not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)
    assert not _survivors(tmp_path)


def test_the_time_limit_stops_a_job_that_never_got_going(tmp_path, data_dir):
    """The limit itself, whatever the job does: 3 s is before the rank has even reported, so it is the one named."""
    t0 = time.monotonic()
    with pytest.raises(LaunchTimeout, match=r"^timed out after 3 s: rank\(s\) \[0\] stopped making progress") as exc:
        launch(_drill(data_dir, 4, "hang", 0, 1), 1, out_dir=tmp_path, launcher="python", timeout_s=3, echo=None)
    assert time.monotonic() - t0 < 30 and exc.value.hung_ranks == [0]
    assert not _survivors(tmp_path)


@pytest.mark.timeout(120)
def test_sigabrt_after_recorded_completion_is_accepted_but_noted(tmp_path):
    r = launch(["--steps", "0", "--fault", "abort-at-exit", "--fault-rank", "1"], 2, out_dir=tmp_path, echo=None)
    assert r.ok and r.completed and r.returncode != 0
    assert r.failed_ranks.get(1) == -6 and "SIGABRT" in r.notes[-1]
    assert not _survivors(tmp_path)


@pytest.mark.timeout(150)
def test_sampler_runs_share_one_budget_and_differ_by_their_flags(tmp_path, data_dir):
    """Notebook 05's runs (`SamplerRuns`): same data/steps/batch/seed, the run's flags decide the sampler."""
    from labkit.training.sampler_runs import SamplerRuns

    lines = []
    runs = SamplerRuns(
        data_dir, tmp_path, nproc=2, steps=8, batch_size=4, seed=0, max_source_len=64, timeout_s=120, echo=lines.append
    )
    frozen = audit.data_audit(runs.run("no_set_epoch", "--sampler", "distributed", "--no-set-epoch"))
    none = audit.data_audit(runs.run("no_sampler", "--sampler", "none"))
    assert none["overlap_pct"] == 100.0 and frozen["overlap_pct"] == 0
    # 60 examples / 2 ranks / batch 4 = 7 steps an epoch: 8 steps cross one epoch boundary on each rank
    assert frozen["order_changes"] == (0, 2) and frozen["same_order_every_epoch"] is True
    assert [line.split(":")[0] for line in lines] == ["no_set_epoch", "no_sampler"]
    assert (tmp_path / "no_sampler" / "ranks").is_dir()


CHATTY = """import os, pathlib, time
from labkit.distributed.env import whole_lines
if __name__ == "__main__":  # the launcher's preflight imports the module in the parent too
    whole_lines()  # as labkit.train does
    rank, out = os.environ["RANK"], pathlib.Path(os.environ["LABKIT_OUT"])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"ready{rank}").touch()
    while len(list(out.glob("ready*"))) < 2:  # start together, as ranks do after joining their group
        time.sleep(0.01)
    for i in range(3000):
        # several writes per line (print writes each argument and separator on its own when unbuffered)
        print("rank", rank, "line", i, "x" * 40, flush=True)
"""


@pytest.mark.timeout(150)
def test_accelerate_launch_relays_each_ranks_lines_whole(tmp_path, monkeypatch):
    """Two ranks under `accelerate launch` print at once on the launcher's pipe: every line relayed is one rank's
    whole line (notebook 04 printed `[rank 0/2] launcher=accelerate ...[rank 1/2] launcher=accelerate ...` on one
    line; without whole_lines() this module's 6,000 lines came back with 353 glued)."""
    (tmp_path / "chatty_ranks.py").write_text(CHATTY)
    monkeypatch.syspath_prepend(str(tmp_path))  # for that import
    res = launch(
        [],
        2,
        out_dir=tmp_path / "out",
        module="chatty_ranks",
        launcher="accelerate",
        env={"PYTHONPATH": str(tmp_path)},
        check=False,
        echo=None,
    )
    assert res.returncode == 0, res.tail()
    said = [line for line in res.log if "line" in line]
    whole = re.compile(r"rank \d line \d+ x{40}")
    assert [line for line in said if not whole.fullmatch(line)] == []
    assert len(said) == 6000
