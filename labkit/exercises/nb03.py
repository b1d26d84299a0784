"""Notebook 03 (memory and accumulation): what fits a card, token-weighted accumulation, a question."""

from __future__ import annotations

import functools
import math

from labkit.exercises import Choice, Quiz, answered, call, fail, passed
from labkit.i18n import N_, _

GB = 2**30
CARDS = (24, 40, 48, 80)  # card sizes in GB (GiB) the check plans for; 24 is the one the notebook prints
BATCH = 16


@functools.lru_cache(maxsize=1)
def _t5_large():
    from labkit.model import count_parameters, model_config
    from labkit.training import memory as mm

    return count_parameters("t5-large", 32128), mm.Shape.of(model_config("t5-large", 32128))


def reference_plan(alpha: float, card_gb: float, budget_per_gb: float = GB * 0.95) -> tuple[int, int]:
    """(largest micro-batch, accumulation steps for batch 16) for T5-large, 512/64 tokens, on a `card_gb` card."""
    from labkit.training import memory as mm

    P, shape = _t5_large()
    fit = mm.largest_fitting_batch(shape, P, 512, 64, alpha, card_gb * budget_per_gb)
    return fit, (math.ceil(BATCH / fit) if fit else 0)


def _pair(got) -> tuple[int, int]:
    answered(got)
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        fail(
            _("plan_for(card_gb) should return a (micro_batch, accumulation_steps) pair, got {got}").format(
                got=repr(got)
            )
        )
    try:
        return int(got[0]), int(got[1])
    except (TypeError, ValueError):
        fail(_("plan_for(card_gb) should return two whole numbers, got {got}").format(got=repr(got)))


def ex1(plan_for, alpha: float) -> bool:
    """`plan_for(card_gb)`: the largest T5-large micro-batch on a card of that size (5% margin), and the accumulation
    steps that make batch 16 -- checked on 24, 40, 48 and 80 GB cards with the notebook's fitted `alpha`."""
    for card in CARDS:
        fit, acc = _pair(call(plan_for, card))
        want_fit, want_acc = reference_plan(alpha, card)
        if fit != want_fit:
            if fit == reference_plan(alpha, card, GB)[0]:
                hint = _("that is the whole card: keep the 5% margin, budget = {card} * GB * 0.95").format(card=card)
            elif fit in (reference_plan(alpha, card, 1e9 * 0.95)[0], reference_plan(alpha, card, 1e9)[0]):
                hint = _("GB here is 2**30 bytes (GiB, as in section 3), not 1e9: budget = {card} * GB * 0.95").format(
                    card=card
                )
            else:
                hint = f"mm.largest_fitting_batch(large, P_large, 512, 64, alpha, {card} * GB * 0.95)"
            fail(
                _("plan_for({card}) says micro-batch {fit}, the memory model says {want_fit}: {hint}").format(
                    card=card, fit=fit, want_fit=want_fit, hint=hint
                )
            )
        if acc != want_acc:
            if acc == BATCH // fit:
                fail(
                    _(
                        "plan_for({card}): {batch} // {fit} = {acc} rounds down, and {acc} x {fit} < {batch}: batch "
                        "{batch} needs ceil({batch} / {fit}) = {want_acc} micro-batches"
                    ).format(card=card, batch=BATCH, fit=fit, acc=acc, want_acc=want_acc)
                )
            fail(
                _(
                    "plan_for({card}): batch {batch} needs ceil({batch} / {fit}) = {want_acc} micro-batches of {fit}"
                ).format(card=card, batch=BATCH, fit=fit, want_acc=want_acc)
            )
    fit, acc = reference_plan(alpha, 24)
    return passed(
        _("{fit} sequences per step fit 24 GB; batch {batch} = {fit} x {acc} accumulation steps").format(
            fit=fit, batch=BATCH, acc=acc
        )
    )


# three micro-batches: mean token loss and number of target tokens in each
LOSSES, TOKENS = [2.0, 3.0, 6.0], [30, 10, 4]


def ex2(window_loss) -> bool:
    """Combine micro-batch mean losses so the result equals one big batch's mean token loss."""
    got = call(window_loss, LOSSES, TOKENS)
    answered(got)
    try:
        got = float(got)
    except (TypeError, ValueError):
        fail(_("window_loss should return a number, got {type}").format(type=type(got).__name__))
    want = sum(l * n for l, n in zip(LOSSES, TOKENS)) / sum(TOKENS)
    naive = sum(LOSSES) / len(LOSSES)
    if abs(got - naive) < 1e-9:
        fail(
            _(
                "{got:.3f} is the plain mean of the micro-batch losses (loss / grad_accum): it gives a 4-token batch "
                "the same weight as a 30-token one. Weight each loss by its share of the window's tokens"
            ).format(got=got)
        )
    if abs(got - sum(l * n for l, n in zip(LOSSES, TOKENS))) < 1e-9:
        fail(
            _(
                "{got:g} is the summed token loss of the window: divide by the window's {tokens} tokens to get the "
                "mean one big batch reports"
            ).format(got=got, tokens=sum(TOKENS))
        )
    if abs(got - sum(LOSSES)) < 1e-9:
        fail(
            _(
                "{got:g} is the sum of the micro-batch means: weight each by its tokens and divide by all the tokens"
            ).format(got=got)
        )
    if abs(got - want) > 1e-6:
        fail(_("got {got}, expected {want:.4f} = sum(loss_i * tokens_i) / sum(tokens_i)").format(got=got, want=want))
    return passed(
        _("{want:.4f} -- the big batch's mean token loss (the plain mean would say {naive:.4f})").format(
            want=want, naive=naive
        )
    )


EX3 = Quiz(
    "ACD",
    {
        "A": Choice(
            N_("the fp32 weights, 4 bytes per parameter"),
            N_("Right: 4 bytes per parameter in fp32, whatever the batch."),
            missed=N_("one statement you left out is about what the model itself takes (section 3's static part)."),
        ),
        "B": Choice(
            N_("the activations the forward pass keeps for backward"),
            N_(
                "Activations grow with batch x sequence length (and the attention scores with its square) -- that is what "
                "the fitted alpha scales, and what micro-batching and accumulation shrink."
            ),
        ),
        "C": Choice(
            N_("the gradients, 4 bytes per parameter"),
            N_("Right: one fp32 gradient per parameter, 4 bytes, whatever the batch."),
            missed=N_("one statement you left out is about what backward writes for every parameter."),
        ),
        "D": Choice(
            N_("AdamW's two moments, 8 bytes per parameter"),
            N_(
                "Right: exp_avg and exp_avg_sq, 4 bytes each. With the weights and gradients: 16 bytes per parameter, "
                "~11 GB for T5-large's 738M parameters before a single activation."
            ),
            missed=N_("one statement you left out is about what the optimizer keeps for every parameter."),
        ),
    },
)


def ex3(answer) -> bool:
    """Which parts of a training step's memory grow with the number of parameters, not the batch? (select all)"""
    return EX3(answer)
