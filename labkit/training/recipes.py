"""One-call recipes the notebooks use: train the tiny generator, generate, evaluate."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from labkit.text.metrics import duplicate_rate, repetition_rate, task_metric, task_score
from labkit.text.tasks import TASKS, Example, Seq2SeqCollator, make_examples, tokenizer_texts


@dataclass
class Trained:
    model: Any
    tokenizer: Any
    history: Any
    metrics: dict = field(default_factory=dict)
    max_source_len: int | None = None  # input tokens it was trained on (recorded by save for serving)

    def save(self, path: str | Path) -> Path:
        """`save_pretrained` model and tokenizer into one directory (loadable with AutoModel/AutoTokenizer)."""
        from labkit.text.tokenizer import save_with_source_len

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path)
        save_with_source_len(self.tokenizer, path, self.max_source_len)
        return path


def generate_text(
    model,
    tokenizer,
    sources: list[str],
    max_new_tokens: int = 48,
    batch_size: int = 32,
    max_source_len: int = 512,
    num_beams: int = 1,
) -> list[str]:
    """Greedy (or beam) generation for a list of source strings (task prefix included)."""
    from labkit.model import generate_ids

    outs: list[str] = []
    for ids in generate_ids(model, tokenizer, sources, max_new_tokens, max_source_len, batch_size, num_beams):
        outs.extend(s.strip() for s in tokenizer.batch_decode(ids, skip_special_tokens=True))
    return outs


def evaluate_generation(
    model, tokenizer, examples: Sequence[Example], max_new_tokens: int = 48, max_source_len: int = 512
) -> dict[str, float]:
    """Generate for every example; ROUGE-L (titles, summaries), keyword F1, repetition within an
    output, duplicated outputs across examples (per task: the same title for different articles); per task too."""
    if not examples:
        raise ValueError("evaluate_generation got no examples")
    preds = generate_text(model, tokenizer, [e.source for e in examples], max_new_tokens, max_source_len=max_source_len)
    per: dict[str, list[float]] = {}
    for e, p in zip(examples, preds):
        per.setdefault(e.task, []).append(task_score(e.task, p, e.target))
    mean = lambda xs: float(sum(xs) / len(xs)) if xs else float("nan")  # noqa: E731
    rouge = per.get("title", []) + per.get("summary", [])
    out = {
        "rouge_l": mean(rouge),
        "keyword_f1": mean(per.get("keywords", [])),
        "repetition": mean([repetition_rate(p) for p in preds]),
    }
    by_task: dict[str, list[str]] = {}
    for e, p in zip(examples, preds):
        by_task.setdefault(e.task, []).append(p)
    out["duplicates"] = mean([duplicate_rate(ps) for ps in by_task.values()])
    for task, xs in per.items():
        out[f"{task}/{task_metric(task)}"] = mean(xs)
    return out


def train_generator(
    train_records: Sequence[Any],
    eval_records: Sequence[Any],
    cfg,
    tasks: Sequence[str] = TASKS,
    steps: int | None = None,
    tokenizer=None,
    **train_overrides,
) -> Trained:
    """Train `cfg.model_preset` on the records' tasks; deterministic for `cfg.seed` on CPU.

    `train_overrides` go to `TrainConfig` (e.g. clip=None, schedule="cosine", log_dir=...).
    """
    from labkit.config import seed_everything
    from labkit.model import build_model
    from labkit.text.tokenizer import train_tokenizer
    from labkit.training.trainer import TrainConfig, Trainer

    train_records, eval_records = list(train_records), list(eval_records or [])
    if not train_records:
        raise ValueError("train_generator got no training records: generate or clean a corpus first")
    if tokenizer is None:
        tokenizer = train_tokenizer(tokenizer_texts(train_records))
    seed_everything(cfg.seed)
    device = cfg.torch_device
    model = build_model(cfg.model_preset, len(tokenizer)).to(device)
    train_ex = make_examples(train_records, tasks)
    eval_ex = make_examples(eval_records, tasks) if eval_records else []
    collator = Seq2SeqCollator(tokenizer, cfg.max_source_len, cfg.max_target_len)
    tc = TrainConfig(
        **{
            "steps": steps or cfg.steps,
            "batch_size": cfg.batch_size,
            "lr": cfg.lr,
            "warmup_steps": cfg.warmup_steps,
            "seed": cfg.seed,
            **train_overrides,
        }
    )
    history = Trainer(model, train_ex, collator, tc, eval_examples=eval_ex, device=device).fit()
    metrics = {}
    if eval_ex:
        metrics = evaluate_generation(
            model, tokenizer, eval_ex, max_new_tokens=cfg.max_target_len, max_source_len=cfg.max_source_len
        )
        metrics["eval_loss"] = history.evals[-1]["eval_loss"] if history.evals else float("nan")
    return Trained(model, tokenizer, history, metrics, max_source_len=cfg.max_source_len)
