import pytest
import torch

from labkit.text.tasks import PREFIX, TASKS, Seq2SeqCollator, make_examples
from training_helpers import articles, tokenizer


def test_make_examples_all_tasks_and_missing_targets():
    arts = articles()[:3]
    ex = make_examples(arts)
    assert len(ex) == 3 * len(TASKS)
    kw = [e for e in ex if e.task == "keywords"][0]
    assert kw.source.startswith(PREFIX["keywords"]) and kw.target == "，".join(arts[0].keywords)
    assert ex[0].id == f"{arts[0].id}/title"
    dicts = [{"id": "a", "title": "标题一二三四五", "body": "正文" * 20}]
    assert [e.task for e in make_examples(dicts)] == ["title"]  # no summary/keywords: skipped


def test_make_examples_bad_input():
    with pytest.raises(ValueError, match="record 'x'.*no body"):
        make_examples([{"id": "x", "title": "t", "body": ""}])
    with pytest.raises(ValueError, match="unknown task"):
        make_examples(articles()[:1], tasks=("translate",))


def test_collator_pads_truncates_and_masks_labels():
    tok = tokenizer()
    ex = make_examples(articles()[:4], ("title",))
    b = Seq2SeqCollator(tok, max_source_len=32, max_target_len=8)(ex)
    assert b["input_ids"].shape == (4, 32) and b["labels"].shape[1] <= 8
    assert (b["input_ids"][:, -1] == tok.eos_token_id).all()  # truncation keeps </s>
    assert b["ids"] == [e.id for e in ex]
    assert min(b["source_lengths"]) > 32  # lengths before truncation are reported
    pad = b["labels"] == -100
    assert pad.any() or b["labels"].shape[1] == 8
    assert (b["attention_mask"].sum(1) == 32).all()
    full = Seq2SeqCollator(tok, max_source_len=None)(ex)
    assert full["input_ids"].shape[1] == max(full["source_lengths"])
    lab = Seq2SeqCollator(tok, max_target_len=64)(ex)["labels"]
    first = lab[0][lab[0] != -100].tolist()
    assert tok.decode(first, skip_special_tokens=True) == ex[0].target and first[-1] == tok.eos_token_id
    with pytest.raises(ValueError, match="empty batch"):
        Seq2SeqCollator(tok)([])
    assert isinstance(b["input_ids"], torch.Tensor)
