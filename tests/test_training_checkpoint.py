import json

import pytest
import torch

import labkit.training.checkpoint as ck
from labkit.training.checkpoint import CheckpointError, resolve_checkpoint
from labkit.training.trainer import TrainConfig, Trainer
from training_helpers import collator, examples, small_model, tokenizer


def _run(tmp_path, model=None, steps=4, **kw):
    cfg = TrainConfig(steps=steps, batch_size=8, ckpt_dir=str(tmp_path), ckpt_every=2, **kw)
    tr = Trainer(model or small_model(len(tokenizer())), examples(), collator(), cfg)
    return tr, tr.fit()


def test_layout_latest_pointer_and_no_pickle(tmp_path):
    _run(tmp_path)
    assert (tmp_path / "latest").read_text().strip() == "step-000004"
    d = resolve_checkpoint(tmp_path)
    assert sorted(p.name for p in d.iterdir()) == ["meta.json", "model.safetensors", "state.pt"]
    torch.load(d / "state.pt", weights_only=True)  # loads without unpickling arbitrary objects
    assert json.loads((d / "meta.json").read_text())["step"] == 4
    assert not list(tmp_path.glob(".*"))


def test_crash_mid_save_leaves_previous_checkpoint_usable(tmp_path, monkeypatch):
    tr, _ = _run(tmp_path, steps=2)
    real_save = torch.save

    def crash(*a, **k):
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(ck.torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, steps=4)
    monkeypatch.setattr(ck.torch, "save", real_save)
    assert (tmp_path / "latest").read_text().strip() == "step-000002"
    assert not (tmp_path / "step-000004").exists() and not list(tmp_path.glob(".*"))
    tr2 = Trainer(small_model(len(tokenizer())), examples(), collator(), TrainConfig(steps=4, batch_size=8))
    assert tr2.fit(resume_from=str(tmp_path)).steps == [3, 4]


def test_corrupted_files_get_clear_errors(tmp_path):
    _run(tmp_path, steps=2)
    d = resolve_checkpoint(tmp_path)
    fresh = lambda: Trainer(small_model(len(tokenizer())), examples(), collator(), TrainConfig(steps=4, batch_size=8))  # noqa: E731
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="model.safetensors cannot be read.*delete"):
        fresh().fit(resume_from=str(d))
    (d / "model.safetensors").write_bytes(data)
    (d / "state.pt").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="state.pt cannot be read"):
        fresh().fit(resume_from=str(d))
    (d / "state.pt").unlink()
    with pytest.raises(CheckpointError, match="incomplete"):
        fresh().fit(resume_from=str(d))
    with pytest.raises(CheckpointError, match="no checkpoint"):
        fresh().fit(resume_from=str(tmp_path / "nowhere"))


def test_checkpoint_from_another_config_is_refused(tmp_path):
    _run(tmp_path, steps=2)
    other = small_model(len(tokenizer()), d_model=48)
    tr = Trainer(other, examples(), collator(), TrainConfig(steps=4, batch_size=8))
    with pytest.raises(CheckpointError, match=r"different configuration.*'model'"):
        tr.fit(resume_from=str(tmp_path))
    tr = Trainer(small_model(len(tokenizer())), examples(), collator(), TrainConfig(steps=4, batch_size=4))
    with pytest.raises(CheckpointError, match=r"'train'"):
        tr.fit(resume_from=str(tmp_path))


def _save(sharded: bool, ckpt_dir, step: int, model, opt, sched):
    if sharded:  # the collective on one process: the barriers have nobody to wait for
        return ck.save_sharded_checkpoint(ckpt_dir, step, model, opt, sched, {}, {}, is_main=True, barrier=lambda: None)
    return ck.save_checkpoint(ckpt_dir, step, model, opt, sched, {}, {})


def _complete(ckpt_dir) -> bool:
    d = resolve_checkpoint(ckpt_dir)
    weights = ".metadata" if ck.is_sharded_checkpoint(d) else "model.safetensors"
    return all((d / name).is_file() for name in (weights, "state.pt", "meta.json"))


@pytest.mark.parametrize("sharded", [False, True], ids=["whole", "sharded"])
def test_latest_names_a_complete_checkpoint_whatever_step_of_a_save_crashes(tmp_path, monkeypatch, sharded):
    """A crash before each file-system step of a save (every rename, replace and removal in turn), saving again a
    step that is there already (a run resumed before it): `latest` still names a complete checkpoint.  The old
    sharded save removed the checkpoint `latest` named, then renamed the new one into its place."""
    import os
    import shutil
    from pathlib import Path

    model = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters())
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    base = tmp_path / "base"
    for step in (2, 4):
        _save(sharded, base, step, model, opt, sched)
    steps = [(os, "replace"), (Path, "rename"), (shutil, "rmtree")]
    for k in range(1, 50):
        ckpt_dir = tmp_path / f"crash{k}"
        shutil.copytree(base, ckpt_dir)
        count = [0]

        def crash_at_k(real):
            def step(*args, **kwargs):
                count[0] += 1
                if count[0] == k:
                    raise KeyboardInterrupt(f"crash before file-system step {k}")
                return real(*args, **kwargs)

            return step

        with monkeypatch.context() as m:
            for owner, name in steps:
                m.setattr(owner, name, crash_at_k(getattr(owner, name)))
            try:
                final = _save(sharded, ckpt_dir, 4, model, opt, sched)
            except BaseException as exc:  # noqa: BLE001 -- DCP hands the crash on inside its own exception
                assert f"crash before file-system step {k}" in str(exc)
                final = None
        assert _complete(ckpt_dir), f"crash before step {k}: latest names {resolve_checkpoint(ckpt_dir)}"
        if final is not None:  # the save ran through: the new copy is the one named, the old one is gone
            assert resolve_checkpoint(ckpt_dir) == final and final.name == "step-000004.1"
            assert sorted(p.name for p in ckpt_dir.glob("step-*")) == ["step-000002", "step-000004.1"]
            break
    else:
        pytest.fail("the save never ran through")
    assert k > 2  # the crash points were really visited
