"""What the async API forwards to: Triton over HTTP, or an in-process ONNX Runtime micro-batcher.

Both expose `async generate(task, text) -> str`, `async ready() -> bool`, `async close()`
and raise `BackendUnavailable` when the model cannot be reached (the API answers 503).
"""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from labkit.serving.schema import MAX_NEW_TOKENS, model_input


class BackendUnavailable(RuntimeError):
    """The model server is down or not ready; retrying later may succeed."""


class BackendError(RuntimeError):
    """The model server answered with an error for this request."""


class TritonBackend:
    """Forward each request to Triton's HTTP endpoint (tritonclient's asyncio client)."""

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
            res = await self.client.infer(self.model_name, inputs,
                                          outputs=[self._http.InferRequestedOutput("output")])
        except InferenceServerException as exc:
            msg = str(exc)
            if str(exc.status() or "") == "503" or "not ready" in msg.lower() or "unavailable" in msg.lower():
                raise BackendUnavailable(f"Triton at {self.url} has no ready model {self.model_name!r}: {msg}") from exc
            raise BackendError(f"Triton error: {msg}") from exc
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise BackendUnavailable(
                f"Triton at {self.url} is unreachable ({type(exc).__name__}); start it with `labkit serve triton`"
            ) from exc
        return res.as_numpy("output").reshape(-1)[0].decode("utf-8")

    async def ready(self) -> bool:
        try:
            return bool(await self.client.is_model_ready(self.model_name))
        except Exception:  # down, refused, reset: all mean "not ready"
            return False

    async def close(self) -> None:
        await self.client.close()


@dataclass
class _Item:
    task: str
    text: str
    future: asyncio.Future


class MicroBatcher:
    """Group concurrent requests into one ONNX Runtime generation, in this process.

    The event loop never runs the model: batches go to one worker thread (ONNX Runtime
    releases the GIL), while the loop keeps accepting requests for the next batch.
    """

    name = "ort-microbatch"

    def __init__(self, onnx_dir: str | Path, max_batch: int = 32, max_delay_ms: float = 2.0, threads: int = 0,
                 max_source_len: int = 128):
        from labkit.serving.ort_generate import OrtGenerator, serving_threads

        self.gen = OrtGenerator(onnx_dir, threads=serving_threads(threads), max_source_len=max_source_len)
        self.max_batch = max_batch
        self.max_delay = max_delay_ms / 1e3
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ort")
        self._queue: asyncio.Queue[_Item] | None = None
        self._task: asyncio.Task | None = None
        self.batches: list[int] = []   # sizes of the batches run (for the notebook's histogram)

    def _ensure_started(self) -> None:
        if self._task is None:
            self._queue = asyncio.Queue()
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def generate(self, task: str, text: str) -> str:
        self._ensure_started()
        fut = asyncio.get_running_loop().create_future()
        await self._queue.put(_Item(task, text, fut))
        return await fut

    async def _collect(self) -> list[_Item]:
        loop = asyncio.get_running_loop()
        batch = [await self._queue.get()]
        deadline = loop.time() + self.max_delay
        while len(batch) < self.max_batch:
            left = deadline - loop.time()
            if left <= 0 and self._queue.empty():
                break
            try:
                batch.append(self._queue.get_nowait() if left <= 0 else await asyncio.wait_for(self._queue.get(), left))
            except (asyncio.QueueEmpty, asyncio.TimeoutError):
                break
        return [b for b in batch if not b.future.done()]  # requests that timed out are skipped

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._collect()
            if not batch:
                continue
            self.batches.append(len(batch))
            sources = [model_input(b.task, b.text) for b in batch]
            caps = [MAX_NEW_TOKENS[b.task] for b in batch]
            try:
                outs = await loop.run_in_executor(self._pool, self.gen.generate, sources, caps)
            except Exception as exc:  # one bad batch must not kill the loop; every waiter learns why
                for b in batch:
                    if not b.future.done():
                        b.future.set_exception(BackendError(f"ONNX Runtime failed: {exc}"))
                continue
            for b, o in zip(batch, outs):
                if not b.future.done():
                    b.future.set_result(o.strip())

    async def ready(self) -> bool:
        return True

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
