"""Notebook 02's smoke source budget (labkit.config.NOTEBOOK_SIZES) truncates only filler: every
title slot is stated in the dateline + lead sentence, which must fit in MAX_SOURCE_LEN tokens."""

from labkit.config import NOTEBOOK_SIZES
from labkit.corpus import generate
from labkit.text.tasks import make_examples, tokenizer_texts
from labkit.text.tokenizer import train_tokenizer


def test_smoke_source_budget_holds_every_lead_sentence():
    budget = NOTEBOOK_SIZES["smoke"]["02_cleaning_pipeline"]["MAX_SOURCE_LEN"]
    articles = generate(600, 0) + generate(120, 10_000)
    tok = train_tokenizer(tokenizer_texts(articles))
    for e in make_examples(articles, ("title",)):
        lead = e.source[: e.source.index("。") + 1]
        n = len(tok(lead)["input_ids"])  # with </s>: the collator keeps it inside the budget
        assert n <= budget, (e.id, n, budget)
