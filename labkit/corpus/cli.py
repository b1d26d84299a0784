"""`labkit corpus make --n N --seed S --out DIR [--rates k=v,...]`: write a labelled dirty crawl dump."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from labkit.cli.errors import UsageError, positive_int, writable_dir


def parse_rates(text: str | None) -> dict[str, float]:
    """'title_missing=0.1,mojibake=0' or a JSON object -> {name: rate}."""
    if not text:
        return {}
    text = text.strip()
    if text.startswith("{"):
        return {k: float(v) for k, v in json.loads(text).items()}
    rates = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"bad --rates item {part!r}: write NAME=VALUE, e.g. mojibake=0.1")
        rates[name.strip()] = float(value)
    return rates


def rates_arg(text: str) -> dict[str, float]:
    """--rates, parsed and checked against labkit.corpus.dump.DEFAULT_RATES while arguments are parsed."""
    from labkit.corpus.dump import resolve_rates

    try:
        rates = parse_rates(text)
        resolve_rates(rates)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    return rates


def _make(args: argparse.Namespace) -> int:
    from labkit.corpus import generate
    from labkit.corpus.dump import write_dump

    crawl = Path(args.out) / "crawl"
    if crawl.is_dir() and any(crawl.iterdir()):  # checked before generating anything
        raise UsageError(f"--out {args.out}: {crawl} is not empty; write the dump into a fresh directory")
    try:
        info = write_dump(generate(args.n, args.seed), args.out, args.seed, args.rates)
    except (ValueError, FileExistsError) as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {info.n_records} records in {info.n_files} files ({info.n_bytes / 1e6:.1f} MB) to {info.crawl_dir}")
    print(f"labels: {info.labels_path}  ground truth: {info.articles_path}")
    print(f"a correct cleaner rejects {info.reject_share:.1%}: " + json.dumps(info.expected, ensure_ascii=False))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("corpus", help="generate the Chinese news corpus and dirty crawl dumps")
    sub = p.add_subparsers(dest="corpus_command", metavar="ACTION")
    m = sub.add_parser("make", help="write a crawl dump with labelled dirt: DIR/crawl, DIR/labels.jsonl")
    m.add_argument("--n", type=positive_int, required=True, help="number of articles")
    m.add_argument("--seed", type=int, default=0, help="generator seed: same seed, same dump (default 0)")
    m.add_argument(
        "--out", type=writable_dir, required=True, help="output directory (its crawl/ must be empty or absent)"
    )
    m.add_argument(
        "--rates",
        type=rates_arg,
        default=None,
        help="dirt rate overrides, 'name=value,...' or JSON; names: see labkit.corpus.dump.DEFAULT_RATES",
    )
    m.set_defaults(func=_make)
    p.set_defaults(func=lambda args: p.print_help() or 2)
