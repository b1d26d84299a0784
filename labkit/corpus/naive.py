"""The story's naive loading recipe, kept exactly as naive as it was.

chardet on every file, decode with `errors="replace"`, the classic
non-DOTALL, case-sensitive `<script.*?>.*?</script>` regex, a regex that
strips tags, and one title-length check.  Notebook 01 trains on what this
returns; the cleaning benchmark races it.  Do not "fix" it here: the fixes
live in `labkit.cleaning`, and the difference between the two is the lesson.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
from pathlib import Path

import chardet

SCRIPT_RE = re.compile(r"<script.*?>.*?</script>")  # the classic: misses multi-line and <SCRIPT>
TAG_RE = re.compile(r"<[^>]+>")
TITLE_RE = re.compile(r"<title>(.*?)</title>")
BODY_RE = re.compile(r"<body[^>]*>")
MAX_TITLE = 100  # the story's only quality check: a title exists and is not absurdly long


def naive_decode(raw: bytes) -> str:
    """chardet's guess, errors replaced with U+FFFD -- where the story's mojibake came from."""
    enc = chardet.detect(raw)["encoding"] or "utf-8"
    try:
        return raw.decode(enc, errors="replace")
    except LookupError:
        return raw.decode("utf-8", errors="replace")


def strip_markup(text: str) -> str:
    text = SCRIPT_RE.sub("", text)
    text = TAG_RE.sub("", text)
    lines = (ln.strip() for ln in html.unescape(text).splitlines())
    return "\n".join(ln for ln in lines if ln)


def _html_record(text: str) -> tuple[str, str]:
    m = TITLE_RE.search(text)
    title = html.unescape(m.group(1)).strip() if m else ""
    parts = BODY_RE.split(text, maxsplit=1)
    body = strip_markup(parts[-1])
    # drop the <h1> copy of the title so the body does not simply contain the answer
    body = "\n".join(ln for ln in body.split("\n") if ln != title)
    return title, body


def _rows(path: Path, text: str, rel: str, st: dict):
    if path.suffix == ".jsonl":
        for n, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                st["dropped_malformed"] += 1  # the story's loader skipped bad lines without a word
                continue
            if isinstance(obj, dict):
                yield obj.get("id") or f"{rel}:{n}", obj.get("title"), obj.get("body"), f"{rel}:{n}"
    else:
        for n, row in enumerate(csv.DictReader(io.StringIO(text)), start=1):
            yield row.get("id") or f"{rel}:{n}", row.get("title"), row.get("body"), f"{rel}:{n}"


def naive_load(crawl_dir, stats: dict | None = None) -> list[dict]:
    """Records `{id, title, body, source}` the naive way; `stats` (if given) gets counts of what was dropped."""
    root = Path(crawl_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"naive_load: {root} is not a directory (expected a dump's crawl/)")
    out: list[dict] = []
    st = {"files": 0, "records_seen": 0, "dropped_title": 0, "dropped_malformed": 0}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        st["files"] += 1
        text = naive_decode(path.read_bytes())
        if path.suffix in (".html", ".htm"):
            items = [(rel, *_html_record(text), rel)]
        elif path.suffix == ".txt":
            first, _, rest = text.partition("\n")
            items = [(rel, first.strip(), strip_markup(rest), rel)]
        elif path.suffix in (".jsonl", ".csv"):
            items = list(_rows(path, text, rel, st))
        else:
            continue
        for rid, title, body, source in items:
            st["records_seen"] += 1
            title, body = str(title or ""), strip_markup(str(body or ""))
            if not title or len(title) > MAX_TITLE:
                st["dropped_title"] += 1
                continue
            out.append({"id": str(rid), "title": title, "body": body, "source": source})
    if stats is not None:
        stats.update(st, kept=len(out))
    return out
