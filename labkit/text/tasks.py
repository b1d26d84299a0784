"""Multi-task formatting (task prefixes) and the seq2seq collator.

One T5 model learns three tasks from the same article; a prefix on the source
tells it which one::

    标题：<body>   -> title
    摘要：<body>   -> summary
    关键词：<body> -> keywords joined by "，"
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

TASKS = ("title", "summary", "keywords")
PREFIX = {"title": "标题：", "summary": "摘要：", "keywords": "关键词："}
KEYWORD_SEP = "，"


@dataclass(frozen=True)
class Example:
    id: str
    task: str
    source: str
    target: str


def record_field(rec: Any, key: str, default=None):
    """`rec[key]` for a dict, `rec.key` for an `Article` (or any object); `default` when absent."""
    if isinstance(rec, dict):
        return rec.get(key, default)
    return getattr(rec, key, default)


def tokenizer_texts(records: Iterable[Any]) -> list[str]:
    """Every text field of the records (what the tokenizer must cover)."""
    out = []
    for r in records:
        for key in ("title", "body", "summary"):
            v = record_field(r, key)
            if v:
                out.append(str(v))
        kws = record_field(r, "keywords")
        if kws:
            out.append(KEYWORD_SEP.join(kws) if not isinstance(kws, str) else kws)
    return out


def _target(rec: Any, task: str) -> str | None:
    if task == "title":
        return record_field(rec, "title")
    if task == "summary":
        return record_field(rec, "summary")
    kws = record_field(rec, "keywords")
    if not kws:
        return None
    return kws if isinstance(kws, str) else KEYWORD_SEP.join(kws)


def make_examples(records: Iterable[Any], tasks: Sequence[str] = TASKS) -> list[Example]:
    """One `Example` per (record, task) whose target is present.

    Records are `Article`s or dicts with at least `title` and `body`.  A record
    without a body is an error (naming it) rather than a silently dropped row.
    """
    bad = [t for t in tasks if t not in TASKS]
    if bad:
        raise ValueError(f"unknown task(s) {bad}: choose from {TASKS}")
    out: list[Example] = []
    for i, rec in enumerate(records):
        rid = str(record_field(rec, "id", None) or i)
        body = record_field(rec, "body")
        if not body or not str(body).strip():
            raise ValueError(
                f"record {rid!r} (#{i}) has no body: clean the data first (labkit clean) or drop it explicitly"
            )
        for task in tasks:
            tgt = _target(rec, task)
            if tgt and str(tgt).strip():
                out.append(Example(f"{rid}/{task}", task, PREFIX[task] + str(body), str(tgt)))
    return out


class Seq2SeqCollator:
    """Tokenise a list of `Example`s into padded tensors for T5.

    `max_source_len=None` disables truncation (the pitfall notebook 06 shows);
    targets are always truncated to `max_target_len`.  Label padding is -100 so
    the loss ignores it.  The returned dict also carries `ids` (example ids) and
    `source_lengths` (tokens before truncation) for diagnostics.
    """

    def __init__(self, tokenizer, max_source_len: int | None = 512, max_target_len: int = 64):
        if tokenizer.pad_token_id is None or tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer needs pad and eos tokens (use labkit.text.tokenizer.train_tokenizer)")
        self.tokenizer = tokenizer
        self.max_source_len = max_source_len
        self.max_target_len = max_target_len

    def __call__(self, examples: Sequence[Example]) -> dict[str, Any]:
        import torch

        if not examples:
            raise ValueError("Seq2SeqCollator got an empty batch")
        tok = self.tokenizer
        src = tok([e.source for e in examples], add_special_tokens=True)["input_ids"]
        lengths = [len(s) for s in src]
        # [fix:truncation]
        if self.max_source_len is not None:
            # keep the closing </s>: truncate the text, not the end marker
            src = [
                s if len(s) <= self.max_source_len else s[: self.max_source_len - 1] + [tok.eos_token_id] for s in src
            ]
        # [/fix:truncation]
        tgt = tok([e.target for e in examples], add_special_tokens=True)["input_ids"]
        tgt = [t if len(t) <= self.max_target_len else t[: self.max_target_len - 1] + [tok.eos_token_id] for t in tgt]
        n, m = max(map(len, src)), max(map(len, tgt))
        input_ids = torch.full((len(src), n), tok.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(src), n), dtype=torch.long)
        labels = torch.full((len(tgt), m), -100, dtype=torch.long)
        for i, (s, t) in enumerate(zip(src, tgt)):
            input_ids[i, : len(s)] = torch.tensor(s)
            attention_mask[i, : len(s)] = 1
            labels[i, : len(t)] = torch.tensor(t)
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "labels": labels,
            "ids": [e.id for e in examples],
            "source_lengths": lengths,
        }
