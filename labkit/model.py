"""T5 presets built from `T5Config` (never downloaded) and `build_model`.

`tiny` trains in about a minute on 2 CPU cores; `t5-small/base/large/3b` carry the
real published shapes (Raffel et al. 2020, v1.0) for memory estimates and GPU runs.
"""

from __future__ import annotations

PRESETS: dict[str, dict] = {
    "tiny": dict(
        d_model=128,
        d_kv=32,
        d_ff=384,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=16,
        relative_attention_max_distance=64,
        dropout_rate=0.0,
        n_positions=2048,
    ),
    "t5-small": dict(d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_decoder_layers=6, num_heads=8),
    "t5-base": dict(d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_decoder_layers=12, num_heads=12),
    "t5-large": dict(d_model=1024, d_kv=64, d_ff=4096, num_layers=24, num_decoder_layers=24, num_heads=16),
    "t5-3b": dict(d_model=1024, d_kv=128, d_ff=16384, num_layers=24, num_decoder_layers=24, num_heads=32),
}


def model_config(preset: str, vocab_size: int, **overrides):
    """The `T5Config` for a preset (pad=0 = decoder start, eos=1, as our tokenizer assigns)."""
    from transformers import T5Config

    if preset not in PRESETS:
        raise ValueError(f"unknown model preset {preset!r}: choose one of {sorted(PRESETS)}")
    if vocab_size <= 3:
        raise ValueError(f"vocab_size={vocab_size} is too small: pass len(tokenizer)")
    kw = dict(PRESETS[preset], vocab_size=vocab_size, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    kw.update(overrides)
    return T5Config(**kw)


def build_model(preset: str, vocab_size: int, **overrides):
    """A freshly initialised `T5ForConditionalGeneration` (seed torch first for repeatability)."""
    from transformers import T5ForConditionalGeneration

    return T5ForConditionalGeneration(model_config(preset, vocab_size, **overrides))


def count_parameters(preset: str, vocab_size: int = 32128) -> int:
    """Parameter count of a preset without allocating it (meta device)."""
    import torch

    with torch.device("meta"):
        m = build_model(preset, vocab_size)
    return sum(p.numel() for p in m.parameters())


def check_vocab(model, tokenizer) -> None:
    """Raise if the tokenizer produces ids the model's embedding cannot hold."""
    n_model = model.get_input_embeddings().num_embeddings
    if len(tokenizer) > n_model:
        raise ValueError(
            f"tokenizer has {len(tokenizer)} tokens but the model's embedding has {n_model}: "
            f"build the model with vocab_size=len(tokenizer) (or load the tokenizer saved with this model)"
        )


def generate_ids(
    model, tokenizer, sources, max_new_tokens: int, max_source_len: int = 512, batch_size: int = 32, num_beams: int = 1
) -> list:
    """`model.generate` (greedy by default: `num_beams=1`, no sampling) over `sources` in batches of `batch_size`.

    Returns one tensor of token ids per batch (decoder start token first).  Sources are
    truncated to `max_source_len` tokens and moved to the model's device; the model runs in
    eval mode and is put back in the mode it was in.  The one PyTorch generation loop of
    labkit: the recipes decode it, the parity check compares its ids, notebook 08 times it.
    """
    import torch

    was = model.training
    model.eval()
    device = next(model.parameters()).device
    out = []
    with torch.no_grad():
        for i in range(0, len(sources), batch_size):
            enc = tokenizer(
                list(sources[i : i + batch_size]),
                return_tensors="pt",
                padding=True,
                truncation=True,
                max_length=max_source_len,
                return_token_type_ids=False,
            ).to(device)
            out.append(model.generate(**enc, max_new_tokens=max_new_tokens, num_beams=num_beams, do_sample=False))
    model.train(was)
    return out
