"""The load generator itself, against an in-memory transport (no server process, fast)."""
import asyncio

import httpx
import pytest

from labkit.serving import loadgen

SERVICE_S = 0.1


@pytest.fixture
def slow_server(monkeypatch):
    """Every request takes SERVICE_S; one at a time (the in-flight cap does the queueing)."""

    async def handler(request):
        await asyncio.sleep(SERVICE_S)
        return httpx.Response(200, json={"output": "x"})

    monkeypatch.setattr(loadgen, "_client", lambda n, timeout: httpx.AsyncClient(transport=httpx.MockTransport(handler)))


def test_open_loop_latency_counts_queueing_from_the_scheduled_send_time(slow_server):
    """Coordinated omission: 20 req/s offered, 1 in flight, 0.1 s each -> a queue builds up.

    Request i is due at i*0.05 s and answered at (i+1)*0.1 s: its user waited (i+1)*0.1 - i*0.05 s
    (0.1 .. 0.55 s), although the server spent only 0.1 s on each.  Timing from when the request
    got a slot (the old clock) reports 0.1 s for all of them."""
    res = loadgen.run_sync(loadgen.open_loop("http://127.0.0.1:9", [{"task": "title", "text": "x"}], rate=20,
                                             seconds=0.5, max_in_flight=1))
    assert res.requests == res.ok == 10
    # the last request was scheduled at 0.45 s and answered at ~1.0 s: ~0.55 s, not the 0.1 s of service time
    assert res.p99_ms > 400, res
    assert res.p50_ms > 2 * SERVICE_S * 1e3, res


def test_closed_loop_latency_is_service_time(slow_server):
    res = loadgen.run_sync(loadgen.closed_loop("http://127.0.0.1:9", [{"task": "title", "text": "x"}], concurrency=1,
                                               max_requests=3, max_seconds=10))
    assert res.ok == 3 and SERVICE_S * 1e3 <= res.p50_ms < 3 * SERVICE_S * 1e3


def test_non_loopback_targets_are_refused():
    with pytest.raises(ValueError, match="loopback"):
        loadgen.check_loopback("http://10.0.0.1:8080")
