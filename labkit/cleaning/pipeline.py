"""`clean_paths`: inputs -> clean.jsonl + rejects.jsonl + report.json, streaming, N processes.

Work is split by file.  Workers read, decode, extract, repair, validate and
sign (MinHash) records; the parent consumes their results *in input order*,
decides duplicates (the first occurrence is kept, so order matters) and
writes.  Hence `workers=N` writes byte-identical files to `workers=1`.  A
large file's results are spooled to a temporary file instead of travelling
back in memory, so the parent's memory stays flat whatever the input size.

The three outputs are written under temporary names and renamed at the end, report.json
last (`labkit.atomic.publish`): an interrupted run leaves no file that looks complete.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Iterable, Iterator

from labkit.atomic import publish, remove_stale
from labkit.cli.errors import RunFailed
from labkit.cleaning.dedup import Deduper, Signature, signatures
from labkit.cleaning.readers import EXTENSIONS, iter_files, read_file
from labkit.cleaning.rows import KeptRow, reject_line
from labkit.cleaning.validate import Limits, Outcome, clean_record
from labkit.progress import Progress


class WorkerDied(RunFailed):
    """A worker process of `clean_paths(workers > 1)` died; nothing was published (`labkit clean` exits 1)."""


SPOOL_BYTES = 4 << 20  # files bigger than this hand their results back through a temp file
# records held while their valid ones are signed together (`dedup.signatures`: numpy's per-call cost is paid
# per batch); a batch also ends at SIGN_BATCH_CHARS of body text, so what it holds stays a small multiple of the
# largest record, as without batching
SIGN_BATCH = 64
SIGN_BATCH_CHARS = 1 << 20


def _outcomes(path: Path, rel: str, limits: Limits) -> Iterator[Outcome]:
    for raw in read_file(path, rel):
        try:
            out = clean_record(raw, limits)
        except Exception as exc:  # noqa: BLE001 -- one record must never stop the run
            out = Outcome(
                raw.id,
                raw.source,
                None,
                None,
                list(raw.fixes),
                "processing_error",
                f"{raw.source}: {type(exc).__name__}: {exc}; please report this input",
                raw.original,
                raw.raw_b64,
            )
        yield out


def _signed(items: Iterable) -> Iterator[tuple]:
    """(item, its signature) in order: an Outcome's signature when it is valid, else None (rejects, and any
    other item passed through, such as the end-of-file marks of `_results`). Items come out a batch at a
    time, once the batch's valid records are signed."""
    held: list = []
    valid: list[tuple[str, str]] = []
    chars = 0
    for item in items:
        held.append(item)
        if isinstance(item, Outcome) and item.reason is None:
            valid.append((item.title or "", item.body or ""))
            chars += len(valid[-1][1])
        if len(held) >= SIGN_BATCH or chars >= SIGN_BATCH_CHARS:
            yield from _pair(held, signatures(valid))
            held, valid, chars = [], [], 0
    yield from _pair(held, signatures(valid))


def _pair(held: list, sigs: list[Signature]) -> Iterator[tuple]:
    it = iter(sigs)
    for item in held:
        yield item, (next(it) if isinstance(item, Outcome) and item.reason is None else None)


def process_file(path: Path, rel: str, limits: Limits) -> Iterator[tuple[Outcome, Signature | None]]:
    """Every record of one file: (outcome, signature of a valid record, else None)."""
    return _signed(_outcomes(path, rel, limits))


def _row(rec: Outcome, sig: Signature | None) -> tuple:
    """A record as the parent needs it: (reason, id, signature, fixes, payload).

    The workers serialise (`labkit.cleaning.rows`): a reject's payload is its finished line (bytes), a
    valid record's its `KeptRow`, which makes its clean row or, should the parent's in-order decision
    say so, its duplicate row.  The parent then only decides, counts and writes bytes -- no Outcome
    objects and no text travel twice."""
    if rec.reason is None:
        return None, rec.id, sig, rec.fixes, KeptRow.of(rec)
    return rec.reason, rec.id, None, None, reject_line(rec)


def _rows(path: Path, rel: str, limits: Limits) -> Iterator[tuple]:
    for rec, sig in process_file(path, rel, limits):
        yield _row(rec, sig)


def _task(args: tuple[str, str, Limits, str, int]) -> tuple[str, object]:
    """Worker entry: one file -> ("mem", rows) or ("spool", temp path) for big files."""
    path, rel, limits, spool_dir, spool_bytes = args
    p = Path(path)
    try:
        big = p.stat().st_size > spool_bytes
    except OSError:
        big = False
    if not big:
        return "mem", list(_rows(p, rel, limits))
    import tempfile

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


_FILE_END = object()  # `_results`: the records before it end a file


def _results(files: list[tuple[Path, str]], limits: Limits, workers: int, spool_dir: str, file_done=None):
    """Every record's row, in input order; `file_done()` is called after each file's last row."""
    file_done = file_done or (lambda: None)
    if workers <= 1:  # signing batches run across files: most files hold one record

        def marked():
            for path, rel in files:
                yield from _outcomes(path, rel, limits)
                yield _FILE_END

        for rec, sig in _signed(marked()):
            if rec is _FILE_END:
                file_done()
            else:
                yield _row(rec, sig)
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from labkit.procs import worker_start_method

    # the threshold travels with each task: workers start from a fresh interpreter, not a copy of this one
    tasks = [(str(p), rel, limits, spool_dir, SPOOL_BYTES) for p, rel in files]
    chunk = max(1, min(64, len(tasks) // (workers * 8)))
    # ProcessPoolExecutor, not multiprocessing.Pool: a worker that dies (killed for memory, or a script that
    # calls this outside `if __name__ == "__main__":`, which a fresh worker re-imports) breaks the pool with an
    # error; Pool silently replaces the dead worker and waits forever for its task.
    pool = ProcessPoolExecutor(workers, mp_context=mp.get_context(worker_start_method()))
    try:
        for kind, payload in pool.map(_task, tasks, chunksize=chunk):
            yield from _unspool(kind, payload)
            file_done()
    except BrokenProcessPool:
        raise WorkerDied(
            f"a cleaning worker process died before finishing its files (killed for memory, or a script that calls "
            f"clean_paths(workers={workers}) outside `if __name__ == '__main__':`): guard the call, or use workers=1"
        ) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def plan_files(inputs) -> tuple[list[tuple[Path, str]], list[str], int]:
    """What `labkit clean` reads, in its order: (files as (path, id-relative name), skipped paths, bytes).

    Both engines plan with it (`labkit.cleaning.datatrove_engine`), so they read the same files in the same order."""
    files, skipped, total = [], [], 0
    for path, rel in iter_files([str(p) for p in inputs]):
        if path.suffix.lower() in EXTENSIONS:
            files.append((path, rel))
            try:
                total += path.stat().st_size
            except OSError:
                pass
        else:
            skipped.append(str(path))
    return files, skipped, total


def clean_paths(
    inputs: Iterable[str | os.PathLike],
    out_dir: str | os.PathLike,
    workers: int = 1,
    min_title: int = 10,
    max_title: int = 60,
    min_body: int = 50,
    max_body: int | None = None,
    near_threshold: float = 0.8,
    progress: str = "off",
    progress_every_s: float = 10.0,
) -> dict:
    """Clean every record under `inputs` into `out_dir`; returns the report (also report.json).

    Raises `readers.InputError` for a missing input path and `OSError` when
    `out_dir` cannot be written; bad files and records never raise.  `progress`
    ('off', 'bar' or 'lines', `labkit.progress`) counts files and records; 'lines'
    prints one every `progress_every_s` seconds.
    """
    t0 = time.perf_counter()
    inputs = [str(p) for p in inputs]
    limits = Limits(min_title, max_title, min_body, max_body)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files, skipped, total_bytes = plan_files(inputs)
    reasons, fixes = Counter(), Counter()
    n_clean = n_rej = 0
    dedup = Deduper(near_threshold)
    bar = Progress(len(files), "clean", "files", progress, every_s=progress_every_s)

    def file_done():
        bar.update(1, records=n_clean + n_rej, clean=n_clean)

    remove_stale(out, ".spool-")  # a killed run's spooled results
    if workers > 1:  # only workers spool; one process needs no spool folder (tempfile, labkit.procs: imported lazily)
        import tempfile

        spooling = tempfile.TemporaryDirectory(dir=out, prefix=f".spool-{os.getpid()}-")
    else:
        spooling = contextlib.nullcontext("")
    with (
        publish(out / "clean.jsonl", out / "rejects.jsonl", out / "report.json") as (clean_to, rejects_to, report_to),
        bar,
        spooling as spool,
        open(clean_to, "wb", buffering=1 << 20) as fc,
        open(rejects_to, "wb", buffering=1 << 20) as fr,
    ):
        for reason, rid, sig, rec_fixes, payload in _results(files, limits, workers, spool, file_done):
            if reason is None:
                dup = dedup.check(rid, sig)
                if not dup:
                    fixes.update(rec_fixes)  # counted on kept records: what the clean set went through
                    n_clean += 1
                    fc.write(payload.clean_line())
                    continue
                reason, payload = "duplicate", payload.duplicate_line(f"{dup[0]} duplicate of {dup[1]}")
            n_rej += 1
            reasons[reason] += 1
            fr.write(payload)
        fc.close()
        fr.close()
        secs = time.perf_counter() - t0
        n = n_clean + n_rej
        report = {
            "inputs": inputs,
            "files": len(files),
            "skipped_files": skipped[:100],
            "n_skipped_files": len(skipped),
            "bytes": total_bytes,
            "records": n,
            "clean": n_clean,
            "rejected": n_rej,
            "reasons": dict(sorted(reasons.items())),
            "fixes": dict(sorted(fixes.items())),
            "seconds": round(secs, 3),
            "records_per_s": round(n / secs, 1) if secs else None,
            "mb_per_s": round(total_bytes / 1e6 / secs, 3) if secs else None,
            "workers": workers,
            "limits": asdict(limits),
            "near_threshold": near_threshold,
        }
        report_to.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
    return report
