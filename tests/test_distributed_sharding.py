"""Sharded training (FSDP2) through `labkit.train`: per-rank bytes, same losses as DDP, DCP checkpoints that
resume at another world size, a consolidated model, and the combinations refused before any rank starts."""

from __future__ import annotations

import json

import pytest

from labkit.training.memory import sharded_static_bytes


def test_zero_stages_shard_optimizer_then_gradients_then_parameters():
    P = 1_000_000
    ddp = sharded_static_bytes(P, 4, 0)
    assert ddp["total"] == 16 * P  # DDP: 16 bytes per parameter on every rank, whatever the world size
    assert sharded_static_bytes(P, 4, 1)["total"] == 4 * P + 4 * P + 8 * P / 4
    assert sharded_static_bytes(P, 4, 2)["total"] == 4 * P + 12 * P / 4
    assert sharded_static_bytes(P, 4, 3)["total"] == 16 * P / 4
    assert sharded_static_bytes(P, 1, 3)["total"] == 16 * P  # one rank holds everything either way
    with pytest.raises(ValueError, match="stage"):
        sharded_static_bytes(P, 2, 4)


def test_blocks_are_the_outermost_repeated_layers():
    from labkit.distributed.sharding import blocks
    from labkit.model import build_model

    model = build_model("tiny", 300)
    got = blocks(model)
    assert got == [*model.encoder.block, *model.decoder.block]  # not each block's own `layer` list


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    from labkit.corpus import generate
    from labkit.train import prepare_data

    arts = generate(40, seed=0)
    return prepare_data(arts[:36], arts[36:], tmp_path_factory.mktemp("data"))


def _args(data_dir, steps: int, *extra: str) -> list[str]:
    return ["--data", str(data_dir), "--steps", str(steps), "--batch-size", "4", "--ckpt-every", "3", *extra]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_fsdp_trains_like_ddp_on_half_the_bytes_and_resumes_on_three_ranks(data_dir, tmp_path):
    from transformers import T5ForConditionalGeneration

    from labkit.distributed.launcher import launch

    ddp = launch(
        _args(data_dir, 6, "--strategy", "ddp", "--stop-after", "3"),
        2,
        out_dir=tmp_path / "ddp",
        echo=None,
        timeout_s=300,
    )
    fsdp = launch(
        _args(data_dir, 6, "--strategy", "fsdp", "--stop-after", "3"),
        2,
        out_dir=tmp_path / "f",
        echo=None,
        timeout_s=300,
    )
    d0, f0 = ddp.ranks[0], fsdp.ranks[0]
    n = f0["n_params"]
    assert d0["strategy"] == "ddp" and f0["strategy"] == "fsdp"
    # DDP: every rank holds weights 4P, gradients 4P, AdamW 8P; FSDP2 on 2 ranks: half of each (+ the padding
    # of shards whose first dimension does not split evenly, and AdamW's scalar step counters)
    assert d0["state_bytes"]["total"] == pytest.approx(16 * n, rel=0.001)
    for r in (0, 1):
        b = fsdp.ranks[r]["state_bytes"]
        assert b["params"] == pytest.approx(2 * n, rel=0.01) and b["grads"] == b["params"]
        assert b["optimizer"] == pytest.approx(4 * n, rel=0.01)
    # same data order, same seeds: the same losses, step by step
    assert f0["history"]["loss"] == pytest.approx(d0["history"]["loss"], rel=1e-4)
    assert fsdp.ranks[1]["history"]["loss"] == f0["history"]["loss"]  # one global loss on every rank
    ck = tmp_path / "f" / "ckpt" / "step-000003"
    assert (ck / ".metadata").exists() and not (ck / "model.safetensors").exists()
    assert json.loads((ck / "meta.json").read_text())["strategy"] == "fsdp"

    # the sharded checkpoint continues on 3 ranks (DCP reshards on load), and the model is saved whole
    more = launch(_args(data_dir, 6, "--strategy", "fsdp", "--save-model"), 3, out_dir=tmp_path / "f", echo=None)
    assert more.ranks[0]["resumed_from"] and more.ranks[0]["history"]["steps"] == [4, 5, 6]
    assert more.ranks[0]["state_bytes"]["params"] == pytest.approx(4 * n / 3, rel=0.02)
    model = T5ForConditionalGeneration.from_pretrained(tmp_path / "f" / "model")
    assert sum(p.numel() for p in model.parameters()) == n


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_fsdp_combinations_that_cannot_work_are_refused_before_any_rank_starts(data_dir, tmp_path):
    from labkit.distributed.launcher import LaunchError, launch

    with pytest.raises(LaunchError, match="--strategy fsdp shards the model over processes and this job has 1"):
        launch(_args(data_dir, 2, "--strategy", "fsdp"), 1, out_dir=tmp_path / "one", echo=None)
    assert not (tmp_path / "one" / "ranks").exists()
    with pytest.raises(LaunchError, match="drop --no-device-placement"):
        launch(_args(data_dir, 2, "--strategy", "fsdp", "--no-device-placement"), 2, out_dir=tmp_path / "x", echo=None)
    launch(_args(data_dir, 3, "--strategy", "ddp"), 2, out_dir=tmp_path / "d", echo=None, timeout_s=300)
    with pytest.raises(LaunchError, match="holds a --strategy ddp checkpoint and this run asks for --strategy fsdp"):
        launch(_args(data_dir, 6, "--strategy", "fsdp"), 2, out_dir=tmp_path / "d", echo=None)


def test_the_cli_refuses_fsdp_on_one_process_with_one_line(data_dir, tmp_path, capsys):
    from labkit.training.rank_program import main

    assert main([*_args(data_dir, 2, "--strategy", "fsdp"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "use --strategy ddp" in err[0]


def test_a_memory_cap_without_a_gpu_is_refused_with_one_line(data_dir, tmp_path, capsys):
    import torch

    from labkit.training.rank_program import main

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the cap applies")
    assert main([*_args(data_dir, 2), "--cuda-memory-gb", "2", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--cuda-memory-gb" in err[0] and "drop it" in err[0]
    assert not (tmp_path / "o" / "ranks").exists()  # refused before any report


@pytest.mark.parametrize(
    "found, expected",
    [
        ((2, "cpu"), (2, "cpu", [1, 2, 3], (3, "cpu"))),  # CPU: gloo ranks may outnumber the cores
        ((1, "cuda"), (2, "cpu", [1, 2, 3], (3, "cpu"))),  # one GPU: FSDP needs 2 ranks, so gloo on CPU
        ((2, "cuda"), (2, "cuda", [1, 2], (3, "cpu"))),  # 2 GPUs: resume on 3 CPU processes, not 1 rank
        ((4, "cuda"), (4, "cuda", [1, 2, 4], (3, "cuda"))),  # one card fewer
    ],
)
def test_the_comparison_runs_fit_the_machine(monkeypatch, found, expected):
    from labkit.distributed import launcher
    from labkit.training import sharding_runs as sr

    def check_devices(nproc, device):
        return (2, "cpu") if device == "cpu" else found

    monkeypatch.setattr(launcher, "check_devices", check_devices)
    nproc, kind, worlds = sr.layout("auto")
    assert (nproc, kind, worlds, sr.elsewhere(nproc, kind)) == expected


def test_the_gpu_demonstration_reads_out_of_memory_and_completion_from_the_rank_reports():
    from labkit.distributed.launcher import LaunchResult
    from labkit.training import sharding_demo as sd

    assert sd.skip_reason(2) is None
    assert sd.run(None, 1, "fsdp").skipped == sd.skip_reason(1)  # nothing runs: the reason comes back
    assert "needs >= 2 CUDA GPUs" in sd.skip_reason(1) and "has 0" in sd.skip_reason(0)
    done = {"completed": True, "history": {"steps": [1, 2, 3]}, "cuda_peak_reserved_bytes": 3 * sd.GiB}
    trained = sd._outcome(
        "fsdp", 2, 4.0, LaunchResult([], 2, ranks={0: done, 1: done | {"cuda_peak_reserved_bytes": sd.GiB}}, ok=True)
    )
    assert (trained.trained_steps, trained.out_of_memory, trained.peak_gb) == (3, False, 3.0)
    assert trained.row()["outcome"] == "trained 3 steps"
    # rank 1 ran out of memory; torchrun stopped rank 0 before it recorded anything more
    oom = {"out_of_memory": {"error": "OutOfMemoryError: CUDA out of memory.", "peak_reserved_bytes": 2 * sd.GiB}}
    failed = sd._outcome("ddp", 2, 1.5, LaunchResult([], 2, ranks={0: {"env": {}}, 1: oom}, ok=False))
    assert (failed.trained_steps, failed.out_of_memory, failed.peak_gb) == (0, True, 2.0)
    assert failed.row()["outcome"] == "out of memory"


def test_an_allocation_failure_is_recognised_whatever_exception_carries_it():
    import torch

    from labkit.training.rank_program import _memory_facts, _out_of_memory

    assert _out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), torch)
    assert _out_of_memory(RuntimeError("NCCL error: unhandled cuda error, out of memory"), torch)
    assert not _out_of_memory(RuntimeError("shape mismatch"), torch)
    facts = _memory_facts(RuntimeError("out of memory\nmore"), torch.device("cpu"), torch)
    assert facts == {"error": "RuntimeError: out of memory"}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_on_two_gpus_ddp_runs_out_of_memory_on_capped_cards_where_fsdp_trains(data_dir, tmp_path):
    import torch

    from labkit.training import sharding_demo as sd
    from labkit.training.sharding_runs import ShardingRuns

    n = torch.cuda.device_count()
    if sd.skip_reason(n):
        pytest.skip(sd.skip_reason(n))
    runs = ShardingRuns(data_dir, tmp_path, n, 3, 4, 0, 64, "cuda", 600)
    demo = sd.run(runs, n, "fsdp", echo=None)
    assert not demo.skipped, demo.skipped
    assert demo.cap_gb < demo.ddp_floor_gb
    assert demo.ddp.out_of_memory and demo.ddp.trained_steps == 0
    assert demo.fixed.trained_steps == 3 and not demo.fixed.out_of_memory
    assert demo.fixed.peak_gb <= demo.cap_gb


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_accelerate_launch_use_fsdp_trains_with_labkits_fsdp2_and_refuses_an_explicit_ddp(data_dir, tmp_path):
    from labkit.distributed.launcher import LaunchFailed, launch

    # `accelerate launch --use_fsdp --fsdp_version 2 --num_processes 2 -m labkit.train ...`: 2 gloo ranks on CPU
    r = launch(_args(data_dir, 3), 2, launcher="accelerate-fsdp", out_dir=tmp_path / "acc", echo=None, timeout_s=280)
    assert "--use_fsdp" in r.command
    assert any("note: accelerate launch --use_fsdp: training with --strategy fsdp" in line for line in r.log)
    for rank in r.ranks.values():
        assert rank["strategy"] == "fsdp"
        assert abs(rank["state_bytes"]["total"] / rank["n_params"] - 8) < 0.1  # 16 bytes / 2 ranks
    with pytest.raises(LaunchFailed) as failed:
        launch(
            _args(data_dir, 3, "--strategy", "ddp"),
            2,
            launcher="accelerate-fsdp",
            out_dir=tmp_path / "x",
            echo=None,
            timeout_s=120,
        )
    assert "asks for sharding and this run asks for --strategy ddp" in "\n".join(failed.value.result.log)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_notebook_run_twice_trains_again_instead_of_resuming_its_finished_checkpoint(data_dir, tmp_path):
    from labkit.training.sharding_runs import ShardingRuns

    runs = ShardingRuns(data_dir, tmp_path, 2, 2, 4, 0, 64, "cpu", 280, echo=None)
    for _ in range(2):  # the second time <name>/ckpt holds step 2 of 2: resuming it would train nothing
        ranks = runs.launch("again", 2, "ddp", "--ckpt-every", "2")
        assert [r["history"]["steps"] for r in ranks.values()] == [[1, 2], [1, 2]]


def test_a_sharded_checkpoint_saves_and_loads_in_one_plain_process_without_warnings(tmp_path):
    import warnings

    import torch

    from labkit.distributed.sharding import load_sharded, save_sharded
    from labkit.model import build_model

    torch.manual_seed(0)
    saved, loaded = build_model("tiny", 64), build_model("tiny", 64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # DCP's "assuming the intent is to load in a single process" would raise
        save_sharded(tmp_path / "ckpt", saved)
        load_sharded(tmp_path / "ckpt", loaded)
    for (name, a), b in zip(saved.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), name
