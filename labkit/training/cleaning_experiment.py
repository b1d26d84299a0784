"""The cleaning experiment: same model, same step budget, dirty full set vs cleaned set.

One code path, two inputs: the naive recipe's records (`naive_load`) and the
pipeline's `clean.jsonl`.  Both arms share one tokenizer (trained on the union
of both training sets, so neither arm gets a vocabulary advantage) and are
evaluated on the same held-out *clean* articles, so eval loss, ROUGE-L and
the repetition rate are comparable.  Training is `train_generator` -- the
course's one training loop.  It lives in `training` because it trains: cleaning
never imports training (docs/architecture.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from labkit.jsonl import read_jsonl


def read_clean(out_dir) -> list[dict]:
    """The kept records of a cleaning run (clean.jsonl) as dicts."""
    return read_jsonl(Path(out_dir) / "clean.jsonl")


def dirty_vs_clean(
    dirty: Sequence[dict],
    clean: Sequence[dict],
    eval_records: Sequence,
    cfg,
    tasks: Sequence[str] = ("title",),
    steps: int | None = None,
    **train_overrides,
) -> dict:
    """Train the same model for the same steps on each set; returns {"dirty": Trained, "clean": Trained}.

    `tasks` defaults to title generation: a crawl has titles and bodies, not summaries or keywords.
    `train_overrides` (e.g. `lr=5e-3`) apply to both arms alike."""
    from labkit.text.tokenizer import train_tokenizer
    from labkit.text.tasks import tokenizer_texts
    from labkit.training.recipes import train_generator

    tokenizer = train_tokenizer(tokenizer_texts(list(dirty) + list(clean)))
    return {
        name: train_generator(
            records, eval_records, cfg, tasks=tasks, steps=steps, tokenizer=tokenizer, **train_overrides
        )
        for name, records in (("dirty", dirty), ("clean", clean))
    }


def metrics_table(runs: dict):
    """One row per arm: final train loss, eval loss, ROUGE-L, keyword F1, repetition, duplicated outputs."""
    import pandas as pd

    rows = {}
    for name, tr in runs.items():
        m = tr.metrics
        tail = tr.history.loss[-10:]
        rows[name] = {
            "train_loss (last 10 steps)": sum(tail) / max(1, len(tail)),
            "eval_loss": m.get("eval_loss"),
            "rouge_l": m.get("rouge_l"),
            "keyword_f1": m.get("keyword_f1"),
            "repetition": m.get("repetition"),
            "duplicates": m.get("duplicates"),
        }
    return pd.DataFrame(rows).T
