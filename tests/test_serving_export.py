"""ONNX export, int8 quantization and the ONNX Runtime generation loop, against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import serving_helpers as h


@pytest.fixture(scope="module")
def art(tmp_path_factory):
    return h.artifacts(tmp_path_factory.getbasetemp() / "serving")


@pytest.fixture(scope="module")
def sources():
    from labkit.serving.schema import model_input

    tasks = ("title", "summary", "keywords")
    return [model_input(tasks[i % 3], t) for i, t in enumerate(h.texts(12))]


def test_fp32_onnx_matches_pytorch_token_for_token(art, sources):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from labkit.serving.ort_generate import OrtGenerator
    from labkit.serving.parity import check_parity

    model = AutoModelForSeq2SeqLM.from_pretrained(art["model"]).eval()
    tok = AutoTokenizer.from_pretrained(art["model"])
    gen = OrtGenerator(art["fp32"], threads=1, max_source_len=64)
    p = check_parity(model, tok, gen, sources, max_new_tokens=12, batch_size=6)
    assert p.n == len(sources)
    assert p.fraction_identical == 1.0, p.mismatches
    assert p.max_abs_logit_diff < 1e-3


def test_int8_is_smaller_and_changes_logits_a_little(art, sources):
    from labkit.serving.export import onnx_size_mb
    from labkit.serving.ort_generate import OrtGenerator

    assert onnx_size_mb(art["int8"]) < 0.6 * onnx_size_mb(art["fp32"])
    g32, g8 = OrtGenerator(art["fp32"], threads=1), OrtGenerator(art["int8"], threads=1)
    ids, mask = g32.encode(sources[:4])
    h32 = g32.encoder.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    h8 = g8.encoder.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    rel = np.abs(h32 - h8).mean() / np.abs(h32).mean()
    assert 0 < rel < 0.2  # quantized (not identical) but close


def test_batching_and_per_row_caps_do_not_change_a_rows_output(art, sources):
    from labkit.serving.ort_generate import OrtGenerator

    gen = OrtGenerator(art["int8"], threads=1, max_source_len=64)
    caps = [3, 9, 5, 12]
    ids, mask = gen.encode(sources[:4])
    batched = gen.generate_ids(ids, mask, caps)
    for i, cap in enumerate(caps):
        one_ids, one_mask = gen.encode([sources[i]])
        alone = gen.generate_ids(one_ids, one_mask, cap)[0]
        assert batched[i] == alone
        assert len(batched[i]) <= cap


def test_int8_generates_like_fp32_on_real_inputs(art, sources):
    """int8 is within tolerance of fp32 on real articles: the first decoder step's logits (what greedy
    decoding picks from), the notebook's quality bar |ROUGE-L delta| <= 0.05, and quality_delta's
    agreement figure matches the agreement measured here output for output."""
    from labkit.corpus import generate
    from labkit.serving.ort_generate import OrtGenerator
    from labkit.serving.parity import quality_delta
    from labkit.text.tasks import make_examples

    g32, g8 = (
        OrtGenerator(art["fp32"], threads=1, max_source_len=64),
        OrtGenerator(art["int8"], threads=1, max_source_len=64),
    )

    def first_step_logits(gen):
        ids, mask = gen.encode(sources)
        start = np.full((ids.shape[0], 1), gen.start_id, dtype=np.int64)
        hidden = gen.encoder.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        feed = {"encoder_attention_mask": mask, "input_ids": start, "encoder_hidden_states": hidden}
        return gen.decoder.run(["logits"], feed)[0][:, -1, :]

    l32, l8 = first_step_logits(g32), first_step_logits(g8)
    assert np.abs(l32 - l32.mean(0)).max() > 1e-3, (
        "the inputs must give different logits for the comparison to mean anything"
    )
    rel = np.abs(l32 - l8).mean() / np.abs(l32).mean()
    assert 0 < rel < 0.1, rel  # quantized, and within 10% of fp32 on every real input together
    top32, top8 = np.argsort(-l32, 1)[:, :5], np.argsort(-l8, 1)[:, :5]
    overlap = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(top32, top8)])
    assert overlap >= 0.6, overlap  # the candidates greedy decoding chooses from stay mostly the same

    ex = make_examples(generate(6, seed=3))
    q = quality_delta(g32, g8, ex, max_new_tokens=8)
    texts32 = [s.strip() for s in g32.generate([e.source for e in ex], 8)]
    texts8 = [s.strip() for s in g8.generate([e.source for e in ex], 8)]
    assert q["same_output"] == pytest.approx(np.mean([a == b for a, b in zip(texts32, texts8)]))
    assert abs(q["rouge_l_delta"]) <= 0.05 and abs(q["keyword_f1_delta"]) <= 0.05


def test_bad_inputs_name_the_fix(tmp_path, art):
    from labkit.serving.export import export_onnx
    from labkit.serving.quantize import quantize_int8

    with pytest.raises(FileNotFoundError, match="save_pretrained"):
        export_onnx(tmp_path, tmp_path / "out")
    with pytest.raises(ValueError, match="overwrite"):
        quantize_int8(art["fp32"], art["fp32"])
    with pytest.raises(FileNotFoundError, match="export_onnx"):
        quantize_int8(tmp_path, tmp_path / "q")


def test_the_generator_truncates_where_training_did(art, tmp_path):
    """No --max-source-len: the export folder's tokenizer says how long the training inputs were."""
    import json
    import shutil

    from labkit.serving.ort_generate import OrtGenerator
    from labkit.text.tokenizer import DEFAULT_SOURCE_LEN

    assert OrtGenerator(art["int8"], threads=1).max_source_len == DEFAULT_SOURCE_LEN  # nothing recorded
    folder = shutil.copytree(art["int8"], tmp_path / "int8")
    cfg_path = folder / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    cfg_path.write_text(json.dumps({**cfg, "model_max_length": 48}), encoding="utf-8")
    gen = OrtGenerator(folder, threads=1)
    ids, _ = gen.encode(["标题：" + "新" * 300])
    assert gen.max_source_len == 48 and ids.shape == (1, 48)
    assert OrtGenerator(folder, threads=1, max_source_len=32).encode(["新" * 300])[0].shape == (1, 32)  # given wins
