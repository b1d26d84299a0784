"""The public API as a real server process (in-process ONNX Runtime micro-batcher behind it).

Every malformed request must get a 4xx with a clear message and never reach the model;
a valid one gets an answer.  Schemathesis then fuzzes the OpenAPI schema.
"""

from __future__ import annotations

import json

import httpx
import pytest

import serving_helpers as h
from labkit.serving.process import ServerProcess, free_port, labkit_argv

pytestmark = pytest.mark.timeout(240)
LIMIT_CHARS = 300


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    art = h.artifacts(tmp_path_factory.getbasetemp() / "serving")
    port = free_port()
    argv = labkit_argv(
        "serve",
        "api",
        "--backend",
        "ort",
        "--onnx",
        str(art["int8"]),
        "--port",
        str(port),
        "--threads",
        "1",
        "--max-text-chars",
        str(LIMIT_CHARS),
        "--max-source-len",
        "64",
        "--timeout",
        "20",
    )
    with ServerProcess(argv, f"http://127.0.0.1:{port}/health", name="api-ort") as srv:
        yield srv


def post(api, body, headers=None):
    hdrs = {"content-type": "application/json"} if headers is None else headers
    content = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    return httpx.post(api.url + "/v1/generate", content=content, headers=hdrs, timeout=30)


def test_valid_request_is_answered(api):
    r = post(api, {"task": "title", "text": "北京市今天发布了新的公共交通规划。"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["task"] == "title" and body["backend"] == "ort-microbatch"
    assert isinstance(body["output"], str) and body["latency_ms"] > 0
    health = httpx.get(api.url + "/health", timeout=5).json()
    assert health == {"status": "ok", "backend": "ort-microbatch", "restarts": {"worker": 0}}


@pytest.mark.parametrize(
    "body, headers, status, needle",
    [
        ({"text": "正文"}, None, 422, "task"),
        ({"task": "poem", "text": "正文"}, None, 422, "title"),
        ({"task": "title", "text": ""}, None, 422, "text"),
        ({"task": "title", "text": "   \n "}, None, 422, "non-space"),
        ({"task": "title", "text": "长" * (LIMIT_CHARS + 1)}, None, 422, str(LIMIT_CHARS)),
        ({"task": "title", "text": "正文", "extra": 1}, None, 422, "extra"),
        (b'{"task": "title", "text": "\\ud800"}', None, 422, "unicode"),
        (b'{"task": "title", "text": "\xff\xfe"}', None, 400, "UTF-8"),
        (b'{"task": "title", "text": ', None, 400, "JSON"),
        ({"task": "title", "text": "正文"}, {"content-type": "text/plain"}, 415, "application/json"),
        ({"task": "title", "text": "正文"}, {"content-type": "application/json; charset=latin-1"}, 415, "UTF-8"),
        ({"task": "title", "text": "x" * 70_000}, None, 413, "limit"),
    ],
    ids=[
        "missing-task",
        "unknown-task",
        "empty-text",
        "blank-text",
        "too-long",
        "unknown-field",
        "surrogate",
        "non-utf8",
        "bad-json",
        "wrong-content-type",
        "wrong-charset",
        "oversized-body",
    ],
)
def test_bad_requests_get_a_clear_4xx(api, body, headers, status, needle):
    r = post(api, body, headers)
    assert r.status_code == status, r.text
    err = r.json()
    assert set(err) == {"error", "message"}
    assert needle.lower() in err["message"].lower()


def test_chunked_oversized_upload_is_cut_off(api):
    def chunks():
        yield b'{"task": "title", "text": "'
        for _ in range(100):
            yield b"x" * 1024
        yield b'"}'

    r = httpx.post(api.url + "/v1/generate", content=chunks(), headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 413


def test_invalid_requests_never_reach_the_model(tmp_path_factory):
    """The micro-batcher counts the batches it runs: 4xx traffic must not add any, a valid request adds one.

    In-process (the same app and MicroBatcher as the server) so the test can read that count."""
    from fastapi.testclient import TestClient

    from labkit.serving.api import ApiSettings, create_app
    from labkit.serving.backends import MicroBatcher

    art = h.artifacts(tmp_path_factory.getbasetemp() / "serving")
    made = []

    def make():
        made.append(MicroBatcher(art["int8"], max_batch=4, max_delay_ms=1, threads=1, max_source_len=64))
        return made[0]

    with TestClient(create_app(make, ApiSettings(timeout_s=20, max_text_chars=LIMIT_CHARS))) as client:
        batcher = made[0]
        for body in (
            {"task": "nope", "text": "x"},
            {"task": "title", "text": ""},
            {"text": "正文"},
            {"task": "title", "text": "长" * (LIMIT_CHARS + 1)},
        ):
            assert client.post("/v1/generate", json=body).status_code == 422
        assert (
            client.post("/v1/generate", content=b"{", headers={"content-type": "application/json"}).status_code == 400
        )
        assert batcher.batches == []  # nothing reached the model
        assert client.post("/v1/generate", json={"task": "keywords", "text": "经济 增长"}).status_code == 200
        assert batcher.batches == [1]  # the valid request did, as one batch of one


def test_bench_serve_command_measures_a_running_server(api, tmp_path):
    from labkit.cli import main

    out = tmp_path / "bench.json"
    rc = main(
        [
            "bench",
            "serve",
            "--url",
            api.url,
            "--name",
            "api-ort",
            "--levels",
            "1,4",
            "--requests",
            "8",
            "--seconds",
            "30",
            "--rate",
            "8",
            "--open-seconds",
            "1",
            "--json",
            str(out),
        ]
    )
    rows = json.loads(out.read_text())
    assert rc == 0
    assert [(r["mode"], r["level"]) for r in rows] == [("closed", 1), ("closed", 4), ("open", 8.0)]
    assert all(r["errors"] == 0 and r["ok"] == r["requests"] and r["p50_ms"] <= r["p99_ms"] for r in rows)


def test_openapi_documents_the_contract(api):
    spec = httpx.get(api.url + "/openapi.json", timeout=5).json()
    op = spec["paths"]["/v1/generate"]["post"]
    assert {"200", "400", "413", "415", "422", "503", "504"} <= set(op["responses"])
    req = spec["components"]["schemas"]["GenerateRequest"]
    assert req["properties"]["task"]["enum"] == ["title", "summary", "keywords"]
    assert req["properties"]["text"]["maxLength"] == LIMIT_CHARS
    assert httpx.get(api.url + "/docs", timeout=5).status_code == 200


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_schemathesis_contract(api, mode):
    """Schemathesis-generated valid and invalid requests for every operation in the OpenAPI schema:
    no 5xx, only documented status codes, responses that match their schemas, invalid data rejected.

    (Driven through `as_strategy` rather than `@schema.parametrize`: schemathesis' lazy pytest
    fixture loader does not work with pytest 9.)
    """
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from schemathesis.generation import GenerationMode

    schema = schemathesis.openapi.from_url(api.url + "/openapi.json")
    ops = [r.ok() for r in schema.get_all_operations()]
    assert {(o.method.upper(), o.path) for o in ops} == {("GET", "/health"), ("POST", "/v1/generate")}
    gen_mode = GenerationMode.POSITIVE if mode == "positive" else GenerationMode.NEGATIVE
    for op in ops:
        if gen_mode is GenerationMode.NEGATIVE and op.method.upper() == "GET":
            continue  # /health takes no input to get wrong

        @given(case=op.as_strategy(generation_mode=gen_mode))
        @settings(
            max_examples=25, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
        )
        def run(case):
            case.call_and_validate(timeout=30)

        run()
