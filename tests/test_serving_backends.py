"""The API's failure paths and the micro-batcher's, in-process with stand-in models (fast, no server)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from labkit.serving import backends
from labkit.serving.process import free_port
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
        bad = await asyncio.gather(
            batcher.generate("title", "POISON"), batcher.generate("title", "fine"), return_exceptions=True
        )
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


# ---- adaptive batching --------------------------------------------------------


@pytest.fixture
def slow_window_batcher(monkeypatch):
    """A batcher whose fixed policy would hold every batch for 300 ms."""
    import labkit.serving.ort_generate as og

    monkeypatch.setattr(og, "OrtGenerator", FakeGenerator)
    return backends.MicroBatcher("unused", max_batch=8, max_delay_ms=300, threads=1)


def test_an_idle_batcher_dispatches_a_lone_request_at_once(slow_window_batcher):
    b = slow_window_batcher

    async def go():
        loop = asyncio.get_running_loop()
        took = []
        for i in range(3):  # one client: each request alone, none waits for the 300 ms window
            t0 = loop.time()
            await b.generate("title", f"t{i}")
            took.append(loop.time() - t0)
        await b.close()
        return took

    took = asyncio.run(go())
    assert max(took) < 0.15, took
    assert b.batches == [1, 1, 1]


def test_a_crowd_is_gathered_again_and_a_pause_resets_the_wait(slow_window_batcher):
    b = slow_window_batcher

    async def staggered(n, gap):
        async def one(i):
            await asyncio.sleep(i * gap)
            return await b.generate("title", f"t{i}")

        return await asyncio.gather(*(one(i) for i in range(n)))

    async def go():
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(b.generate("title", f"c{i}") for i in range(6)))  # a batch of 6 sets the expectation
        t0 = loop.time()
        await staggered(6, 0.01)  # the next 6 arrive 10 ms apart: gathered into one batch, not 6
        crowd = loop.time() - t0
        await asyncio.sleep(0.4)  # a pause longer than the window
        t0 = loop.time()
        await b.generate("title", "alone")
        alone = loop.time() - t0
        await b.close()
        return crowd, alone

    crowd, alone = asyncio.run(go())
    assert b.batches[:2] == [6, 6], b.batches
    assert b.batches[-1] == 1 and alone < 0.15, (b.batches, alone)
    assert crowd < 0.3


def test_the_fixed_policy_still_waits_for_the_window(monkeypatch):
    import labkit.serving.ort_generate as og

    monkeypatch.setattr(og, "OrtGenerator", FakeGenerator)
    b = backends.MicroBatcher("unused", max_batch=8, max_delay_ms=150, threads=1, adaptive=False)

    async def go():
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await b.generate("title", "alone")
        await b.close()
        return loop.time() - t0

    assert asyncio.run(go()) >= 0.14


def test_triton_batches_never_exceed_the_models_max_batch_size():
    import numpy as np

    class FakeTriton:
        def __init__(self):
            self.sizes = []

        async def get_model_config(self, name, as_json=False):
            return {"config": {"max_batch_size": 2}}

        async def infer(self, name, inputs, outputs=None):
            n = inputs[0].shape()[0]
            self.sizes.append(n)
            outs = np.array([f"out{i}".encode() for i in range(n)], dtype=np.object_).reshape(n, 1)
            return type("R", (), {"as_numpy": lambda self, k: outs})()

        async def close(self):
            pass

    fake = FakeTriton()

    async def go():
        b = backends.TritonBatcher(
            "grpc://127.0.0.1:1", max_batch=32, max_delay_ms=50
        )  # made in the loop, as the API does
        await b.client.close()
        b.client = fake
        outs = await asyncio.gather(*(b.generate("title", f"t{i}") for i in range(5)))
        await b.close()
        return outs, b.max_batch

    outs, max_batch = asyncio.run(go())
    assert outs == ["out0", "out1", "out0", "out1", "out0"]
    assert fake.sizes == [2, 2, 1] and max_batch == 2


# ---- Triton down or refusing: the errors the API turns into 503 / 502 ---------------


@pytest.mark.parametrize(
    "status, msg, kind",
    [
        ("503", "Request for unknown model: 'labkit_t5' is not ready", BackendUnavailable),  # HTTP
        ("StatusCode.UNAVAILABLE", "failed to connect to all addresses", BackendUnavailable),  # gRPC, down
        # PyTriton's model process died (or restarts): Triton has unloaded the model -- measured under load
        (
            "StatusCode.NOT_FOUND",
            "Request for unknown model: 'labkit_t5' has no available versions",
            BackendUnavailable,
        ),
        ("404", "Request for unknown model: 'labkit_t5' is not found", BackendUnavailable),
        ("400", "unknown task(s) ['poem']: choose one of ('title', 'summary', 'keywords')", BackendError),
        ("StatusCode.INTERNAL", "ONNX Runtime failed", BackendError),
    ],
)
def test_triton_errors_map_to_503_or_502(status, msg, kind):
    from tritonclient.utils import InferenceServerException

    err = backends._triton_error(InferenceServerException(msg, status=status), "127.0.0.1:1", "labkit_t5")
    assert type(err) is kind and (msg in str(err) or "unreachable" in str(err))


@pytest.mark.parametrize(
    "make",
    [
        lambda port: backends.TritonBackend(f"127.0.0.1:{port}"),
        lambda port: backends.TritonBatcher(f"127.0.0.1:{port}"),
        lambda port: backends.TritonBatcher(f"grpc://127.0.0.1:{port}"),
    ],
    ids=["per-request http", "batched http", "batched grpc"],
)
def test_a_triton_that_is_down_is_not_ready_and_unavailable(make):
    async def go():
        backend = make(free_port())
        try:
            assert await backend.ready() is False
            with pytest.raises(BackendUnavailable, match="unreachable|no ready model"):
                await asyncio.wait_for(backend.generate("title", "北京今日发布新闻。"), 20)
        finally:
            await backend.close()

    asyncio.run(go())
