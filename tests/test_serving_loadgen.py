"""The load generator itself, against a slow aiohttp server in a thread (no server process, fast)."""

import asyncio
import threading

import pytest

from labkit.serving import loadgen
from labkit.serving.process import free_port

SERVICE_S = 0.1


@pytest.fixture
def slow_server():
    """Every request takes SERVICE_S (the client's in-flight cap does the queueing); yields its base URL."""
    from aiohttp import web

    async def handler(request):
        await request.json()
        await asyncio.sleep(SERVICE_S)
        return web.json_response({"output": "x"})

    port = free_port()
    loop = asyncio.new_event_loop()
    started = threading.Event()
    runner = None

    async def start():
        nonlocal runner
        app = web.Application()
        app.router.add_post("/v1/generate", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        started.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True)
    thread.start()
    assert started.wait(10)
    yield f"http://127.0.0.1:{port}"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def test_open_loop_latency_counts_queueing_from_the_scheduled_send_time(slow_server):
    """Coordinated omission: 20 req/s offered, 1 in flight, 0.1 s each -> a queue builds up.

    Request i is due at i*0.05 s and answered at (i+1)*0.1 s: its user waited (i+1)*0.1 - i*0.05 s
    (0.1 .. 0.55 s), although the server spent only 0.1 s on each.  Timing from when the request
    got a slot (the old clock) reports 0.1 s for all of them."""
    res = loadgen.run_sync(
        loadgen.open_loop(slow_server, [{"task": "title", "text": "x"}], rate=20, seconds=0.5, max_in_flight=1)
    )
    assert res.requests == res.ok == 10
    # the last request was scheduled at 0.45 s and answered at ~1.0 s: ~0.55 s, not the 0.1 s of service time
    assert res.p99_ms > 400, res
    assert res.p50_ms > 2 * SERVICE_S * 1e3, res


def test_closed_loop_latency_is_service_time(slow_server):
    res = loadgen.run_sync(
        loadgen.closed_loop(
            slow_server, [{"task": "title", "text": "x"}], concurrency=1, max_requests=3, max_seconds=10
        )
    )
    assert res.ok == 3 and SERVICE_S * 1e3 <= res.p50_ms < 3 * SERVICE_S * 1e3


def test_non_loopback_targets_are_refused():
    with pytest.raises(ValueError, match="loopback"):
        loadgen.check_loopback("http://10.0.0.1:8080")


def test_refused_connections_are_errors_never_successes():
    res = loadgen.run_sync(
        loadgen.closed_loop(
            f"http://127.0.0.1:{free_port()}",
            [{"task": "title", "text": "x"}],
            concurrency=2,
            max_requests=4,
            max_seconds=10,
        )
    )
    assert res.requests == res.errors == 4 and res.ok == 0 and res.qps == 0
