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
