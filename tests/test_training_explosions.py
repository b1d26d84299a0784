"""`labkit.training.explosions`: notebook 06's recipes, their comparison and the hostile batches."""

import math
from dataclasses import replace

import pytest

from labkit.training import explosions as X
from labkit.training.trainer import History
from training_helpers import examples, tokenizer

BROKEN = dict(lr=0.1, clip=None, schedule="constant", warmup_steps=0, max_source_len=None)


def test_fix_recipes_add_one_fix_each_and_fix_false_drops_the_last():
    r = X.fix_recipes(BROKEN, max_source_len=128, lr=3e-3, warmup_steps=4)
    assert list(r) == [X.TRUNCATED, X.LR_ONLY, X.FIXED]
    assert r[X.TRUNCATED] == dict(BROKEN, max_source_len=128)
    assert r[X.LR_ONLY] == dict(r[X.TRUNCATED], lr=3e-3)
    assert r[X.FIXED] == dict(r[X.LR_ONLY], clip=1.0, schedule="cosine_restarts", warmup_steps=4)
    off = X.fix_recipes(BROKEN, max_source_len=128, lr=3e-3, warmup_steps=4, fix=False)
    assert off[X.FIXED] == off[X.LR_ONLY] == r[X.LR_ONLY]


def test_hostile_steps_reads_what_the_run_trained_on():
    data = examples()[:6]
    data[4] = replace(data[4], id="hostile-0/x")
    hist = History(steps=[1, 2, 3], seen=[0, 1, 2, 4, 5, 3])  # batches of 2: {0,1}, {2,4}, {5,3}
    assert X.hostile_steps(data, hist) == [1]
    assert X.hostile_steps(data, History()) == []


def test_compare_fixes_trains_each_recipe_like_the_broken_run(tmp_path):
    clean = examples()
    data = X.mix(clean, X.hostile_examples(clean, 3, seed=0, repeat=2), seed=0)
    common = dict(steps=3, batch_size=8, seed=0)
    broken = X.run_recipe(tokenizer(), data, **common, **BROKEN)
    recipes = X.fix_recipes(BROKEN, max_source_len=64, lr=3e-3, warmup_steps=1)
    cmp = X.compare_fixes(tokenizer(), data, broken, recipes, log_dirs={X.FIXED: str(tmp_path / "tb")}, **common)
    assert list(cmp.hists) == [X.BROKEN, X.TRUNCATED, X.LR_ONLY, X.FIXED] and cmp.hists[X.BROKEN] is broken
    assert all(h.seen == broken.seen for h in cmp.hists.values())  # same seed, same data order
    assert any(tmp_path.joinpath("tb").iterdir())  # only the fixed run logs
    assert cmp.hostile_at == X.hostile_steps(data, broken)
    table = cmp.summary()
    assert list(table.index) == list(cmp.hists) and table.loc[X.FIXED, "final loss"] == cmp.hists[X.FIXED].loss[-1]
    m = cmp.metrics()
    assert set(m) == {
        "fixed_final_loss",
        "hostile_loss_jump[lr_only]",
        "hostile_max_grad_norm[lr_only]",
        "final_loss[lr_only]",
        "hostile_loss_jump[lr_clip_warmup]",
        "hostile_max_grad_norm[lr_clip_warmup]",
        "final_loss[lr_clip_warmup]",
    }
    assert all(math.isfinite(v) for v in m.values())


def test_compare_fixes_shows_table_and_curves(capsys):
    import matplotlib

    matplotlib.use("Agg")
    h = History(steps=[1, 2], loss=[3.0, 2.0], grad_norm=[1.0, 2.0], seen=[0, 1], seconds=1.0, samples=2)
    cmp = X.FixComparison({name: h for name in (X.BROKEN, X.TRUNCATED, X.LR_ONLY, X.FIXED)}, hostile_at=[0])
    fig = cmp.show()
    out = capsys.readouterr().out
    assert X.FIXED in out and "1 of 2 batches hold a hostile sample" in out
    assert len(fig.axes) == 2 and len(fig.axes[0].lines) == 4
    assert cmp.metrics()["hostile_max_grad_norm[lr_only]"] == pytest.approx(1.0)


def test_frequency_loss_is_the_loss_of_the_best_fixed_guess():
    """`frequency_loss` is the cross-entropy of the title tokens under their own frequencies: the loss of a model that
    outputs one distribution whatever the article -- the best such guess (a uniform one, or any other, is worse)."""
    import torch

    from labkit.text.tasks import Seq2SeqCollator

    data, tok = examples()[:12], tokenizer()
    labels = Seq2SeqCollator(tok, None, X.TARGET_LEN)(data)["labels"].flatten()
    labels = labels[labels != -100]
    counts = torch.bincount(labels, minlength=len(tok)).double()

    def loss_of(probs):  # every position predicted with the same distribution
        return float(torch.nn.functional.nll_loss(probs.clamp_min(1e-12).log().expand(len(labels), -1), labels))

    best = X.frequency_loss(tok, data)
    assert best == pytest.approx(loss_of(counts / counts.sum()), rel=1e-6)
    assert loss_of(torch.full((len(tok),), 1.0 / len(tok), dtype=torch.double)) > best + 0.5
    assert loss_of((counts + 1) / (counts + 1).sum()) > best  # smoothed towards uniform: still a worse guess
