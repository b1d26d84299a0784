"""Notebook 08 (deployment): a bounded load test, what a dynamic batcher does, a question."""
from __future__ import annotations

import time

from labkit.exercises import call, fail, passed, quiz


def ex1(bounded_load) -> bool:
    """`bounded_load(send, max_requests, max_seconds)` -> latencies (s); stops at whichever bound comes first."""
    calls = {"n": 0}

    def fast():
        calls["n"] += 1
        time.sleep(0.001)

    got = call(bounded_load, fast, 20, 5.0)
    if not isinstance(got, list) or calls["n"] != 20 or len(got) != 20:
        fail(f"with a fast server it sent {calls['n']} requests and returned {type(got).__name__} of "
             f"{len(got) if isinstance(got, list) else '?'} latencies: stop after max_requests=20 and return one "
             "latency per request")
    if not all(isinstance(x, float) and 0.0005 < x < 1.0 for x in got):
        fail("each latency is the seconds one send() took: t0 = time.perf_counter(); send(); t1 - t0")
    calls["n"] = 0

    def slow():
        calls["n"] += 1
        time.sleep(0.05)

    t0 = time.perf_counter()
    got = call(bounded_load, slow, 10_000, 0.25)
    took = time.perf_counter() - t0
    if took > 0.6:
        fail(f"with a slow server it ran {took:.2f} s past max_seconds=0.25: check the clock before every request")
    if calls["n"] < 3:
        fail("it stopped too early: keep sending until max_seconds have passed")
    return passed(f"stopped at 20 requests (fast server) and after {took:.2f} s (slow server): a load test that "
                  "cannot run away, like `labkit bench serve`'s levels")


def ex2(answer) -> bool:
    """16 clients, max_batch 32, queue delay 10 ms: what does Triton's dynamic batcher do?"""
    return quiz(answer, "B", {
        "A": "The batcher never waits for a full batch: the queue delay bounds the wait, then it runs what it has.",
        "B": "Right: it gathers the requests that arrive within the queue delay (up to max_batch) and runs them as one "
             "call, so concurrency becomes batch size -- the 'batched' row of step 3.",
        "C": "Instances run in parallel, but the batcher's job is to group requests; one call per request is the "
             "baseline's behaviour.",
        "D": "Batching does not change the model's outputs per request (greedy decoding per row); quantization is a "
             "separate step with its own measured price.",
    })


def ex3(answer) -> bool:
    """Where did most of the speed-up come from on this machine?"""
    return quiz(answer, "C", {
        "A": "On the tiny model int8 barely beats fp32 for one request (step 3): its matrices are too small for int8 "
             "kernels to pay off.",
        "B": "Leaving PyTorch's generate for a lean ONNX Runtime loop helps one request, but by a small factor.",
        "C": "Right: one batched call over 16 requests multiplies throughput; a server can only batch if it accepts many "
             "requests at once (the async front) and groups them (the dynamic batcher).",
        "D": "The async front is what lets requests reach the batcher concurrently, but by itself it computes nothing "
             "faster.",
    })
