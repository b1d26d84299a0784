"""Notebook 03 (memory and accumulation): what fits a 24 GB card, token-weighted accumulation, a question."""
from __future__ import annotations

import math

from labkit.exercises import answered, call, fail, passed, quiz

GB = 2**30


def reference_24gb(alpha: float) -> tuple[int, int]:
    """(largest micro-batch, accumulation steps for batch 16) for T5-large, 512/64 tokens, 24 GB x 0.95."""
    from labkit.model import count_parameters, model_config
    from labkit.training import memory as mm

    P = count_parameters("t5-large", 32128)
    shape = mm.Shape.of(model_config("t5-large", 32128))
    fit = mm.largest_fitting_batch(shape, P, 512, 64, alpha, 24 * GB * 0.95)
    return fit, (math.ceil(16 / fit) if fit else 0)


def ex1(fit_24gb, accum_24gb, alpha: float) -> bool:
    """The largest T5-large micro-batch on a 24 GB card, and the accumulation steps that make batch 16."""
    answered(fit_24gb)
    answered(accum_24gb)
    fit, acc = reference_24gb(alpha)
    if int(fit_24gb) != fit:
        hint = ("use the same 5% margin as the 16 GB cell: budget = 24 * GB * 0.95" if abs(int(fit_24gb) - fit) == 1
                else "call mm.largest_fitting_batch(large, P_large, 512, 64, alpha, budget) with budget = 24 * GB * 0.95")
        fail(f"fit_24gb = {fit_24gb}, the memory model says {fit}: {hint}")
    if int(accum_24gb) != acc:
        fail(f"accum_24gb = {accum_24gb}: batch 16 needs ceil(16 / {fit}) = {acc} micro-batches of {fit}")
    return passed(f"{fit} sequences per step fit 24 GB; batch 16 = {fit} x {acc} accumulation steps")


# three micro-batches: mean token loss and number of target tokens in each
LOSSES, TOKENS = [2.0, 3.0, 6.0], [30, 10, 4]


def ex2(window_loss) -> bool:
    """Combine micro-batch mean losses so the result equals one big batch's mean token loss."""
    got = call(window_loss, LOSSES, TOKENS)
    answered(got)
    want = sum(l * n for l, n in zip(LOSSES, TOKENS)) / sum(TOKENS)
    naive = sum(LOSSES) / len(LOSSES)
    if abs(float(got) - naive) < 1e-9:
        fail(f"{got:.3f} is the plain mean of the micro-batch losses (loss / grad_accum): it gives a 4-token batch "
             "the same weight as a 30-token one. Weight each loss by its share of the window's tokens")
    if abs(float(got) - want) > 1e-6:
        fail(f"got {got}, expected {want:.4f} = sum(loss_i * tokens_i) / sum(tokens_i)")
    return passed(f"{want:.4f} -- the big batch's mean token loss (the plain mean would say {naive:.4f})")


def ex3(answer) -> bool:
    """Bytes per parameter for fp32 weights + gradients + AdamW states."""
    return quiz(answer, "C", {
        "A": "4 bytes is the fp32 weight alone; training also keeps a gradient and two Adam moments per parameter.",
        "B": "8 bytes counts weights and gradients but forgets AdamW's two moment estimates (exp_avg, exp_avg_sq).",
        "C": "Right: 4 (weight) + 4 (gradient) + 8 (two fp32 moments) = 16 bytes, ~11 GB for T5-large's 738M "
             "parameters before a single activation.",
        "D": "12 bytes would be weights + gradients + *one* moment; AdamW keeps two.",
    })
