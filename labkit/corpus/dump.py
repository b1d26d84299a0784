"""Write a crawl dump with labelled dirt: the input of the cleaning pipeline and its answer key.

Layout of `write_dump(articles, out_dir, seed)`::

    out_dir/crawl/html/000001.html   one page per file, mixed encodings, some lying meta charsets
    out_dir/crawl/txt/000001.txt     first line title, rest body; plus binary files named .txt
    out_dir/crawl/jsonl/part-0001.jsonl   rows {"id"?, "title", "body", "url", "pub_time"}
    out_dir/crawl/csv/export-0001.csv     header [id,]title,body,url,pub_time
    out_dir/labels.jsonl             one line per record (outside crawl/ so a cleaner never ingests it)
    out_dir/articles.jsonl           the clean ground truth (`Article.to_dict()`)

A label line: ``{"id", "file", "article_id", "defects", "expected", "expected_fixes"}``.
`id` follows the cleaning pipeline's id rules (the row's `id` when present, else
the path relative to crawl/, plus `:<line or data-row number from 1>` for rows).
`expected` is "clean" or a reason code from `labkit.codes.REASONS`; for clean records
`expected_fixes` lists the fixes (`labkit.codes.FIXES`) a correct pipeline must report (it may report
more, e.g. whitespace_normalized after HTML extraction); for rejects it is [].

HTML pages carry the title in <title> and <h1> and the article text in
`<div class="article-content">`; nav, sidebar (other headlines), footer, head
scripts and styles surround it, as on a real news site.

Duplicates: exact ones repeat title and body verbatim (possibly in another
container/encoding); near ones add a source tag and a sentence, keeping body
character-5-gram Jaccard >= 0.8 with the original, while distinct generated
articles stay below 0.7 (tests/test_corpus_generator.py checks both).

Ordering contract: the "first" of a duplicate pair is the one that comes first
when files are processed in sorted order of their path relative to crawl/
and records in file order; originals of duplicates are always clean.
JSONL lines and CSV rows are separated by "\n" only: a mojibake'd field can
contain U+0085 or U+2028, which `str.splitlines()` would wrongly treat as line
breaks (so read files line by line, not with splitlines).
Records with Big5 text are converted to traditional characters first (so they
are encodable); their ground truth in articles.jsonl stays simplified.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from labkit.corpus.generator import Article
from labkit.corpus.layout import build_records, write_files
from labkit.corpus.record import Rec
from labkit.jsonl import read_jsonl, write_jsonl

# Probabilities per record (or per file / per container row where noted).
DEFAULT_RATES: dict[str, float] = {
    # rejects: at most one per record
    "title_missing": 0.04,
    "title_too_short": 0.03,
    "title_too_long": 0.04,
    "body_too_short": 0.03,
    "replacement_chars": 0.04,  # heavy U+FFFD damage -> mojibake
    "csv_misaligned": 0.15,  # of CSV rows: too many / too few fields -> misaligned_fields
    "json_truncated": 0.10,  # of JSONL rows: line cut mid-record -> malformed_record
    "exact_duplicate": 0.04,  # extra records, as a fraction of the articles
    "near_duplicate": 0.04,
    "binary_file": 0.01,  # extra gzip files named .txt -> not_text
    # repairable (clean records only)
    "non_utf8": 0.4,  # per file: GBK/GB18030/Big5/UTF-16/UTF-8+BOM instead of UTF-8
    "meta_charset_lie": 0.3,  # per HTML page: declared charset is wrong
    "mojibake": 0.06,  # text rows/files: latin-1/cp1252 mojibake -> mojibake_repaired
    "script": 0.25,  # script/style blocks in the body (half multi-line/upper-case)
    "boilerplate": 0.3,
    "control_chars": 0.04,
    "whitespace": 0.1,
    "csv_swapped": 0.12,  # of clean CSV rows: title and body swapped
    "extreme_length": 0.005,  # body repeated to 20k-50k chars (still clean: no maximum)
}

CONTAINER_SHARES: dict[str, float] = {"csv": 0.2, "html": 0.35, "jsonl": 0.3, "txt": 0.15}


@dataclass
class DumpInfo:
    out_dir: Path
    crawl_dir: Path
    labels_path: Path
    articles_path: Path
    n_articles: int
    n_records: int
    n_files: int
    n_bytes: int
    expected: dict[str, int] = field(default_factory=dict)
    defects: dict[str, int] = field(default_factory=dict)

    @property
    def reject_share(self) -> float:
        """Share of records a correct cleaner rejects."""
        return 1 - self.expected.get("clean", 0) / max(1, self.n_records)


def resolve_rates(rates: dict[str, float] | None) -> dict[str, float]:
    """DEFAULT_RATES with overrides; unknown names or values outside [0, 1] are errors."""
    merged = dict(DEFAULT_RATES)
    for k, v in (rates or {}).items():
        if k not in DEFAULT_RATES:
            raise ValueError(f"unknown dirt rate {k!r}; known: {', '.join(sorted(DEFAULT_RATES))}")
        if not 0.0 <= float(v) <= 1.0:
            raise ValueError(f"dirt rate {k}={v} must be within [0, 1]")
        merged[k] = float(v)
    rejects = sum(
        merged[k] for k in ("title_missing", "title_too_short", "title_too_long", "body_too_short", "replacement_chars")
    )
    if rejects > 0.9:
        raise ValueError(f"record-level reject rates sum to {rejects:.2f}; keep them under 0.9")
    return merged


def write_dump(articles: list[Article], out_dir, seed: int, rates: dict[str, float] | None = None) -> DumpInfo:
    """Write crawl/, labels.jsonl and articles.jsonl under `out_dir`; deterministic for `seed`."""
    rates = resolve_rates(rates)
    if not articles:
        raise ValueError("write_dump needs at least one article")
    out = Path(out_dir)
    crawl = out / "crawl"
    if crawl.exists() and any(crawl.iterdir()):
        raise FileExistsError(f"{crawl} is not empty: write the dump into a fresh directory")
    crawl.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"labkit-dump-{seed}")
    records: list[Rec] = build_records(articles, rates, CONTAINER_SHARES, rng)
    n_files, n_bytes = write_files(records, crawl, rates, rng, [a.title for a in articles])
    records.sort(key=lambda r: r.order_key)
    labels_path = out / "labels.jsonl"
    write_jsonl(labels_path, (r.label() for r in records))
    articles_path = write_jsonl(out / "articles.jsonl", (a.to_dict() for a in articles))
    ids = Counter(r.id for r in records)
    dup_ids = [i for i, c in ids.items() if c > 1]
    if dup_ids:  # a label set with colliding ids could not score a pipeline
        raise AssertionError(f"dump produced colliding record ids: {dup_ids[:5]}")
    return DumpInfo(
        out_dir=out,
        crawl_dir=crawl,
        labels_path=labels_path,
        articles_path=articles_path,
        n_articles=len(articles),
        n_records=len(records),
        n_files=n_files,
        n_bytes=n_bytes,
        expected=dict(Counter(r.expected for r in records)),
        defects=dict(Counter(d.split(":")[0] for r in records for d in r.defects)),
    )


def load_labels(out_dir) -> list[dict]:
    """The label lines of a dump written by `write_dump`."""
    return read_jsonl(Path(out_dir) / "labels.jsonl")
