"""Outputs that cannot lie: write under a temporary name, rename into place when complete.

Every output a command promises (cleaning's clean.jsonl / rejects.jsonl / report.json, the
ONNX folder of `labkit export`, `labkit train --save-model`'s model folder, reports and
pointer files) is written here:

* `atomic_write_text(path, text)`: one small file, staged under a name of its own, replaced in one rename;
* `publish(*finals)`: a block that writes each output to a hidden sibling
  `.<name>.partial-<pid>` (a file, or with `directory=True` a folder) and, when the block
  ends normally, renames them over `finals` in the order given -- the last one (a report)
  appears last, so its presence means the others are complete.  If the block raises, or
  the process gets SIGTERM meanwhile (and no SIGTERM handler of the program's own lets it
  go on), the partial outputs are removed; after SIGKILL they
  stay hidden under their `.partial-<pid>` names, and the next `publish` of the same
  outputs removes those of processes that are gone.

`LABKIT_HOLD_BEFORE_PUBLISH=SECONDS` makes `publish` wait that long with everything
staged, before the renames: the interruption tests use it to hit that moment.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Iterator

HOLD_ENV = "LABKIT_HOLD_BEFORE_PUBLISH"
PARTIAL = ".partial-"


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Replace `path` with `text` atomically: written to a temporary file of this write's own beside it
    (`.<name>.<random>.tmp`), then renamed over `path`.  Two writers of one file never share a temporary name,
    so a reader sees one whole text or the other."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as f:  # "x": a name in use is an error, never someone else's file
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return path


def partial_path(final: str | Path, pid: int | None = None) -> Path:
    """Where `final` is written before it is complete: `.<name>.partial-<pid>` beside it."""
    final = Path(final)
    return final.with_name(f".{final.name}{PARTIAL}{pid or os.getpid()}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def remove_stale(parent: str | Path, prefix: str) -> list[Path]:
    """Remove `<parent>/<prefix><pid>...` left by processes that no longer run (a SIGKILL); returns them."""
    gone = []
    for p in Path(parent).glob(f"{prefix}*"):
        pid = p.name[len(prefix) :].split("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            _remove(p)
            gone.append(p)
    return gone


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[dict]:
    """In this process's main thread, SIGTERM during the block ends it through its cleanup; the SIGTERM handler in
    place before is back when the block ends.

    SIGTERM goes to that handler first, if one was installed: it decides what SIGTERM means here (a server's graceful
    stop returns, and the block goes on; one that raises ends the block through its cleanup).  Where SIGTERM had its
    default action, SystemExit(143) is raised, so `finally` blocks run; ignored stays ignored.  A handler Python did
    not install (C code's) could not be put back, so it is left in place.  Children forked meanwhile (cleaning's worker
    pool) inherit the handler; in them SIGTERM does what it did before the block."""
    received: dict = {}
    previous = signal.getsignal(signal.SIGTERM)
    if threading.current_thread() is not threading.main_thread() or previous is None:
        yield received
        return
    owner = os.getpid()

    def handler(signum, frame):
        if os.getpid() != owner:
            signal.signal(signum, previous)
            os.kill(os.getpid(), signum)
            return
        if callable(previous):
            previous(signum, frame)
            return
        if previous == signal.SIG_IGN:
            return
        received["signum"] = signum
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def publish(*finals: str | Path, directory: bool = False) -> Iterator[list[Path]]:
    """Yield the temporary paths to write `finals` to; rename them into place when the block succeeds.

    With `directory=True` each temporary path is an empty folder, made here; otherwise nothing
    is created (write the files).  An existing output is replaced only at the end: a
    folder is moved aside, then removed once the new one is in place."""
    finals_p = [Path(f) for f in finals]
    for f in finals_p:
        f.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(f.parent, f".{f.name}{PARTIAL}")
    temps = [partial_path(f) for f in finals_p]
    for t in temps:
        _remove(t)
        if directory:
            t.mkdir()
    with _sigterm_raises() as received:
        try:
            yield temps
            hold = float(os.environ.get(HOLD_ENV) or 0)
            if hold > 0:
                time.sleep(hold)
            _commit(finals_p, temps)
        except BaseException:
            for t in temps:
                _remove(t)
            if received:
                # the SystemExit raised for SIGTERM can come back as another exception when it was raised inside a
                # library's callback (torch's ONNX exporter turned it into exit 1 under load): it is still SIGTERM
                raise SystemExit(128 + received["signum"]) from None
            raise


def _commit(finals: list[Path], temps: list[Path]) -> None:
    """Old outputs go first, the last one (the report) first of all, so no mix of old and new looks complete."""
    asides = []
    for f in reversed(finals):
        if f.is_dir() and not f.is_symlink():
            aside = partial_path(f).with_name(partial_path(f).name + "-old")
            _remove(aside)
            os.replace(f, aside)
            asides.append(aside)
        else:
            with contextlib.suppress(FileNotFoundError):
                f.unlink()
    for f, t in zip(finals, temps):
        for p in t.iterdir() if t.is_dir() else [t]:  # the data is on disk before the rename shows it
            if p.is_file():
                with open(p, "rb") as fh:
                    os.fsync(fh.fileno())
        os.replace(t, f)
    for aside in asides:
        shutil.rmtree(aside, ignore_errors=True)
