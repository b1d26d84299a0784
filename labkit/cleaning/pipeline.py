"""`clean_paths`: inputs -> clean.jsonl + rejects.jsonl + report.json, streaming, N processes.

Work is split by file.  Workers read, decode, extract, repair, validate and
sign (MinHash) records; the parent consumes their results *in input order*,
decides duplicates (the first occurrence is kept, so order matters) and
writes.  Hence `workers=N` writes byte-identical files to `workers=1`.  A
large file's results are spooled to a temporary file instead of travelling
back in memory, so the parent's memory stays flat whatever the input size.
"""
from __future__ import annotations

import json
import os
import pickle
import tempfile
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Iterable, Iterator

from labkit.cleaning.dedup import Deduper, signature
from labkit.cleaning.readers import EXTENSIONS, iter_files, read_file
from labkit.cleaning.validate import Limits, Outcome, clean_record

SPOOL_BYTES = 4 << 20  # files bigger than this hand their results back through a temp file


def _process(path: Path, rel: str, limits: Limits) -> Iterator[tuple[Outcome, object]]:
    for raw in read_file(path, rel):
        try:
            out = clean_record(raw, limits)
        except Exception as exc:  # noqa: BLE001 -- one record must never stop the run
            out = Outcome(raw.id, raw.source, None, None, list(raw.fixes), "processing_error",
                          f"{raw.source}: {type(exc).__name__}: {exc}; please report this input",
                          raw.original, raw.raw_b64)
        sig = signature(out.title or "", out.body or "") if out.reason is None else None
        yield out, sig


_JSON = json.JSONEncoder(ensure_ascii=False).encode  # what json.dumps(x, ensure_ascii=False) returns
_JSON_ASCII = json.JSONEncoder(ensure_ascii=True).encode
_EOL = os.linesep  # what `_dump`'s text-mode write ends a line with
_EOLB = _EOL.encode("ascii")


def _line(obj: dict) -> bytes:
    """`_dump`'s line as UTF-8 bytes (lone surrogates: the whole row escaped, as `_dump` does)."""
    try:
        return (_JSON(obj) + _EOL).encode("utf-8")
    except UnicodeEncodeError:
        return (_JSON_ASCII(obj) + _EOL).encode("ascii")


def _pieces(rec: Outcome) -> tuple:
    """A valid record's JSON values (id, title, body, source, fixes) as UTF-8 bytes, then whether
    they are escaped: all of them (ensure_ascii) if any holds a lone surrogate, as `_dump` does."""
    vals = (rec.id, rec.title, rec.body, rec.source, rec.fixes)
    try:
        return (*(_JSON(v).encode("utf-8") for v in vals), False)
    except UnicodeEncodeError:
        return (*(_JSON_ASCII(v).encode("ascii") for v in vals), True)


def _clean_line(p: tuple) -> bytes:
    """{"id", "title", "body", "source", "fixes"}: the bytes `_dump` writes for a kept record."""
    return b"".join((b'{"id": ', p[0], b', "title": ', p[1], b', "body": ', p[2], b', "source": ', p[3],
                     b', "fixes": ', p[4], b"}", _EOLB))


def _duplicate_line(p: tuple, detail: str) -> bytes:
    """The reject row `_dump` writes for a duplicate, from the same pieces (keys in its order)."""
    if p[5]:
        d = _JSON_ASCII(detail).encode("ascii")
    else:
        try:
            d = _JSON(detail).encode("utf-8")
        except UnicodeEncodeError:  # the original's id holds a lone surrogate: the whole row escaped
            row = {"id": json.loads(p[0]), "source": json.loads(p[3]), "reason": "duplicate", "detail": detail,
                   "fixes": json.loads(p[4]), "original": {"title": json.loads(p[1]), "body": json.loads(p[2])}}
            return _line(row)
    return b"".join((b'{"id": ', p[0], b', "source": ', p[3], b', "reason": "duplicate", "detail": ', d,
                     b', "fixes": ', p[4], b', "original": {"title": ', p[1], b', "body": ', p[2], b"}}", _EOLB))


def _rows(path: Path, rel: str, limits: Limits) -> Iterator[tuple]:
    """`_process`'s results as the parent needs them: (reason, id, signature, fixes, payload).

    The workers serialise: a reject's payload is its finished line (bytes), a valid record's
    the JSON pieces of its clean row, which also make its duplicate row should the parent's
    in-order decision say so.  The parent then only decides, counts and writes bytes -- no
    Outcome objects and no text travel twice."""
    for rec, sig in _process(path, rel, limits):
        if rec.reason is None:
            yield None, rec.id, sig, rec.fixes, _pieces(rec)
        else:
            row = {"id": rec.id, "source": rec.source, "reason": rec.reason, "detail": rec.detail,
                   "fixes": rec.fixes, "original": rec.original}
            if rec.raw_b64 is not None:
                row["raw_b64"] = rec.raw_b64
            yield rec.reason, rec.id, None, None, _line(row)


def _task(args: tuple[str, str, Limits, str]) -> tuple[str, object]:
    """Worker entry: one file -> ("mem", rows) or ("spool", temp path) for big files."""
    path, rel, limits, spool_dir = args
    p = Path(path)
    try:
        big = p.stat().st_size > SPOOL_BYTES
    except OSError:
        big = False
    if not big:
        return "mem", list(_rows(p, rel, limits))
    fd, tmp = tempfile.mkstemp(suffix=".pkl", dir=spool_dir)
    with os.fdopen(fd, "wb") as f:
        for item in _rows(p, rel, limits):
            pickle.dump(item, f, protocol=pickle.HIGHEST_PROTOCOL)
    return "spool", tmp


def _unspool(kind: str, payload) -> Iterator[tuple]:
    if kind == "mem":
        yield from payload
        return
    try:
        with open(payload, "rb") as f:
            while True:
                try:
                    yield pickle.load(f)
                except EOFError:
                    return
    finally:
        os.unlink(payload)


def _results(files: list[tuple[Path, str]], limits: Limits, workers: int, spool_dir: str):
    if workers <= 1:
        for path, rel in files:
            yield from _rows(path, rel, limits)
        return
    import multiprocessing as mp

    tasks = [(str(p), rel, limits, spool_dir) for p, rel in files]
    chunk = max(1, min(64, len(tasks) // (workers * 8)))
    with mp.get_context("spawn" if os.name == "nt" else "fork").Pool(workers) as pool:
        for kind, payload in pool.imap(_task, tasks, chunksize=chunk):
            yield from _unspool(kind, payload)


def _dump(f, obj: dict) -> None:
    try:
        f.write(json.dumps(obj, ensure_ascii=False) + "\n")
    except UnicodeEncodeError:  # lone surrogates from \\ud800-style JSON escapes: keep them escaped
        f.write(json.dumps(obj, ensure_ascii=True) + "\n")


def clean_paths(inputs: Iterable[str | os.PathLike], out_dir: str | os.PathLike, workers: int = 1,
                min_title: int = 10, max_title: int = 60, min_body: int = 50,
                max_body: int | None = None, near_threshold: float = 0.8) -> dict:
    """Clean every record under `inputs` into `out_dir`; returns the report (also report.json).

    Raises `readers.InputError` for a missing input path and `OSError` when
    `out_dir` cannot be written; bad files and records never raise.
    """
    t0 = time.perf_counter()
    inputs = [str(p) for p in inputs]
    limits = Limits(min_title, max_title, min_body, max_body)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files, skipped, total_bytes = [], [], 0
    for path, rel in iter_files(inputs):
        if path.suffix.lower() in EXTENSIONS:
            files.append((path, rel))
            try:
                total_bytes += path.stat().st_size
            except OSError:
                pass
        else:
            skipped.append(str(path))
    reasons, fixes = Counter(), Counter()
    n_clean = n_rej = 0
    dedup = Deduper(near_threshold)
    with tempfile.TemporaryDirectory(dir=out, prefix=".spool-") as spool, \
            open(out / "clean.jsonl", "wb", buffering=1 << 20) as fc, \
            open(out / "rejects.jsonl", "wb", buffering=1 << 20) as fr:
        for reason, rid, sig, rec_fixes, payload in _results(files, limits, workers, spool):
            if reason is None:
                dup = dedup.check(rid, sig)
                if not dup:
                    fixes.update(rec_fixes)  # counted on kept records: what the clean set went through
                    n_clean += 1
                    fc.write(_clean_line(payload))
                    continue
                reason, payload = "duplicate", _duplicate_line(payload, f"{dup[0]} duplicate of {dup[1]}")
            n_rej += 1
            reasons[reason] += 1
            fr.write(payload)
    secs = time.perf_counter() - t0
    n = n_clean + n_rej
    report = {
        "inputs": inputs, "files": len(files), "skipped_files": skipped[:100], "n_skipped_files": len(skipped),
        "bytes": total_bytes, "records": n, "clean": n_clean, "rejected": n_rej,
        "reasons": dict(sorted(reasons.items())), "fixes": dict(sorted(fixes.items())),
        "seconds": round(secs, 3), "records_per_s": round(n / secs, 1) if secs else None,
        "mb_per_s": round(total_bytes / 1e6 / secs, 3) if secs else None,
        "workers": workers, "limits": asdict(limits), "near_threshold": near_threshold,
    }
    (out / "report.json").write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
    return report
