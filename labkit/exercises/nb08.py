"""Notebook 08 (deployment): a bounded load test, what a dynamic batcher does, a question."""

from __future__ import annotations

import time

from labkit.exercises import Choice, Quiz, answered, call, fail, passed
from labkit.i18n import N_, _


def ex1(bounded_load) -> bool:
    """`bounded_load(send, max_requests, max_seconds)` -> latencies (s); stops at whichever bound comes first."""
    calls = {"n": 0}
    runaway = N_("it sent a 21st request with max_requests=20: stop after max_requests, whichever bound comes first")

    def fast():
        calls["n"] += 1
        if calls["n"] > 20:
            fail(runaway)
        time.sleep(0.001)

    def slow():
        calls["n"] += 1
        if time.perf_counter() - t0 > 0.6:  # a load test that does not stop: end the check, not the kernel
            fail(
                _(
                    "with a slow server it was still sending after {elapsed:.2f} s with "
                    "max_seconds=0.25: checking the clock once, before the loop, does not stop it -- check the elapsed "
                    "time before every request"
                ).format(elapsed=time.perf_counter() - t0)
            )
        time.sleep(0.05)

    t0 = time.perf_counter()
    got = call(bounded_load, fast, 20, 2.0)
    answered(got)
    took = time.perf_counter() - t0
    if calls["n"] != 20:
        fail(
            _("with a fast server, max_requests=20 and max_seconds=2 it sent {n} requests: send until a bound").format(
                n=calls["n"]
            )
        )
    if not isinstance(got, list):
        fail(_("return the list of latencies (one float per request), got {type}").format(type=type(got).__name__))
    if len(got) != calls["n"]:
        fail(
            _("it sent {n} requests but returned {got} latencies: append one per request").format(
                n=calls["n"], got=len(got)
            )
        )
    if not all(isinstance(x, float) and 0.0005 < x < 1.0 for x in got) or sum(got) > took + 0.01:
        fail(
            N_(
                "each latency is the seconds one send() took, not a timestamp or the time since the start: "
                "t0 = time.perf_counter(); send(); latencies.append(time.perf_counter() - t0)"
            )
        )
    calls["n"] = 0
    t0 = time.perf_counter()
    call(bounded_load, slow, 10_000, 0.25)
    took = time.perf_counter() - t0
    if took > 0.6:
        fail(
            _(
                "with a slow server it ran {took:.2f} s past max_seconds=0.25 ({n} requests): checking the clock "
                "once, before the loop, does not stop it -- check the elapsed time before every request"
            ).format(took=took, n=calls["n"])
        )
    if calls["n"] < 3:
        fail(N_("it stopped too early: keep sending until max_seconds have passed"))
    return passed(
        _(
            "stopped at 20 requests (fast server) and after {took:.2f} s (slow server): a load test that "
            "cannot run away, like `labkit bench serve`'s levels"
        ).format(took=took)
    )


EX2 = Quiz(
    "A",
    {
        "A": Choice(
            N_("runs what arrives within 10 ms as one batched call"),
            N_(
                "Right: it gathers the requests that arrive within the queue delay (up to max_batch) and runs them as one "
                "call, so concurrency becomes batch size -- the 'batched' row of step 3."
            ),
        ),
        "B": Choice(
            N_("waits until 32 requests have arrived, then runs them"),
            N_("The batcher never waits for a full batch: the queue delay bounds the wait, then it runs what it has."),
        ),
        "C": Choice(
            N_("one call per request, spread over parallel instances"),
            N_(
                "Instances run in parallel, but the batcher's job is to group requests; one call per request is the "
                "baseline's behaviour."
            ),
        ),
        "D": Choice(
            N_("quantizes the batch to int8 before it runs the model"),
            N_(
                "Batching does not change the model's outputs per request (greedy decoding per row); quantization is a "
                "separate step with its own measured price."
            ),
        ),
    },
)


def ex2(answer) -> bool:
    """16 clients, max_batch 32, queue delay 10 ms: what does Triton's dynamic batcher do?"""
    return EX2(answer)


EX3 = Quiz(
    "BD",
    {
        "A": Choice(
            N_("int8 quantization of the model's weights"),
            N_(
                "On the tiny model int8 barely beats fp32 for one request (step 3): its matrices are too small for int8 "
                "kernels to pay off."
            ),
        ),
        "B": Choice(
            N_("an async front that takes many requests at once"),
            N_(
                "Right: a server can only batch requests it holds at the same time -- the async front accepts them "
                "concurrently instead of one after another."
            ),
            missed=N_("one piece you left out is what lets many requests reach the server at the same time."),
        ),
        "C": Choice(
            N_("a lean ONNX Runtime loop instead of PyTorch"),
            N_("Leaving PyTorch's generate for a lean ONNX Runtime loop helps one request, but by a small factor."),
        ),
        "D": Choice(
            N_("a dynamic batcher that groups them into one call"),
            N_(
                "Right: one batched call over 16 requests multiplies throughput (step 3's 'batched' row) -- the dynamic "
                "batcher groups what the front accepted."
            ),
            missed=N_("one piece you left out is what turns concurrent requests into one model call."),
        ),
    },
)


def ex3(answer) -> bool:
    """Which pieces does most of the measured throughput gain depend on? (select all that apply)"""
    return EX3(answer)
