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


def hostile_steps(data: Sequence[Example], *, steps: int, batch_size: int, seed: int) -> list[int]:
    """The steps (0-based) whose batch holds a hostile example, in a single-process `Trainer` run
    (no sampler, grad_accum 1): the same seeded order per epoch that `Trainer._order` draws."""
    import torch

    out, epoch, pos = [], 0, 0
    order = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed * 100_003)).tolist()
    bs = min(batch_size, len(order))
    for step in range(steps):
        if pos + bs > len(order):
            epoch, pos = epoch + 1, 0
            order = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed * 100_003 + epoch)).tolist()
        if any(data[i].id.startswith("hostile-") for i in order[pos : pos + bs]):
            out.append(step)
        pos += bs
    return out


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
