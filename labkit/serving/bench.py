"""`labkit bench serve`: load a running server (`labkit.serving.loadgen`), or with `--compare` the model's own
limit, the served figures and the baseline, in one run.

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
import unicodedata
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from labkit.cli.errors import (
    existing_dir,
    int_list,
    loopback_url,
    nonneg_float,
    nonneg_int,
    positive_float,
    positive_int,
    writable_dir,
    writable_file,
)
from labkit.i18n import _
from labkit.serving.loadgen import LEVELS, closed_loop, open_loop, payloads_from_texts, run_sync, sweep
from labkit.serving.measure.stack import post_generate

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


# The level the ratios read: 16 clients (the targets' level), or the highest level run when 16 is not among them.
def ratio_level(levels: Sequence[int]) -> int:
    return 16 if 16 in levels else max(levels)


def meets(name: str, value: float) -> bool:
    """A QPS ratio must reach its target; a latency must stay within it (`TARGETS`)."""
    return value >= TARGETS[name] if name.startswith("qps") else value <= TARGETS[name]


# how report() writes each target next to its figure, from TARGETS itself
def _target_text(name: str) -> str:
    return f"{'>=' if name.startswith('qps') else '<='} {TARGETS[name]:g}"


@dataclass
class Comparison:
    isolated: dict
    served: dict = field(default_factory=dict)  # stack name -> {level: [LoadResult per round]}
    baseline: dict = field(default_factory=dict)  # level -> LoadResult
    open_loop: list = field(default_factory=list)  # LoadResult per server (mode "open")
    answers: dict = field(default_factory=dict)  # server -> its JSON answers to the asked requests

    def medians(self, name: str, level: int) -> dict:
        """Median QPS and latency percentiles over the rounds; errors and requests summed."""
        runs = self.served[name][level]
        med = {k: float(np.median([getattr(r, k) for r in runs])) for k in ("qps", "p50_ms", "p95_ms", "p99_ms")}
        return {
            **med,
            "errors": sum(r.errors for r in runs),
            "requests": sum(r.requests for r in runs),
            "qps_rounds": [r.qps for r in runs],
        }  # the spread: how much of a margin is noise

    def summary(self) -> dict:
        iso = self.isolated
        out = {"isolated": iso, "settings": {}, "baseline": {}}
        for lvl, r in self.baseline.items():
            out["baseline"][lvl] = {"qps": r.qps, "p50_ms": r.p50_ms, "errors": r.errors, "requests": r.requests}
        for s, by_level in self.served.items():
            top = ratio_level(list(by_level))
            c1, c16 = self.medians(s, 1), self.medians(s, top)
            ratios = {
                "qps_c16_vs_isolated": c16["qps"] / iso["batched_qps"],
                "p50_c1_over_single_ms": c1["p50_ms"] - iso["single_ms"],
                "p50_c1_ms": c1["p50_ms"],
            }
            if top in self.baseline:
                ratios["qps_c16_vs_baseline"] = c16["qps"] / max(self.baseline[top].qps, 1e-9)
            out["settings"][s] = {
                "c1": c1,
                "c16": c16,
                "level": top,
                "ratios": ratios,
                "met": {k: meets(k, v) for k, v in ratios.items()},
                # the share of a served request's time spent outside the model: 1 - served/isolated
                "overhead_share": max(0.0, 1 - ratios["qps_c16_vs_isolated"]),
                "errors": sum(r.errors for runs in by_level.values() for r in runs),
            }
        return out

    def rows(self) -> list[dict]:
        """One row per server, mode and level (medians over the rounds) -- notebook 08's table."""
        rows = [_row(name, "closed", lvl, self.medians(name, lvl)) for name, by in self.served.items() for lvl in by]
        rows += [_row("baseline", "closed", lvl, vars(r)) for lvl, r in self.baseline.items()]
        rows += [_row(r.server, "open", r.level, vars(r)) for r in self.open_loop]
        return rows


ROW_FIELDS = ("requests", "errors", "qps", "p50_ms", "p95_ms", "p99_ms")


def _row(server: str, mode: str, level: float, figures: dict) -> dict:
    return {"server": server, "mode": mode, "level": level, **{k: figures[k] for k in ROW_FIELDS}}


BENCH_STACKS = {
    "api+triton before": dict(kind="api+triton", setting="before"),
    "api+triton now": dict(kind="api+triton", setting="now"),
}


def compare(
    int8_dir: Path,
    model_dir: Path | None,
    payloads: Sequence[dict],
    log_dir: Path,
    rounds: int = 2,
    requests: int = 160,
    seconds: float = 8.0,
    threads: int = 0,
    max_batch: int = 32,
    front_delay_us: int = 10_000,
    max_source_len: int = 0,
    stacks: dict[str, dict] | None = None,
    baseline: bool = True,
    levels: Sequence[int] = (1, 16),
    open_rate: float = 0.0,
    open_seconds: float = 5.0,
    ask: Sequence[dict] = (),
) -> Comparison:
    """The one measuring path of `labkit bench serve --compare` and notebook 08.

    `stacks` maps a name to `measure.stack.start_stack` settings (default: api+triton before / now).  All stacks stay
    up and the closed-loop runs alternate between them for `rounds` rounds, at least `REQUESTS_PER_CLIENT` per
    client, so load on a shared machine hits every stack alike; the model's own limit (`measure.timing.isolated`) is
    timed between the loads in each round.  Then, per server, an open-loop run at `open_rate` (0: none) and the
    `ask` bodies sent one by one (answers kept in `Comparison.answers`); the baseline runs last, on its own."""
    from labkit.serving.measure.stack import start_stack
    from labkit.serving.measure.timing import isolated, isolated_generator
    from labkit.serving.ort_generate import serving_threads

    log_dir.mkdir(parents=True, exist_ok=True)
    stacks = stacks or BENCH_STACKS
    gen = isolated_generator(int8_dir, threads, max_source_len)
    kw = dict(threads=threads, max_batch=max_batch, queue_delay_us=front_delay_us, max_source_len=max_source_len)
    iso, answers, opened = [], {}, []
    with ExitStack() as stack:
        servers = {
            name: start_stack(
                stack=stack, model_dir=model_dir, int8_dir=int8_dir, log_dir=log_dir, name=name, **{**kw, **spec}
            )
            for name, spec in stacks.items()
        }
        served = {name: {lvl: [] for lvl in levels} for name in servers}
        for _round in range(rounds):  # the limit is measured between the loads, in each round (the servers idle)
            iso.append(isolated(gen, payloads))
            for level in levels:
                for name, srv in servers.items():
                    served[name][level].append(
                        run_sync(
                            closed_loop(
                                srv.url,
                                payloads,
                                level,
                                max(requests, REQUESTS_PER_CLIENT * level),
                                seconds,
                                name,
                                warmup=2,
                            )
                        )
                    )
        iso.append(isolated(gen, payloads))
        for name, srv in servers.items():
            if open_rate:
                opened.append(run_sync(open_loop(srv.url, payloads, open_rate, open_seconds, server=name)))
            answers[name] = [post_generate(srv.url, body) for body in ask]
    cmp = Comparison(
        isolated={
            "single_ms": float(np.median([r["single_ms"] for r in iso])),
            "batched_qps": float(np.median([r["batched_qps"] for r in iso])),
            "batch": iso[0]["batch"],
            "threads": serving_threads(threads),
            "passes": len(iso),
            "batched_qps_passes": [r["batched_qps"] for r in iso],
        },
        served=served,
        answers=answers,
    )
    if baseline and model_dir is not None:
        with ExitStack() as stack:
            srv = start_stack(
                "baseline", stack, Path(model_dir), int8_dir, log_dir, threads=threads, max_source_len=max_source_len
            )
            for level in levels:  # the baseline is slow: its runs end at the time bound
                cmp.baseline[level] = run_sync(
                    closed_loop(srv.url, payloads, level, max(requests // 2, 2 * level), seconds, "baseline", warmup=1)
                )
            if open_rate:
                opened.append(run_sync(open_loop(srv.url, payloads, open_rate, open_seconds, server="baseline")))
            cmp.answers["baseline"] = [post_generate(srv.url, body) for body in ask]
    cmp.open_loop = opened
    return cmp


def report(summary: dict) -> str:
    iso = summary["isolated"]
    lines = [
        _(
            "isolated int8 ({threads} ORT thread(s)): single {single_ms:.1f} ms/request, "
            "{batch} batched {batched_qps:.1f} requests/s"
        ).format(
            threads=iso["threads"], single_ms=iso["single_ms"], batch=iso["batch"], batched_qps=iso["batched_qps"]
        ),
        f"{_pad(_('server'), 22)} {'c=1 p50 ms':>10} {'c=1 qps':>8} {'c=N qps':>9} {'c=N p50':>9} "
        f"{_pad(_('errors'), 6, right=True)}",
    ]
    b = summary["baseline"]
    if b:
        top = max(b)
        lines.append(
            f"{'baseline':22} {b[1]['p50_ms']:>10.1f} {b[1]['qps']:>8.1f} {b[top]['qps']:>9.1f} "
            f"{b[top]['p50_ms']:>9.1f} {sum(v['errors'] for v in b.values()):>6}"
        )
    for s, v in summary["settings"].items():
        lines.append(
            f"{s:22} {v['c1']['p50_ms']:>10.1f} {v['c1']['qps']:>8.1f} {v['c16']['qps']:>9.1f} "
            f"{v['c16']['p50_ms']:>9.1f} {v['errors']:>6}"
        )
    for s, v in summary["settings"].items():
        r, m, n = v["ratios"], v["met"], v["level"]
        parts = [
            _("c{n} QPS / isolated batched {ratio:.2f} ({target}: {met})").format(
                n=n,
                ratio=r["qps_c16_vs_isolated"],
                target=_target_text("qps_c16_vs_isolated"),
                met=_verdict(m["qps_c16_vs_isolated"]),
            ),
            _("c1 p50 - single {delta:+.1f} ms ({target}: {met})").format(
                delta=r["p50_c1_over_single_ms"],
                target=_target_text("p50_c1_over_single_ms"),
                met=_verdict(m["p50_c1_over_single_ms"]),
            ),
            _("c1 p50 {p50:.1f} ms ({target}: {met})").format(
                p50=r["p50_c1_ms"], target=_target_text("p50_c1_ms"), met=_verdict(m["p50_c1_ms"])
            ),
        ]
        if "qps_c16_vs_baseline" in r:
            parts.append(
                _("c{n} QPS / baseline {ratio:.1f}x ({target}: {met})").format(
                    n=n,
                    ratio=r["qps_c16_vs_baseline"],
                    target=_target_text("qps_c16_vs_baseline"),
                    met=_verdict(m["qps_c16_vs_baseline"]),
                )
            )
        lines.append(f"{s}: " + _("; ").join(parts))
    spread = [_("isolated batched {span} req/s").format(span=_span(iso.get("batched_qps_passes", [])))]
    spread += [f"{s} c{v['level']} {_span(v['c16'].get('qps_rounds', []))} QPS" for s, v in summary["settings"].items()]
    lines.append(_("spread over the rounds: {spread}").format(spread=_("; ").join(spread)))
    return "\n".join(lines)


# a target met or not as report() shows it: True/False in English (what the tests and scripts read), words in a translation
def _verdict(met: bool) -> str:
    return _("True") if met else _("False")


# f"{text:width}" (right: f"{text:>width}") counting a wide (CJK) character as two columns, so a translated
# header still lines up with the figures under it; English text pads exactly as the format spec does
def _pad(text: str, width: int, right: bool = False) -> str:
    fill = " " * max(0, width - sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text))
    return fill + text if right else text + fill


def _span(values) -> str:
    return f"{min(values):.0f}-{max(values):.0f}" if values else "-"


def run(args, payloads: Sequence[dict]) -> int:
    out = Path(args.out)
    model_dir = Path(args.model) if args.model else smoke_model(out / "smoke-model")
    int8_dir = Path(args.onnx) if args.onnx else int8_export(model_dir, out / "onnx-int8")
    cmp = compare(
        int8_dir,
        model_dir,
        payloads,
        out / "logs",
        rounds=args.rounds,
        requests=args.requests,
        seconds=args.seconds,
        threads=args.threads,
        front_delay_us=args.queue_delay_us,
        baseline=not args.no_baseline,
    )
    summary = cmp.summary()
    print(report(summary))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2, default=str)
    errors = sum(v["errors"] for v in summary["settings"].values()) + sum(
        b["errors"] for b in summary["baseline"].values()
    )
    return 1 if errors else 0


# ---- `labkit bench serve` -------------------------------------------------


def _default_payloads(n: int = 64) -> list[dict]:
    from labkit.corpus import generate

    return payloads_from_texts([a.body for a in generate(n, seed=12345)])


def _run(args) -> int:
    payloads = _default_payloads()
    if args.compare:
        return run(args, payloads)
    levels = args.levels  # a list of ints >= 1 (parsed by int_list)
    results = sweep(args.url, payloads, levels, args.requests, args.seconds, server=args.name)
    if args.rate:
        results.append(run_sync(open_loop(args.url, payloads, args.rate, args.open_seconds, server=args.name)))
    rows = [r.to_dict() for r in results]
    head = f"{'mode':6} {'level':>6} {'n':>5} {'err':>4} {'qps':>8} {'p50':>8} {'p95':>8} {'p99':>8}"
    print(head)
    for r in results:
        print(
            f"{r.mode:6} {r.level:>6g} {r.requests:>5} {r.errors:>4} {r.qps:>8.1f} {r.p50_ms:>8.1f} {r.p95_ms:>8.1f} {r.p99_ms:>8.1f}"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)
    return 1 if any(r.errors for r in results) else 0


def register(subparsers) -> None:
    p = subparsers.add_parser("serve", help="load-test a running server on 127.0.0.1 (closed-loop sweep + open loop)")
    p.add_argument(
        "--url",
        type=loopback_url,
        default="http://127.0.0.1:8080",
        help="server base URL (loopback only: 127.0.0.1, ::1, localhost)",
    )
    p.add_argument("--name", default="server", help="label for the results")
    p.add_argument(
        "--levels",
        type=int_list,
        default=list(LEVELS),
        help=f"closed-loop concurrency levels, comma-separated (default {','.join(map(str, LEVELS))})",
    )
    p.add_argument("--requests", type=positive_int, default=200, help="requests per level (upper bound)")
    p.add_argument("--seconds", type=positive_float, default=20.0, help="seconds per level (upper bound)")
    p.add_argument("--rate", type=nonneg_float, default=0.0, help="open-loop requests/s (0 = skip the open-loop run)")
    p.add_argument("--open-seconds", type=positive_float, default=10.0, help="open-loop duration")
    p.add_argument("--json", type=writable_file, help="write the results as JSON here")
    c = p.add_argument_group("--compare: start the servers here and measure them against the model's own limit")
    c.add_argument(
        "--compare",
        action="store_true",
        help="one run on one int8 model: isolated single/batched, api+triton before/now at 1 and 16 clients "
        "(alternating), the baseline; ratios against the targets (--url is not used)",
    )
    c.add_argument(
        "--model", type=existing_dir, help="save_pretrained folder (default: a seeded tiny smoke model built in --out)"
    )
    c.add_argument("--onnx", type=existing_dir, help="int8 ONNX folder of --model (default: exported into --out)")
    c.add_argument(
        "--out", type=writable_dir, default="runs/bench_serve", help="models and server logs (default runs/bench_serve)"
    )
    c.add_argument(
        "--rounds", type=positive_int, default=2, help="alternations of the served settings (medians reported)"
    )
    c.add_argument(
        "--threads", type=nonneg_int, default=0, help="ONNX Runtime/PyTorch threads (0: the servers' default)"
    )
    c.add_argument("--queue-delay-us", type=nonneg_int, default=10_000, help="the API batcher's longest wait (µs)")
    c.add_argument("--no-baseline", action="store_true", help="skip the PyTorch pipeline server")
    p.set_defaults(func=_run)
