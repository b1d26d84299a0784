"""Export a trained T5 to ONNX with optimum's exporter: encoder, decoder, decoder-with-past.

optimum-onnx 0.1.0 is the maintained home of the exporter and pins transformers < 4.58;
we chose that line (see docs/serving.md).  The export runs fully offline from a local
`save_pretrained` directory: nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

ONNX_FILES = ("encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx")
# tokenizer/config files that travel with the ONNX graphs so a serving process needs only this folder
SIDE_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "spiece.model",  # a SentencePiece (T5Tokenizer) checkpoint's vocabulary
    "tokenizer_config.json",
    "special_tokens_map.json",
    "labkit_task.json",
)


def save_model(model, tokenizer, out_dir: str | Path) -> Path:
    """`save_pretrained` model and tokenizer together (what the exporter and the baseline load)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def copy_side_files(src: str | Path, dst: str | Path) -> None:
    """Copy config and tokenizer files that exist in `src` into `dst`."""
    src, dst = Path(src), Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    for name in SIDE_FILES:
        if (src / name).exists():
            shutil.copy2(src / name, dst / name)


def export_onnx(model_dir: str | Path, out_dir: str | Path, validate: bool = True, opset: int | None = None) -> Path:
    """Export `model_dir` (a `save_pretrained` T5 + tokenizer) to `out_dir`.

    Writes the three graphs of `ONNX_FILES` plus config and tokenizer files.  With
    `validate`, optimum compares ONNX outputs to PyTorch on dummy inputs and raises
    if they disagree beyond its tolerance.
    """
    model_dir, out = Path(model_dir), Path(out_dir)
    if not (model_dir / "config.json").exists():
        raise FileNotFoundError(
            f"{model_dir} has no config.json: pass a folder written by save_pretrained (see labkit.serving.export.save_model)"
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder; never reach for the hub
    from optimum.exporters.onnx import main_export

    with warnings.catch_warnings():
        # tracing T5 warns about python bools in its graph (shape checks; the exporter's validation covers them)
        warnings.simplefilter("ignore")
        _main_export(main_export, model_dir, out, validate, opset)
    copy_side_files(model_dir, out)
    missing = [f for f in ONNX_FILES if not (out / f).exists()]
    if missing:
        raise RuntimeError(f"ONNX export to {out} did not write {missing}")
    return out


def _main_export(main_export, model_dir: Path, out: Path, validate: bool, opset: int | None) -> None:
    main_export(
        str(model_dir),
        output=out,
        task="text2text-generation-with-past",
        opset=opset,
        device="cpu",
        do_validation=validate,
        no_post_process=True,  # the merged decoder is not used: our loop picks the graph per step
        local_files_only=True,
        library_name="transformers",
    )


def onnx_size_mb(onnx_dir: str | Path) -> float:
    """Total size of the ONNX graphs in a folder, in MiB."""
    d = Path(onnx_dir)
    return sum((d / f).stat().st_size for f in ONNX_FILES if (d / f).exists()) / 2**20
