"""The public request/response shapes shared by the three servers and the load generator."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from labkit.text.tasks import PREFIX, TASKS  # the task names: one source, the training's

GENERATE_PATH = "/v1/generate"
Task = Literal[TASKS]
MAX_TEXT_CHARS = 2000  # default request limit; long inputs are truncated to max_source_len tokens anyway
MAX_BODY_BYTES = 64 * 1024
# tokens generated per task: a title is short, a summary longer (greedy stops at eos earlier)
MAX_NEW_TOKENS = {"title": 32, "summary": 48, "keywords": 24}


class GenerateRequest(BaseModel):
    """`POST /v1/generate` body."""

    model_config = ConfigDict(extra="forbid")
    task: Task = Field(description="what to generate from the text")
    text: str = Field(
        min_length=1,
        max_length=MAX_TEXT_CHARS,
        pattern=r"\S",
        description="the news article body (Chinese), at least one non-space character",
    )


class GenerateResponse(BaseModel):
    task: Task
    output: str
    backend: str = Field(description="which serving path produced the output")
    latency_ms: float = Field(description="time spent inside this server")


class ErrorResponse(BaseModel):
    """Every 4xx/5xx the API sends has this shape."""

    error: str = Field(description="short machine-readable code, e.g. invalid_request, backend_unavailable")
    message: str = Field(description="what went wrong and how to fix it")


class HealthResponse(BaseModel):
    """`GET /health` when the model answers."""

    status: Literal["ok"]
    backend: str = Field(description="which serving path answers")
    restarts: dict[str, int] = Field(
        description="restarts so far of what this server keeps running: "
        "'worker' (its batching task), 'triton' (the Triton it started)"
    )


class HealthError(ErrorResponse):
    """`GET /health` when the model does not answer (503)."""

    restarts: dict[str, int] = Field(description="as in the 200 answer")


def request_model(max_text_chars: int = MAX_TEXT_CHARS) -> type[GenerateRequest]:
    """`GenerateRequest` with a configured text limit (the schema the OpenAPI docs show)."""
    if max_text_chars == MAX_TEXT_CHARS:
        return GenerateRequest

    from pydantic import create_model

    return create_model(
        "GenerateRequest",
        __base__=GenerateRequest,
        text=(
            str,
            Field(
                min_length=1,
                max_length=max_text_chars,
                pattern=r"\S",
                description=GenerateRequest.model_fields["text"].description,
            ),
        ),
    )


def model_input(task: str, text: str) -> str:
    """The model's input string for (task, text): the same formatting the training used."""
    if task not in PREFIX:
        raise ValueError(f"unknown task {task!r}: choose one of {TASKS}")
    return PREFIX[task] + text
