"""The supervisor and the batcher's worker supervision, on real processes and real asyncio tasks (fast, no Triton).

The server the supervisor keeps is Python's own `http.server` as a real subprocess; the
Triton kill test under load is in tests/test_serving_triton.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time

import httpx
import pytest

from labkit.serving.process import ServerProcess, free_port
from labkit.serving.supervisor import RestartPolicy, Supervisor

pytestmark = pytest.mark.timeout(120)


def test_policy_restarts_at_once_then_backs_off_and_forgets_old_failures():
    p = RestartPolicy(max_failures=3, window_s=60)
    seen = [p.failed(t) for t in (0, 1, 2)]
    assert seen == [1, 2, 3]
    assert [p.delay(n) for n in seen] == [0.0, 1.0, 2.0]
    assert not p.exhausted(3) and p.exhausted(p.failed(3))  # the 4th failure within 60 s: give up
    assert p.failed(200) == 1 and p.delay(1) == 0.0  # an hour later: a lone failure again
    assert RestartPolicy(max_delay_s=5).delay(10) == 5


def _http_server(port: int, tmp_path, argv=None) -> ServerProcess:
    argv = argv or [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)]
    return ServerProcess(argv, f"http://127.0.0.1:{port}/", timeout=30, name="http", log_path=tmp_path / "srv.log")


def _wait(cond, timeout: float) -> float:
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, "timed out"
        time.sleep(0.05)
    return time.monotonic() - t0


def test_a_killed_server_is_restarted_on_its_port_and_counted(tmp_path):
    port = free_port()
    with Supervisor(
        lambda: _http_server(port, tmp_path), "http", RestartPolicy(max_failures=3, window_s=60), poll_s=0.05
    ) as sup:
        first = sup.srv.proc.pid
        for n in (1, 2):
            os.kill(sup.srv.proc.pid, signal.SIGKILL)
            _wait(lambda: sup.restarts == n and sup.up, 20)
            assert httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 200  # same address
        assert sup.srv.proc.pid != first and sup.failures == 2
        assert "exited with code -9" in sup.status()["last_failure"]
        srv = sup.srv
    assert not srv.alive() and sup.state == "stopped"


def test_a_server_that_cannot_restart_makes_it_give_up_with_one_line(tmp_path):
    port = free_port()
    starts = []
    reasons = []

    def make():
        starts.append(time.monotonic())
        if len(starts) == 1:
            return _http_server(port, tmp_path)
        # the restarts fail the way a deleted model folder does: the command exits at once
        return _http_server(port, tmp_path, [sys.executable, "-c", "import sys; sys.exit('no model here')"])

    gave_up = threading.Event()
    sup = Supervisor(
        make,
        "http",
        RestartPolicy(max_failures=2, window_s=60),
        poll_s=0.05,
        on_give_up=lambda why: (reasons.append(why), gave_up.set()),
    )
    with sup:
        os.kill(sup.srv.proc.pid, signal.SIGKILL)
        assert gave_up.wait(30)
    assert sup.state == "gave_up" and sup.restarts == 2 and sup.failures == 3
    # restart 1 at once, restart 2 after 1 s: backoff, not a spin
    assert starts[2] - starts[1] >= 1.0
    assert len(reasons) == 1 and "\n" not in reasons[0]
    assert reasons[0].startswith("http failed 3 times within 60 s (more than --max-restarts 2)")
    assert "did not restart: http exited with code 1 before it was ready" in reasons[0]


def test_stop_during_a_restart_ends_it(tmp_path):
    """Stopping the API while Triton restarts must not wait for the restart to finish."""
    port = free_port()

    def slow_start():
        return _http_server(port, tmp_path, [sys.executable, "-c", "import time; time.sleep(60)"])

    made = []

    def make():
        made.append(1)
        return _http_server(port, tmp_path) if len(made) == 1 else slow_start()

    sup = Supervisor(make, "http", poll_s=0.05).start()
    os.kill(sup.srv.proc.pid, signal.SIGKILL)
    _wait(lambda: sup.state == "restarting" and len(made) == 2, 10)
    t0 = time.monotonic()
    sup.stop()
    assert time.monotonic() - t0 < 15 and not sup.srv.alive()


# ---- the batcher's worker ------------------------------------------------------------


class EchoGenerator:
    """OrtGenerator's interface, answering at once (the worker's supervision is under test, not the model)."""

    def __init__(self, *args, **kwargs):
        self.batches = []

    def generate(self, sources, caps):
        self.batches.append(list(sources))
        return [f" out:{s} " for s in sources]


@pytest.fixture
def echo(monkeypatch):
    import labkit.serving.ort_generate as og

    monkeypatch.setattr(og, "OrtGenerator", EchoGenerator)


def _kill_worker_once(batcher, times: int = 1):
    """Make the worker task itself raise (outside the model call) the next `times` batches."""
    real = batcher._target
    left = [times]

    def target(now):
        if left[0]:
            left[0] -= 1
            raise RuntimeError("worker bug")
        return real(now)

    batcher._target = target


def test_a_dead_worker_fails_its_requests_at_once_and_is_restarted(echo):
    from labkit.serving.backends import BackendError, MicroBatcher

    b = MicroBatcher("unused", max_batch=8, max_delay_ms=5, threads=1)

    async def go():
        await b.generate("title", "warm")
        _kill_worker_once(b)
        t0 = asyncio.get_running_loop().time()
        # without supervision this request waits forever (the API's timeout makes it a 504 after 10 s)
        with pytest.raises(BackendError, match="batching worker failed .RuntimeError: worker bug"):
            await asyncio.wait_for(b.generate("title", "dies"), 5)
        took = asyncio.get_running_loop().time() - t0
        after = await asyncio.wait_for(b.generate("title", "after"), 5)
        await b.close()
        return took, after

    took, after = asyncio.run(go())
    assert took < 0.5 and after.startswith("out:") and after.endswith("after")
    assert b.restarts == 1 and not b.gave_up


def test_a_worker_that_keeps_dying_gives_up_and_says_so(echo):
    from labkit.serving.backends import BackendUnavailable, MicroBatcher

    reasons = []
    b = MicroBatcher(
        "unused",
        max_batch=8,
        max_delay_ms=5,
        threads=1,
        policy=RestartPolicy(max_failures=1, window_s=60),
        on_give_up=reasons.append,
    )

    async def go():
        _kill_worker_once(b, times=5)
        for _ in range(2):
            with pytest.raises(Exception):
                await asyncio.wait_for(b.generate("title", "x"), 5)
        with pytest.raises(BackendUnavailable, match="died 2 times within 60 s"):
            await b.generate("title", "y")
        ready = await b.ready()
        await b.close()
        return ready

    assert asyncio.run(go()) is False
    assert b.restarts == 1 and len(reasons) == 1


def test_a_batch_with_missing_answers_fails_instead_of_hanging(echo):
    from labkit.serving.backends import BackendError, MicroBatcher

    b = MicroBatcher("unused", max_batch=8, max_delay_ms=5, threads=1)
    b.gen.generate = lambda sources, caps: ["only one"]

    async def go():
        res = await asyncio.wait_for(
            asyncio.gather(*(b.generate("title", f"t{i}") for i in range(3)), return_exceptions=True), 5
        )
        await b.close()
        return res

    res = asyncio.run(go())
    assert all(isinstance(e, BackendError) and "1 outputs for a batch of" in str(e) for e in res), res
    assert b.restarts == 0


def test_health_counts_worker_restarts(echo):
    from fastapi.testclient import TestClient

    from labkit.serving.api import create_app
    from labkit.serving.backends import MicroBatcher

    made = []

    def make():
        made.append(MicroBatcher("unused", max_batch=4, max_delay_ms=1, threads=1))
        return made[0]

    with TestClient(create_app(make)) as client:
        assert client.get("/health").json() == {"status": "ok", "backend": "ort-microbatch", "restarts": {"worker": 0}}
        _kill_worker_once(made[0])
        r = client.post("/v1/generate", json={"task": "title", "text": "北京今天发布新的交通规划。"})
        assert r.status_code == 502 and "restarted" in r.json()["message"]
        assert client.post("/v1/generate", json={"task": "title", "text": "再来一次。"}).status_code == 200
        assert client.get("/health").json()["restarts"] == {"worker": 1}


def test_triton_gets_two_different_ports_and_keeps_the_ones_given():
    """Its HTTP and gRPC ports are chosen by one call (`free_ports(2)`): two calls in a row could return one
    port twice (the first is free again as soon as its socket closes), and Triton would not start."""
    from labkit.serving.triton import start_triton

    def ports(srv) -> tuple[int, int]:
        return int(srv.argv[srv.argv.index("--port") + 1]), int(srv.argv[srv.argv.index("--grpc-port") + 1])

    for _ in range(50):  # never entered: the servers are not started
        http_port, grpc_port = ports(start_triton("no-model-needed"))
        assert http_port != grpc_port
    given = free_port()
    assert ports(start_triton("x", port=given))[0] == given != ports(start_triton("x", port=given))[1]
    assert ports(start_triton("x", port=given, grpc_port=given + 1)) == (given, given + 1)
