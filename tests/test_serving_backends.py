"""The API's failure paths and the micro-batcher's, in-process with stand-in models (fast, no server)."""
from __future__ import annotations

import asyncio
import threading

import pytest

from labkit.serving import backends
from labkit.serving.api import ApiSettings, create_app
from labkit.serving.backends import BackendError, BackendUnavailable


class FakeBackend:
    name = "fake"

    def __init__(self, behaviour):
        self.behaviour = behaviour
        self.calls = 0

    async def generate(self, task, text):
        self.calls += 1
        return await self.behaviour(task, text)

    async def ready(self):
        return True

    async def close(self):
        pass


def _client(behaviour, timeout_s=0.2):
    from fastapi.testclient import TestClient

    backend = FakeBackend(behaviour)
    return TestClient(create_app(lambda: backend, ApiSettings(timeout_s=timeout_s))), backend


def _post(client):
    return client.post("/v1/generate", json={"task": "title", "text": "北京今天发布新的交通规划。"})


def test_a_backend_error_is_a_502_with_its_reason():
    async def fails(task, text):
        raise BackendError("Triton error: model crashed on this input")

    client, backend = _client(fails)
    with client:
        r = _post(client)
    assert r.status_code == 502
    assert r.json() == {"error": "backend_error", "message": "Triton error: model crashed on this input"}
    assert backend.calls == 1


def test_a_slow_model_is_a_504_after_the_timeout():
    async def slow(task, text):
        await asyncio.sleep(5)

    client, _ = _client(slow, timeout_s=0.1)
    with client:
        r = _post(client)
    assert r.status_code == 504
    assert r.json()["error"] == "timeout" and "0.1s" in r.json()["message"]


def test_a_down_backend_is_a_503():
    async def down(task, text):
        raise BackendUnavailable("Triton at 127.0.0.1:8000 is unreachable")

    client, _ = _client(down)
    with client:
        r = _post(client)
    assert r.status_code == 503 and r.json()["error"] == "backend_unavailable"


# ---- MicroBatcher -----------------------------------------------------------

class FakeGenerator:
    """Stands in for OrtGenerator: records each batch; raises on a poisoned input; can be held."""

    def __init__(self, *args, **kwargs):
        self.batches: list[list[str]] = []
        self.release = threading.Event()
        self.release.set()

    def generate(self, sources, caps):
        self.release.wait(10)
        self.batches.append(list(sources))
        if any("POISON" in s for s in sources):
            raise RuntimeError("ORT crashed")
        return [f" out:{s} " for s in sources]


@pytest.fixture
def batcher(monkeypatch):
    import labkit.serving.ort_generate as og

    monkeypatch.setattr(og, "OrtGenerator", FakeGenerator)
    b = backends.MicroBatcher("unused", max_batch=8, max_delay_ms=20, threads=1)
    yield b


def test_concurrent_requests_share_batches(batcher):
    async def go():
        outs = await asyncio.gather(*(batcher.generate("title", f"t{i}") for i in range(6)))
        await batcher.close()
        return outs

    outs = asyncio.run(go())
    assert len(outs) == 6 and all(o.startswith("out:") for o in outs)  # stripped
    assert sum(batcher.batches) == 6 and len(batcher.batches) < 6


def test_a_failing_batch_fails_its_waiters_and_the_loop_keeps_serving(batcher):
    async def go():
        bad = await asyncio.gather(batcher.generate("title", "POISON"), batcher.generate("title", "fine"),
                                   return_exceptions=True)
        good = await batcher.generate("title", "after")
        await batcher.close()
        return bad, good

    bad, good = asyncio.run(go())
    assert all(isinstance(e, BackendError) and "ONNX Runtime failed: ORT crashed" in str(e) for e in bad)
    assert good.startswith("out:") and "after" in good


def test_timed_out_requests_are_skipped_not_run(batcher):
    gen = batcher.gen

    async def go():
        gen.release.clear()  # the first batch is stuck in the model
        first = asyncio.ensure_future(batcher.generate("title", "first"))
        await asyncio.sleep(0.1)
        with pytest.raises(asyncio.TimeoutError):  # this one waits behind it and times out (the API's 504)
            await asyncio.wait_for(batcher.generate("title", "gave-up"), 0.1)
        late = asyncio.ensure_future(batcher.generate("title", "late"))
        await asyncio.sleep(0.05)
        gen.release.set()
        out = await first, await late
        await batcher.close()
        return out

    first, late = asyncio.run(go())
    assert "first" in first and "late" in late
    ran = [s for batch in gen.batches for s in batch]
    assert not any("gave-up" in s for s in ran), gen.batches  # the model never spent time on it
    assert sum(batcher.batches) == 2
