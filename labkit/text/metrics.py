"""Generation metrics for Chinese: character-level ROUGE-L, keyword F1, repetition."""

from __future__ import annotations

import re
from collections.abc import Iterable

_SPLIT = re.compile(r"[，,、;；/|\s]+")
_IGNORE = re.compile(r"\s+")


def _lcs(a: str, b: str) -> int:
    prev = [0] * (len(b) + 1)
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b):
            cur.append(prev[j] + 1 if ca == cb else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(pred: str, ref: str) -> float:
    """Character-level ROUGE-L F1 (whitespace ignored); 0.0 when either side is empty.

    >>> round(rouge_l("北京今天下雨", "北京明天下雨"), 3)
    0.833
    """
    p, r = _IGNORE.sub("", pred or ""), _IGNORE.sub("", ref or "")
    if not p or not r:
        return 0.0
    lcs = _lcs(p, r)
    if lcs == 0:
        return 0.0
    prec, rec = lcs / len(p), lcs / len(r)
    return 2 * prec * rec / (prec + rec)


def split_keywords(text: str) -> list[str]:
    return [k for k in _SPLIT.split(text or "") if k]


def keyword_f1(pred: str | Iterable[str], ref_keywords: Iterable[str] | str) -> float:
    """Set F1 between predicted keywords (a "，"-joined string or a list) and the reference list."""
    p = set(split_keywords(pred) if isinstance(pred, str) else pred)
    r = set(split_keywords(ref_keywords) if isinstance(ref_keywords, str) else ref_keywords)
    if not p or not r:
        return 0.0
    tp = len(p & r)
    if tp == 0:
        return 0.0
    prec, rec = tp / len(p), tp / len(r)
    return 2 * prec * rec / (prec + rec)


def repetition_rate(text: str, n: int = 3) -> float:
    """Share of character n-grams that repeat an earlier n-gram in the same text (0 = none).

    >>> repetition_rate("哈哈哈哈哈哈")
    0.75
    """
    s = _IGNORE.sub("", text or "")
    grams = [s[i : i + n] for i in range(len(s) - n + 1)]
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def stuck_in_a_loop(text: str, run: int = 6) -> bool:
    """Whether a generated text is stuck in a run of one character, `run` times or more in a row -- a tiny
    model's commonest loop (`1111…`, `增长4444444…`).

    >>> stuck_in_a_loop("亩产8999999公斤"), stuck_in_a_loop("同比增长29.0%")
    (True, False)
    """
    return re.search(rf"(.)\1{{{run - 1},}}", text or "") is not None


def duplicate_rate(outputs: Iterable[str]) -> float:
    """Share of outputs that repeat an earlier output word for word (0 = all different).

    A model that "repeats itself" across inputs -- the same title whatever the article --
    scores high here while each title alone looks fine to `repetition_rate`.

    >>> duplicate_rate(["甲", "乙", "甲", "甲"])
    0.5
    """
    outs = [_IGNORE.sub("", o or "") for o in outputs]
    return 1.0 - len(set(outs)) / len(outs) if outs else 0.0


def task_metric(task: str) -> str:
    """The metric a task is scored with: "keyword_f1" for keywords, "rouge_l" for title and summary."""
    return "keyword_f1" if task == "keywords" else "rouge_l"


def task_score(task: str, pred: str, target: str) -> float:
    """Score one output against its reference with `task_metric(task)`."""
    return keyword_f1(pred, split_keywords(target)) if task == "keywords" else rouge_l(pred, target)
