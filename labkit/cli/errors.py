"""The one CLI contract shared by every `labkit` command (standard library only: imported at start-up).

* bad arguments or input -> raise `UsageError("what is wrong; how to fix it")` (or let an
  argparse `type=` helper below reject the value): `labkit.cli.main` prints exactly one line,
  `labkit <cmd>: <what is wrong>; <fix>`, on stderr and exits 2 -- never a traceback;
* a run that started and failed -> return 1 (or raise `RunFailed(reason)`: one line, exit 1);
* success -> 0.

The `type=` helpers validate while argparse parses, so nothing (no process group, no
server, no notebook kernel) starts before the arguments are known to be usable.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
from pathlib import Path
from urllib.parse import urlsplit


class UsageError(ValueError):
    """Bad arguments or input: the message says what is wrong and how to fix it (exit 2)."""


class RunFailed(RuntimeError):
    """A run that started and failed: the message is its reason (exit 1)."""


class Parser(argparse.ArgumentParser):
    """An `ArgumentParser` whose errors are one line: `labkit <cmd>: <error>; see `labkit <cmd> --help``."""

    def error(self, message: str):  # noqa: D102  (argparse's hook; exits 2 like argparse)
        self.exit(2, f"{self.prog}: {message}; see `{self.prog} --help`\n")


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise argparse.ArgumentTypeError(msg)


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None


def _float(value: str) -> float:
    try:
        f = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    _check(f == f and f not in (float("inf"), float("-inf")), f"{value!r} is not a finite number")
    return f


def positive_int(value: str) -> int:
    """An int >= 1."""
    n = _int(value)
    _check(n >= 1, f"{value} must be at least 1")
    return n


def nonneg_int(value: str) -> int:
    """An int >= 0."""
    n = _int(value)
    _check(n >= 0, f"{value} must be 0 or more")
    return n


def port(value: str) -> int:
    """A TCP port, 0-65535 (0 lets the helper pick one where documented)."""
    n = _int(value)
    _check(0 <= n <= 65535, f"{value} is not a TCP port (0-65535)")
    return n


def positive_float(value: str) -> float:
    """A finite float > 0."""
    f = _float(value)
    _check(f > 0, f"{value} must be greater than 0")
    return f


def nonneg_float(value: str) -> float:
    """A finite float >= 0."""
    f = _float(value)
    _check(f >= 0, f"{value} must be 0 or more")
    return f


def int_list(value: str) -> list[int]:
    """'1,4,16' -> [1, 4, 16]: a non-empty comma-separated list of ints >= 1."""
    parts = [p.strip() for p in value.split(",") if p.strip()]
    _check(bool(parts), f"{value!r} is empty; write comma-separated whole numbers, e.g. 1,4,16")
    out = []
    for p in parts:
        try:
            n = int(p)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{p!r} in {value!r} is not a whole number; write e.g. 1,4,16") from None
        _check(n >= 1, f"{p} in {value!r} must be at least 1")
        out.append(n)
    return out


def existing_path(value: str) -> str:
    """A file or directory that exists."""
    _check(os.path.exists(value), f"{value!r}: no such file or directory")
    return value


def existing_dir(value: str) -> str:
    """A directory that exists."""
    _check(
        os.path.isdir(value),
        f"{value!r}: no such directory" if not os.path.exists(value) else f"{value!r} is a file, not a directory",
    )
    return value


def _writable_ancestor(path: Path) -> Path | None:
    """The nearest existing ancestor of `path` (itself included), or None."""
    for p in (path, *path.parents):
        if p.exists():
            return p
    return None


def writable_dir(value: str) -> str:
    """An output directory: an existing writable directory, or one that can be created."""
    p = Path(value).expanduser().absolute()
    base = _writable_ancestor(p)
    _check(base is not None and base.is_dir(), f"{value!r} cannot be a directory: {base} is a file")
    _check(os.access(base, os.W_OK | os.X_OK), f"{value!r} is not writable ({base} is read-only)")
    return value


def writable_file(value: str) -> str:
    """An output file: not a directory, inside a directory that exists (or can be created) and is writable."""
    p = Path(value).expanduser().absolute()
    _check(not p.is_dir(), f"{value!r} is a directory; name a file")
    base = _writable_ancestor(p.parent)
    _check(base is not None and base.is_dir(), f"{value!r} cannot be written: {base} is a file")
    _check(os.access(base, os.W_OK | os.X_OK), f"{value!r} is not writable ({base} is read-only)")
    return value


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_url(value: str) -> str:
    """An http(s) URL on 127.0.0.1 / ::1 / localhost (load tools never target other machines)."""
    parts = urlsplit(value)
    _check(
        parts.scheme in ("http", "https") and bool(parts.hostname),
        f"{value!r} is not an http URL; write e.g. http://127.0.0.1:8080",
    )
    _check(
        is_loopback_host(parts.hostname or ""),
        f"{value!r} is not on this machine; only loopback servers (127.0.0.1, ::1, localhost) may be targeted",
    )
    try:
        parts.port
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} has a bad port; write e.g. http://127.0.0.1:8080") from None
    return value
