"""Batched greedy generation over ONNX Runtime sessions (encoder, decoder, decoder-with-past).

The loop is the one `model.generate(num_beams=1, do_sample=False)` runs: encode once,
first decoder step without a cache, then one token per step feeding back the self-attention
keys/values ("past") while the cross-attention keys/values from step one are reused.
No torch is needed at serving time: numpy in, numpy out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from labkit.text.tokenizer import trained_source_len


def serving_threads(threads: int = 0) -> int:
    """ONNX Runtime intra-op threads for a server: `threads`, or all cores but one when 0.

    The spare core is for the HTTP front and Triton, which run beside the model; on this
    2-core machine one model thread gave 86 QPS at concurrency 16 against 77 with two.  The cores are
    this process's (`labkit.threads.cores`: its affinity), so under `taskset` or a cgroup's cpuset the
    server does not start more threads than it has cores."""
    from labkit.threads import cores

    return threads if threads > 0 else max(1, cores() - 1)


def _session(path: Path, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = max(1, threads)
    so.inter_op_num_threads = 1
    # ORT's idle workers spin by default, burning the cores the servers' other processes need:
    # at concurrency 16 on 2 cores, 40 QPS with spinning and 77 without (2 threads each).
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3  # warnings about unused initializers are noise here
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


class OrtGenerator:
    """Greedy seq2seq generation from an exported folder (see `labkit.serving.export`).

    >>> gen = OrtGenerator("runs/08_deployment/onnx-int8")          # doctest: +SKIP
    >>> gen.generate(["标题：北京今日发布……"], max_new_tokens=32)     # doctest: +SKIP
    """

    def __init__(self, onnx_dir: str | Path, threads: int = 1, max_source_len: int = 0, tokenizer=None):
        self.dir = Path(onnx_dir)
        cfg = json.loads((self.dir / "config.json").read_text(encoding="utf-8"))
        self.start_id = int(cfg.get("decoder_start_token_id") or cfg.get("pad_token_id") or 0)
        self.eos_id = int(cfg.get("eos_token_id", 1))
        self.pad_id = int(cfg.get("pad_token_id", 0))
        self.encoder = _session(self.dir / "encoder_model.onnx", threads)
        self.decoder = _session(self.dir / "decoder_model.onnx", threads)
        self.decoder_past = _session(self.dir / "decoder_with_past_model.onnx", threads)
        self._past_inputs = [i.name for i in self.decoder_past.get_inputs() if i.name.startswith("past_key_values.")]
        self._first_out = [o.name for o in self.decoder.get_outputs()]
        self._past_out = [o.name for o in self.decoder_past.get_outputs()]
        # 0: truncate where training did (recorded in the folder's tokenizer_config.json), else 128
        self.max_source_len = max_source_len or trained_source_len(self.dir)
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(self.dir)
        self.tokenizer = tokenizer

    def generate_ids(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, max_new_tokens: int | Sequence[int] = 48
    ) -> list[list[int]]:
        """Greedy token ids per row (without the start token, cut after the first eos).

        `max_new_tokens` may differ per row (a batch mixing titles and summaries): a row
        stops at its own cap, so batching never changes a request's output.
        """
        caps = np.broadcast_to(np.asarray(max_new_tokens, dtype=np.int64), (input_ids.shape[0],))
        limit = int(caps.max()) if caps.size else 0
        input_ids = np.ascontiguousarray(input_ids, dtype=np.int64)
        mask = np.ascontiguousarray(attention_mask, dtype=np.int64)
        batch = input_ids.shape[0]
        hidden = self.encoder.run(None, {"input_ids": input_ids, "attention_mask": mask})[0]
        step_ids = np.full((batch, 1), self.start_id, dtype=np.int64)
        outs = self.decoder.run(
            None, {"encoder_attention_mask": mask, "input_ids": step_ids, "encoder_hidden_states": hidden}
        )
        named = dict(zip(self._first_out, outs))
        # cross-attention keys/values are fixed after step one; only the decoder's own grow
        past = {p: named[p.replace("past_key_values.", "present.")] for p in self._past_inputs}
        logits = named["logits"]
        finished = np.zeros(batch, dtype=bool)
        tokens: list[np.ndarray] = []
        for step in range(limit):
            nxt = logits[:, -1, :].argmax(-1).astype(np.int64)
            nxt[finished] = self.pad_id
            tokens.append(nxt)
            finished |= (nxt == self.eos_id) | (step + 1 >= caps)
            if finished.all():
                break
            outs = self.decoder_past.run(None, {"encoder_attention_mask": mask, "input_ids": nxt[:, None], **past})
            named = dict(zip(self._past_out, outs))
            logits = named["logits"]
            for p in self._past_inputs:
                if ".decoder." in p:
                    past[p] = named[p.replace("past_key_values.", "present.")]
        seqs = np.stack(tokens, axis=1) if tokens else np.zeros((batch, 0), dtype=np.int64)
        return [_cut(row[:cap], self.eos_id) for row, cap in zip(seqs.tolist(), caps.tolist())]

    def encode(self, sources: list[str]) -> tuple[np.ndarray, np.ndarray]:
        enc = self.tokenizer(
            list(sources),
            max_length=self.max_source_len,
            truncation=True,
            padding=True,
            return_tensors="np",
            return_token_type_ids=False,
        )
        return enc["input_ids"], enc["attention_mask"]

    def generate(self, sources: Sequence[str], max_new_tokens: int | Sequence[int] = 48) -> list[str]:
        """Decoded greedy outputs for already-formatted model inputs (task prefix included)."""
        if not sources:
            return []
        ids, mask = self.encode(sources)
        out = self.generate_ids(ids, mask, max_new_tokens)
        return self.tokenizer.batch_decode(out, skip_special_tokens=True)


def _cut(row: list[int], eos: int) -> list[int]:
    return row[: row.index(eos) + 1] if eos in row else row
