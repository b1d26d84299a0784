"""The `triton` server: a real Triton Inference Server (via PyTriton) serving the ONNX int8 model.

PyTriton's bundled Triton has only the Python backend, so ONNX Runtime runs inside the
bound Python function; Triton's dynamic batcher groups concurrent requests (up to
`max_batch`, waiting at most `queue_delay_us` for more) into one call of that function,
and one batched generation serves them all.  Tensors cross from Triton to this process
through PyTriton's shared-memory proxy (no pickle).

Model `labkit_t5`: inputs `task` and `text` (BYTES, one per request), output `output` (BYTES).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from labkit.procs import free_ports
from labkit.serving.process import LOOPBACK, ServerProcess, labkit_argv
from labkit.serving.schema import MAX_NEW_TOKENS, TASKS, model_input

MODEL_NAME = "labkit_t5"
LOG = logging.getLogger("labkit.serving.triton")


@dataclass
class TritonSettings:
    onnx_dir: Path
    http_port: int = 8000
    grpc_port: int = 8001
    max_batch: int = 32
    queue_delay_us: int = 2000
    threads: int = 0  # ONNX Runtime intra-op threads per instance; 0 -> all cores but one
    instances: int = 1  # model instances (each its own sessions; Triton runs them concurrently)
    max_source_len: int = 0  # 0: what the model was trained with (its tokenizer's model_max_length)
    model_name: str = MODEL_NAME


def make_infer_fn(gen):
    """The batched inference function Triton calls: decode bytes, one generation, encode bytes."""
    from pytriton.decorators import batch

    @batch
    def infer(task: np.ndarray, text: np.ndarray):
        tasks = [_text(t) for t in task]
        texts = [_text(t) for t in text]
        bad = [t for t in tasks if t not in TASKS]
        if bad:
            # the API validates first; a direct Triton client gets a clear error instead of a guess
            raise ValueError(f"unknown task(s) {sorted(set(bad))}: choose one of {TASKS}")
        sources = [model_input(t, x) for t, x in zip(tasks, texts)]
        outs = gen.generate(sources, [MAX_NEW_TOKENS[t] for t in tasks])
        return {"output": np.array([[o.strip().encode("utf-8")] for o in outs], dtype=np.object_)}

    return infer


def _text(cell) -> str:
    v = cell[0] if isinstance(cell, np.ndarray) and cell.shape else cell
    return v.decode("utf-8") if isinstance(v, (bytes, np.bytes_)) else str(v)


def serve(s: TritonSettings) -> None:
    """Run Triton on 127.0.0.1 until SIGTERM/SIGINT (blocks)."""
    from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
    from pytriton.triton import Triton, TritonConfig

    from labkit.serving.ort_generate import OrtGenerator, serving_threads

    threads = serving_threads(s.threads)
    # one generator per instance: a fast tokenizer is not safe to share between threads ("Already borrowed")
    gens = [
        OrtGenerator(s.onnx_dir, threads=threads, max_source_len=s.max_source_len) for _ in range(max(1, s.instances))
    ]
    for gen in gens:
        gen.generate([model_input("title", "预热")], 2)  # warm the sessions before the first request
    cfg = TritonConfig(
        http_address=LOOPBACK,
        http_port=s.http_port,
        grpc_address=LOOPBACK,
        grpc_port=s.grpc_port,
        allow_metrics=False,
        log_verbose=0,
        exit_timeout_secs=5,
    )
    with Triton(config=cfg) as triton:
        triton.bind(
            model_name=s.model_name,
            infer_func=[make_infer_fn(gen) for gen in gens],
            inputs=[Tensor(name="task", dtype=bytes, shape=(1,)), Tensor(name="text", dtype=bytes, shape=(1,))],
            outputs=[Tensor(name="output", dtype=bytes, shape=(1,))],
            # [fix:dynamic_batching]
            config=ModelConfig(
                max_batch_size=s.max_batch,
                batching=True,
                batcher=DynamicBatcher(max_queue_delay_microseconds=s.queue_delay_us),
            ),
            # [/fix:dynamic_batching]
            strict=True,
        )
        LOG.warning(
            "triton serving %s on http://%s:%d (max_batch=%d, queue_delay=%dus, instances=%d, ort threads=%d)",
            s.model_name,
            LOOPBACK,
            s.http_port,
            s.max_batch,
            s.queue_delay_us,
            len(gens),
            threads,
        )
        triton.serve()


def ready_url(http_port: int, model_name: str = MODEL_NAME) -> str:
    """Triton answers 200 here once the model is loaded."""
    return f"http://{LOOPBACK}:{http_port}/v2/models/{model_name}/ready"


def start_triton(
    onnx_dir,
    max_batch: int = 32,
    queue_delay_us: int = 2000,
    threads: int = 0,
    max_source_len: int = 0,
    log_path=None,
    port: int | None = None,
    instances: int = 1,
    grpc_port: int | None = None,
) -> ServerProcess:
    """A `ServerProcess` for `labkit serve triton` on free loopback ports, or the ones given (enter it to start).

    `.url` is its HTTP endpoint, `.grpc_url` (`grpc://127.0.0.1:PORT`) its gRPC one; a restart
    (`labkit.serving.supervisor`) passes the same ports again, so clients keep their addresses."""
    free = iter(p for p in free_ports(2) if p not in (port, grpc_port))  # two at once: never the same port twice
    port = port or next(free)
    grpc_port = grpc_port or next(free)
    argv = labkit_argv(
        "serve",
        "triton",
        "--onnx",
        str(onnx_dir),
        "--port",
        str(port),
        "--grpc-port",
        str(grpc_port),
        "--max-batch",
        str(max_batch),
        "--queue-delay-us",
        str(queue_delay_us),
        "--threads",
        str(threads),
        "--max-source-len",
        str(max_source_len),
        "--instances",
        str(instances),
    )
    srv = ServerProcess(argv, ready_url(port), timeout=120, name="triton", log_path=log_path)
    srv.grpc_url = f"grpc://{LOOPBACK}:{grpc_port}"  # what `labkit serve api --triton-url` takes for gRPC
    return srv
