"""Notebook 06's experiment: hostile samples and one training recipe with switchable fixes.

The broken recipe and each fix are settings of the same `run_recipe` call
(`clip=None` vs `1.0`, `schedule="constant", warmup=0` vs cosine with hard
restarts + warmup, `max_source_len=None` vs a limit), so the comparison changes
exactly one thing at a time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Sequence

from labkit.i18n import N_, _
from labkit.text.tasks import Example

TARGET_LEN = 48  # target tokens the recipes train on (titles are far shorter)
JUNK = "🔥★※①②№€™～￥…\u200b\u3000▲◆■□●◎♀♂"


def hostile_examples(
    examples: Sequence[Example], n: int, seed: int, repeat: int = 3, junk_len: int = 40
) -> list[Example]:
    """`n` crawl-style accidents: a body pasted `repeat` times with runs of symbols/emoji between.

    They are several times longer than any clean article and full of characters
    the tokenizer maps to <unk> -- what a scraper's unfiltered output feeds a model."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        e = examples[rng.randrange(len(examples))]
        body = e.source
        junk = lambda: "".join(rng.choice(JUNK) for _k in range(junk_len))  # noqa: E731
        out.append(
            replace(e, id=f"hostile-{i}/{e.id}", source=body + "".join(junk() + body for _r in range(repeat - 1)))
        )
    return out


def mix(clean: Sequence[Example], hostile: Sequence[Example], seed: int) -> list[Example]:
    data = list(clean) + list(hostile)
    random.Random(seed).shuffle(data)
    return data


def spiky_trace(steps: int = 300, seed: int = 0, typical: float = 0.3, spikes: int = 12) -> list[float]:
    """A total gradient-norm trace shaped like a larger, healthy run's, for choosing a clip threshold.

    This notebook's tiny model gives no such trace: at a sane learning rate its unclipped norm rises smoothly
    (~0.4 to ~2 over 60 smoke steps) with no spike to find. Here the ordinary steps scatter log-normally
    (sigma 0.25) around `typical` with a slow 20 % drift up, and `spikes` steps -- the batches a crawl accident
    or a bad update lands on -- are 5 to 40 times `typical`. Seeded: the same list for the same arguments."""
    import math

    rng = random.Random(seed)
    norms = [typical * math.exp(rng.gauss(0.0, 0.25)) * (1 + 0.2 * s / steps) for s in range(steps)]
    for s in rng.sample(range(steps), spikes):
        norms[s] = typical * rng.uniform(5.0, 40.0)
    return [round(x, 4) for x in norms]


def run_recipe(
    tokenizer,
    data: Sequence[Example],
    *,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    clip: float | None,
    schedule: str,
    warmup_steps: int,
    max_source_len: int | None,
    log_dir: str | None = None,
    preset: str = "tiny",
    spike_factor: float = 5.0,
):
    """Train a fresh `preset` model (initialised from `seed`) with the given recipe; returns its History.

    Non-finite values never stop the run (policy "ignore") so the notebook can
    show what happens after them; the history records every event."""
    from labkit.config import seed_everything
    from labkit.model import build_model
    from labkit.text.tasks import Seq2SeqCollator
    from labkit.training.trainer import TrainConfig, Trainer

    seed_everything(seed)
    model = build_model(preset, len(tokenizer))
    cfg = TrainConfig(
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        clip=clip,
        schedule=schedule,
        warmup_steps=warmup_steps,
        nonfinite="ignore",
        log_dir=log_dir,
        spike_factor=spike_factor,
    )
    return Trainer(model, data, Seq2SeqCollator(tokenizer, max_source_len, TARGET_LEN), cfg).fit()


def frequency_loss(tokenizer, data: Sequence[Example], target_len: int | None = None) -> float:
    """The loss of a model that ignores its input: the cross-entropy of the targets' tokens under their own
    frequencies (every position of every title predicted by how often each token occurs in the titles).

    A run whose loss settles here has learned nothing from the articles, nor from the title so far: its output is
    one fixed distribution, and at the best fixed distribution the per-example gradients cancel on average -- so
    its total gradient norm is small. A small gradient there means stuck, not healthy (notebook 06's broken run)."""
    import collections
    import math

    from labkit.text.tasks import Seq2SeqCollator

    collate = Seq2SeqCollator(tokenizer, None, target_len or TARGET_LEN)
    counts: collections.Counter = collections.Counter()
    for i in range(0, len(data), 64):  # the trainer's collator, its labels (-100 marks padding)
        counts.update(int(t) for t in collate(list(data[i : i + 64]))["labels"].flatten() if t != -100)
    n = sum(counts.values())
    return -sum(c / n * math.log(c / n) for c in counts.values())


def hostile_steps(data: Sequence[Example], history) -> list[int]:
    """The steps (0-based) of a finished run whose batch held a hostile example.

    Read from the run's own record of what it trained on (`History.seen`, the example indices in
    order), so the answer is the order the trainer drew, whatever its sampler or epochs."""
    per_step = len(history.seen) // max(len(history.steps), 1)
    return [
        step
        for step in range(len(history.steps))
        if any(data[i].id.startswith("hostile-") for i in history.seen[step * per_step : (step + 1) * per_step])
    ]


def hostile_loss_jump(losses: Sequence[float], at_steps: Sequence[int]) -> float:
    """Largest rise of the loss on the step after a hostile batch over the loss just before it
    (loss[s + 1] - loss[s - 1]): how far one hostile update throws the model; inf if non-finite."""
    import math

    worst = 0.0
    for s in at_steps:
        if 1 <= s and s + 1 < len(losses):
            jump = losses[s + 1] - losses[s - 1]
            if not math.isfinite(jump):
                return math.inf
            worst = max(worst, jump)
    return worst


def loss_spike_factor(losses: Sequence[float], window: int = 5) -> float:
    """Largest ratio of a loss to the minimum of the `window` losses before it (inf if non-finite)."""
    import math

    worst = 1.0
    for i in range(window, len(losses)):
        if not math.isfinite(losses[i]):
            return math.inf
        worst = max(worst, losses[i] / max(min(losses[i - window : i]), 1e-12))
    return worst


BROKEN, TRUNCATED, LR_ONLY, FIXED = "broken", "+ truncation", "+ lr 3e-3", "+ clip + warmup/cosine restarts"


def fix_recipes(
    broken: dict, *, max_source_len: int, lr: float, warmup_steps: int, fix: bool = True
) -> dict[str, dict]:
    """The recipes after the broken one, each adding one fix to the one before: truncation, a sane
    learning rate, then clipping at 1.0 + warmup and cosine with hard restarts.

    One code path, two settings: `fix=False` keeps truncation and the learning rate but drops the
    clipping and warmup/restarts of the last recipe (it then equals the one before)."""
    truncated = dict(broken, max_source_len=max_source_len)
    sane = dict(truncated, lr=lr)
    clip_warmup = dict(clip=1.0, schedule="cosine_restarts", warmup_steps=warmup_steps) if fix else {}
    return {TRUNCATED: truncated, LR_ONLY: sane, FIXED: dict(sane, **clip_warmup)}


# summary()'s columns are keys (tests and notebooks read them); show() prints them translated
_COLUMNS = {
    "final loss": N_("final loss"),
    "max grad norm": N_("max grad norm"),
    "layer spikes >=5x": N_("layer spikes >=5x"),
    "non-finite": N_("non-finite"),
    "samples/s": N_("samples/s"),
}


@dataclass
class FixComparison:
    """Each recipe's History (the broken run first) and the steps whose batch held a hostile sample."""

    hists: dict
    hostile_at: list[int]

    def summary(self):
        """One row per recipe: final loss, max grad norm, layer spikes, non-finite values, samples/s."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "recipe": k,
                    "final loss": h.loss[-1],
                    "max grad norm": max(h.grad_norm),
                    "layer spikes >=5x": len(h.spikes),
                    "non-finite": len(h.nonfinite),
                    "samples/s": h.samples_per_s,
                }
                for k, h in self.hists.items()
            ]
        ).set_index("recipe")

    def metrics(self) -> dict:
        """The lowered learning rate alone vs with clipping + warmup/restarts, on the hostile batches."""
        out = {"fixed_final_loss": self.hists[FIXED].loss[-1]}
        for label, name in (("lr_only", LR_ONLY), ("lr_clip_warmup", FIXED)):
            h = self.hists[name]
            out[f"hostile_loss_jump[{label}]"] = hostile_loss_jump(h.loss, self.hostile_at)
            out[f"hostile_max_grad_norm[{label}]"] = max((h.grad_norm[s] for s in self.hostile_at), default=0.0)
            out[f"final_loss[{label}]"] = h.loss[-1]
        return out

    def show(self):
        """Print the summary table and the hostile-batch comparison; plot loss and grad norm per recipe."""
        import matplotlib.pyplot as plt
        import pandas as pd

        table = self.summary().round(3).rename(columns={k: _(v) for k, v in _COLUMNS.items()})
        with pd.option_context("display.unicode.east_asian_width", True):  # CJK headers: columns stay aligned
            print(table.to_string())
        fig, ax = plt.subplots(1, 2, figsize=(11, 3.6))
        for k, h in self.hists.items():
            ax[0].plot(h.steps, h.loss, label=k)
            ax[1].semilogy(h.steps, h.grad_norm, label=k)
        ax[0].set_title(_("train loss"))
        ax[1].set_title(_("total grad norm (before clipping)"))
        for a in ax:
            a.set_xlabel(_("step"))
            a.legend(fontsize=7)
        plt.tight_layout()
        plt.show()
        m = self.metrics()
        print(
            _(
                "{hostile} of {steps} batches hold a hostile sample; worst loss rise across one of them: "
                "lr alone {lr_only:.3f}, + clip + warmup/restarts {lr_clip_warmup:.3f}"
            ).format(
                hostile=len(self.hostile_at),
                steps=len(self.hists[FIXED].steps),
                lr_only=m["hostile_loss_jump[lr_only]"],
                lr_clip_warmup=m["hostile_loss_jump[lr_clip_warmup]"],
            )
        )
        return fig


def compare_fixes(
    tokenizer,
    data: Sequence[Example],
    broken,
    recipes: dict[str, dict],
    *,
    steps: int,
    batch_size: int,
    seed: int,
    log_dirs: dict[str, str] | None = None,
) -> FixComparison:
    """Train each of `recipes` (see `fix_recipes`) like the `broken` run's History, same seed and data order.

    `log_dirs` names a TensorBoard folder per recipe (others log nothing)."""
    hists = {BROKEN: broken}
    for name, kw in recipes.items():
        hists[name] = run_recipe(
            tokenizer, data, steps=steps, batch_size=batch_size, seed=seed, log_dir=(log_dirs or {}).get(name), **kw
        )
    return FixComparison(hists, hostile_steps(data, hists[FIXED]))
