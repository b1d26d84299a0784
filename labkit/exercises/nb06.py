"""Notebook 06 (exploding gradients): a clip threshold from a trace, truncation with the tokenizer, a question;
`grade_fix`, the find-and-fix grader."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from labkit.exercises import Choice, Quiz, answered, call, fail, passed
from labkit.i18n import N_, _
from labkit.training.monitor import SPIKE_FACTOR

if TYPE_CHECKING:
    from labkit.exercises.transfer import Run


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


# ---- find and fix: `grade_fix` grades what `labkit.exercises.transfer` measured running the repaired script
# Two repairs are right, the two notebook 06 measures: a learning rate low enough that the grad-norm monitor sees no
# layer spike (section 3's `+ lr 3e-3` row ends lowest), or what the loop lacks -- clipping and a warmup (the
# recipe's insurance). Either way the run must still learn.
CLIP_LIMIT = 2.0  # the largest gradient norm a clipped step may apply (the notebook's recipe clips at 1.0)
MIN_STEPS = 10
LEARNS = 0.85  # the mean loss of the last 4 steps must end below this share of the first step's (shipped: ~0.73)


def _monitor_line(verdict: dict | None) -> str:
    """The grad-norm monitor's verdict in one clause (which layer spiked first, on which batch)."""
    if not verdict:
        return ""
    nf, sp = verdict.get("first_nonfinite"), verdict.get("first_spike")
    if nf:
        return _("the grad-norm monitor: the first non-finite {where} at step {step}").format(
            where=nf["where"], step=nf["step"]
        )
    if not sp:
        return _("the grad-norm monitor saw no layer spike")
    hostile = [i for i in sp.get("ids", []) if str(i).startswith("hostile")]
    return _(
        "the grad-norm monitor: the first spike at step {step} in {layer}, {factor:.0f}x its moving baseline"
    ).format(step=sp["step"], layer=sp["layer"], factor=sp["factor"]) + (
        _(", on a batch holding the crawl accident {id}").format(id=hostile[0]) if hostile else ""
    )


def grade_fix(run: Run) -> bool:
    import math
    import statistics

    rep = run.ranks[0]
    steps, losses = rep.get("steps", []), rep.get("losses", [])
    if len(steps) < MIN_STEPS or not all("pre_clip_norm" in s for s in steps):
        fail(
            _(
                "the check saw {steps} optimizer steps after loss.backward() (at least {min_steps} needed): keep "
                "fit(...) running its steps -- backward, then optimizer.step()"
            ).format(steps=len(steps), min_steps=MIN_STEPS)
        )
    verdict = rep.get("monitor") or {}
    monitor = _monitor_line(verdict)
    bad = [i for i, x in enumerate(losses) if not math.isfinite(x)]
    if bad:
        fail(
            _(
                "the loss went non-finite at step {step}: {monitor}. Lower the learning rate, or clip and warm up"
            ).format(step=bad[0] + 1, monitor=monitor)
        )
    first, end = losses[0], statistics.fmean(losses[-4:])
    lrs = [s["lr"] for s in steps]
    peak = max(lrs)
    if end > LEARNS * first:
        fail(
            _(
                "the loss fell only from {first:.2f} to {end:.2f} (the mean of the last 4 steps): at a peak learning "
                "rate of {peak:g} the run no longer learns in {steps} steps -- lower the learning rate until the spikes "
                "stop, not until the training does (the notebook's `+ lr 3e-3` row learns)"
            ).format(first=first, end=end, peak=peak, steps=len(steps))
        )
    n_spikes = verdict.get("n_spikes", 0)
    unclipped = [s for s in steps if s["applied_norm"] > CLIP_LIMIT * 1.001]
    large = [s for s in steps if s["pre_clip_norm"] > CLIP_LIMIT]
    warm = lrs[0] <= 0.5 * peak
    learned = _("the loss fell from {first:.2f} to {end:.2f}").format(first=first, end=end)
    clipped = not unclipped and warm and large  # the insurance recipe: every step bounded, warmed up, seen to act
    if n_spikes == 0 and not clipped:
        return passed(
            _(
                "the grad-norm monitor saw no layer spike in {steps} steps (the largest jump: {factor:.1f}x a layer's "
                "moving baseline, a spike is over {limit:g}x) at a peak learning rate of {peak:g}; {learned}"
            ).format(
                steps=len(steps),
                factor=verdict.get("max_factor", 0.0),
                limit=SPIKE_FACTOR,
                peak=peak,
                learned=learned,
            )
        )
    spikes = _("{monitor} (layer spikes in {steps} steps: {n})").format(monitor=monitor, n=n_spikes, steps=len(steps))
    if unclipped:
        worst = max(unclipped, key=lambda s: s["applied_norm"])
        fail(
            _(
                "{spikes}; the optimizer applied a gradient of norm {norm:.3g} at step {step}. Nothing bounds these "
                "steps: with AdamW every weight moves by about lr per step whatever the gradient (exercise 3). Lower "
                "the learning rate (peak {peak:g} now) until the monitor sees no spike -- the notebook's `+ lr 3e-3` "
                "row -- or give the loop what it lacks{warmup}: torch.nn.utils.clip_grad_norm_(model.parameters(), "
                "1.0) between backward() and step()"
            ).format(
                spikes=spikes,
                norm=worst["applied_norm"],
                step=worst["step"],
                peak=peak,
                warmup="" if warm else _(", a warmup and clipping"),
            )
        )
    if not warm:
        fail(
            _(
                "{spikes}. Every gradient is clipped now, but the first optimizer step already ran at lr={lr:g}, the "
                "full learning rate (peak {peak:g}): Adam's first steps, with no history in its moment estimates, are "
                "the largest and least informed. Warm up (e.g. LinearLR(optimizer, start_factor=0.01, total_iters=W), "
                "stepped once per optimizer step), or lower the learning rate until the monitor sees no spike"
            ).format(spikes=spikes, lr=lrs[0], peak=peak)
        )
    if not large:
        fail(
            _(
                "no step produced a gradient above {limit:g} before clipping, so the check cannot see your clipping "
                "act: keep the data as it was (the crawl accidents included) -- the repair belongs in the loop"
            ).format(limit=CLIP_LIMIT)
        )
    seen = (
        _("The monitor saw no layer spike")
        if n_spikes == 0
        else _(
            "The monitor still saw {n} layer spike(s) (clipping bounds what they do to the weights; a lower "
            "learning rate, the fix exercise 3 makes first, removes them)"
        ).format(n=n_spikes)
    )
    return passed(
        _(
            "{large} of {steps} steps had a gradient norm above {limit:g} before clipping (up to {max_pre:.3g}); the "
            "optimizer applied at most {max_applied:.3g}; the learning rate rose from {lr_first:.2g} to {peak:.2g}; "
            "{learned}. {seen}"
        ).format(
            large=len(large),
            steps=len(steps),
            limit=CLIP_LIMIT,
            max_pre=max(s["pre_clip_norm"] for s in steps),
            max_applied=max(s["applied_norm"] for s in steps),
            lr_first=lrs[0],
            peak=peak,
            learned=learned,
            seen=seen,
        )
    )
