"""Progress the ecosystem's way: a tqdm bar on a terminal, a plain line every so often in a log, or nothing.

`progress_mode(quiet)` picks it as the Hugging Face Trainer and accelerate's examples do:
a bar (tqdm, on stderr) when stdout and stderr are terminals; otherwise (a pipe, a file, a
notebook's launcher) one line at a time on stdout, where the command's other log lines go,
so a log file reads top to bottom; `--quiet` silences it.  `Progress` is what `labkit
train`, `labkit clean` and `labkit export` report through.
"""

from __future__ import annotations

import sys
import time

MODES = ("bar", "lines", "off")


def _tty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def progress_mode(quiet: bool = False) -> str:
    """'off' when quiet, 'bar' when stdout and stderr are terminals, else 'lines'."""
    if quiet:
        return "off"
    return "bar" if _tty(sys.stdout) and _tty(sys.stderr) else "lines"


def _clock(seconds: float) -> str:
    """tqdm's `MM:SS` / `H:MM:SS` (written here: the slim cleaning image has no tqdm)."""
    m, sec = divmod(int(max(0.0, seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


class Progress:
    """Count `total` `unit`s under `desc`.

    `update(n, **fields)` counts n more and shows `fields` (the bar's postfix, or the line's
    `key value` pairs); in 'lines' mode a line is printed when the count reaches a multiple
    of `every`, when `every_s` seconds have passed since the last line, and at the total.
    `stage(name)` says what runs now (the bar's description, or a line of its own).
    """

    def __init__(
        self,
        total: int | None,
        desc: str,
        unit: str,
        mode: str,
        every: int = 0,
        every_s: float = 0.0,
        initial: int = 0,
        leave: bool = True,
    ):
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}: choose one of {MODES}")
        self.total, self.desc, self.unit, self.mode = total, desc, unit, mode
        self.every, self.every_s = every, every_s
        self.count = self.start = initial
        self.t0 = self.last_line = time.perf_counter()
        self.bar = None
        if mode == "bar":
            try:
                from tqdm.auto import tqdm
            except ImportError:  # the slim cleaning image: lines instead of a bar
                self.mode = "lines"
                return
            self.bar = tqdm(
                total=total, initial=initial, desc=desc, unit=unit, leave=leave, dynamic_ncols=True, file=sys.stderr
            )

    def stage(self, name: str) -> None:
        if self.bar is not None:
            self.bar.set_description_str(f"{self.desc}: {name}")
        elif self.mode == "lines":
            at = f" [{self.count + 1}/{self.total}]" if self.total else ""
            print(f"{self.desc}{at} {name}", flush=True)

    def echo(self, text: str) -> None:
        """A line of the command's own output on stdout, without breaking the bar."""
        if self.bar is not None:
            self.bar.write(text, file=sys.stdout)
            sys.stdout.flush()
        else:
            print(text, flush=True)

    def update(self, n: int = 1, **fields) -> None:
        self.count += n
        if self.bar is not None:
            self.bar.update(n)
            if fields:
                self.bar.set_postfix(fields, refresh=False)
            return
        if self.mode != "lines" or not (self.every or self.every_s):
            return
        now = time.perf_counter()
        due = (self.every and self.count % self.every == 0) or (self.every_s and now - self.last_line >= self.every_s)
        if due or (self.total is not None and self.count >= self.total):
            self.last_line = now
            print(self.line(now, fields), flush=True)

    def line(self, now: float, fields: dict) -> str:
        """`desc 20/40 unit | key value | ... | 3.1 unit/s | 0:07 elapsed, ETA 0:06`."""
        elapsed = now - self.t0
        done = self.count - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        parts = [
            f"{self.desc} {self.count}/{self.total} {self.unit}"
            if self.total
            else f"{self.desc} {self.count} {self.unit}"
        ]
        parts += [f"{k} {v}" for k, v in fields.items()]
        parts.append(f"{rate:.2f} {self.unit}/s")
        eta = ""
        if self.total and rate > 0 and self.count < self.total:
            eta = f", ETA {_clock((self.total - self.count) / rate)}"
        parts.append(f"{_clock(elapsed)} elapsed{eta}")
        return " | ".join(parts)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
