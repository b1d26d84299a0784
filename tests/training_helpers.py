"""Small shared builders for the text/training tests (real components, tiny sizes)."""

from __future__ import annotations

import functools

import torch


@functools.lru_cache(maxsize=None)
def articles(n: int = 48, seed: int = 0):
    from labkit.corpus import generate

    return tuple(generate(n, seed))


@functools.lru_cache(maxsize=None)
def tokenizer():
    from labkit.text.tokenizer import train_tokenizer
    from labkit.text.tasks import tokenizer_texts

    return train_tokenizer(tokenizer_texts(articles()), min_frequency=1)


def small_model(vocab_size: int, seed: int = 0, **overrides):
    """The tiny preset shrunk further so a step takes milliseconds."""
    from labkit.model import build_model

    torch.manual_seed(seed)
    kw = dict(d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=2)
    kw.update(overrides)
    return build_model("tiny", vocab_size, **kw)


def examples(tasks=("title",)):
    from labkit.text.tasks import make_examples

    return make_examples(articles(), tasks)


def collator(max_source_len=64, max_target_len=24):
    from labkit.text.tasks import Seq2SeqCollator

    return Seq2SeqCollator(tokenizer(), max_source_len, max_target_len)
