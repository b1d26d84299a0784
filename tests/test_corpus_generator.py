"""The generator's contract: deterministic, within the length limits, tasks derivable from the body."""

import re
from collections import Counter

import pytest

from labkit.corpus import Article, generate
from labkit.corpus import dirt
from labkit.corpus.frames import FRAMES


@pytest.fixture(scope="module")
def arts() -> list[Article]:
    return generate(2000, seed=3)


def test_deterministic_per_seed_and_different_across_seeds():
    assert generate(50, seed=7) == generate(50, seed=7)
    a, b = generate(50, seed=7), generate(50, seed=8)
    assert sum(x.body == y.body for x, y in zip(a, b)) == 0


def test_contract_lengths_keywords_and_ids(arts):
    assert len({a.id for a in arts}) == len(arts)
    for a in arts:
        assert 12 <= len(a.title) <= 40, a
        assert 150 <= len(a.body) <= 600, a
        assert 40 <= len(a.summary) <= 100, a
        assert 3 <= len(a.keywords) <= 5, a
        assert all(k in a.body for k in a.keywords), a
        assert set(a.to_dict()) == {"id", "title", "body", "summary", "keywords", "category"}


def test_many_frames_and_categories_with_variety(arts):
    cats = Counter(a.category for a in arts)
    assert len(cats) >= 10 and min(cats.values()) > 50, cats
    assert len(FRAMES) >= 30
    assert len({a.title for a in arts}) > 0.95 * len(arts)
    assert len({a.body for a in arts}) == len(arts)


def test_title_and_summary_numbers_are_stated_in_the_body(arts):
    """What makes the tasks learnable: every number in a title/summary is copied from the body."""
    for a in arts:
        for target in (a.title, a.summary):
            for num in re.findall(r"\d+(?:\.\d+)?", target):
                assert num in a.body, (num, target, a.body)


def test_near_duplicates_are_closer_than_any_two_distinct_articles(arts):
    def grams(t: str) -> set[str]:
        t = t.replace("\n", "")
        return {t[i : i + 5] for i in range(len(t) - 4)}

    def jac(x: set, y: set) -> float:
        return len(x & y) / len(x | y)

    import random

    rng = random.Random(0)
    sample = arts[:600]
    g = [grams(a.body) for a in sample]
    distinct = max(
        jac(g[i], g[j]) for i in range(len(g)) for j in range(i + 1, len(g)) if sample[i].category == sample[j].category
    )
    near = min(jac(g[i], grams(dirt.near_duplicate(sample[i].body, rng))) for i in range(200))
    assert distinct < 0.7 and near >= 0.8, (distinct, near)


def test_negative_n_is_an_error():
    with pytest.raises(ValueError):
        generate(-1, seed=0)
