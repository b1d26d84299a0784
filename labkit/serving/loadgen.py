"""The async load generator behind `labkit bench serve`: bounded in requests and time, loopback only.

Closed loop: `concurrency` workers each send a request, wait for the answer, send the
next -- throughput is what the server sustains at that many requests in flight.
Open loop: requests start at a fixed rate whether or not earlier ones finished -- what
users see when traffic does not slow down for a slow server (queues grow).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import time
from dataclasses import asdict, dataclass
from typing import Sequence
from urllib.parse import urlsplit

import numpy as np

from labkit.serving.schema import GENERATE_PATH

LEVELS = (1, 4, 16, 64)


@dataclass
class LoadResult:
    server: str
    mode: str  # "closed" or "open"
    level: float  # concurrency (closed) or offered requests/s (open)
    requests: int
    ok: int
    errors: int  # non-2xx answers and transport errors
    server_errors: int  # 5xx answers
    seconds: float
    qps: float  # successful requests per second
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float

    def to_dict(self) -> dict:
        return asdict(self)


def check_loopback(url: str) -> None:
    """Refuse anything but 127.0.0.1 / ::1 / localhost: this tool must never load someone else's server."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise ValueError(f"labkit bench serve only targets loopback servers; {url!r} is not on 127.0.0.1")


def _summarise(server: str, mode: str, level: float, lat: list[float], codes: list[int], seconds: float) -> LoadResult:
    ok_lat = np.array([l for l, c in zip(lat, codes) if 200 <= c < 300]) * 1e3
    ok = len(ok_lat)
    pct = (lambda q: float(np.percentile(ok_lat, q))) if ok else (lambda q: float("nan"))
    return LoadResult(
        server,
        mode,
        level,
        len(codes),
        ok,
        len(codes) - ok,
        sum(500 <= c < 600 for c in codes),
        seconds,
        ok / seconds if seconds > 0 else 0.0,
        pct(50),
        pct(95),
        pct(99),
        float(ok_lat.mean()) if ok else float("nan"),
    )


JSON_HEADERS = {"Content-Type": "application/json"}


async def _one(client, url: str, payload: dict, lat: list[float], codes: list[int], t0: float | None = None) -> None:
    """Send one request; its latency runs from `t0` (its scheduled send time) or from now."""
    import aiohttp

    t0 = time.perf_counter() if t0 is None else t0
    try:
        async with client.post(
            url, data=json.dumps(payload, ensure_ascii=False).encode("utf-8"), headers=JSON_HEADERS
        ) as r:
            await r.read()  # the whole answer arrives before the clock stops
            code = r.status
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
        code = 0  # transport error: counted as an error, never as a success
    lat.append(time.perf_counter() - t0)
    codes.append(code)


def _client(concurrency: int, timeout: float):
    """aiohttp, not httpx: the client shares the server's cores here, and per request httpx spent
    ~1.5 ms of CPU against aiohttp's ~0.16 ms (docs/decisions.md §17) -- time the servers lost."""
    import aiohttp

    conn = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    return aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=timeout))


async def closed_loop(
    base_url: str,
    payloads: Sequence[dict],
    concurrency: int,
    max_requests: int,
    max_seconds: float,
    server: str = "",
    timeout: float = 120.0,
    warmup: int = 0,
) -> LoadResult:
    """`concurrency` workers loop until `max_requests` were sent or `max_seconds` passed."""
    check_loopback(base_url)
    url = base_url.rstrip("/") + GENERATE_PATH
    lat: list[float] = []
    codes: list[int] = []
    async with _client(concurrency, timeout) as client:
        for i in range(warmup):
            await _one(client, url, payloads[i % len(payloads)], [], [])
        sent = 0
        t0 = time.perf_counter()
        deadline = t0 + max_seconds

        async def worker() -> None:
            nonlocal sent
            while sent < max_requests and time.perf_counter() < deadline:
                i = sent
                sent += 1
                await _one(client, url, payloads[i % len(payloads)], lat, codes)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - t0
    return _summarise(server, "closed", concurrency, lat, codes, seconds)


async def open_loop(
    base_url: str,
    payloads: Sequence[dict],
    rate: float,
    seconds: float,
    server: str = "",
    timeout: float = 120.0,
    max_in_flight: int = 256,
) -> LoadResult:
    """Start `rate` requests per second for `seconds`; in-flight requests are capped (a bounded client).

    Each latency runs from the request's scheduled send time, so time spent waiting for a free
    slot (queueing behind a slow server) is counted -- no coordinated omission."""
    check_loopback(base_url)
    url = base_url.rstrip("/") + GENERATE_PATH
    lat: list[float] = []
    codes: list[int] = []
    n = max(1, int(rate * seconds))
    async with _client(max_in_flight, timeout) as client:
        sem = asyncio.Semaphore(max_in_flight)
        t0 = time.perf_counter()
        tasks = []

        async def fire(i: int) -> None:
            due = t0 + i / rate  # the user's clock starts now, not when a slot frees up (coordinated omission)
            async with sem:
                await _one(client, url, payloads[i % len(payloads)], lat, codes, t0=due)

        for i in range(n):
            delay = t0 + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(fire(i)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - t0
    return _summarise(server, "open", rate, lat, codes, elapsed)


def run_sync(coro):
    """Run a coroutine to completion from sync code, also inside Jupyter (whose loop is already running)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:  # a fresh loop in a helper thread
        return pool.submit(asyncio.run, coro).result()


def sweep(
    base_url: str,
    payloads: Sequence[dict],
    levels: Sequence[int] = LEVELS,
    requests_per_level: int = 200,
    seconds_per_level: float = 20.0,
    server: str = "",
    warmup: int = 2,
) -> list[LoadResult]:
    """Closed-loop runs at each concurrency level (each bounded by requests and time)."""
    out = []
    for c in levels:
        n = max(requests_per_level, 2 * c)  # every worker gets at least two requests
        out.append(run_sync(closed_loop(base_url, payloads, c, n, seconds_per_level, server, warmup=warmup)))
    return out


def payloads_from_texts(texts: Sequence[str], tasks: Sequence[str] = ("title", "summary", "keywords")) -> list[dict]:
    """Request bodies cycling over tasks and texts."""
    return [{"task": tasks[i % len(tasks)], "text": t} for i, t in enumerate(texts)]
