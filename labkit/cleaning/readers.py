"""Streaming readers: one `RawRecord` per input record, whatever the file looks like.

Record ids (the contract the corpus labels use): the record's `id` field or
column when present; otherwise for whole-file records (.html/.htm/.txt) the
path relative to the INPUT directory (the file name for a file given
directly); for jsonl lines / csv rows without an id that path plus
`:<line or data-row number, from 1>`.

Readers never raise on bad data: a record they cannot read comes out with a
`reason` so the pipeline rejects it -- nothing is dropped on the floor.
Memory is bounded by the largest single record, never by file size.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from labkit.cleaning.decode import decode_bytes, declared_charset, fix_code, sniff

WHOLE_FILE = {".html": "html", ".htm": "html", ".txt": "txt"}
ROWS = {".jsonl": "jsonl", ".csv": "csv", ".tsv": "tsv"}
EXTENSIONS = tuple(sorted({**WHOLE_FILE, **ROWS}))
MAX_RAW_BYTES = 1 << 20  # rejects keep at most 1 MiB of undecodable raw bytes (base64)
_SNIFF_BYTES = 1 << 16

csv.field_size_limit(1 << 30)  # a 10 MB single-line body is data, not a reason to crash


class InputError(Exception):
    """An INPUT path the run cannot start with (missing, not a file or directory)."""


@dataclass
class RawRecord:
    """One input record before validation; `reason` set when it could not even be read."""

    id: str
    source: str
    kind: str  # html | txt | jsonl | csv | tsv
    title: str | None = None
    body: str | None = None
    fixes: list[str] = field(default_factory=list)
    reason: str | None = None
    detail: str = ""
    original: Any = None  # the record as best decoded (dict, row list or text)
    raw_b64: str | None = None  # raw bytes when they could not be decoded


def raw_b64(data: bytes) -> str:
    return base64.b64encode(data[:MAX_RAW_BYTES]).decode("ascii")


def iter_files(inputs: list[str | os.PathLike]) -> Iterator[tuple[Path, str]]:
    """(path, id-relative name) for every input file, directories walked in sorted order."""
    for given in inputs:
        p = Path(given)
        if p.is_dir():
            # one global order by relative path, the order `duplicate` decisions follow; relative names are cut
            # from the walked strings, one Path per file (Path joins and relative_to were most of the planning)
            top = str(p)
            cut = len(os.path.join(top, ""))
            found = sorted(
                (full[cut:].replace(os.sep, "/"), full)
                for root, _dirs, files in os.walk(top)
                for full in (os.path.join(root, name) for name in files)
            )
            for rel, full in found:
                yield Path(full), rel
        elif p.is_file():
            yield p, p.name
        elif p.exists():
            raise InputError(f"{p}: not a regular file or directory; pass files or directories")
        else:
            raise InputError(f"{p}: no such file or directory; check the INPUT path")


def read_file(path: Path, rel: str) -> Iterator[RawRecord]:
    """All records of one file (empty for an unknown extension: the pipeline counts it as skipped)."""
    ext = path.suffix.lower()
    source = str(path)
    try:
        if ext in WHOLE_FILE:
            yield _whole_file(path.read_bytes(), rel, source, WHOLE_FILE[ext])
        elif ext == ".jsonl":
            yield from _jsonl(path, rel, source)
        elif ext in (".csv", ".tsv"):
            yield from _csv(path, rel, source, "\t" if ext == ".tsv" else ",")
    except OSError as exc:  # unreadable file: one reject standing for the whole file
        yield RawRecord(
            rel,
            source,
            ROWS.get(ext) or WHOLE_FILE.get(ext, "?"),
            reason="unreadable",
            detail=f"{source}: {exc.strerror or exc}; fix the file's permissions and re-run",
        )


def _whole_file(data: bytes, rel: str, source: str, kind: str) -> RawRecord:
    if not data.strip():
        return RawRecord(rel, source, kind, reason="empty", detail=f"{source}: empty file")
    claimed = declared_charset(data) if kind == "html" else None
    dec = decode_bytes(data, declared=claimed)
    if dec.text is None:
        return RawRecord(rel, source, kind, reason=dec.reason, detail=f"{source}: {dec.detail}", raw_b64=raw_b64(data))
    rec = RawRecord(rel, source, kind, fixes=list(dec.fixes), original=dec.text)
    if kind == "html":
        if claimed and dec.encoding and claimed != dec.encoding.replace("-sig", ""):
            rec.fixes.append("charset_mismatch")
        rec.body = dec.text  # extraction happens in the pipeline (parser cost stays in workers)
    else:
        text = dec.text.lstrip("\ufeff")
        head, _, rest = text.lstrip("\r\n \t\u3000").partition("\n")
        rec.title, rec.body = head, rest
    return rec


def _decoded_lines(f, hint: str | None) -> Iterator[tuple[bytes, str | None, str, list[str]]]:
    """(raw line, text or None, detail, fixes) per physical line, decoding with the file's sniffed encoding."""
    if hint and hint.startswith(("utf-16", "utf-32")):  # NUL-rich encodings: no byte-level split
        for line in io.TextIOWrapper(f, encoding=hint, errors="replace", newline=""):
            ok = "\ufffd" not in line
            yield (
                line.encode("utf-8", "surrogatepass"),
                (line if ok else None),
                ("" if ok else f"invalid {hint} bytes"),
                [fix_code(hint)],
            )
        return
    bom = hint == "utf-8-sig"  # a file-level fact: every row of the file was behind that BOM
    first = True
    for line in f:
        if first:
            first = False
            line = line[3:] if line.startswith(b"\xef\xbb\xbf") else line
        dec = decode_bytes(line, hint=None if bom else hint)
        fixes = ["bom_stripped", *dec.fixes] if bom and dec.text is not None else dec.fixes
        yield line, dec.text, dec.detail or (dec.reason or ""), fixes


def _jsonl(path: Path, rel: str, source: str) -> Iterator[RawRecord]:
    with open(path, "rb") as f:
        hint, reason = sniff(f.read(_SNIFF_BYTES))
        f.seek(0)
        for n, (raw, text, detail, fixes) in enumerate(_decoded_lines(f, hint), start=1):
            if not raw.strip():
                continue  # blank lines are not records
            rid, src = f"{rel}:{n}", f"{source}:{n}"
            if text is None:
                yield RawRecord(
                    rid,
                    src,
                    "jsonl",
                    reason=reason or "encoding_undecodable",
                    detail=f"{src}: {detail}",
                    raw_b64=raw_b64(raw),
                )
                continue
            yield _json_record(text, rid, src, fixes)


def _json_record(text: str, rid: str, src: str, fixes: list[str]) -> RawRecord:
    try:
        obj = json.loads(text, strict=False)  # control chars inside strings: repaired later
    except ValueError as exc:
        return RawRecord(
            rid,
            src,
            "jsonl",
            reason="malformed_record",
            original=text,
            detail=f"{src}: invalid JSON ({exc}); a truncated or hand-edited line",
        )
    if not isinstance(obj, dict):
        return RawRecord(
            rid,
            src,
            "jsonl",
            reason="malformed_record",
            original=obj,
            detail=f"{src}: a JSON {type(obj).__name__}, expected an object with title/body",
        )
    if obj.get("id") not in (None, ""):
        rid = str(obj["id"])
    rec = RawRecord(rid, src, "jsonl", fixes=fixes, original=obj)
    for key in ("title", "body"):
        value = obj.get(key)
        if isinstance(value, (dict, list)):
            return RawRecord(
                rid,
                src,
                "jsonl",
                reason="malformed_record",
                original=obj,
                detail=f"{src}: field {key!r} is a JSON {type(value).__name__}, expected text",
            )
        setattr(rec, key, None if value is None else str(value))
    return rec


def _csv(path: Path, rel: str, source: str, delimiter: str) -> Iterator[RawRecord]:
    kind = "tsv" if delimiter == "\t" else "csv"
    with open(path, "rb") as f:
        hint, _ = sniff(f.read(_SNIFF_BYTES))
        f.seek(0)
        bad: dict[int, bytes] = {}  # physical line -> raw bytes, for lines that did not decode
        line_fixes: dict[int, list[str]] = {}
        lineno = 0

        def lines() -> Iterator[str]:
            nonlocal lineno
            for raw, text, _detail, fixes in _decoded_lines(f, hint):
                lineno += 1
                line_fixes[lineno] = fixes
                if text is None:
                    bad[lineno] = raw
                    text = raw.decode("utf-8", "replace")
                yield text

        reader = csv.reader(lines(), delimiter=delimiter)
        header, last_line, row_no = None, 0, 0
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:  # csv's own parse errors; the rest of the file is still read
                row_no += 1
                yield RawRecord(
                    f"{rel}:{row_no}",
                    f"{source}:{row_no}",
                    kind,
                    reason="malformed_record",
                    detail=f"{source} line {reader.line_num}: {exc}",
                )
                last_line = reader.line_num
                continue
            span = range(last_line + 1, reader.line_num + 1)
            last_line = reader.line_num
            if header is None:
                if not row or not any(c.strip() for c in row):
                    continue
                header = [c.strip().lstrip("\ufeff").lower() for c in row]
                continue
            if not any(c.strip() for c in row):
                continue  # blank line
            row_no += 1
            fixes = sorted({fx for ln in span for fx in line_fixes.get(ln, ())})
            yield _csv_record(row, header, rel, source, row_no, kind, hint, span, bad, fixes)
            for ln in span:
                bad.pop(ln, None)
                line_fixes.pop(ln, None)


def _csv_record(
    row: list[str],
    header: list[str],
    rel: str,
    source: str,
    row_no: int,
    kind: str,
    hint: str | None,
    span: range,
    bad: dict[int, bytes],
    fixes: list[str],
) -> RawRecord:
    rid, src = f"{rel}:{row_no}", f"{source}:{row_no}"
    if "id" in header and len(row) > header.index("id") and row[header.index("id")].strip():
        rid = row[header.index("id")].strip()
    broken = [bad[ln] for ln in span if ln in bad]
    if broken:
        return RawRecord(
            rid,
            src,
            kind,
            reason="encoding_undecodable",
            original=row,
            detail=f"{src}: bytes not decodable as {hint or 'any detected encoding'}",
            raw_b64=raw_b64(b"".join(broken)),
        )
    if "title" not in header or "body" not in header:
        return RawRecord(
            rid,
            src,
            kind,
            reason="malformed_record",
            original=row,
            detail=f"{source}: header {header} names no title/body columns; add a header row",
        )
    rec = RawRecord(rid, src, kind, fixes=fixes, original=row)
    if len(row) == len(header):
        fields = dict(zip(header, row))
        rec.title, rec.body = fields["title"], fields["body"]
    else:
        rec.reason = "misaligned_fields"
        rec.detail = (
            f"{src}: {len(row)} fields for the {len(header)}-column header {header}; "
            "a shifted row cannot be realigned with confidence -- quote fields containing the delimiter"
        )
    return rec
