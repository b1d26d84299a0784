"""The one place a served stack is started (`start_stack`) and loaded (`load_test`, `post_generate`).

Servers are real processes on 127.0.0.1: the baseline pipeline server, and the async API in front of Triton
(`served_stack()`: without Triton installed, the API's own ONNX Runtime micro-batcher).  `labkit bench serve
--compare` and notebook 08 both load them through `labkit.serving.bench.compare`.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Sequence


from labkit.serving.availability import triton_available
from labkit.serving.loadgen import LoadResult, open_loop, run_sync, sweep
from labkit.serving.process import ServerProcess, free_port, labkit_argv
from labkit.serving.triton import start_triton

SERVERS = ("baseline", "api+triton", "api+ort")


def served_stack() -> str:
    """The fast stack notebook 08 serves: "api+triton" where Triton is installed, else "api+ort" (the API's
    in-process ONNX Runtime micro-batcher, same int8 model; `labkit.serving.availability`)."""
    return "api+triton" if triton_available() else "api+ort"


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
