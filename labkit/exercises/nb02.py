"""Notebook 02 (cleaning pipeline): shingles and Jaccard for near duplicates, and two questions."""

from __future__ import annotations

from labkit.exercises import Choice, Quiz, answered, call, fail, passed
from labkit.i18n import N_, _

A = "本市今日召开新闻发布会，介绍今年一季度经济运行情况，地区生产总值同比增长5.2%。"
B = "本市今日召开新闻发布会，介绍今年一季度经济运行情况，地区生产总值同比增长5.3%。"  # one character differs
C = "受冷空气影响，明天全市将出现大风降温天气，请市民注意防寒保暖，出行注意安全。"


def _ref_shingles(text: str, k: int = 5) -> set[str]:
    return {text[i : i + k] for i in range(max(1, len(text) - k + 1))}


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def ex1(shingles, near_duplicate) -> bool:
    """Character k-gram shingles, and a near-duplicate decision by Jaccard similarity >= 0.8."""
    got = call(shingles, A, 5)
    answered(got)
    want = _ref_shingles(A, 5)
    if isinstance(got, (list, tuple)):
        fail(
            _(
                "shingles(text, k) returned a {type}: return a set -- a list keeps repeats and order, and "
                "Jaccard similarity is defined on sets (|A & B| / |A | B|)"
            ).format(type=type(got).__name__)
        )
    if not isinstance(got, (set, frozenset)):
        fail(_("shingles(text, k) should return a set of strings, got {type}").format(type=type(got).__name__))
    if set(got) != want:
        if set(got) == want - {A[-5:]}:
            fail(
                _(
                    "shingles(A, 5) has {got} items, expected {want}: range(len(text) - k) stops one window "
                    "short -- the last shingle text[-k:] = {last!r} is missing. Use range(len(text) - k + 1)"
                ).format(got=len(got), want=len(want), last=A[-5:])
            )
        fail(
            _(
                "shingles(A, 5) has {got} items, expected {want}: every window text[i:i+k] for "
                "i in range(len(text) - k + 1)"
            ).format(got=len(got), want=len(want))
        )
    if call(near_duplicate, A, B) is not True:
        fail(
            _("A and B differ in one character (Jaccard {jaccard:.2f}): near_duplicate(A, B) must return True").format(
                jaccard=_jaccard(want, _ref_shingles(B))
            )
        )
    if call(near_duplicate, A, C) is not False:
        fail(N_("A and C are different articles: near_duplicate must return False (Jaccard of their shingles < 0.8)"))
    if call(near_duplicate, A, A + C) is not False:
        j = _jaccard(want, _ref_shingles(A + C))
        fail(
            _(
                "near_duplicate(A, A + C) returned True, but A is only half of A + C (Jaccard {j:.2f}): you measured "
                "how much of A is in the other text. Jaccard divides the shared shingles by the union of both sets"
            ).format(j=j)
        )
    return passed(
        _(
            "Jaccard(A, B) = {jaccard:.2f} -> duplicate; the pipeline estimates the same "
            "number with MinHash so it never compares every pair"
        ).format(jaccard=_jaccard(want, _ref_shingles(B)))
    )


EX2 = Quiz(
    "D",
    {
        "A": Choice(
            N_("ftfy is switched off for U+FFFD"),
            N_("ftfy runs on every text field; it simply has nothing to work with here."),
        ),
        "B": Choice(
            N_("the record was too long to repair"),
            N_(
                "Length checks come after repair and have their own reasons (title_too_long); this record's reason is "
                "mojibake."
            ),
        ),
        "C": Choice(
            N_("the encoding detector guessed wrong inside the pipeline"),
            N_(
                "The encoding detector is only consulted while decoding bytes; the damage happened before the pipeline "
                "saw them."
            ),
        ),
        "D": Choice(
            N_("the bytes were thrown away at decode time"),
            N_(
                "Right: U+FFFD is what a decoder writes when it *threw bytes away* (errors='replace'); the original "
                "characters are gone. `æ–°é—»` still holds every byte, decoded with the wrong table, so ftfy can reverse "
                "it."
            ),
        ),
    },
)


def ex2(answer) -> bool:
    """Why is a record with U+FFFD rejected while `æ–°é—»` is repaired?"""
    return EX2(answer)


EX3 = Quiz(
    "BD",
    {
        "A": Choice(
            N_("it made fewer optimizer updates than the dirty arm did"),
            N_("Both arms train for the same number of steps with the same batch size: neither made fewer updates."),
        ),
        "B": Choice(
            N_("each of its steps learned from a real title/body pair"),
            N_("Right: every step of the clean arm learns the task itself, from a real title and its article."),
            missed=N_("one true statement is about what each of the clean arm's steps learns from."),
        ),
        "C": Choice(
            N_("its tokenizer got a better vocabulary"),
            N_("The tokenizer is trained on both sets together, so neither arm has a vocabulary advantage."),
        ),
        "D": Choice(
            N_("the dirty arm trained on furniture and damaged text"),
            N_(
                "Right: section 5's audit counts them with notebook 01's instruments -- every such pair spends a step "
                "teaching the model something other than the article's title."
            ),
            missed=N_(
                "one true statement is about what the dirty arm trained on (section 5 audits both arms' records)."
            ),
        ),
    },
)


def ex3(answer) -> bool:
    """Less but clean beats more but dirty, with the same step budget: which statements explain it? (select all)"""
    return EX3(answer)
