"""The `api` server: the public, async FastAPI front.

`POST /v1/generate` `{"task": "title"|"summary"|"keywords", "text": "..."}`, `GET /health`,
OpenAPI docs at `/docs`.  Requests are checked before anything reaches the model:
wrong content type -> 415, oversized body -> 413, non-UTF-8 or malformed JSON -> 400,
schema violations (unknown/missing task, empty or too long text, extra fields) -> 422.
The model answers through a backend (`labkit.serving.backends`): Triton -> 503 while it
is down (and normal service as soon as it is back), a per-request timeout -> 504.
With a `supervisor` (the Triton this API started, `labkit.serving.supervisor`) requests
get 503 without touching Triton while it restarts; `/health` counts the restarts.
"""

import asyncio
import json
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Callable

from labkit.serving.backends import BackendError, BackendUnavailable
from labkit.serving.schema import (
    GENERATE_PATH,
    MAX_BODY_BYTES,
    MAX_TEXT_CHARS,
    ErrorResponse,
    GenerateResponse,
    HealthError,
    HealthResponse,
    request_model,
)


@dataclass
class ApiSettings:
    timeout_s: float = 10.0
    max_text_chars: int = MAX_TEXT_CHARS
    max_body_bytes: int = MAX_BODY_BYTES


def _error_body(code: str, message: str) -> bytes:
    return json.dumps({"error": code, "message": message}, ensure_ascii=False).encode("utf-8")


class BodyGuard:
    """ASGI middleware: content type, size and UTF-8 of `POST /v1/generate` bodies, before parsing.

    The body is read with a running byte count (no trust in Content-Length alone), so an
    oversized or chunked upload is cut off at the limit instead of being buffered whole.
    """

    def __init__(self, app, max_body_bytes: int):
        self.app = app
        self.limit = max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] != GENERATE_PATH or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        ctype = headers.get(b"content-type", b"").decode("latin-1")
        media, _, params = ctype.partition(";")
        charset = (
            params.strip().lower().removeprefix("charset=").strip('"') if "charset=" in params.lower() else "utf-8"
        )
        if media.strip().lower() != "application/json" or charset not in ("utf-8", "utf8"):
            return await _send(
                send,
                415,
                "unsupported_media_type",
                f"send the body as JSON with 'Content-Type: application/json' (UTF-8); got {ctype or 'no Content-Type'!r}",
            )
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await _send(
                send, 413, "body_too_large", f"request body is {int(declared)} bytes; the limit is {self.limit}"
            )
        body, more = b"", True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return None
            body += msg.get("body", b"")
            more = msg.get("more_body", False)
            if len(body) > self.limit:
                return await _send(send, 413, "body_too_large", f"request body exceeds the limit of {self.limit} bytes")
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            return await _send(
                send,
                400,
                "invalid_encoding",
                f"request body is not valid UTF-8 (bad byte at offset {exc.start}); encode the JSON as UTF-8",
            )
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


async def _send(send, status: int, code: str, message: str) -> None:
    payload = _error_body(code, message)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def _validation_message(errors) -> tuple[int, str, str]:
    if any(e.get("type") == "json_invalid" for e in errors):
        e = next(e for e in errors if e.get("type") == "json_invalid")
        return 400, "invalid_json", f"request body is not valid JSON: {e.get('ctx', {}).get('error', e.get('msg'))}"
    parts = []
    for e in errors:
        loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
        msg = e.get("msg", "invalid")
        if e.get("type") == "string_pattern_mismatch":
            msg = "must contain at least one non-space character"
        parts.append(f"{loc}: {msg}")
    return (
        422,
        "invalid_request",
        "; ".join(parts) + ' (expected {"task": "title"|"summary"|"keywords", "text": "..."})',
    )


ERROR_RESPONSES = {
    code: {"model": ErrorResponse, "description": desc}
    for code, desc in {
        400: "body is not UTF-8 or not JSON",
        413: "body larger than the configured limit",
        415: "Content-Type is not application/json",
        422: "body does not match the schema",
        502: "the model server failed on this request",
        503: "the model server is down or not ready",
        504: "the model did not answer within the per-request timeout",
    }.items()
}


def create_app(make_backend: Callable[[], object], settings: ApiSettings | None = None, supervisor=None):
    """The FastAPI app; `make_backend()` is called at startup, inside the event loop.

    `supervisor`: what keeps the model server running (`.up`, `.restarts`, `.describe()`), if this API owns one."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response

    settings = settings or ApiSettings()
    Req = request_model(settings.max_text_chars)
    state: dict = {}

    @asynccontextmanager
    async def lifespan(app):
        state["backend"] = make_backend()
        yield
        await state["backend"].close()

    app = FastAPI(
        title="labkit generation API",
        version="1",
        lifespan=lifespan,
        description="Titles, summaries and keywords for Chinese news text, from the course's T5 model.",
    )
    app.add_middleware(BodyGuard, max_body_bytes=settings.max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, exc: RequestValidationError):
        status, code, message = _validation_message(exc.errors())
        return JSONResponse({"error": code, "message": message}, status_code=status)

    def restarts(backend) -> dict[str, int]:
        """What this API restarted so far: the batching worker, and the Triton it started."""
        out = {}
        if hasattr(backend, "restarts"):
            out["worker"] = backend.restarts
        if supervisor is not None:
            out["triton"] = supervisor.restarts
        return out

    @app.get(
        "/health",
        response_model=HealthResponse,
        responses={503: {"model": HealthError, "description": "backend not ready (restarting, or down)"}},
    )
    async def health():
        backend = state["backend"]
        if supervisor is not None and not supervisor.up:
            return JSONResponse(
                {"error": "backend_unavailable", "message": supervisor.describe(), "restarts": restarts(backend)},
                status_code=503,
            )
        if not await backend.ready():
            why = getattr(backend, "gave_up", "") or f"{backend.name} backend is not ready"
            return JSONResponse(
                {"error": "backend_unavailable", "message": why, "restarts": restarts(backend)}, status_code=503
            )
        return {"status": "ok", "backend": backend.name, "restarts": restarts(backend)}

    @app.post(GENERATE_PATH, response_model=GenerateResponse, responses=ERROR_RESPONSES)
    async def generate(req: Req) -> GenerateResponse:
        backend = state["backend"]
        if supervisor is not None and not supervisor.up:  # restarting: answer now, do not knock on a dead port
            return JSONResponse({"error": "backend_unavailable", "message": supervisor.describe()}, status_code=503)
        t0 = time.perf_counter()
        try:
            out = await asyncio.wait_for(backend.generate(req.task, req.text), timeout=settings.timeout_s)
        except asyncio.TimeoutError:
            return JSONResponse(
                {
                    "error": "timeout",
                    "message": f"the model did not answer within {settings.timeout_s:g}s; retry later",
                },
                status_code=504,
            )
        except BackendUnavailable as exc:
            return JSONResponse({"error": "backend_unavailable", "message": str(exc)}, status_code=503)
        except BackendError as exc:
            return JSONResponse({"error": "backend_error", "message": str(exc)}, status_code=502)
        # serialized here, once: returning the model would make FastAPI validate and encode it again
        body = GenerateResponse(
            task=req.task, output=out, backend=backend.name, latency_ms=(time.perf_counter() - t0) * 1e3
        ).model_dump_json()
        return Response(body, media_type="application/json")

    return app
