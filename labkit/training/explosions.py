"""Notebook 06's experiment: hostile samples and one training recipe with switchable fixes.

The broken recipe and each fix are settings of the same `run_recipe` call
(`clip=None` vs `1.0`, `schedule="constant", warmup=0` vs cosine with hard
restarts + warmup, `max_source_len=None` vs a limit), so the comparison changes
exactly one thing at a time.
"""
from __future__ import annotations

import random
from dataclasses import replace
from typing import Sequence

from labkit.text.tasks import Example

JUNK = "🔥★※①②№€™～￥…\u200b\u3000▲◆■□●◎♀♂"


def hostile_examples(examples: Sequence[Example], n: int, seed: int, repeat: int = 3, junk_len: int = 40) -> list[Example]:
    """`n` crawl-style accidents: a body pasted `repeat` times with runs of symbols/emoji between.

    They are several times longer than any clean article and full of characters
    the tokenizer maps to <unk> -- what a scraper's unfiltered output feeds a model."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        e = examples[rng.randrange(len(examples))]
        body = e.source
        junk = lambda: "".join(rng.choice(JUNK) for _ in range(junk_len))  # noqa: E731
        out.append(replace(e, id=f"hostile-{i}/{e.id}", source=body + "".join(junk() + body for _ in range(repeat - 1))))
    return out


def mix(clean: Sequence[Example], hostile: Sequence[Example], seed: int) -> list[Example]:
    data = list(clean) + list(hostile)
    random.Random(seed).shuffle(data)
    return data


def run_recipe(tokenizer, data: Sequence[Example], *, steps: int, batch_size: int, lr: float, seed: int,
               clip: float | None, schedule: str, warmup_steps: int, max_source_len: int | None,
               log_dir: str | None = None, preset: str = "tiny", spike_factor: float = 5.0):
    """Train a fresh `preset` model (initialised from `seed`) with the given recipe; returns its History.

    Non-finite values never stop the run (policy "ignore") so the notebook can
    show what happens after them; the history records every event."""
    from labkit.config import seed_everything
    from labkit.model import build_model
    from labkit.text.tasks import Seq2SeqCollator
    from labkit.training.trainer import TrainConfig, Trainer

    seed_everything(seed)
    model = build_model(preset, len(tokenizer))
    cfg = TrainConfig(steps=steps, batch_size=batch_size, lr=lr, seed=seed, clip=clip, schedule=schedule,
                      warmup_steps=warmup_steps, nonfinite="ignore", log_dir=log_dir, spike_factor=spike_factor)
    return Trainer(model, data, Seq2SeqCollator(tokenizer, max_source_len, 48), cfg).fit()


def loss_spike_factor(losses: Sequence[float], window: int = 5) -> float:
    """Largest ratio of a loss to the minimum of the `window` losses before it (inf if non-finite)."""
    import math

    worst = 1.0
    for i in range(window, len(losses)):
        if not math.isfinite(losses[i]):
            return math.inf
        worst = max(worst, losses[i] / max(min(losses[i - window : i]), 1e-12))
    return worst
