"""`labkit bench serve --compare`: the model's own limit, the served figures and the baseline, in one run.

On one int8 model, in one process tree on 127.0.0.1:
- isolated: `OrtGenerator` in this process with the servers' thread count -- one request at a
  time (ms per request) and `batch` requests in one call (requests/s): what serving can at best reach;
- served: the async API in front of Triton, in the setting before (`--front-batching off`: one
  Triton HTTP request per request, Triton's dynamic batcher waiting up to 10 ms) and now (the API
  batches adaptively and sends each batch to Triton over gRPC; Triton does not wait), closed loop
  at 1 and 16 clients; both stacks stay up and the runs alternate, so load on a shared machine hits both;
- the baseline: the per-request PyTorch pipeline server at 1 and 16 clients.
"""
from __future__ import annotations

import json
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from labkit.serving.loadgen import LoadResult, closed_loop, run_sync
from labkit.serving.process import ServerProcess, free_port, labkit_argv

# name -> (api --front-batching, Triton queue delay µs, protocol between API and Triton)
SETTINGS = {
    "before": ("off", 10_000, "http"),
    "now": ("adaptive", 0, "grpc"),
}
TARGETS = {"qps_c16_vs_isolated": 0.7, "p50_c1_over_single_ms": 10.0, "p50_c1_ms": 30.0, "qps_c16_vs_baseline": 20.0}
# Served runs send at least this many requests per client: 160 requests at 16 clients last 0.6 s, mostly
# ramp-up and stragglers (276 QPS measured there against 298 over 800 requests, same machine and hour).
REQUESTS_PER_CLIENT = 50


def smoke_model(out: Path, seed: int = 0) -> Path:
    """A seeded tiny T5 and a character tokenizer (untrained: plumbing and speed, not quality)."""
    import torch

    from labkit.corpus import generate
    from labkit.model import build_model
    from labkit.serving.export import save_model
    from labkit.text.tasks import tokenizer_texts
    from labkit.text.tokenizer import train_tokenizer

    if (out / "config.json").exists():
        return out
    tok = train_tokenizer(tokenizer_texts(generate(120, seed=seed)), vocab_size=3000)
    torch.manual_seed(seed)
    return save_model(build_model("tiny", len(tok)).eval(), tok, out)


def int8_export(model_dir: Path, out: Path) -> Path:
    from labkit.serving.export import export_onnx
    from labkit.serving.quantize import quantize_int8

    if not (out / "decoder_with_past_model.onnx").exists():
        export_onnx(model_dir, out.with_name(out.name + "-fp32"), validate=False)
        quantize_int8(out.with_name(out.name + "-fp32"), out)
    return out


def isolated_generator(int8_dir: Path, threads: int, max_source_len: int = 0):
    from labkit.serving.ort_generate import OrtGenerator, serving_threads

    return OrtGenerator(int8_dir, threads=serving_threads(threads), max_source_len=max_source_len)


def isolated(gen, payloads: Sequence[dict], batch: int = 16, batched_calls: int = 5) -> dict:
    """One pass: each of `batch` requests alone (median ms per call), then all of them in one call, `batched_calls`
    times (requests/s from the median call: one timed call per pass spread 287-412 req/s in one run)."""
    from labkit.serving.schema import MAX_NEW_TOKENS, model_input

    rows = list(payloads)[:batch]
    srcs = [model_input(p["task"], p["text"]) for p in rows]
    caps = [MAX_NEW_TOKENS[p["task"]] for p in rows]
    gen.generate(srcs[:1], caps[:1])
    single = []
    for s, c in zip(srcs, caps):
        t0 = time.perf_counter()
        gen.generate([s], [c])
        single.append((time.perf_counter() - t0) * 1e3)
    calls = []
    for _ in range(batched_calls):
        t0 = time.perf_counter()
        gen.generate(srcs, caps)
        calls.append(time.perf_counter() - t0)
    return {"single_ms": float(np.median(single)), "batched_qps": len(srcs) / float(np.median(calls)),
            "batch": len(srcs)}


def _served_stack(stack: ExitStack, setting: str, int8_dir: Path, log_dir: Path, threads: int, max_batch: int,
                  front_delay_us: int, max_source_len: int) -> ServerProcess:
    from labkit.serving.triton import start_triton

    front, triton_delay, proto = SETTINGS[setting]
    triton = stack.enter_context(start_triton(int8_dir, max_batch, triton_delay, threads, max_source_len,
                                              log_path=log_dir / f"triton_{setting}.log"))
    port = free_port()
    argv = labkit_argv("serve", "api", "--triton-url", triton.grpc_url if proto == "grpc" else triton.url,
                       "--front-batching", front, "--max-batch", str(max_batch), "--queue-delay-us", str(front_delay_us),
                       "--port", str(port), "--threads", str(threads), "--max-source-len", str(max_source_len))
    return stack.enter_context(ServerProcess(argv, f"http://127.0.0.1:{port}/health", timeout=120, name=f"api_{setting}",
                                             log_path=log_dir / f"api_{setting}.log"))


@dataclass
class Comparison:
    isolated: dict
    served: dict = field(default_factory=dict)      # setting -> {level: [LoadResult, ...]}
    baseline: dict = field(default_factory=dict)    # level -> LoadResult

    def best(self, setting: str, level: int) -> dict:
        """Median QPS and p50 over the rounds; errors summed."""
        runs = self.served[setting][level]
        return {"qps": float(np.median([r.qps for r in runs])), "p50_ms": float(np.median([r.p50_ms for r in runs])),
                "errors": sum(r.errors for r in runs), "requests": sum(r.requests for r in runs),
                "qps_rounds": [r.qps for r in runs]}   # the spread: how much of a margin is noise

    def summary(self) -> dict:
        iso = self.isolated
        out = {"isolated": iso, "settings": {}, "baseline": {}}
        for lvl, r in self.baseline.items():
            out["baseline"][lvl] = {"qps": r.qps, "p50_ms": r.p50_ms, "errors": r.errors, "requests": r.requests}
        for s in self.served:
            c1, c16 = self.best(s, 1), self.best(s, 16)
            ratios = {"qps_c16_vs_isolated": c16["qps"] / iso["batched_qps"],
                      "p50_c1_over_single_ms": c1["p50_ms"] - iso["single_ms"],
                      "p50_c1_ms": c1["p50_ms"]}
            if 16 in self.baseline:
                ratios["qps_c16_vs_baseline"] = c16["qps"] / max(self.baseline[16].qps, 1e-9)
            met = {k: (v >= TARGETS[k] if k.startswith("qps") else v <= TARGETS[k]) for k, v in ratios.items()}
            out["settings"][s] = {"c1": c1, "c16": c16, "ratios": ratios, "met": met,
                                  "errors": c1["errors"] + c16["errors"]}
        return out


def compare(int8_dir: Path, model_dir: Path | None, payloads: Sequence[dict], log_dir: Path, rounds: int = 2,
            requests: int = 160, seconds: float = 8.0, threads: int = 0, max_batch: int = 32,
            front_delay_us: int = 10_000, max_source_len: int = 0, settings: Sequence[str] = ("before", "now"),
            baseline: bool = True) -> Comparison:
    """Everything in one run (see the module docstring); `rounds` alternations of the served settings."""
    from labkit.serving.ort_generate import serving_threads

    log_dir.mkdir(parents=True, exist_ok=True)
    gen = isolated_generator(int8_dir, threads, max_source_len)
    iso = []
    with ExitStack() as stack:
        servers = {s: _served_stack(stack, s, int8_dir, log_dir, threads, max_batch, front_delay_us, max_source_len)
                   for s in settings}
        served = {s: {1: [], 16: []} for s in settings}
        for _ in range(rounds):  # the limit is measured between the loads, in each round (the servers idle)
            iso.append(isolated(gen, payloads))
            for level in (1, 16):
                for s, srv in servers.items():
                    served[s][level].append(
                        run_sync(closed_loop(srv.url, payloads, level, max(requests, REQUESTS_PER_CLIENT * level), seconds, s,
                                            warmup=2)))
        iso.append(isolated(gen, payloads))
    cmp = Comparison(isolated={"single_ms": float(np.median([r["single_ms"] for r in iso])),
                               "batched_qps": float(np.median([r["batched_qps"] for r in iso])),
                               "batch": iso[0]["batch"], "threads": serving_threads(threads), "passes": len(iso),
                               "batched_qps_passes": [r["batched_qps"] for r in iso]},
                     served=served)
    if baseline and model_dir is not None:
        port = free_port()
        argv = labkit_argv("serve", "baseline", "--model", str(model_dir), "--port", str(port),
                           "--threads", str(threads), "--max-source-len", str(max_source_len))
        with ServerProcess(argv, f"http://127.0.0.1:{port}/health", timeout=120, name="baseline",
                           log_path=log_dir / "baseline.log") as srv:
            for level in (1, 16):
                cmp.baseline[level] = run_sync(closed_loop(srv.url, payloads, level, max(requests // 2, 2 * level),
                                                           seconds, "baseline", warmup=1))
    return cmp


def report(summary: dict) -> str:
    iso = summary["isolated"]
    lines = [f"isolated int8 ({iso['threads']} ORT thread(s)): single {iso['single_ms']:.1f} ms/request, "
             f"{iso['batch']} batched {iso['batched_qps']:.1f} requests/s",
             f"{'server':22} {'c=1 p50 ms':>10} {'c=1 qps':>8} {'c=16 qps':>9} {'c=16 p50':>9} {'errors':>6}"]
    for lvl_name, b in (("baseline", summary["baseline"]),):
        if b:
            lines.append(f"{lvl_name:22} {b[1]['p50_ms']:>10.1f} {b[1]['qps']:>8.1f} {b[16]['qps']:>9.1f} "
                         f"{b[16]['p50_ms']:>9.1f} {b[1]['errors'] + b[16]['errors']:>6}")
    for s, v in summary["settings"].items():
        lines.append(f"{'api+triton ' + s:22} {v['c1']['p50_ms']:>10.1f} {v['c1']['qps']:>8.1f} {v['c16']['qps']:>9.1f} "
                     f"{v['c16']['p50_ms']:>9.1f} {v['errors']:>6}")
    for s, v in summary["settings"].items():
        r, m = v["ratios"], v["met"]
        parts = [f"c16 QPS / isolated batched {r['qps_c16_vs_isolated']:.2f} (>= 0.7: {m['qps_c16_vs_isolated']})",
                 f"c1 p50 - single {r['p50_c1_over_single_ms']:+.1f} ms (<= 10: {m['p50_c1_over_single_ms']})",
                 f"c1 p50 {r['p50_c1_ms']:.1f} ms (< 30: {m['p50_c1_ms']})"]
        if "qps_c16_vs_baseline" in r:
            parts.append(f"c16 QPS / baseline {r['qps_c16_vs_baseline']:.1f}x (>= 20: {m['qps_c16_vs_baseline']})")
        lines.append(f"{s}: " + "; ".join(parts))
    spread = [f"isolated batched {_span(iso.get('batched_qps_passes', []))} req/s"]
    spread += [f"{s} c16 {_span(v['c16'].get('qps_rounds', []))} QPS" for s, v in summary["settings"].items()]
    lines.append("spread over the rounds: " + "; ".join(spread))
    return "\n".join(lines)


def _span(values) -> str:
    return f"{min(values):.0f}-{max(values):.0f}" if values else "-"


def run(args, payloads: Sequence[dict]) -> int:
    out = Path(args.out)
    model_dir = Path(args.model) if args.model else smoke_model(out / "smoke-model")
    int8_dir = Path(args.onnx) if args.onnx else int8_export(model_dir, out / "onnx-int8")
    cmp = compare(int8_dir, model_dir, payloads, out / "logs", rounds=args.rounds, requests=args.requests,
                  seconds=args.seconds, threads=args.threads, front_delay_us=args.queue_delay_us,
                  baseline=not args.no_baseline)
    summary = cmp.summary()
    print(report(summary))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2, default=str)
    errors = sum(v["errors"] for v in summary["settings"].values()) + sum(b["errors"] for b in summary["baseline"].values())
    return 1 if errors else 0
