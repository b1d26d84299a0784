"""Notebook 03's accumulation check: the gradient of one window of examples, as a `Trainer` computes it.

`window_grads` runs `Trainer.backward` -- the training loop's own accumulation code -- over the
window split the way the trainer's config splits it (`grad_accum` micro-batches of `batch_size`),
so one batch of 16 and 4 micro-batches of 4 are compared through the code that trains.
`grad_gap` compares two such gradients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch


def window_grads(trainer, window: Sequence[int]) -> list[torch.Tensor]:
    """The gradient (one tensor per parameter) of `trainer`'s model on the examples `window` indexes.

    The window must be exactly one optimizer step of `trainer.cfg`: `grad_accum` micro-batches of
    `batch_size`. Gradients are zeroed first and left on the model."""
    cfg, window = trainer.cfg, list(window)
    if len(window) != cfg.batch_size * cfg.grad_accum:
        raise ValueError(
            f"a window of {len(window)} examples is not one step of {cfg.grad_accum} micro-batch(es) "
            f"of {cfg.batch_size}: pass {cfg.batch_size * cfg.grad_accum} indices"
        )
    trainer.raw.zero_grad(set_to_none=True)
    micro = [window[i : i + cfg.batch_size] for i in range(0, len(window), cfg.batch_size)]
    trainer.backward([trainer.collator([trainer.examples[i] for i in idx]) for idx in micro])
    return [torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for p in trainer.raw.parameters()]


@dataclass(frozen=True)
class GradGap:
    max_abs_diff: float  # the largest |a - b| over every gradient element
    allclose: bool  # torch.allclose(a, b, rtol, atol) for every parameter


def grad_gap(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor], rtol: float = 1e-4, atol: float = 1e-7) -> GradGap:
    """How far two gradients of the same model are apart."""
    if len(a) != len(b):
        raise ValueError(f"gradients of different models: {len(a)} vs {len(b)} parameters")
    return GradGap(
        max(float((p - q).abs().max()) for p, q in zip(a, b)),
        all(torch.allclose(p, q, rtol=rtol, atol=atol) for p, q in zip(a, b)),
    )
