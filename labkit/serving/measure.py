"""What notebook 08 measures: each serving step in isolation, then the three servers under load.

Steps (one process, no HTTP): PyTorch `generate` one request at a time -> ONNX fp32 ->
ONNX int8 -> int8 with 16 requests batched into one call.  Servers (real processes on
127.0.0.1): the baseline pipeline server, and the async API in front of Triton (`served_stack()`:
without Triton installed, the API's own ONNX Runtime micro-batcher).
"""
from __future__ import annotations

import json
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from labkit.serving.loadgen import LoadResult, open_loop, run_sync, sweep
from labkit.serving.process import ServerProcess, free_port, labkit_argv
from labkit.serving.availability import triton_available
from labkit.serving.triton import start_triton

SERVERS = ("baseline", "api+triton", "api+ort")


def served_stack() -> str:
    """The fast stack notebook 08 serves: "api+triton" where Triton is installed, else "api+ort" (the API's
    in-process ONNX Runtime micro-batcher, same int8 model; `labkit.serving.availability`)."""
    return "api+triton" if triton_available() else "api+ort"


def time_calls(fn: Callable[[], object], repeats: int, warmup: int = 2) -> np.ndarray:
    """Wall time of `fn()` in ms, `repeats` times after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return np.array(out)


def isolation_steps(model, tokenizer, fp32_gen, int8_gen, sources: Sequence[str], max_new_tokens: int,
                    repeats: int = 16, batch: int = 16) -> list[dict]:
    """Per-request latency and throughput of each step on the same inputs, same thread count.

    Every step serves the same `batch` sources: one at a time (each source once per pass),
    then all of them in one call -- outputs end at their own eos, so comparing steps over
    different inputs would compare different amounts of work.  `repeats` single calls are timed
    per step (whole passes over the batch, at least one) and `max(3, repeats // 4)` batched calls."""
    from labkit.model import generate_ids

    srcs = list(sources)[:batch]

    def torch_gen(batch_srcs):
        return generate_ids(model, tokenizer, batch_srcs, max_new_tokens, fp32_gen.max_source_len, len(batch_srcs))

    passes = max(1, -(-repeats // len(srcs)))
    rows = []
    for step, fn in (("pytorch fp32", torch_gen),
                     ("onnx fp32", lambda s: fp32_gen.generate(s, max_new_tokens)),
                     ("onnx int8", lambda s: int8_gen.generate(s, max_new_tokens))):
        fn(srcs[:1])  # warm-up
        ms = np.concatenate([time_calls(lambda src=src: fn([src]), 1, warmup=0) for _ in range(passes) for src in srcs])
        rows.append({"step": step, "batch": 1, "p50_ms_per_call": float(np.median(ms)),
                     "requests_per_s": 1e3 * len(ms) / float(ms.sum())})
    ms = time_calls(lambda: int8_gen.generate(srcs, max_new_tokens), max(3, repeats // 4), warmup=1)
    rows.append({"step": f"onnx int8, {len(srcs)} batched", "batch": len(srcs), "p50_ms_per_call": float(np.median(ms)),
                 "requests_per_s": len(srcs) * 1e3 / float(np.median(ms))})
    return rows


def start_stack(kind: str, stack: ExitStack, model_dir: Path, int8_dir: Path, log_dir: Path, threads: int = 0,
                max_batch: int = 32, queue_delay_us: int = 10_000, max_source_len: int = 0,
                instances: int = 1) -> ServerProcess:
    """Start `kind` (and what it needs) inside `stack`; returns the process the load goes to.

    The 10 ms queue delay was measured: at 16 clients on 2 cores api+triton gave 77.5 / 84.1 / 81.9 QPS
    with 3 / 10 / 20 ms -- waiting a little longer forms fuller batches.  It is now the API batcher's longest
    wait, and only when the previous batch showed a crowd (`labkit.serving.backends._Batching`)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    common = ["--port", str(port), "--threads", str(threads), "--max-source-len", str(max_source_len)]
    if kind == "baseline":
        argv = labkit_argv("serve", "baseline", "--model", str(model_dir), *common)
    elif kind == "api+triton":
        # the API forms the batches (adaptively: no wait for a lone request) and sends each over gRPC; Triton
        # does not wait again, and its max_batch_size caps the API's batches (docs/serving.md, "Near the limit")
        triton = stack.enter_context(start_triton(int8_dir, max_batch, 0, threads, max_source_len,
                                                  log_path=log_dir / "triton.log", instances=instances))
        argv = labkit_argv("serve", "api", "--triton-url", triton.grpc_url, "--max-batch", str(max_batch),
                           "--queue-delay-us", str(queue_delay_us), *common)
    elif kind == "api+ort":
        argv = labkit_argv("serve", "api", "--backend", "ort", "--onnx", str(int8_dir), "--max-batch", str(max_batch),
                           "--queue-delay-us", str(queue_delay_us), *common)
    else:
        raise ValueError(f"unknown server kind {kind!r}: choose one of {SERVERS}")
    srv = ServerProcess(argv, f"http://127.0.0.1:{port}/health", timeout=120, name=kind,
                        log_path=log_dir / f"{kind.replace('+', '_')}.log")
    return stack.enter_context(srv)


def load_test(kind: str, model_dir: Path, int8_dir: Path, payloads: Sequence[dict], levels: Sequence[int],
              requests_per_level: int, seconds_per_level: float, log_dir: Path, open_rate: float = 0.0,
              open_seconds: float = 5.0, answers: list | None = None, ask: Sequence[dict] = (),
              **server_kw) -> list[LoadResult]:
    """Start the server stack, run the closed-loop sweep (and an open-loop run), always stop it.

    With `ask`, those request bodies are also sent one by one after the load and the server's JSON
    answers appended to `answers` (to show what the served model says)."""
    with ExitStack() as stack:
        srv = start_stack(kind, stack, Path(model_dir), Path(int8_dir), Path(log_dir), **server_kw)
        out = sweep(srv.url, payloads, levels, requests_per_level, seconds_per_level, server=kind)
        if open_rate:
            out.append(run_sync(open_loop(srv.url, payloads, open_rate, open_seconds, server=kind)))
        for body in ask:
            answers.append(post_generate(srv.url, body))
    return out


def post_generate(base_url: str, body: dict, timeout: float = 60.0) -> dict:
    """One `POST /v1/generate` (standard library only); returns the JSON answer."""
    import json
    import urllib.request

    req = urllib.request.Request(f"{base_url.rstrip('/')}/v1/generate", data=json.dumps(body).encode("utf-8"),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read().decode("utf-8"))


def model_for_serving(cfg, out_dir: Path, model_dir: str | Path = "", fallback: str | Path | None = None,
                      fallback_origin: str = "fallback") -> tuple[Path, str]:
    """The model to serve: `model_dir` if given, else `fallback` if it holds a saved model, else train one.

    Notebook 08 passes notebook 07's saved model as `fallback` (origin "notebook 07").
    Returns (save_pretrained folder, where it came from).
    """
    if model_dir:
        return Path(model_dir), "given"
    if fallback and (Path(fallback) / "config.json").exists():
        return Path(fallback), fallback_origin
    from labkit.corpus import generate
    from labkit.training.recipes import train_generator

    arts = generate(cfg.corpus_size, seed=cfg.seed)
    trained = train_generator(arts, [], cfg)
    return trained.save(Path(out_dir) / "model"), "trained here (tiny, smoke)"


def title_floor_skip(origin: str, notebook07_dir: str | Path) -> str | None:
    """Why notebook 08's served-title floor does not apply to the served model, or None when it does.

    The floor was measured for the finale's model: notebook 07 trained with its fix (FIX=True, recorded
    as its `fix` metric). A model given by hand, trained here as a fallback, or from 07 run with its fix
    removed is served and scored all the same, but the floor says nothing about it."""
    if origin != "notebook 07":
        return f"the floor is measured for notebook 07's model; this one was {origin}"
    try:
        fix = json.loads((Path(notebook07_dir) / "results.json").read_text(encoding="utf-8"))["metrics"]["fix"]
    except (OSError, ValueError, KeyError):
        return "notebook 07's results.json does not say how its model was trained"
    return None if fix else "notebook 07 ran with FIX=False (no sampler): the floor is for its fixed run"


def results_table(results: Sequence[LoadResult]):
    """LoadResults as a pandas DataFrame (one row per server, mode and level)."""
    import pandas as pd

    cols = ["server", "mode", "level", "requests", "errors", "qps", "p50_ms", "p95_ms", "p99_ms", "mean_ms"]
    return pd.DataFrame([r.to_dict() for r in results])[cols]
