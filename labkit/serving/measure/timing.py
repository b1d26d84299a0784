"""The model's own limit, no HTTP: each request alone, then a batch in one call (`isolated`), and notebook 08's
isolation steps on the same requests (PyTorch `generate` one at a time -> ONNX fp32 -> ONNX int8 -> int8 with 16
requests batched into one call: `isolation_steps`, whose int8 figures are `isolated`'s).  The served stack is judged
against this limit (`labkit.serving.bench.compare`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

import numpy as np


def _single_ms(fn, srcs: Sequence[str], caps: Sequence[int]) -> list[float]:
    """ms of `fn([src], [cap])` for each request alone, after one untimed warm-up call."""
    fn(list(srcs[:1]), list(caps[:1]))
    out = []
    for s, c in zip(srcs, caps):
        t0 = time.perf_counter()
        fn([s], [c])
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def requests_of(payloads: Sequence[dict], batch: int = 16) -> tuple[list[str], list[int]]:
    """The model inputs and token caps of the first `batch` request bodies, as the servers build them."""
    from labkit.serving.schema import MAX_NEW_TOKENS, model_input

    rows = list(payloads)[:batch]
    return [model_input(p["task"], p["text"]) for p in rows], [MAX_NEW_TOKENS[p["task"]] for p in rows]


def isolated(gen, payloads: Sequence[dict], batch: int = 16, batched_calls: int = 5) -> dict:
    """The model's own limit, no HTTP: each of `batch` requests alone (median ms per call), then all of them in
    one call, `batched_calls` times (requests/s from the median call: one timed call per pass spread 287-412
    req/s in one run).  `labkit bench serve --compare` and notebook 08 judge the served stack against this."""
    srcs, caps = requests_of(payloads, batch)
    single = _single_ms(gen.generate, srcs, caps)
    calls = []
    for _call in range(batched_calls):
        t0 = time.perf_counter()
        gen.generate(srcs, caps)
        calls.append(time.perf_counter() - t0)
    return {
        "single_ms": float(np.median(single)),
        "batched_qps": len(srcs) / float(np.median(calls)),
        "batch": len(srcs),
    }


def isolated_generator(int8_dir: Path, threads: int, max_source_len: int = 0):
    """`OrtGenerator` with the servers' thread count (`serving_threads`)."""
    from labkit.serving.ort_generate import OrtGenerator, serving_threads

    return OrtGenerator(int8_dir, threads=serving_threads(threads), max_source_len=max_source_len)


def isolation_steps(
    model, tokenizer, fp32_gen, int8_gen, payloads: Sequence[dict], batch: int = 16, batched_calls: int = 5
) -> list[dict]:
    """Per-request latency and throughput of each step on the same requests, same thread count.

    Every step serves the same `batch` requests: one at a time, then (int8) all of them in one call --
    outputs end at their own eos, so comparing steps over different inputs would compare different
    amounts of work.  The int8 rows are `isolated`'s figures: the limit the served stack is judged by."""
    from labkit.model import generate_ids

    srcs, caps = requests_of(payloads, batch)

    def torch_gen(batch_srcs, batch_caps):
        return generate_ids(model, tokenizer, batch_srcs, max(batch_caps), fp32_gen.max_source_len, len(batch_srcs))

    rows = []
    for step, fn in (("pytorch fp32", torch_gen), ("onnx fp32", fp32_gen.generate)):
        ms = _single_ms(fn, srcs, caps)
        rows.append(
            {
                "step": step,
                "batch": 1,
                "p50_ms_per_call": float(np.median(ms)),
                "requests_per_s": 1e3 / float(np.median(ms)),
            }
        )
    lim = isolated(int8_gen, payloads, batch, batched_calls)
    rows.append(
        {"step": "onnx int8", "batch": 1, "p50_ms_per_call": lim["single_ms"], "requests_per_s": 1e3 / lim["single_ms"]}
    )
    rows.append(
        {
            "step": f"onnx int8, {lim['batch']} batched",
            "batch": lim["batch"],
            "p50_ms_per_call": 1e3 * lim["batch"] / lim["batched_qps"],
            "requests_per_s": lim["batched_qps"],
        }
    )
    return rows
