"""Notebook 06 (exploding gradients): a clip threshold from a trace, truncation with the tokenizer, a question."""

from __future__ import annotations

import statistics

from labkit.exercises import Choice, Quiz, answered, call, fail, passed
from labkit.i18n import N_, _


# the accepted clip threshold rescales between these shares of the trace's steps: enough to catch the spikes,
# few enough to leave the ordinary steps alone (a threshold that rescales most steps is a hidden learning-rate cut)
LOWER_SHARE, UPPER_SHARE = 0.02, 0.10
RECIPE_CLIP = 1.0  # what the fixed recipe above and most transformer recipes use: clip_grad_norm_(..., max_norm=1.0)


def rescaled_share(clip: float, trace) -> float:
    """Share of the steps whose total gradient norm is above `clip` (the steps clipping rescales)."""
    norms = [float(x) for x in trace if x == x]
    return sum(n > clip for n in norms) / len(norms)


def ex1(clip, trace) -> bool:
    """A clip threshold chosen from a grad-norm trace: it rescales the spikes, not the ordinary steps -- between
    LOWER_SHARE and UPPER_SHARE of the steps."""
    answered(clip)
    norms = sorted(float(x) for x in trace if x == x)
    med, top = statistics.median(norms), norms[-1]
    try:
        c = float(clip)
    except (TypeError, ValueError):
        fail(_("clip should be a number (a gradient norm), got {type}").format(type=type(clip).__name__))
    if not c > 0:
        fail(N_("a clip threshold is a positive gradient norm"))
    share = rescaled_share(c, norms)
    band = _("between {lower:.0%} and {upper:.0%} of the steps").format(lower=LOWER_SHARE, upper=UPPER_SHARE)
    if c >= top:
        fail(
            _(
                "clip={c:g} is at or above the largest norm in the trace ({top:.3g}): it never acts. A useful "
                "threshold rescales {band}: the spikes"
            ).format(c=c, top=top, band=band)
        )
    if c <= med:
        fail(
            _(
                "clip={c:g} is at or below the median norm {med:.3g}: it rescales {share:.0%} of the steps, so at "
                "least every other step trains at a lower learning rate than you set. Raise it until it rescales {band}"
            ).format(c=c, med=med, share=share, band=band)
        )
    if share > UPPER_SHARE:
        fail(
            _(
                "clip={c:g} rescales {share:.0%} of the steps: ordinary steps get scaled down too, i.e. it quietly "
                "lowers the learning rate. Raise it until it rescales {band}"
            ).format(c=c, share=share, band=band)
        )
    if share < LOWER_SHARE:
        fail(
            _(
                "clip={c:g} rescales only {share:.1%} of the steps: most spikes pass through unclipped. Lower it "
                "toward the top of the ordinary steps, so that it rescales {band}"
            ).format(c=c, share=share, band=band)
        )
    recipe = rescaled_share(RECIPE_CLIP, norms)
    return passed(
        _(
            "clip={c:g} rescales {share:.1%} of these steps (accepted: {band}; median {med:.3g}, max {top:.3g}). "
            "The recipe's max_norm={recipe_clip} rescales {recipe:.1%} here"
        ).format(c=c, share=share, band=band, med=med, top=top, recipe_clip=RECIPE_CLIP, recipe=recipe)
    )


def ex2(encode, tok, max_len: int = 32) -> bool:
    """`encode(tok, text, max_len)`: token ids truncated to max_len, ending with </s>, like the collator."""
    from labkit.text.tasks import Example, Seq2SeqCollator

    text = "标题：" + "今天市政府召开新闻发布会。" * 20
    ids = call(encode, tok, text, max_len)
    answered(ids)
    ids = list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
    if ids and isinstance(ids[0], list):
        ids = ids[0]
    full = tok(text)["input_ids"]
    if len(ids) == len(full):
        fail(
            _("{n} ids: nothing was truncated. Pass truncation=True and max_length={max_len} to the tokenizer").format(
                n=len(ids), max_len=max_len
            )
        )
    if len(ids) != max_len:
        fail(
            _("{n} ids, expected {max_len}: max_length counts the special tokens too").format(
                n=len(ids), max_len=max_len
            )
        )
    want = Seq2SeqCollator(tok, max_len, 8)([Example("x", "title", text, "t")])["input_ids"][0].tolist()
    if ids != want:
        fail(
            N_(
                "the ids differ from the collator's: keep the closing </s> (tokenizer(..., truncation=True, "
                "max_length=N) does, slicing input_ids[:N] does not)"
            )
        )
    return passed(
        _("{n} tokens -> {max_len}, ending with </s>: the same ids the trainer's collator makes").format(
            n=len(full), max_len=max_len
        )
    )


EX3 = Quiz(
    "BC",
    {
        "A": Choice(
            N_("clipping at 1.0 bounds every step, so the run is fixed"),
            N_(
                "Clipping bounds the gradient's norm, but AdamW divides the gradient by the root of its own running "
                "square: the step is about lr per parameter whatever the gradient's scale."
            ),
        ),
        "B": Choice(
            N_("each weight still moves by about lr = 0.1 per step"),
            N_(
                "Right: AdamW's update is ~lr x m / sqrt(v), scale-free in the gradient, so a rescaled gradient still "
                "moves each weight by ~lr = 0.1."
            ),
            missed=N_(
                "one statement you left out is about how far AdamW moves a weight when the gradient is rescaled."
            ),
        ),
        "C": Choice(
            N_("lowering the learning rate is the fix to make first"),
            N_(
                "Right: lower the learning rate first (section 3's `+ lr 3e-3`); clipping and warmup handle the rare "
                "bad batch once the step size is sane."
            ),
            missed=N_("one statement you left out is about which fix section 3 applies before clipping."),
        ),
        "D": Choice(
            N_("truncating the sources would fix the run on its own"),
            N_(
                "Truncation bounds the cost and reach of long crawl accidents; it does not change the step size, and "
                "the first spikes came on ordinary batches."
            ),
        ),
    },
)


def ex3(answer) -> bool:
    """lr=0.1 with AdamW and clipping at 1.0: which statements are true? (select all)"""
    return EX3(answer)
