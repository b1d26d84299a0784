"""Is the exported model the trained model?  fp32 parity and the int8 quality cost, measured.

fp32 ONNX must produce the same greedy tokens as PyTorch on an evaluation set (tiny
float differences may flip a near-tie argmax; we report the fraction identical and show
any mismatch).  int8 changes the numbers on purpose: the question is how much quality it
costs, reported as a ROUGE-L (and keyword-F1) delta against the references.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np


@dataclass
class Parity:
    n: int
    identical: int
    max_abs_logit_diff: float
    mismatches: list[dict] = field(default_factory=list)

    @property
    def fraction_identical(self) -> float:
        return self.identical / self.n if self.n else float("nan")

    def to_dict(self) -> dict:
        return {**asdict(self), "fraction_identical": self.fraction_identical}


def torch_greedy_ids(
    model, tokenizer, sources: Sequence[str], max_new_tokens: int, max_source_len: int, batch_size: int = 32
) -> list[list[int]]:
    """PyTorch `generate` (greedy) token ids per source, cut after eos, start token dropped."""
    from labkit.model import generate_ids

    model.eval()  # and it stays in eval mode: check_parity compares logits next
    eos = model.config.eos_token_id
    out: list[list[int]] = []
    for ids in generate_ids(model, tokenizer, sources, max_new_tokens, max_source_len, batch_size):
        for row in ids[:, 1:].tolist():
            out.append(row[: row.index(eos) + 1] if eos in row else row)
    return out


def first_step_logit_diff(model, gen, sources: Sequence[str]) -> float:
    """Max |logit| difference of the first decoder step, PyTorch vs ONNX (a numeric sanity check)."""
    import torch

    ids, mask = gen.encode(list(sources))
    start = np.full((ids.shape[0], 1), gen.start_id, dtype=np.int64)
    with torch.no_grad():
        ref = model(
            input_ids=torch.from_numpy(ids),
            attention_mask=torch.from_numpy(mask),
            decoder_input_ids=torch.from_numpy(start),
        ).logits.numpy()
    hidden = gen.encoder.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    got = gen.decoder.run(
        ["logits"], {"encoder_attention_mask": mask, "input_ids": start, "encoder_hidden_states": hidden}
    )[0]
    return float(np.abs(ref - got).max())


def check_parity(
    model, tokenizer, gen, sources: Sequence[str], max_new_tokens: int = 32, batch_size: int = 32
) -> Parity:
    """Greedy tokens of PyTorch `model` vs ONNX Runtime generator `gen` on the same sources."""
    ref = torch_greedy_ids(model, tokenizer, sources, max_new_tokens, gen.max_source_len, batch_size)
    got: list[list[int]] = []
    for i in range(0, len(sources), batch_size):
        ids, mask = gen.encode(list(sources[i : i + batch_size]))
        got.extend(gen.generate_ids(ids, mask, max_new_tokens))
    mism = [
        {
            "source": s[:40],
            "torch": tokenizer.decode(a, skip_special_tokens=True),
            "onnx": tokenizer.decode(b, skip_special_tokens=True),
        }
        for s, a, b in zip(sources, ref, got)
        if a != b
    ]
    diff = first_step_logit_diff(model, gen, sources[: min(len(sources), batch_size)])
    return Parity(n=len(sources), identical=len(sources) - len(mism), max_abs_logit_diff=diff, mismatches=mism[:5])


def score(preds: Sequence[str], examples: Sequence) -> dict[str, float]:
    """ROUGE-L over title/summary examples, keyword F1 over keyword examples (labkit.text.metrics)."""
    from labkit.text.metrics import task_metric, task_score

    rouge, kw = [], []
    for p, e in zip(preds, examples):
        (kw if task_metric(e.task) == "keyword_f1" else rouge).append(task_score(e.task, p, e.target))
    mean = lambda xs: float(np.mean(xs)) if xs else float("nan")  # noqa: E731
    return {"rouge_l": mean(rouge), "keyword_f1": mean(kw)}


def quality_delta(gen_fp32, gen_int8, examples: Sequence, max_new_tokens: int = 32, batch_size: int = 32) -> dict:
    """Score both generators on the same examples; `rouge_l_delta` = int8 - fp32 (negative = int8 worse)."""
    sources = [e.source for e in examples]

    def run(gen):
        out: list[str] = []
        for i in range(0, len(sources), batch_size):
            out.extend(s.strip() for s in gen.generate(sources[i : i + batch_size], max_new_tokens))
        return out

    p32, p8 = run(gen_fp32), run(gen_int8)
    s32, s8 = score(p32, examples), score(p8, examples)
    return {
        "fp32": s32,
        "int8": s8,
        "rouge_l_delta": s8["rouge_l"] - s32["rouge_l"],
        "keyword_f1_delta": s8["keyword_f1"] - s32["keyword_f1"],
        "same_output": float(np.mean([a == b for a, b in zip(p32, p8)])),
    }
