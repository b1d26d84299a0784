"""Shared, fast fixtures for the serving tests: a tiny T5 + tokenizer, exported fp32 and int8.

The model is freshly initialised (untrained) and seeded: the serving tests check plumbing,
parity and robustness, not quality (notebook 08 measures quality on a trained model).
"""

from __future__ import annotations

from pathlib import Path


def build_tiny(out_dir: Path, seed: int = 0) -> Path:
    """Save a seeded tiny T5 and a character tokenizer trained on generated articles."""
    import torch

    from labkit.corpus import generate
    from labkit.model import build_model
    from labkit.serving.export import save_model
    from labkit.text.tokenizer import train_tokenizer
    from labkit.text.tasks import tokenizer_texts

    arts = generate(120, seed=seed)
    tok = train_tokenizer(tokenizer_texts(arts), vocab_size=3000)
    torch.manual_seed(seed)
    model = build_model("tiny", len(tok)).eval()
    return save_model(model, tok, out_dir)


def texts(n: int = 24, seed: int = 7) -> list[str]:
    from labkit.corpus import generate

    return [a.body for a in generate(n, seed=seed)]


def artifacts(root: Path) -> dict[str, Path]:
    """Model, fp32 ONNX and int8 ONNX folders under `root`, built once per test session."""
    from labkit.serving.export import export_onnx
    from labkit.serving.quantize import quantize_int8

    paths = {"model": root / "model", "fp32": root / "onnx-fp32", "int8": root / "onnx-int8"}
    if not (paths["int8"] / "decoder_with_past_model.onnx").exists():
        build_tiny(paths["model"])
        export_onnx(paths["model"], paths["fp32"], validate=False)
        quantize_int8(paths["fp32"], paths["int8"])
    return paths
