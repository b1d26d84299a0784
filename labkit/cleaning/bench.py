"""`labkit bench clean`: the cleaning pipeline (1 and N workers) against the story's naive recipe.

Both run in this process on the same generated dump (>= 20,000 records by
default): records/s and MB/s for `naive_load` (chardet on every file, the
non-DOTALL script regex, tag stripping, a title check) and for `clean_paths`
with 1 and 2 workers, plus the pipeline's accuracy against the dump's labels
(what the naive recipe's speed buys is in notebook 01) and the measured
accuracy/speed of the two encoding detectors.  Figures go to stdout and
`--json`.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from labkit.cli_errors import UsageError, existing_dir, int_list, positive_int, writable_file


def measure_detectors(dump_dir, sample_bytes: int = 65536) -> dict:
    """Accuracy and ms/file of chardet vs charset-normalizer on the dump's non-UTF-8 files.

    UTF-8 / BOM files are left out: the pipeline never asks a detector about them."""
    from labkit.cleaning.decode import canonical, detect
    from labkit.jsonl import read_jsonl

    root = Path(dump_dir)
    truth: dict[str, str] = {}
    for lab in read_jsonl(root / "labels.jsonl"):
        if "binary_file" in lab["defects"]:
            continue
        encs = [d.split(":", 1)[1] for d in lab["defects"] if d.startswith("encoding:")]
        truth.setdefault(lab["file"], canonical(encs[0]) if encs else "utf-8")
    files = {f: e for f, e in truth.items() if e not in ("utf-8", "utf-8-sig", "utf-16", "utf-32")}
    out: dict[str, dict] = {}
    for det in ("chardet", "charset_normalizer"):
        outcome, secs = Counter(), 0.0
        for rel, enc in files.items():
            data = (root / "crawl" / rel).read_bytes()[:sample_bytes]
            t = time.perf_counter()
            guess = detect(data, det)
            secs += time.perf_counter() - t
            outcome["right" if guess == enc else "no answer" if guess is None else "wrong"] += 1
        n = max(1, len(files))
        out[det] = {"files": len(files), "accuracy": outcome["right"] / n, "no_answer": outcome["no answer"],
                    "wrong": outcome["wrong"], "ms_per_file": 1000 * secs / n}
    return out


def run_bench(dump_dir: Path, workers: list[int], out_dir: Path) -> dict:
    """Time naive_load and clean_paths (each worker count) on `dump_dir/crawl`."""
    from labkit.cleaning.pipeline import clean_paths
    from labkit.cleaning.score import score
    from labkit.corpus.naive import naive_load

    crawl = dump_dir / "crawl"
    n_bytes = sum(p.stat().st_size for p in crawl.rglob("*") if p.is_file())
    rows = []
    stats: dict = {}
    t = time.perf_counter()
    naive_load(crawl, stats)
    secs = time.perf_counter() - t
    rows.append({"run": "naive recipe", "records": stats["records_seen"], "seconds": secs,
                 "records_per_s": stats["records_seen"] / secs, "mb_per_s": n_bytes / 1e6 / secs,
                 "kept": stats["kept"], "accuracy": None})
    for w in workers:
        target = out_dir / f"workers-{w}"
        shutil.rmtree(target, ignore_errors=True)
        rep = clean_paths([crawl], target, workers=w)
        acc = score(dump_dir / "labels.jsonl", target)["accuracy"]
        rows.append({"run": f"pipeline, {w} worker{'s' if w > 1 else ''}", "records": rep["records"],
                     "seconds": rep["seconds"], "records_per_s": rep["records_per_s"],
                     "mb_per_s": rep["mb_per_s"], "kept": rep["clean"], "accuracy": acc})
    same = None
    if len(workers) > 1:
        first = out_dir / f"workers-{workers[0]}"
        same = all((first / n).read_bytes() == (out_dir / f"workers-{w}" / n).read_bytes()
                   for w in workers[1:] for n in ("clean.jsonl", "rejects.jsonl"))
    return {"bytes": n_bytes, "runs": rows, "identical_outputs": same,
            "detectors": measure_detectors(dump_dir)}


def _print(result: dict) -> None:
    print(f"dump: {result['bytes'] / 1e6:.1f} MB")
    print(f"{'run':<22}{'records':>9}{'seconds':>9}{'records/s':>11}{'MB/s':>8}{'kept':>8}{'accuracy':>10}")
    for r in result["runs"]:
        acc = "-" if r["accuracy"] is None else f"{r['accuracy']:.3f}"
        print(f"{r['run']:<22}{r['records']:>9}{r['seconds']:>9.2f}{r['records_per_s']:>11.0f}"
              f"{r['mb_per_s']:>8.2f}{r['kept']:>8}{acc:>10}")
    if result["identical_outputs"] is not None:
        print(f"outputs identical across worker counts: {result['identical_outputs']}")
    for det, d in result["detectors"].items():
        print(f"detector {det:<19} accuracy {d['accuracy']:.3f} on {d['files']} non-UTF-8 files "
              f"({d['no_answer']} no answer, {d['wrong']} wrong), {d['ms_per_file']:.1f} ms/file")


def run(args: argparse.Namespace) -> int:
    workers = sorted(set(args.workers))  # ints >= 1 (parsed by int_list)
    tmp = Path(tempfile.mkdtemp(prefix="labkit-bench-clean-"))
    try:
        dump = Path(args.dump) if args.dump else tmp / "dump"
        if not args.dump:
            from labkit.corpus import generate
            from labkit.corpus.dump import write_dump

            print(f"generating a dump of {args.n} articles (seed {args.seed}) ...", file=sys.stderr)
            write_dump(generate(args.n, args.seed), dump, args.seed)
        elif not (dump / "crawl").is_dir() or not (dump / "labels.jsonl").is_file():
            raise UsageError(f"--dump {dump} has no crawl/ and labels.jsonl; make one with `labkit corpus make`")
        result = run_bench(dump, workers, tmp / "out")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _print(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("clean", help="cleaning pipeline vs the naive recipe: records/s, MB/s")
    p.add_argument("--n", type=positive_int, default=20_000, help="articles in the generated dump (default 20000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated dump (default 0)")
    p.add_argument("--dump", type=existing_dir, default=None, help="use an existing dump (DIR with crawl/ and labels.jsonl)")
    p.add_argument("--workers", type=int_list, default=[1, 2], help="worker counts to time, comma-separated (default 1,2)")
    p.add_argument("--json", type=writable_file, default=None, help="also write the figures to this JSON file")
    p.set_defaults(func=run)
