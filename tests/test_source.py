"""labkit.viz.source: the notebooks' "show the fix" cells read labkit's code at run time."""

import pytest

from labkit.viz.source import show_diff, show_source, source, without

# every (module[:qualname], marker) a notebook shows; a rename must break this test, not a notebook
SHOWN = [
    ("labkit.training.trainer", "fix:set_epoch"),
    ("labkit.training.trainer", "fix:token_weighted_accumulation"),
    ("labkit.training.trainer", "fix:clip"),
    ("labkit.training.trainer", "fix:schedule"),
    ("labkit.training.schedules", "fix:cosine_restarts"),
    ("labkit.text.tasks", "fix:truncation"),
    ("labkit.training.rank_program", "fix:device_placement"),
    ("labkit.training.rank_program", "fix:ddp_wrap"),
    ("labkit.training.rank_program", "fix:sampler"),
    ("labkit.distributed.launcher", "fix:torchrun"),
    ("labkit.distributed.launcher", "fix:accelerate_launch"),
    ("labkit.distributed.samplers", "fix:distributed_sampler"),
    ("labkit.serving.triton", "fix:dynamic_batching"),
    ("labkit.serving.backends", "fix:front_batching"),
    ("labkit.distributed.env:rank_device", None),
    ("labkit.cleaning.validate:clean_record", None),
    ("labkit.cleaning.dedup:Deduper", None),
    ("labkit.training.trainer:Trainer._order", None),
    ("labkit.training.trainer:Trainer.backward", None),
    ("labkit.text.tasks:make_examples", None),
    ("labkit.serving.triton:make_infer_fn", None),
]


@pytest.mark.parametrize("spec,marker", SHOWN)
def test_every_shown_region_exists(spec, marker):
    text = source(spec, marker=marker)
    assert text.strip() and "# [" not in text  # marker comment lines are hidden


def test_regions_hold_the_lines_the_notebooks_teach():
    assert "self.sampler.set_epoch(epoch)" in source("labkit.training.trainer", marker="fix:set_epoch")
    assert "clip_grad_norm_(params, cfg.clip)" in source("labkit.training.trainer", marker="fix:clip")
    assert "self._queue.get_nowait()" in source("labkit.serving.backends", marker="fix:front_batching")
    assert "get_cosine_with_hard_restarts_schedule_with_warmup" in source(
        "labkit.training.schedules", marker="fix:cosine_restarts"
    )
    assert "DDP(model, device_ids=" in source("labkit.training.rank_program", marker="fix:ddp_wrap")
    ddp = source("labkit.training.rank_program", marker="fix:ddp_wrap")
    assert ddp.index("model.to(dev)") < ddp.index("DDP(model")  # device first, then wrap
    assert "torch.distributed.run" in source("labkit.distributed.launcher", marker="fix:torchrun")
    assert "DistributedSampler(" in source("labkit.distributed.samplers", marker="fix:distributed_sampler")
    assert "DynamicBatcher(" in source("labkit.serving.triton", marker="fix:dynamic_batching")
    assert "/ n_tok" in source("labkit.training.trainer", marker="fix:token_weighted_accumulation")


def test_missing_things_fail_loudly():
    with pytest.raises(LookupError, match="fix:nope"):
        source("labkit.training.trainer", marker="fix:nope")
    with pytest.raises(LookupError, match="Trainer.nope"):
        source("labkit.training.trainer:Trainer.nope")
    with pytest.raises(LookupError, match="module"):
        source("labkit.no_such_module")
    with pytest.raises(LookupError, match="no line matches"):
        source("labkit.training.schedules", pattern=r"xyzzy")
    with pytest.raises(LookupError, match="identical"):
        show_diff("a = 1", "a = 1")
    with pytest.raises(LookupError):
        without("a = 1", r"b")


def test_objects_patterns_and_diffs(capsys):
    from labkit.training.schedules import make_scheduler

    assert source(make_scheduler).startswith("def make_scheduler")
    assert source("labkit.training.schedules", pattern="cosine_restarts", context=0).count("\n") >= 1
    fix = source("labkit.training.trainer:Trainer._order")
    pitfall = without(fix, r"set_epoch")
    diff = show_diff(pitfall, fix, title="the one change")
    assert any(ln.startswith("+") and "self.sampler.set_epoch(epoch)" in ln for ln in diff.splitlines())
    show_source("labkit.training.schedules", marker="fix:cosine_restarts")
    out = capsys.readouterr().out
    assert "the one change" in out and "get_cosine_with_hard_restarts" in out


def test_duplicate_markers_are_refused(tmp_path, monkeypatch):
    (tmp_path / "twice_mod.py").write_text("# [fix:a]\nx = 1\n# [/fix:a]\n# [fix:a]\ny = 2\n# [/fix:a]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(LookupError, match="2/2 times"):
        source("twice_mod", marker="fix:a")
