"""`labkit.training.accumulation`: notebook 03's gradient comparison through `Trainer.backward`."""

import random

import pytest
import torch

from labkit.training.accumulation import GradGap, grad_gap, window_grads
from labkit.training.trainer import TrainConfig, Trainer
from training_helpers import collator, examples, small_model, tokenizer


def _trainer(batch_size, grad_accum=1, token_weighted=True):
    cfg = TrainConfig(
        steps=2, batch_size=batch_size, grad_accum=grad_accum, lr=3e-3, seed=0, clip=None, token_weighted=token_weighted
    )
    return Trainer(small_model(len(tokenizer())), examples(), collator(), cfg)


WINDOW = random.Random(0).sample(range(len(examples())), 16)


def test_token_weighted_4x4_equals_batch_16_and_loss_over_4_does_not():
    g16 = window_grads(_trainer(16), WINDOW)
    fixed = grad_gap(g16, window_grads(_trainer(4, 4), WINDOW))
    naive = grad_gap(g16, window_grads(_trainer(4, 4, token_weighted=False), WINDOW))
    assert fixed.allclose and fixed.max_abs_diff < 1e-5
    assert not naive.allclose and naive.max_abs_diff > 10 * fixed.max_abs_diff


def test_window_grads_is_repeatable_and_zeroes_first():
    t = _trainer(4, 4)
    first, again = window_grads(t, WINDOW), window_grads(t, WINDOW)  # no accumulation across calls
    assert grad_gap(first, again) == GradGap(0.0, True)
    assert all(p.grad is not None for p in t.raw.parameters())  # left on the model, as after backward


def test_window_must_be_one_step_of_the_config():
    with pytest.raises(ValueError, match="not one step of 4 micro-batch"):
        window_grads(_trainer(4, 4), WINDOW[:12])


def test_grad_gap():
    a = [torch.zeros(3), torch.ones(2)]
    assert grad_gap(a, [torch.zeros(3), torch.ones(2) + 1e-9]).allclose
    gap = grad_gap(a, [torch.tensor([0.0, 0.5, 0.0]), torch.ones(2)])
    assert gap == GradGap(0.5, False)
    with pytest.raises(ValueError, match="different models"):
        grad_gap(a, a[:1])
