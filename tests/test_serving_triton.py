"""The full stack as real processes: Triton (PyTriton, ONNX int8) behind the async API, and the baseline.

One Triton start serves the whole module: the API is started first with Triton absent
(503 with a message), then Triton comes up (the API recovers without a restart), a bounded
concurrent load runs with zero 5xx, and Triton is stopped again (503 again).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

import httpx
import pytest

import serving_helpers as h
from labkit.procs import free_ports
from labkit.serving.loadgen import check_loopback, closed_loop, open_loop, payloads_from_texts
from labkit.serving.process import ServerProcess, free_port, labkit_argv
from labkit.serving.triton import start_triton

from labkit.serving.availability import triton_missing

# Triton is an extra with wheels for Linux glibc >= 2.35 only; elsewhere 08 and the chain use the ORT backend
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(triton_missing() is not None, reason=triton_missing() or ""),
]


@pytest.fixture(scope="module")
def art(tmp_path_factory):
    return h.artifacts(tmp_path_factory.getbasetemp() / "serving")


def _generate(url: str, task: str = "summary", text: str = "上海今天举行国际进口博览会。") -> httpx.Response:
    return httpx.post(url + "/v1/generate", json={"task": task, "text": text}, timeout=30)


def test_api_reports_triton_down_then_recovers_and_serves_concurrent_load(art, tmp_path):
    triton_port, api_port = free_ports(2)
    argv = labkit_argv(
        "serve", "api", "--triton-url", f"127.0.0.1:{triton_port}", "--port", str(api_port), "--timeout", "20"
    )
    with ServerProcess(
        argv, f"http://127.0.0.1:{api_port}/openapi.json", name="api", log_path=tmp_path / "api.log"
    ) as api:
        # 1. Triton is not running: a clear 503, and /health says so
        r = _generate(api.url)
        assert r.status_code == 503, r.text
        assert r.json()["error"] == "backend_unavailable" and "labkit serve triton" in r.json()["message"]
        assert httpx.get(api.url + "/health", timeout=5).status_code == 503

        triton = start_triton(
            art["int8"],
            max_batch=16,
            queue_delay_us=3000,
            threads=1,
            max_source_len=64,
            port=triton_port,
            log_path=tmp_path / "triton.log",
        )
        with triton:
            # 2. recovery without restarting the API
            assert httpx.get(api.url + "/health", timeout=5).json() == {
                "status": "ok",
                "backend": "triton",
                "restarts": {"worker": 0},
            }
            r = _generate(api.url)
            assert r.status_code == 200, r.text
            assert r.json()["backend"] == "triton"
            # 3. bounded concurrent load: every request answered, no 5xx
            payloads = payloads_from_texts(h.texts(16))
            res = asyncio.run(
                closed_loop(api.url, payloads, concurrency=16, max_requests=64, max_seconds=60, server="api")
            )
            assert res.requests == 64 and res.ok == 64 and res.server_errors == 0, res
            ores = asyncio.run(open_loop(api.url, payloads, rate=20, seconds=1.5, server="api"))
            assert ores.requests == 30 and ores.errors == 0, ores
            # identical requests give identical answers whatever they were batched with
            outs = {_generate(api.url, "title", payloads[0]["text"]).json()["output"] for _ in range(3)}
            assert len(outs) == 1
            triton_pgid = os.getpgid(triton.proc.pid)
        # 4. Triton gone again (and its whole process group with it): 503, not a hang or a 500
        with pytest.raises(ProcessLookupError):
            os.killpg(triton_pgid, 0)
        r = _generate(api.url)
        assert r.status_code == 503, r.text


def test_baseline_pipeline_server_answers_and_validates(art, tmp_path):
    port = free_port()
    argv = labkit_argv(
        "serve",
        "baseline",
        "--model",
        str(art["model"]),
        "--port",
        str(port),
        "--threads",
        "1",
        "--max-source-len",
        "64",
    )
    with ServerProcess(argv, f"http://127.0.0.1:{port}/health", name="baseline", log_path=tmp_path / "b.log") as srv:
        r = _generate(srv.url, "keywords")
        assert r.status_code == 200, r.text
        assert r.json()["backend"] == "pipeline"
        assert _generate(srv.url, "poem").status_code == 422
        pid = srv.proc.pid
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def _triton_pids() -> set[int]:
    import psutil

    out = set()
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "tritonserver" in cmd or "serve triton" in cmd:
            out.add(p.info["pid"])
    return out


def test_api_started_triton_dies_with_the_api_even_on_sigkill(art, tmp_path):
    import signal
    import time

    before = _triton_pids()
    api_port = free_port()
    argv = labkit_argv(
        "serve",
        "api",
        "--start-triton",
        "--onnx",
        str(art["int8"]),
        "--threads",
        "1",
        "--max-source-len",
        "64",
        "--port",
        str(api_port),
    )
    api = ServerProcess(
        argv, f"http://127.0.0.1:{api_port}/health", timeout=180, name="api", log_path=tmp_path / "api.log"
    )
    with api:
        assert _generate(api.url, "title").status_code == 200
        started = _triton_pids() - before
        assert started, "the api did not start a Triton of its own"
        os.kill(api.proc.pid, signal.SIGKILL)  # the leader only: no chance to clean up
        deadline = time.monotonic() + 30
        while _triton_pids() - before and time.monotonic() < deadline:
            time.sleep(0.5)
        left = _triton_pids() - before
        for pid in left:  # do not let a failure here leave servers running for the next tests
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert not left, f"Triton outlived its SIGKILLed api: {left}"


def test_process_helper_reports_a_server_that_dies_at_startup(tmp_path):
    argv = labkit_argv("serve", "triton", "--onnx", str(tmp_path / "missing"), "--port", str(free_port()))
    srv = ServerProcess(argv, "http://127.0.0.1:1/never", timeout=60, name="broken", log_path=tmp_path / "x.log")
    with pytest.raises(RuntimeError, match="exited with code"):
        srv.start()
    assert not srv.alive()


def test_load_generator_refuses_non_loopback_targets():
    check_loopback("http://127.0.0.1:8080")
    check_loopback("http://localhost:1")
    for url in ("http://10.0.0.1:8080", "http://example.com", "http://0.0.0.0:80"):
        with pytest.raises(ValueError, match="loopback"):
            check_loopback(url)


# ---- a Triton that dies is restarted (labkit.serving.supervisor) -----------------------------


def _victim(api_pid: int, which: str) -> int:
    """The Triton Inference Server binary, or PyTriton's leader (the process the model runs in), under the api."""
    import psutil

    for p in psutil.Process(api_pid).children(recursive=True):
        try:
            if which == "tritonserver" and p.name() == "tritonserver":
                return p.pid
            if which == "leader" and p.ppid() == api_pid and "triton" in p.cmdline():
                return p.pid
        except psutil.NoSuchProcess:
            continue
    raise AssertionError(f"no {which} process under the api {api_pid}")


unexpected: list[str] = []  # the answers of the last kill that were neither 200 nor 503, for the failure message


async def _load_across_a_kill(
    url: str, victim: int, clients: int = 4, before_s: float = 2.0, after_s: float = 2.0, give_up_s: float = 45.0
) -> tuple[float, float, list[tuple]]:
    """`clients` closed-loop clients; SIGKILL `victim` after `before_s`; run until `after_s` past the first
    success after the kill.  Returns (kill time, recovery seconds, [(sent, answered, status or error)])."""
    loop = asyncio.get_running_loop()
    rows: list[tuple] = []
    stop = asyncio.Event()
    texts = h.texts(8)
    unexpected.clear()

    async def client(i: int):
        async with httpx.AsyncClient(timeout=30) as http:
            k = i
            while not stop.is_set():
                t0 = loop.time()
                try:
                    r = await http.post(url + "/v1/generate", json={"task": "title", "text": texts[k % len(texts)]})
                    rows.append((t0, loop.time(), r.status_code))
                    if r.status_code not in (200, 503):
                        unexpected.append(f"{r.status_code} {r.text[:300]}")
                    if r.status_code != 200:
                        await asyncio.sleep(0.05)  # a client that is told 503 waits a little, as it should
                except httpx.HTTPError as exc:  # a hung or dropped request: what must never happen
                    rows.append((t0, loop.time(), type(exc).__name__))
                k += clients

    tasks = [asyncio.ensure_future(client(i)) for i in range(clients)]
    await asyncio.sleep(before_s)
    t_kill = loop.time()
    os.kill(victim, signal.SIGKILL)
    recovered = None
    while recovered is None and loop.time() - t_kill < give_up_s:
        await asyncio.sleep(0.1)
        ok_after = [end for sent, end, st in rows if st == 200 and sent > t_kill]
        recovered = min(ok_after) - t_kill if ok_after else None
    await asyncio.sleep(after_s if recovered is not None else 0)
    stop.set()
    await asyncio.gather(*tasks)
    return t_kill, recovered, rows


def test_api_restarts_the_triton_it_started_when_it_dies_under_load(art, tmp_path):
    """Kill Triton twice under 4 concurrent clients -- the tritonserver binary, then PyTriton's leader process:
    each time /health and requests come back within 30 s, every request is answered (200, or 503 within a
    second while Triton is down; never a hang, a 504 or a dropped connection), and /health counts the restarts."""
    api_port = free_port()
    argv = labkit_argv(
        "serve",
        "api",
        "--start-triton",
        "--onnx",
        str(art["int8"]),
        "--threads",
        "1",
        "--max-source-len",
        "64",
        "--port",
        str(api_port),
        "--timeout",
        "10",
    )
    api = ServerProcess(
        argv, f"http://127.0.0.1:{api_port}/health", timeout=180, name="api", log_path=tmp_path / "api.log"
    )
    with api:
        for n, which in enumerate(("tritonserver", "leader"), 1):
            t_kill, recovered, rows = asyncio.run(_load_across_a_kill(api.url, _victim(api.proc.pid, which)))
            down = [end - sent for sent, end, st in rows if st == 503]
            print(
                f"killed {which}: recovered after {recovered and round(recovered, 1)} s; {len(rows)} requests, {len(down)} answered 503 "
                f"(slowest {max(down, default=0) * 1e3:.0f} ms), slowest of all {max(e - s for s, e, _ in rows):.2f} s"
            )
            assert recovered is not None and recovered < 30, (which, recovered, api.log_tail())
            statuses = {st for _, _, st in rows}
            assert statuses <= {200, 503}, (which, statuses, unexpected[:3])  # no 504, 502, dropped or hung request
            assert down, "the kill was not seen: no 503 while Triton was down"
            assert max(down) < 1.0, (which, sorted(down)[-5:])
            assert max(end - sent for sent, end, _ in rows) < 10, which
            assert any(st == 200 and sent < t_kill for sent, _, st in rows)
            health = httpx.get(api.url + "/health", timeout=5)
            assert health.status_code == 200 and health.json()["restarts"] == {"worker": 0, "triton": n}, health.text
        log = api.log_path.read_text(errors="replace")
        assert log.count("triton is back after") == 2 and "restart 2 in 0 s" not in log  # 2nd death: 1 s backoff


def test_api_gives_up_after_max_restarts_with_exit_1_and_one_line(art, tmp_path):
    """Triton dies and cannot come back (its model folder is gone): one restart allowed, then the API exits 1."""
    import shutil
    import time

    onnx = tmp_path / "onnx"
    shutil.copytree(art["int8"], onnx)
    api_port = free_port()
    argv = labkit_argv(
        "serve",
        "api",
        "--start-triton",
        "--onnx",
        str(onnx),
        "--threads",
        "1",
        "--max-source-len",
        "64",
        "--port",
        str(api_port),
        "--max-restarts",
        "1",
        "--restart-window",
        "60",
    )
    api = ServerProcess(
        argv, f"http://127.0.0.1:{api_port}/health", timeout=180, name="api", log_path=tmp_path / "api.log"
    )
    with api:
        shutil.rmtree(onnx)
        os.kill(_victim(api.proc.pid, "tritonserver"), signal.SIGKILL)
        deadline = time.monotonic() + 60
        while api.alive() and time.monotonic() < deadline:
            try:  # until it exits, the API answers: 503
                assert _generate(api.url, "title").status_code == 503
            except httpx.ConnectError:
                break
            time.sleep(0.2)
        code = api.proc.wait(timeout=5)
    lines = [ln for ln in api.log_path.read_text(errors="replace").splitlines() if ln.startswith("labkit serve api:")]
    assert code == 1, api.log_tail()
    assert len(lines) == 1, api.log_tail()
    assert lines[0].startswith(
        "labkit serve api: triton failed 2 times within 60 s (more than --max-restarts 1); "
        "last: it did not restart: triton exited with code 2 before it was ready"
    ), lines[0]
