import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from labkit.text.tokenizer import load_tokenizer, train_tokenizer, unk_rate
from training_helpers import articles, tokenizer


def test_specials_have_t5_ids_and_eos_is_appended():
    tok = tokenizer()
    assert isinstance(tok, PreTrainedTokenizerFast)
    assert (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2)
    ids = tok("新华社北京电")["input_ids"]
    assert ids[-1] == tok.eos_token_id and len(ids) == 7  # one token per character + </s>
    assert "token_type_ids" not in tok("你好")


def test_roundtrip_keeps_chinese_latin_digits_and_spaces():
    tok = tokenizer()
    text = articles()[0].title
    assert tok.decode(tok(text)["input_ids"], skip_special_tokens=True) == text
    mixed = "恒通 AI 2024年"
    tok2 = train_tokenizer([mixed] * 3, min_frequency=1)
    assert tok2.decode(tok2(mixed)["input_ids"], skip_special_tokens=True) == mixed


def test_fullwidth_is_folded_and_unseen_chars_are_unk():
    tok = train_tokenizer(["ABC123 新闻"] * 2, min_frequency=1)
    assert tok("ＡＢＣ１２３")["input_ids"] == tok("ABC123")["input_ids"]
    assert tok.unk_token_id in tok("鑫")["input_ids"]
    assert unk_rate(tok, ["鑫鑫新闻"]) == pytest.approx(0.5)


def test_cjk_punctuation_survives_normalisation():
    # NFKC (and ftfy's width fix) would turn these into ASCII: the model would learn to write "," in Chinese
    text = "据报道，会议（第3次）召开：成功！真的？是。"
    tok = train_tokenizer([text] * 2, min_frequency=1)
    assert tok.decode(tok(text)["input_ids"], skip_special_tokens=True) == text
    assert tok("，")["input_ids"] != tok(",")["input_ids"]


def test_save_and_load_as_standard_tokenizer(tmp_path):
    tok = tokenizer()
    tok.save_pretrained(tmp_path)
    for loaded in (load_tokenizer(tmp_path), AutoTokenizer.from_pretrained(tmp_path)):
        s = articles()[1].body[:60]
        assert loaded(s)["input_ids"] == tok(s)["input_ids"]
        assert loaded.model_input_names == ["input_ids", "attention_mask"]


def test_bad_input_errors(tmp_path):
    with pytest.raises(ValueError, match="no text"):
        train_tokenizer(["", "  "])
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        load_tokenizer(tmp_path)


def test_the_training_input_length_travels_with_the_saved_tokenizer(tmp_path):
    """Serving truncates where training did: the length is the tokenizer's model_max_length on disk."""
    from labkit.text.tokenizer import DEFAULT_SOURCE_LEN, save_with_source_len, trained_source_len

    tok = tokenizer()
    in_memory = tok.model_max_length
    save_with_source_len(tok, tmp_path / "trained", 64)
    assert trained_source_len(tmp_path / "trained") == 64
    assert tok.model_max_length == in_memory  # the object in memory is untouched
    loaded = AutoTokenizer.from_pretrained(tmp_path / "trained")
    assert len(loaded("中" * 300, truncation=True)["input_ids"]) == 64  # and the field's own truncation obeys it
    save_with_source_len(tok, tmp_path / "unrecorded", None)
    assert trained_source_len(tmp_path / "unrecorded") == DEFAULT_SOURCE_LEN  # labkit's "no limit" is not a length
    assert trained_source_len(tmp_path / "missing", default=96) == 96


def test_a_saved_recipe_model_records_its_training_length(tmp_path):
    from labkit.model import build_model
    from labkit.text.tokenizer import trained_source_len
    from labkit.training.recipes import Trained

    tok = tokenizer()
    Trained(build_model("tiny", len(tok)), tok, history=None, max_source_len=96).save(tmp_path / "m")
    assert trained_source_len(tmp_path / "m") == 96
