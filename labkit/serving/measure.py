"""Serving measurements, one owner each: the stack starter, the isolated-model timer, the served model.

Steps (one process, no HTTP): PyTorch `generate` one request at a time -> ONNX fp32 ->
ONNX int8 -> int8 with 16 requests batched into one call (`isolation_steps`, whose int8 figures are
`isolated`'s: the model's own limit).  Servers (real processes on 127.0.0.1, `start_stack`): the
baseline pipeline server, and the async API in front of Triton (`served_stack()`: without Triton
installed, the API's own ONNX Runtime micro-batcher).  `labkit bench serve --compare` and notebook 08
both load them through `labkit.serving.bench.compare`.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path
from typing import Sequence

import numpy as np

from labkit.i18n import N_, _
from labkit.results import read_run
from labkit.serving.loadgen import LoadResult, open_loop, run_sync, sweep
from labkit.serving.process import ServerProcess, free_port, labkit_argv
from labkit.serving.availability import triton_available
from labkit.serving.triton import start_triton

SERVERS = ("baseline", "api+triton", "api+ort")


def served_stack() -> str:
    """The fast stack notebook 08 serves: "api+triton" where Triton is installed, else "api+ort" (the API's
    in-process ONNX Runtime micro-batcher, same int8 model; `labkit.serving.availability`)."""
    return "api+triton" if triton_available() else "api+ort"


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


# api+triton settings: name -> (the API's --front-batching, Triton's queue delay µs, protocol API -> Triton)
SETTINGS = {
    "before": ("off", 10_000, "http"),  # one Triton HTTP request per request; Triton's batcher waits up to 10 ms
    "now": ("adaptive", 0, "grpc"),  # the API batches (no wait for a lone request); Triton does not wait again
}


def start_stack(
    kind: str,
    stack: ExitStack,
    model_dir: Path,
    int8_dir: Path,
    log_dir: Path,
    threads: int = 0,
    max_batch: int = 32,
    queue_delay_us: int = 10_000,
    max_source_len: int = 0,
    instances: int = 1,
    setting: str = "now",
    name: str | None = None,
) -> ServerProcess:
    """Start `kind` (and what it needs) inside `stack`; returns the process the load goes to.

    The one place a served stack is started (notebook 08, `labkit bench serve --compare`, the tests).
    `setting` picks api+triton's batching (`SETTINGS`).  The 10 ms queue delay was measured: at 16 clients
    on 2 cores api+triton gave 77.5 / 84.1 / 81.9 QPS with 3 / 10 / 20 ms -- waiting a little longer forms
    fuller batches.  It is the API batcher's longest wait, and only when the previous batch showed a crowd
    (`labkit.serving.backends._Batching`)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    name = name or kind
    port = free_port()
    common = ["--port", str(port), "--threads", str(threads), "--max-source-len", str(max_source_len)]
    if kind == "baseline":
        argv = labkit_argv("serve", "baseline", "--model", str(model_dir), *common)
    elif kind == "api+triton":
        if setting not in SETTINGS:
            raise ValueError(f"unknown api+triton setting {setting!r}: choose one of {sorted(SETTINGS)}")
        front, triton_delay, proto = SETTINGS[setting]
        triton = stack.enter_context(
            start_triton(
                int8_dir,
                max_batch,
                triton_delay,
                threads,
                max_source_len,
                log_path=log_dir / f"triton_{_file_name(name)}.log",
                instances=instances,
            )
        )
        argv = labkit_argv(
            "serve",
            "api",
            "--triton-url",
            triton.grpc_url if proto == "grpc" else triton.url,
            "--front-batching",
            front,
            "--max-batch",
            str(max_batch),
            "--queue-delay-us",
            str(queue_delay_us),
            *common,
        )
    elif kind == "api+ort":
        argv = labkit_argv(
            "serve",
            "api",
            "--backend",
            "ort",
            "--onnx",
            str(int8_dir),
            "--max-batch",
            str(max_batch),
            "--queue-delay-us",
            str(queue_delay_us),
            *common,
        )
    else:
        raise ValueError(f"unknown server kind {kind!r}: choose one of {SERVERS}")
    srv = ServerProcess(
        argv, f"http://127.0.0.1:{port}/health", timeout=120, name=name, log_path=log_dir / f"{_file_name(name)}.log"
    )
    return stack.enter_context(srv)


def _file_name(name: str) -> str:
    return name.replace("+", "_").replace(" ", "_")


def load_test(
    kind: str,
    model_dir: Path,
    int8_dir: Path,
    payloads: Sequence[dict],
    levels: Sequence[int],
    requests_per_level: int,
    seconds_per_level: float,
    log_dir: Path,
    open_rate: float = 0.0,
    open_seconds: float = 5.0,
    answers: list | None = None,
    ask: Sequence[dict] = (),
    **server_kw,
) -> list[LoadResult]:
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

    req = urllib.request.Request(
        f"{base_url.rstrip('/')}/v1/generate",
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read().decode("utf-8"))


def model_for_serving(
    cfg,
    out_dir: Path,
    model_dir: str | Path = "",
    fallback: str | Path | None = None,
    fallback_origin: str = "notebook 07",
) -> tuple[Path, str]:
    """The model to serve: `model_dir` if given, else `fallback` if it holds a saved model, else notebook 07's
    recipe trained here on one process (`labkit.training.finale`: the same data, budget and schedule).

    Returns (save_pretrained folder, where it came from)."""
    if model_dir:
        return Path(model_dir), N_("given")  # the value stays English (compared); title_floor_skip shows it translated
    if fallback and (Path(fallback) / "config.json").exists():
        return Path(fallback), fallback_origin
    from labkit.training.finale import train_finale_model

    return train_finale_model(cfg, Path(out_dir) / "finale"), TRAINED_HERE


TRAINED_HERE = "notebook 07's recipe, trained here"


def title_floor_skip(origin: str, notebook07_dir: str | Path) -> str | None:
    """Why notebook 08's served-title floor does not apply to the served model, or None when it does.

    The floor was measured for the finale's model: notebook 07's recipe with its fix -- trained by 07 (FIX=True,
    recorded as its `fix` metric) or, without 07's run, by 08 itself on one process (`TRAINED_HERE`).  A model
    given by hand, or from 07 run with its fix removed, is served and scored all the same, but the floor says
    nothing about it."""
    if origin == TRAINED_HERE:
        return None
    if origin != "notebook 07":
        return _("the floor is measured for notebook 07's recipe; this model was {origin}").format(origin=_(origin))
    fix = (read_run(notebook07_dir).results or {}).get("metrics", {}).get("fix")
    if fix is None:
        return _("notebook 07's results.json does not say how its model was trained")
    return None if fix else _("notebook 07 ran with FIX=False (no sampler): the floor is for its fixed run")
