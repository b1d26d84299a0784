"""Decide each record's container and defects, then write the crawl files.

`build_records` turns articles into `Rec`s (plus duplicates), drawing at most
one reject-defect per record and repairable defects only for records that a
correct pipeline keeps; `write_files` groups them into html/txt/jsonl/csv
files in mixed encodings (serialised by `pages`, which says where each record
landed) and places each record (`Rec.place`: its file, row and id) and its fixes.
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

from labkit.codes import ENCODING_FIXES
from labkit.corpus import dirt
from labkit.corpus.generator import Article
from labkit.corpus.pages import csv_text, html_page, jsonl_text, txt_file
from labkit.corpus.record import Rec

ORDER = ("csv", "html", "jsonl", "txt")  # sorted directory names = processing order
TEXT_CONTAINERS = ("csv", "jsonl", "txt")
ROWS_PER_FILE = {"jsonl": 50, "csv": 40}


def _weighted(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def build_records(articles: list[Article], rates: dict, shares: dict, rng: random.Random) -> list[Rec]:
    recs = [Rec(a, _weighted(rng, shares), a.title, a.body) for a in articles]
    n = len(articles)
    k_exact, k_near = round(rates["exact_duplicate"] * n), round(rates["near_duplicate"] * n)
    for j, i in enumerate(rng.sample(range(n), min(n, k_exact + k_near))):
        orig = recs[i]
        orig.protected = True
        kind = "exact_duplicate" if j < k_exact else "near_duplicate"
        # a later-sorting container (and a later position in it) keeps the original first
        dup = Rec(
            orig.article,
            rng.choice(ORDER[ORDER.index(orig.container) :]),
            orig.title,
            orig.body if kind == "exact_duplicate" else dirt.near_duplicate(orig.body, rng),
            is_dup=True,
        )
        dup.defects.append(kind)
        dup.expected = "duplicate"
        recs.append(dup)
    for r in recs:
        if not (r.protected or r.is_dup):
            _draw_reject(r, rates, rng)
        if r.expected in ("clean", "duplicate"):
            _draw_repairable(r, rates, rng)
    return recs


def _draw_reject(r: Rec, rates: dict, rng: random.Random) -> None:
    options = ["title_missing", "title_too_short", "title_too_long", "body_too_short", "replacement_chars"]
    if r.container == "txt":
        options.remove("title_missing")  # a .txt always has a first line
    options += {"csv": ["csv_misaligned"], "jsonl": ["json_truncated"]}.get(r.container, [])
    u, acc = rng.random(), 0.0
    for kind in options:
        acc += rates[kind]
        if u < acc:
            break
    else:
        return
    r.reject(kind)
    a = r.article
    if kind == "title_missing":
        r.title, r.title_style = None, rng.choice(("absent", "null", "empty"))
    elif kind == "title_too_short":
        r.title = dirt.short_title(a.title, rng)
    elif kind == "title_too_long":
        r.title = dirt.long_title(a.title, a.body, rng)
    elif kind == "body_too_short":
        r.body = dirt.short_body(a.body, rng)
    elif kind == "replacement_chars":
        r.body = dirt.replacement_damage(a.body, rng, fraction=rng.uniform(0.15, 0.35))
    elif kind == "csv_misaligned":
        r.misaligned = rng.choice(("extra", "missing"))


def _draw_repairable(r: Rec, rates: dict, rng: random.Random) -> None:
    text_like = r.container in TEXT_CONTAINERS
    if r.container == "html":
        r.fixes.add("html_extracted")
    if r.container in ("jsonl", "txt") and not (r.protected or r.is_dup) and rng.random() < rates["extreme_length"]:
        r.body = dirt.extreme_body(r.body, rng)
        r.defects.append("extreme_length")
    if rng.random() < rates["script"]:
        kind = _weighted(rng, {"inline": 0.25, "multiline": 0.35, "upper": 0.25, "style": 0.15})
        r.body = dirt.insert_between_paragraphs(r.body, dirt.script_block(kind, rng), rng)
        r.defects.append(f"script_{kind}")
        if text_like:
            r.fixes.add("script_removed")
    if rng.random() < rates["boilerplate"]:
        r.body = dirt.add_boilerplate(r.body, rng)
        r.defects.append("boilerplate")
        r.fixes.add("boilerplate_removed")
    if r.container == "csv" and rng.random() < rates["csv_swapped"]:
        r.swapped = True
        r.defects.append("csv_swapped")
        r.fixes.add("fields_swapped")
    if not text_like:
        return
    if rng.random() < rates["mojibake"]:
        codec = rng.choice(("latin-1", "cp1252"))
        try:
            r.title, r.body = dirt.mojibake(r.title, codec), dirt.mojibake(r.body, codec)
        except ValueError:
            return
        r.defects.append(f"mojibake_{codec}")
        r.fixes.add("mojibake_repaired")
        return
    if rng.random() < rates["control_chars"]:
        r.body = dirt.add_control_chars(r.body, rng)
        r.defects.append("control_chars")
        r.fixes.add("control_chars_removed")
    if rng.random() < rates["whitespace"]:
        r.body = dirt.add_whitespace(r.body, rng)
        r.defects.append("whitespace")
        r.fixes.add("whitespace_normalized")


def _pick_encoding(rng: random.Random, rates: dict, single: bool) -> str:
    if rng.random() >= rates["non_utf8"]:
        return "utf-8"
    if single:
        return _weighted(rng, {"gbk": 0.3, "gb18030": 0.2, "utf-8-sig": 0.2, "big5": 0.15, "utf-16": 0.15})
    return _weighted(rng, {"gbk": 0.35, "gb18030": 0.3, "utf-8-sig": 0.35})


_S2TW = None


def _traditional(text: str) -> str:
    global _S2TW
    if _S2TW is None:
        import opencc  # only Big5 files need it

        _S2TW = opencc.OpenCC("s2tw")
    return _S2TW.convert(text)


def _encode(text: str, enc: str) -> tuple[bytes, str]:
    """`text` in `enc`, or in GB18030 (which encodes all of Unicode) when `enc` cannot hold it."""
    try:
        return text.encode(enc), enc
    except UnicodeEncodeError:
        return text.encode("gb18030"), "gb18030"


def _apply_encoding(recs: list[Rec], enc: str) -> None:
    for r in recs:
        if enc != "utf-8":
            r.defects.append(f"encoding:{enc}")
            r.fixes.add(ENCODING_FIXES[enc])


def write_files(recs: list[Rec], crawl: Path, rates: dict, rng: random.Random, titles: list[str]) -> tuple[int, int]:
    """Write every record into crawl/; returns (files, bytes)."""
    n_files = n_bytes = 0
    by = {c: [r for r in recs if r.container == c] for c in ORDER}
    for c in ORDER:
        (crawl / c).mkdir(exist_ok=True)
    for i, r in enumerate(by["html"] + by["txt"]):
        c = r.container
        idx = i + 1 if c == "html" else i + 1 - len(by["html"])
        r.place(f"{c}/{idx:06d}.{c}")
        enc = _pick_encoding(rng, rates, single=True)
        if enc == "big5" and (r.protected or r.is_dup):
            enc = "gb18030"  # traditional text would no longer match its duplicate
        text = _single_file_text(r, enc, rates, rng, titles)
        if enc == "big5":
            try:
                data = text.encode("big5")
            except UnicodeEncodeError:  # e.g. '©' or mojibake: keep simplified text, use GB18030
                enc = "gb18030"
                r.defects = [d for d in r.defects if d != "meta_charset_lie"]
                text = _single_file_text(r, enc, rates, rng, titles)
        if enc != "big5":
            data, enc = _encode(text, enc)
        _apply_encoding([r], enc)
        n_files, n_bytes = n_files + 1, n_bytes + _write(crawl / r.file, data)
    for c in ("jsonl", "csv"):
        rows, size = by[c], ROWS_PER_FILE[c]
        for k in range(0, len(rows), size):
            chunk = rows[k : k + size]
            rel = f"{c}/{'part' if c == 'jsonl' else 'export'}-{k // size + 1:04d}.{c}"
            has_id = rng.random() < 0.7
            text, placed = jsonl_text(chunk, rel, has_id, rng) if c == "jsonl" else csv_text(chunk, rel, has_id)
            for r, (row, id_field) in zip(chunk, placed, strict=True):
                r.place(rel, row, id_field)
            data, enc = _encode(text, _pick_encoding(rng, rates, single=False))
            _apply_encoding(chunk, enc)
            n_files, n_bytes = n_files + 1, n_bytes + _write(crawl / rel, data)
    n_bin = round(rates["binary_file"] * sum(1 for r in recs if not r.is_dup))
    for k in range(n_bin):
        a = rng.choice(recs).article
        r = Rec(a, "bin", defects=["binary_file"], expected="not_text")
        r.place(f"txt/scan-{k + 1:04d}.txt")
        page = html_page(a.title, a.body, rng, "utf-8", [])
        recs.append(r)
        n_files, n_bytes = n_files + 1, n_bytes + _write(crawl / r.file, gzip.compress(page.encode(), mtime=0))
    return n_files, n_bytes


def _single_file_text(r: Rec, enc: str, rates: dict, rng: random.Random, titles: list[str]) -> str:
    if r.container == "html":
        declared = _declared(r, enc, rates, rng)
        text = html_page(r.title, r.body, rng, declared, rng.sample(titles, min(4, len(titles))))
    else:
        text = txt_file(r.title, r.body)
    return _traditional(text) if enc == "big5" else text


def _declared(r: Rec, enc: str, rates: dict, rng: random.Random) -> str | None:
    truthful = {"utf-8-sig": "utf-8"}.get(enc, enc)
    if rng.random() < rates["meta_charset_lie"]:
        if "meta_charset_lie" not in r.defects:
            r.defects.append("meta_charset_lie")
        return "gbk" if enc in ("utf-8", "utf-8-sig") else "utf-8"
    return None if rng.random() < 0.1 else truthful


def _write(path: Path, data: bytes) -> int:
    path.write_bytes(data)
    return len(data)
