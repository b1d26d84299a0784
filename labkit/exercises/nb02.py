"""Notebook 02 (cleaning pipeline): shingles and Jaccard for near duplicates, and two questions."""
from __future__ import annotations

from labkit.exercises import call, fail, passed, quiz

A = "本市今日召开新闻发布会，介绍今年一季度经济运行情况，地区生产总值同比增长5.2%。"
B = "本市今日召开新闻发布会，介绍今年一季度经济运行情况，地区生产总值同比增长5.3%。"   # one character differs
C = "受冷空气影响，明天全市将出现大风降温天气，请市民注意防寒保暖，出行注意安全。"


def _ref_shingles(text: str, k: int = 5) -> set[str]:
    return {text[i:i + k] for i in range(max(1, len(text) - k + 1))}


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def ex1(shingles, near_duplicate) -> bool:
    """Character k-gram shingles, and a near-duplicate decision by Jaccard similarity >= 0.8."""
    got = call(shingles, A, 5)
    if not isinstance(got, (set, frozenset)):
        fail(f"shingles(text, k) should return a set of strings, got {type(got).__name__}")
    want = _ref_shingles(A, 5)
    if set(got) != want:
        fail(f"shingles(A, 5) has {len(got)} items, expected {len(want)}: every window text[i:i+k] for "
             "i in range(len(text) - k + 1)")
    if call(near_duplicate, A, B) is not True:
        fail(f"A and B differ in one character (Jaccard {_jaccard(want, _ref_shingles(B)):.2f}): they are near duplicates")
    if call(near_duplicate, A, C) is not False:
        fail("A and C are different articles: near_duplicate must return False (Jaccard of their shingles < 0.8)")
    return passed(f"Jaccard(A, B) = {_jaccard(want, _ref_shingles(B)):.2f} -> duplicate; the pipeline estimates the same "
                  "number with MinHash so it never compares every pair")


def ex2(answer) -> bool:
    """Why is a record with U+FFFD rejected while `æ–°é—»` is repaired?"""
    return quiz(answer, "B", {
        "A": "ftfy runs on every text field; it simply has nothing to work with here.",
        "B": "Right: U+FFFD is what a decoder writes when it *threw bytes away* (errors='replace'); the original "
             "characters are gone. `æ–°é—»` still holds every byte, decoded with the wrong table, so ftfy can reverse it.",
        "C": "Length checks come after repair and have their own reasons (title_too_long); this record's reason is mojibake.",
        "D": "The encoding detector is only consulted while decoding bytes; the damage happened before the pipeline saw them.",
    })


def ex3(answer) -> bool:
    """Less but clean beats more but dirty: why, with the same step budget?"""
    return quiz(answer, "B", {
        "A": "Both arms train for the same number of steps with the same batch size: neither saw fewer updates.",
        "B": "Right: every step of the clean arm learns from a real title/body pair; many of the dirty arm's steps "
             "teach it footers, scripts, mojibake and stock titles -- which it then writes for held-out articles.",
        "C": "The tokenizer is trained on both sets together, so neither arm has a vocabulary advantage.",
        "D": "Evaluation uses the same held-out clean articles for both arms; shorter training records do not make "
             "the test easier.",
    })
