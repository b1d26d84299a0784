"""The `baseline` server: FastAPI + a `transformers` pipeline, one request at a time.

This is how the story first served the model: a synchronous handler calls
`pipeline("text2text-generation")` for each request.  Pipelines are not thread-safe,
so a lock serialises them; under concurrent load requests queue behind each other and
latency grows with the queue -- the symptom notebook 08 starts from.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from labkit.serving.schema import MAX_NEW_TOKENS, GenerateRequest, GenerateResponse, model_input
from labkit.text.tokenizer import trained_source_len


def create_app(model_dir: str | Path, max_source_len: int = 0, threads: int = 0):
    """FastAPI app with `POST /v1/generate` and `GET /health`, backed by a PyTorch pipeline.

    `max_source_len` 0: the input length the model was trained with (`trained_source_len`)."""
    import torch
    from fastapi import FastAPI
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

    from labkit.threads import cores

    torch.set_num_threads(threads or cores())  # this process's cores (its affinity), not the machine's
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.model_max_length = max_source_len or trained_source_len(model_dir)  # the pipeline truncates to this
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
    pipe = pipeline("text2text-generation", model=model, tokenizer=tokenizer, device="cpu")
    lock = threading.Lock()
    app = FastAPI(title="labkit baseline (transformers pipeline)", version="1")

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "backend": "pipeline"}

    @app.post("/v1/generate", response_model=GenerateResponse)
    def generate(req: GenerateRequest) -> GenerateResponse:  # sync: FastAPI runs it in a worker thread
        t0 = time.perf_counter()
        with lock:
            out = pipe(
                model_input(req.task, req.text),
                max_new_tokens=MAX_NEW_TOKENS[req.task],
                num_beams=1,
                do_sample=False,
                truncation=True,
            )
        return GenerateResponse(
            task=req.task,
            output=out[0]["generated_text"].strip(),
            backend="pipeline",
            latency_ms=(time.perf_counter() - t0) * 1e3,
        )

    return app
