"""Fast checks of the distributed building blocks (no processes started)."""

from __future__ import annotations

import socket
import warnings

import pytest
import torch

from labkit.distributed import audit
from labkit.distributed.env import LaunchWarning, check_legacy_local_rank, choose_backend, read_env
from labkit.distributed.launcher import (
    LaunchError,
    build_command,
    check_devices,
    check_port,
    free_port,
    IDLE_CORE_SHARE,
    StallWatch,
    laggards,
    launch,
    rank_tagged,
)
from labkit.distributed.samplers import RecordingSampler, make_sampler


def test_read_env_single_and_torchrun():
    single = read_env({})
    assert (single.rank, single.world_size, single.distributed, single.launcher) == (0, 1, False, "python")
    tr = read_env(
        {
            "RANK": "3",
            "LOCAL_RANK": "1",
            "WORLD_SIZE": "4",
            "LOCAL_WORLD_SIZE": "2",
            "TORCHELASTIC_RUN_ID": "x",
            "TORCHELASTIC_RESTART_COUNT": "1",
        }
    )
    assert (tr.rank, tr.local_rank, tr.world_size, tr.local_world_size, tr.launcher, tr.restart_count) == (
        3,
        1,
        4,
        2,
        "torchrun",
        1,
    )
    assert read_env({"RANK": "0", "WORLD_SIZE": "2", "ACCELERATE_USE_CPU": "1"}).launcher == "accelerate"


@pytest.mark.parametrize("mode", [["--multi_gpu"], ["--cpu"]])
def test_read_env_names_accelerate_under_its_elastic_agent(mode):
    """`accelerate launch --multi_gpu` starts its ranks through torch's elastic agent (TORCHELASTIC_RUN_ID is set, as
    under torchrun): the environment accelerate itself prepares still says accelerate, as notebook 04's rank lines."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env, prepare_simple_launcher_cmd_env

    argv = [*mode, "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    args, _, _ = _validate_launch_command(launch_command_parser().parse_args([*argv, "train.py"]))
    env = prepare_multi_gpu_env(args) if mode == ["--multi_gpu"] else prepare_simple_launcher_cmd_env(args)[1]
    elastic = {"TORCHELASTIC_RUN_ID": "x"} if mode == ["--multi_gpu"] else {}
    env = {k: v for k, v in env.items() if k.startswith("ACCELERATE_")} | elastic | {"RANK": "1", "WORLD_SIZE": "2"}
    assert read_env(env).launcher == "accelerate"
    assert read_env({"RANK": "1", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x"}).launcher == "torchrun"


@pytest.mark.parametrize(
    "environ", [{"RANK": "2", "WORLD_SIZE": "2"}, {"WORLD_SIZE": "0"}, {"RANK": "x", "WORLD_SIZE": "2"}]
)
def test_read_env_rejects_impossible_worlds(environ):
    with pytest.raises(ValueError, match="RANK|WORLD_SIZE"):
        read_env(environ)


def test_legacy_local_rank_warns_without_launcher_and_on_disagreement():
    with pytest.warns(LaunchWarning, match="ONE process"):
        msg = check_legacy_local_rank(0, read_env({}), environ={})
    assert "torchrun" in msg
    env = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}
    with pytest.warns(LaunchWarning, match="disagrees"):
        check_legacy_local_rank(0, read_env(env), environ=env)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_legacy_local_rank(1, read_env(env), environ=env) is None
        assert check_legacy_local_rank(None, read_env({}), environ={}) is None


def test_backend_follows_device():
    assert choose_backend("cpu") == "gloo"
    assert choose_backend(torch.device("cuda", 0)) == "nccl"


def _reports(kind: str, n: int, world: int, seeds: list[int], set_epoch: bool, epochs: int = 2) -> dict:
    """What the ranks record, produced by the real samplers (no processes needed)."""
    out = {}
    for r in range(world):
        s = RecordingSampler(make_sampler(kind, n, r, world, seeds[r]))
        for e in range(epochs):
            if set_epoch:
                s.set_epoch(e)
            list(iter(s))
        out[r] = {"samples": s.epochs, "dataset_size": n, "env": {"rank": r, "world_size": world, "local_rank": r}}
    return out


def test_data_audit_measures_each_sampler_setting():
    n, w = 60, 2
    none = audit.data_audit(_reports("none", n, w, [0, 0], True))
    assert none["overlap_pct"] == 100.0 and none["work_factor"] == 2.0 and none["coverage_pct"] == 100.0
    frozen = audit.data_audit(_reports("distributed", n, w, [0, 0], False))
    assert frozen["overlap_pct"] == 0.0 and frozen["coverage_pct"] == 100.0 and frozen["same_order_every_epoch"]
    good = audit.data_audit(_reports("distributed", n, w, [0, 0], True))
    assert good["overlap_pct"] == 0.0 and good["coverage_pct"] == 100.0 and good["order_changed_between_epochs"]
    boundaries = sum(len(c) for c in good["order_changed"].values())
    assert (
        boundaries > 0
        and good["order_changes"] == (boundaries, boundaries)
        and frozen["order_changes"] == (0, boundaries)
    )
    split_ok = audit.data_audit(_reports("split", n, w, [5, 5], True))
    assert split_ok["overlap_pct"] == 0.0 and split_ok["missing"] == 0
    split_bad = audit.data_audit(_reports("split", n, w, [5, 6], True))
    assert split_bad["overlap_pct"] > 0 and split_bad["missing"] > 0 and split_bad["coverage_pct"] < 100


def test_replica_and_launch_audits():
    m1, m2 = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    m2.load_state_dict(m1.state_dict())
    same, other = audit.param_checksum(m1), audit.param_checksum(m2)
    assert same == other
    with torch.no_grad():
        m2.weight[0, 0] += 1e-6
    assert audit.param_checksum(m2) != same
    ranks = {
        0: {
            "env": {"rank": 0, "world_size": 2, "launcher": "torchrun", "local_rank": 0},
            "checksums": {"final": "a"},
            "param_devices": ["cuda:0"],
        },
        1: {
            "env": {"rank": 1, "world_size": 2, "launcher": "torchrun", "local_rank": 1},
            "checksums": {"final": "b"},
            "param_devices": ["cuda:0"],
        },
    }
    assert audit.replica_audit(ranks)["identical"] == {"final": False}
    la = audit.launch_audit(ranks)
    assert la["world_size"] == 2 and la["distributed"] and la["ranks_seen"] == [0, 1]
    dev = audit.device_audit(ranks)
    assert dev["accelerator_pileup"] and not dev["each_rank_on_own_device"]
    alone = {0: {"env": {"rank": 0, "world_size": 1, "launcher": "python", "local_rank": 0}}}
    assert audit.launch_audit(alone)["distributed"] is False


def test_laggard_is_the_rank_behind():
    beats = {
        0: {"stage": "train", "step": 2, "phase": "backward"},
        1: {"stage": "train", "step": 2, "phase": "forward"},
    }
    assert laggards(beats, {}, 2) == [1]
    assert laggards({0: beats[0]}, {}, 2) == [1]  # never reported at all


def _watch_over(watch: StallWatch, seconds: int, beats, cpu_per_s: float, t0: float = 0.0, cpu0: float = 0.0):
    """Feed `watch` one reading a second; the first second at which it says stalled, or None."""
    for i in range(seconds + 1):
        b = beats(i) if callable(beats) else beats
        if watch.stalled(b, now=t0 + i, cpu=cpu0 + cpu_per_s * i):
            return i
    return None


def test_a_job_that_stands_still_and_sleeps_is_stalled_after_stall_s():
    training = {0: {"stage": "train", "step": 1, "phase": "backward"}, 1: {"stage": "train", "step": 1, "phase": ""}}
    idle = IDLE_CORE_SHARE / 5  # what two hung gloo ranks and torchrun's agent used (0.009 of a core)
    assert _watch_over(StallWatch(1, 15, 2), 40, training, idle) == 15


def test_a_job_that_burns_cpu_or_beats_is_never_stalled():
    training = {0: {"stage": "train", "step": 1, "phase": "forward"}, 1: {"stage": "train", "step": 1, "phase": ""}}
    # a working rank beside a busy machine still gets >= 0.4 of a core; heartbeats frozen (the harness's ranks)
    assert _watch_over(StallWatch(1, 15, 2), 60, training, 0.4) is None

    # asleep but a heartbeat moves every 10 s (a slow, I/O-bound step)
    def beating(i):
        return {r: {"stage": "train", "step": i // 10, "phase": "forward"} for r in (0, 1)}

    assert _watch_over(StallWatch(1, 15, 2), 60, beating, 0.0) is None
    # just above the idle line
    assert _watch_over(StallWatch(1, 15, 2), 60, training, IDLE_CORE_SHARE * 1.2) is None


def test_the_stall_watch_arms_only_once_every_rank_trains():
    # a rank asleep in the rendezvous while its peer still imports: not a hang, however long
    waiting = {0: {"stage": "start", "step": 0, "phase": ""}}
    assert _watch_over(StallWatch(1, 15, 2), 60, waiting, 0.0) is None

    # arms when the second rank starts training at t=30; stalled 15 s later
    def late(i):
        beats = {0: {"stage": "train", "step": 0, "phase": ""}}
        if i >= 30:
            beats[1] = {"stage": "train", "step": 0, "phase": ""}
        return beats

    assert _watch_over(StallWatch(1, 15, 2), 60, late, 0.0) == 45


def test_torchruns_prefix_names_the_rank_once():
    assert rank_tagged("[default1]:loss 3.2") == "[rank 1] loss 3.2"
    assert rank_tagged("[default0]:[rank 0/2] launcher=torchrun") == "[rank 0/2] launcher=torchrun"
    assert rank_tagged("[default0]:[rank 0] done: 4 steps") == "[rank 0] done: 4 steps"
    assert rank_tagged("[default0]:[rank 1] says rank 0 waits") == "[rank 0] [rank 1] says rank 0 waits"  # not its own
    # on several nodes torchrun's number is the local rank: kept beside the global one the program prints
    assert rank_tagged("[default0]:[rank 2/4] launcher=torchrun", multi_node=True) == (
        "[local rank 0] [rank 2/4] launcher=torchrun"
    )
    assert rank_tagged("plain line") == "plain line"


def test_port_in_use_is_refused_with_owner():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(LaunchError, match=f"port {port} .*in use"):
            check_port(port)
        with pytest.raises(LaunchError, match="in use"):
            launch(["--steps", "0"], 2, out_dir="/nonexistent-never-written", port=port)
    assert 0 < free_port() < 65536


def test_free_ports_are_different_from_one_call():
    from labkit.procs import free_ports

    for _ in range(200):
        ports = free_ports(3)
        assert len(set(ports)) == 3 and all(0 < p < 65536 for p in ports)


def test_impossible_requests_are_refused_before_starting(tmp_path):
    if not torch.cuda.is_available():
        with pytest.raises(LaunchError, match="no visible GPU"):
            check_devices(2, "cuda")
    with pytest.raises(LaunchError, match="impossible world size"):
        check_devices(1000, "cpu")
    with pytest.raises(LaunchError, match="node layout"):
        launch([], 2, out_dir=tmp_path, nnodes=2, node_rank=2)
    with pytest.raises(LaunchError, match="unknown launcher"):
        launch([], 2, out_dir=tmp_path, launcher="mpirun")
    assert not (tmp_path / "ranks").exists()


def test_commands_for_each_launcher():
    tr = build_command("torchrun", "labkit.train", ["--steps", "1"], 2, 1234, nnodes=2, node_rank=1, max_restarts=1)
    assert "--nnodes=2" in tr and "--rdzv-endpoint=127.0.0.1:1234" in tr and "--max-restarts=1" in tr
    assert "--rdzv-conf=is_host=false" in tr and tr[-3:] == ["labkit.train", "--steps", "1"]
    assert build_command("python", "labkit.train", [], 2, 1)[1:3] == ["-m", "labkit.train"]
    assert "--cpu" in build_command("accelerate-cpu", "labkit.train", [], 2, 1)
    assert "--multi_gpu" in build_command("accelerate", "labkit.train", [], 2, 1)


def test_entry_point_is_the_labkit_train_command():
    from labkit.cli.commands import build_parser
    from labkit.train import run

    args = build_parser().parse_args(
        [
            "train",
            "--steps",
            "0",
            "--sampler",
            "split",
            "--no-set-epoch",
            "--seed-mode",
            "per-rank",
            "--no-device-placement",
            "--local-rank",
            "0",
        ]
    )
    assert args.func is run and args.sampler == "split" and args.set_epoch is False and args.local_rank == 0
    assert args.seed_mode == "per-rank" and args.device_placement is False


def test_launch_is_the_function_and_launcher_the_module():
    """No module shares the function's name: `labkit.distributed.launch` always means the function."""
    import importlib
    import types

    import labkit.distributed as dist
    import labkit.distributed.launcher as launcher_module

    assert isinstance(launcher_module, types.ModuleType) and dist.launch is launcher_module.launch
    assert callable(dist.launch) and not isinstance(dist.launch, types.ModuleType)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("labkit.distributed.launch")


def test_the_launcher_asks_the_launched_module_to_check_its_arguments(tmp_path):
    """launcher.preflight knows no program: labkit.train's own preflight(argv) refuses a bad --schedule before any
    rank starts; a module without a preflight is launched as it is."""
    from labkit.distributed.launcher import LaunchError, preflight

    with pytest.raises(LaunchError, match=r"labkit\.train: arguments .*--schedule.*invalid choice"):
        preflight("labkit.train", ["--steps", "0", "--schedule", "sawtooth"], tmp_path)
    preflight("labkit.train", ["--steps", "0"], tmp_path)  # fine: no exception
    preflight("labkit.doctor", ["--anything"], tmp_path)  # no preflight: nothing to check here


def test_the_rank_report_protocol_round_trips(tmp_path):
    """One module writes and reads `<out>/ranks/`: what a rank saves is what the launcher reads back."""
    from labkit.distributed.reports import RankReport, clear_reports, read_reports

    rep = RankReport(tmp_path, 1)
    rep.progress("train", step=3, phase="backward")
    rep.save(completed=True, seen=[4, 2])
    (tmp_path / "ranks" / "rank7.json").write_text("{half", encoding="utf-8")  # being replaced: skipped
    ranks, beats = read_reports(tmp_path)
    assert ranks[1]["completed"] is True and ranks[1]["seen"] == [4, 2] and set(ranks) == {1}
    assert beats[1]["stage"] == "train" and beats[1]["step"] == 3
    clear_reports(tmp_path)
    assert read_reports(tmp_path) == ({}, {})


@pytest.mark.parametrize("ending", ["exit_without_teardown(3)", "sys.exit(3)"])
def test_a_rank_ends_like_a_normal_exit_without_the_teardown(ending):
    """labkit.train and the exercise harness end with procs.exit_without_teardown: threads joined, exit handlers
    run, buffered output written, the exit code kept -- and no module teardown (an object's __del__ at
    interpreter shutdown), which a normal exit (the control) does run."""
    import subprocess
    import sys

    code = (
        "import atexit, sys, threading, time\n"
        "from labkit.procs import exit_without_teardown\n"
        "class Held:\n"
        "    def __del__(self):\n"
        "        sys.__stderr__.write('teardown\\n')\n"
        "held = Held()\n"
        "atexit.register(lambda: print('exit handler'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.3), print('thread done'))).start()\n"
        "sys.stdout.write('buffered')\n"
        f"{ending}\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stderr
    assert "buffered" in r.stdout and "thread done" in r.stdout and "exit handler" in r.stdout, r.stdout
    assert ("teardown" in r.stderr) == (ending == "sys.exit(3)"), r.stderr
