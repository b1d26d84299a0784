"""Notebook 06 (exploding gradients): a clip threshold from a trace, truncation with the tokenizer, a question."""
from __future__ import annotations

import statistics

from labkit.exercises import answered, call, fail, passed, quiz


def ex1(clip, trace) -> bool:
    """A clip threshold chosen from a grad-norm trace: leaves typical steps alone, cuts the spikes."""
    answered(clip)
    norms = sorted(float(x) for x in trace if x == x)
    med, top = statistics.median(norms), norms[-1]
    c = float(clip)
    if c <= 0:
        fail("a clip threshold is a positive gradient norm")
    if c < med:
        fail(f"clip={c:g} is below the median norm {med:.3g}: it would rescale most steps, i.e. quietly lower the "
             "learning rate. Pick a value a little above the typical (median) norm")
    if c >= top:
        fail(f"clip={c:g} is at or above the largest norm in the trace ({top:.3g}): it never acts. Pick a value "
             "between the median and the spikes")
    share = sum(n > c for n in norms) / len(norms)
    return passed(f"clip={c:g} rescales {share:.0%} of these steps (median {med:.3g}, max {top:.3g}); 1.0 is the "
                  "common default for transformers")


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
        fail(f"{len(ids)} ids: nothing was truncated. Pass truncation=True and max_length={max_len} to the tokenizer")
    if len(ids) != max_len:
        fail(f"{len(ids)} ids, expected {max_len}: max_length counts the special tokens too")
    want = Seq2SeqCollator(tok, max_len, 8)([Example("x", "title", text, "t")])["input_ids"][0].tolist()
    if ids != want:
        fail("the ids differ from the collator's: keep the closing </s> (tokenizer(..., truncation=True, "
             "max_length=N) does, slicing input_ids[:N] does not)")
    return passed(f"{len(full)} tokens -> {max_len}, ending with </s>: the same ids the trainer's collator makes")


def ex3(answer) -> bool:
    """lr=0.1 with AdamW: does clipping at 1.0 save the run?"""
    return quiz(answer, "B", {
        "A": "Clipping bounds the gradient's norm, but AdamW divides the gradient by the root of its own running "
             "square: the step is about lr per parameter whatever the gradient's scale.",
        "B": "Right: AdamW's update is ~lr x m / sqrt(v), scale-free in the gradient, so a rescaled gradient still moves "
             "each weight by ~lr = 0.1. Lower the learning rate first; clipping and warmup handle the rare bad batch.",
        "C": "Truncation bounds the cost and reach of long crawl accidents; it does not change the step size.",
        "D": "The first spikes came on ordinary batches (the monitor shows it): removing the hostile samples would not "
             "remove the cause.",
    })
