import math

import pytest
import torch

from labkit.training.trainer import NonFiniteError, TrainConfig, Trainer
from training_helpers import collator, examples, small_model, tokenizer

V = lambda: len(tokenizer())  # noqa: E731


def _trainer(model=None, **kw):
    cfg = TrainConfig(**{"steps": 4, "batch_size": 16, "lr": 3e-3, "seed": 0, **kw})
    return Trainer(model or small_model(V()), examples(), collator(), cfg)


def test_accumulation_4x4_equals_batch_16_gradients():
    big, acc = _trainer(small_model(V()), batch_size=16), _trainer(small_model(V()), batch_size=4, grad_accum=4)
    idx = big._order(0)[:16]
    loss_big = big.backward([big._collate(idx)])
    loss_acc = acc.backward([acc._collate(idx[i : i + 4]) for i in range(0, 16, 4)])
    assert float(loss_big) == pytest.approx(float(loss_acc), rel=1e-5)
    for (n, a), b in zip(big.raw.named_parameters(), acc.raw.parameters()):
        assert torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-7), n
    # naive "divide by grad_accum" differs when micro-batches hold different token counts
    naive = small_model(V())
    for i in range(0, 16, 4):
        b = acc._collate(idx[i : i + 4])
        (naive(input_ids=b["input_ids"], attention_mask=b["attention_mask"], labels=b["labels"]).loss / 4).backward()
    diff = max(float((a.grad - c.grad).abs().max()) for a, c in zip(big.raw.parameters(), naive.parameters()))
    assert diff > 1e-5


def test_accumulation_loss_curves_match():
    h1 = _trainer(small_model(V()), steps=6, clip=None).fit()
    h2 = _trainer(small_model(V()), steps=6, clip=None, batch_size=4, grad_accum=4).fit()
    assert h1.loss == pytest.approx(h2.loss, rel=1e-3)
    assert h1.loss[-1] < h1.loss[0]


def test_deterministic_for_a_seed():
    a = _trainer(small_model(V()), steps=3).fit().loss
    b = _trainer(small_model(V()), steps=3).fit().loss
    assert a == b


def test_stop_after_is_a_prefix_of_the_same_schedule():
    kw = dict(steps=6, schedule="cosine", warmup_steps=2)
    full = _trainer(small_model(V()), **kw).fit()
    prefix = _trainer(small_model(V()), stop_after=3, **kw).fit()
    assert prefix.steps == [1, 2, 3] and prefix.samples == 3 * 16
    assert prefix.loss == full.loss[:3] and prefix.lr == full.lr[:3]


def test_resume_continues_with_identical_losses(tmp_path):
    kw = dict(
        steps=8,
        batch_size=8,
        grad_accum=2,
        ckpt_dir=str(tmp_path),
        ckpt_every=2,
        ckpt_keep=0,
        schedule="cosine",
        warmup_steps=2,
    )
    full = _trainer(small_model(V(), dropout_rate=0.1), **kw).fit()
    # a fresh, differently initialised model: everything must come from the checkpoint
    # (step 4 = epoch 1, position 16: the data position crosses an epoch boundary)
    resumed = _trainer(small_model(V(), seed=123, dropout_rate=0.1), **kw).fit(
        resume_from=str(tmp_path / "step-000004")
    )
    assert resumed.steps == [5, 6, 7, 8]
    assert resumed.loss == pytest.approx(full.loss[4:], rel=1e-6)
    assert resumed.lr == pytest.approx(full.lr[4:])


def test_schedules_and_history():
    h = _trainer(steps=6, schedule="cosine_restarts", warmup_steps=2, restarts=2, log_dir=None).fit()
    assert h.lr[0] == 0.0 and h.lr[2] == pytest.approx(3e-3)
    assert len(h.grad_norm) == 6 and h.samples == 6 * 16 and h.samples_per_s > 0
    assert any("EncDecAttention" in k for k in h.layer_norms)
    with pytest.raises(ValueError, match="schedule"):
        TrainConfig(schedule="exp")


def test_tensorboard_and_eval(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ex = examples()
    tr = Trainer(
        small_model(V()),
        ex[:32],
        collator(),
        TrainConfig(steps=4, batch_size=8, log_dir=str(tmp_path), eval_every=2),
        eval_examples=ex[32:],
    )
    h = tr.fit()
    assert [e["step"] for e in h.evals] == [2, 4] and all(math.isfinite(e["eval_loss"]) for e in h.evals)
    acc = EventAccumulator(str(tmp_path)).Reload()
    tags = acc.Tags()["scalars"]
    assert {"train/loss", "train/lr", "grad_norm/total", "eval/eval_loss"} <= set(tags)
    assert any(t.startswith("grad_norm_layer/decoder") for t in tags)
    assert [e.value for e in acc.Scalars("train/loss")] == pytest.approx(h.loss)


def test_bad_inputs():
    with pytest.raises(ValueError, match="empty"):
        Trainer(small_model(V()), [], collator(), TrainConfig())
    with pytest.raises(ValueError, match="vocab_size=len\\(tokenizer\\)"):
        Trainer(small_model(V() - 10), examples(), collator(), TrainConfig())
    short = small_model(V(), n_positions=32)
    tr = Trainer(short, examples(), collator(max_source_len=None), TrainConfig(steps=1))
    with pytest.raises(ValueError, match=r"source tokens but the model supports n_positions=32.*max_source_len"):
        tr.fit()
    with pytest.raises(ValueError, match="nonfinite"):
        TrainConfig(nonfinite="hide")


def _poison(model, at_call: int):
    """Make the decoder's cross-attention value projection emit NaN on its `at_call`-th forward
    and on the next one (the trainer's diagnostic replay of the same batch)."""
    mod = model.decoder.block[0].layer[1].EncDecAttention.v
    calls = {"n": 0}

    def hook(_m, _i, out):
        calls["n"] += 1
        return out * float("nan") if calls["n"] in (at_call, at_call + 1) else out

    mod.register_forward_hook(hook)
    return mod


def test_nonfinite_raise_names_first_module():
    m = small_model(V())
    _poison(m, 2)
    # the 2nd forward is optimizer step 2 (History and TensorBoard's number)
    with pytest.raises(NonFiniteError, match=r"step 2 .*decoder\.block\.0\.layer\.1\.EncDecAttention\.v"):
        _trainer(m, steps=3).fit()


def test_nonfinite_skip_step_counts_and_keeps_weights_finite():
    m = small_model(V())
    _poison(m, 2)
    h = _trainer(m, steps=4, nonfinite="skip_step").fit()
    assert h.skipped_steps == [1] and len(h.nonfinite) == 1 and h.nonfinite[0]["step"] == h.steps[1] == 2
    assert h.nonfinite[0]["where"] == "activation"
    assert not math.isfinite(h.loss[1]) and all(math.isfinite(x) for x in h.loss[2:])
    assert all(torch.isfinite(p).all() for p in m.parameters())


def test_nonfinite_ignore_lets_nan_into_weights():
    m = small_model(V())
    _poison(m, 2)
    h = _trainer(m, steps=3, nonfinite="ignore").fit()
    assert h.skipped_steps == [] and len(h.nonfinite) >= 1
    assert not all(torch.isfinite(p).all() for p in m.parameters())
