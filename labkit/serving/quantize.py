"""Dynamic int8 quantization of the exported graphs with `onnxruntime.quantization`.

Dynamic quantization stores weights as int8 and quantizes activations on the fly per
batch, so it needs no calibration data; on CPU the int8 MatMul kernels are where the
speed comes from.
"""

from __future__ import annotations

from pathlib import Path

from labkit.serving.export import ONNX_FILES, copy_side_files


def quantize_int8(onnx_dir: str | Path, out_dir: str | Path, per_channel: bool = False) -> Path:
    """Quantize every graph of `onnx_dir` to int8 weights into `out_dir` (side files copied)."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    src, out = Path(onnx_dir), Path(out_dir)
    if src.resolve() == out.resolve():
        raise ValueError(f"quantize_int8 would overwrite its input {src}: choose another out_dir")
    out.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # its "consider pre-processing" advice targets CNNs with static quantization
    try:
        _quantize_all(src, out, per_channel, quantize_dynamic, QuantType)
    finally:
        root.setLevel(level)
    copy_side_files(src, out)
    return out


def _quantize_all(src: Path, out: Path, per_channel: bool, quantize_dynamic, QuantType) -> None:
    for name in ONNX_FILES:
        if not (src / name).exists():
            raise FileNotFoundError(f"{src / name} is missing: run labkit.serving.export.export_onnx first")
        quantize_dynamic(
            src / name,
            out / name,
            weight_type=QuantType.QInt8,
            per_channel=per_channel,
            op_types_to_quantize=[
                "MatMul",
                "Gemm",
            ],  # the embedding Gather stays fp32: int8 there costs quality for no speed
        )
