"""What the async API forwards to: Triton (batched in the API, or one request at a time), or an in-process
ONNX Runtime micro-batcher.

Both expose `async generate(task, text) -> str`, `async ready() -> bool`, `async close()`
and raise `BackendUnavailable` when the model cannot be reached (the API answers 503).
The batchers' worker task is supervised: if it dies, the requests it held fail at once
(502), it is restarted (counted in `restarts`, shown by `/health`), and after more than
`RestartPolicy.max_failures` deaths within its window the batcher gives up (503, and
`on_give_up` lets the API exit 1).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from labkit.serving.schema import MAX_NEW_TOKENS, model_input
from labkit.serving.supervisor import RestartPolicy

LOG = logging.getLogger("labkit.serving.backends")


class BackendUnavailable(RuntimeError):
    """The model server is down or not ready; retrying later may succeed."""


class BackendError(RuntimeError):
    """The model server answered with an error for this request."""


class _TritonModel:
    """What both Triton clients share: the model's name and a tritonclient asyncio client (`self.client`)."""

    model_name: str
    client: object

    async def ready(self) -> bool:
        try:
            return bool(await self.client.is_model_ready(self.model_name))
        except Exception:  # down, refused, reset: all mean "not ready"
            return False

    async def close(self) -> None:
        await self.client.close()


class TritonBackend(_TritonModel):
    """Forward each request to Triton's HTTP endpoint (tritonclient's asyncio client), one by one.

    The setting before `TritonBatcher` (`labkit serve api --no-front-batching`): Triton's dynamic
    batcher groups the requests, each paying its own HTTP round trip and trip through Triton."""

    name = "triton"

    def __init__(self, url: str, model_name: str = "labkit_t5"):
        import tritonclient.http.aio as httpclient

        self._http = httpclient
        self.url = url.removeprefix("http://").rstrip("/")
        self.model_name = model_name
        self.client = httpclient.InferenceServerClient(self.url, conn_limit=256, conn_timeout=30.0)

    async def generate(self, task: str, text: str) -> str:
        import aiohttp
        from tritonclient.utils import InferenceServerException

        inputs = []
        for name, value in (("task", task), ("text", text)):
            t = self._http.InferInput(name, [1, 1], "BYTES")
            t.set_data_from_numpy(np.array([[value.encode("utf-8")]], dtype=np.object_))
            inputs.append(t)
        try:
            res = await self.client.infer(self.model_name, inputs, outputs=[self._http.InferRequestedOutput("output")])
        except InferenceServerException as exc:
            raise _triton_error(exc, self.url, self.model_name) from exc
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise _unreachable(self.url, exc) from exc
        return res.as_numpy("output").reshape(-1)[0].decode("utf-8")


@dataclass
class _Item:
    task: str
    text: str
    future: asyncio.Future


class _Batching:
    """Group concurrent requests into batches, one batch in flight at a time (the event loop never blocks).

    Adaptive (the default): a batch waits only for as many requests as the previous batch had
    (`expect`), at most `max_delay`; so one client is served at once (a batch of one, no delay),
    while 16 clients, whose answers go out together and whose next requests come back within a
    few ms, are gathered into one batch again.  Anything already queued joins the batch, up to
    `max_batch` (so `expect` grows with the load), and after a pause longer than `max_delay` the
    next request goes alone.  `adaptive=False` is the old fixed policy: every batch waits up to
    `max_delay` for `max_batch` requests (kept for before/after measurements).

    The worker task is supervised (`_worker_exited`): whatever kills it, the requests it had
    taken fail at once instead of waiting for their timeout, and a new worker starts
    (after `policy`'s delay); past `policy`'s limit the batcher stops and says so.
    """

    def __init__(
        self,
        max_batch: int,
        max_delay_ms: float,
        adaptive: bool = True,
        policy: RestartPolicy | None = None,
        on_give_up=None,
    ):
        self.max_batch = max_batch
        self.max_delay = max_delay_ms / 1e3
        self.adaptive = adaptive
        self.policy = policy or RestartPolicy()
        self.on_give_up = on_give_up
        self._queue: asyncio.Queue[_Item] | None = None
        self._task: asyncio.Task | None = None
        self._taken: list[_Item] = []  # what the worker holds: failed at once if it dies
        self._closing = False
        self._expect = 1
        self._idle_since: float | None = None
        self.batches: list[int] = []  # sizes of the batches run (for the notebook's histogram)
        self.restarts = 0
        self.gave_up = ""

    def _ensure_started(self) -> None:
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._start_worker()

    def _start_worker(self) -> None:
        if self._closing or self.gave_up:
            return
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._task.add_done_callback(self._worker_exited)

    def _worker_exited(self, task: asyncio.Task) -> None:
        """The worker ended: on close, nothing to do; otherwise it died -- fail what it held, restart it."""
        if self._closing or task.cancelled():
            return
        exc = task.exception()
        why = f"{type(exc).__name__}: {exc}" if exc is not None else "returned"
        err = BackendError(f"the batching worker failed ({why}); it was restarted, retry the request")
        for item in self._taken:
            if not item.future.done():
                item.future.set_exception(err)
        self._taken = []
        loop = asyncio.get_running_loop()
        recent = self.policy.failed(loop.time())
        if self.policy.exhausted(recent):
            self.gave_up = (
                f"the batching worker died {recent} times within {self.policy.window_s:.0f} s "
                f"(more than --max-restarts {self.policy.max_failures}); last: {why}"
            )
            LOG.error("giving up: %s", self.gave_up)
            self._fail_queued(BackendUnavailable(self.gave_up))
            if self.on_give_up is not None:
                self.on_give_up(self.gave_up)
            return
        self.restarts += 1
        delay = self.policy.delay(recent)
        LOG.warning("batching worker died (%s); restart %d in %.0f s", why, self.restarts, delay)
        loop.call_later(delay, self._start_worker)

    def _fail_queued(self, err: Exception) -> None:
        while self._queue is not None and not self._queue.empty():
            item = self._queue.get_nowait()
            if not item.future.done():
                item.future.set_exception(err)

    async def generate(self, task: str, text: str) -> str:
        if self.gave_up:
            raise BackendUnavailable(self.gave_up)
        self._ensure_started()
        fut = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Item(task, text, fut))
        return await fut

    def _target(self, now: float) -> int:
        if not self.adaptive:
            return self.max_batch
        if self._idle_since is not None and now - self._idle_since > self.max_delay:
            self._expect = 1  # traffic paused: the next request does not wait for a crowd that left
        return min(self.max_batch, self._expect)

    async def _collect(self) -> list[_Item]:
        # [fix:front_batching]
        loop = asyncio.get_running_loop()
        batch = self._taken = [await self._queue.get()]
        now = loop.time()
        target = self._target(now)
        deadline = now + self.max_delay
        while len(batch) < self.max_batch:
            if not self._queue.empty():
                batch.append(self._queue.get_nowait())
                continue
            left = deadline - loop.time()
            if len(batch) >= target or left <= 0:
                break
            try:
                batch.append(await asyncio.wait_for(self._queue.get(), left))
            except asyncio.TimeoutError:
                break
        self._expect = len(batch)
        return [b for b in batch if not b.future.done()]  # requests that timed out are skipped
        # [/fix:front_batching]

    async def _run_batch(self, batch: list[_Item]) -> list[str]:
        raise NotImplementedError

    def _failure(self, exc: Exception) -> Exception:
        return exc

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._collect()
            if not batch:
                self._idle_since = loop.time()
                continue
            self.batches.append(len(batch))
            try:
                outs = await self._run_batch(batch)
                if len(outs) != len(batch):  # a waiter without an answer would hang until its timeout
                    raise BackendError(f"the model returned {len(outs)} outputs for a batch of {len(batch)}")
                outs = [o.strip() for o in outs]
            except Exception as exc:  # one bad batch must not kill the loop; every waiter learns why
                err = exc if isinstance(exc, BackendError) else self._failure(exc)
                for b in batch:
                    if not b.future.done():
                        b.future.set_exception(err)
                outs = ()
            self._idle_since = loop.time()
            for b, o in zip(batch, outs):
                if not b.future.done():
                    b.future.set_result(o)
            self._taken = []

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()


class MicroBatcher(_Batching):
    """Group concurrent requests into one ONNX Runtime generation, in this process.

    The event loop never runs the model: batches go to one worker thread (ONNX Runtime
    releases the GIL), while the loop keeps accepting requests for the next batch.
    """

    name = "ort-microbatch"

    def __init__(
        self,
        onnx_dir: str | Path,
        max_batch: int = 32,
        max_delay_ms: float = 2.0,
        threads: int = 0,
        max_source_len: int = 0,
        adaptive: bool = True,
        policy: RestartPolicy | None = None,
        on_give_up=None,
    ):
        from labkit.serving.ort_generate import OrtGenerator, serving_threads

        super().__init__(max_batch, max_delay_ms, adaptive, policy, on_give_up)
        self.gen = OrtGenerator(onnx_dir, threads=serving_threads(threads), max_source_len=max_source_len)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ort")

    async def _run_batch(self, batch: list[_Item]) -> list[str]:
        sources = [model_input(b.task, b.text) for b in batch]
        caps = [MAX_NEW_TOKENS[b.task] for b in batch]
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.gen.generate, sources, caps)

    def _failure(self, exc: Exception) -> Exception:
        return BackendError(f"ONNX Runtime failed: {exc}")

    async def ready(self) -> bool:
        return not self.gave_up

    async def close(self) -> None:
        await super().close()
        self._pool.shutdown(wait=False, cancel_futures=True)


class TritonBatcher(_TritonModel, _Batching):
    """Batch in the API, then send each batch to Triton as ONE inference request (gRPC or HTTP).

    Per request the API would otherwise pay a Triton round trip, and Triton a request through
    its core, the Python-backend stub and PyTriton's proxy; here those are paid per batch.
    Triton's own dynamic batcher still runs (for other clients) and should not wait
    (`--queue-delay-us 0`): the batch it gets is already formed.
    `url`: `grpc://host:port` (tritonclient.grpc.aio) or `[http://]host:port` (tritonclient.http.aio).
    """

    name = "triton"

    def __init__(
        self,
        url: str,
        model_name: str = "labkit_t5",
        max_batch: int = 32,
        max_delay_ms: float = 10.0,
        adaptive: bool = True,
        policy: RestartPolicy | None = None,
        on_give_up=None,
    ):
        super().__init__(max_batch, max_delay_ms, adaptive, policy, on_give_up)
        self.grpc = url.startswith("grpc://")
        self.url = url.removeprefix("grpc://").removeprefix("http://").rstrip("/")
        self.model_name = model_name
        if self.grpc:
            import tritonclient.grpc.aio as client

            self.client = client.InferenceServerClient(self.url)
        else:
            import tritonclient.http.aio as client

            self.client = client.InferenceServerClient(self.url, conn_limit=8, conn_timeout=30.0)
        self._lib = client
        self._limit: int | None = None

    async def _triton_max_batch(self) -> int:
        """The model's `max_batch_size` in Triton: a batch formed here is never larger (asked once)."""
        if self._limit is None:
            cfg = await self.client.get_model_config(self.model_name, **({"as_json": True} if self.grpc else {}))
            limit = int(cfg.get("config", cfg).get("max_batch_size", 0) or 1)
            self._limit = limit
            self.max_batch = min(self.max_batch, limit)
        return self._limit

    async def _run_batch(self, batch: list[_Item]) -> list[str]:
        from tritonclient.utils import InferenceServerException

        try:
            limit = await self._triton_max_batch()
        except InferenceServerException as exc:
            raise _triton_error(exc, self.url, self.model_name) from exc
        except Exception as exc:  # refused, reset, timeout
            raise _unreachable(self.url, exc) from exc
        out: list[str] = []
        for i in range(0, len(batch), limit):
            out += await self._infer(batch[i : i + limit])
        return out

    async def _infer(self, batch: list[_Item]) -> list[str]:
        import aiohttp
        from tritonclient.utils import InferenceServerException

        n = len(batch)
        inputs = []
        for name, values in (("task", [b.task for b in batch]), ("text", [b.text for b in batch])):
            t = self._lib.InferInput(name, [n, 1], "BYTES")
            t.set_data_from_numpy(np.array([v.encode("utf-8") for v in values], dtype=np.object_).reshape(n, 1))
            inputs.append(t)
        try:
            res = await self.client.infer(self.model_name, inputs, outputs=[self._lib.InferRequestedOutput("output")])
        except InferenceServerException as exc:
            raise _triton_error(exc, self.url, self.model_name) from exc
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise _unreachable(self.url, exc) from exc
        return [o.decode("utf-8") for o in res.as_numpy("output").reshape(-1)]

    async def ready(self) -> bool:
        return not self.gave_up and await _TritonModel.ready(self)

    async def close(self) -> None:
        await _Batching.close(self)  # stop forming batches first,
        await _TritonModel.close(self)  # then drop the connection


def _triton_error(exc, url: str, model_name: str) -> Exception:
    msg = str(exc)
    status = str(exc.status() or "")
    if status == "StatusCode.UNAVAILABLE" and "connect" in msg.lower():
        return _unreachable(url, exc)
    # no model loaded under that name right now: not ready, unloaded while PyTriton's model process died or restarts
    # (Triton answers NOT_FOUND "... has no available versions" then; measured killing the process under load) --
    # a retry after the restart succeeds, so 503, not the 502 of a request the model failed on
    gone = status in ("404", "StatusCode.NOT_FOUND") or "unknown model" in msg.lower()
    if (
        gone
        or status in ("503", "StatusCode.UNAVAILABLE")
        or "not ready" in msg.lower()
        or "unavailable" in msg.lower()
    ):
        return BackendUnavailable(f"Triton at {url} has no ready model {model_name!r}: {msg}")
    return BackendError(f"Triton error: {msg}")


def _unreachable(url: str, exc: Exception) -> BackendUnavailable:
    return BackendUnavailable(
        f"Triton at {url} is unreachable ({type(exc).__name__}); start it with `labkit serve triton`"
    )
