"""Run the installed `labkit` as a user would: in a terminal (a pty) or with its output piped."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data_samples"
LABKIT = str(Path(sys.executable).parent / "labkit")


def in_terminal(argv: list[str], timeout: float = 300, cols: int = 120, env: dict | None = None) -> tuple[int, str]:
    """(exit code, what the terminal showed): stdout and stderr on one pty of `cols` columns."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))  # tqdm sizes its bar from this
    proc = subprocess.Popen(
        argv, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, close_fds=True, env=env or dict(os.environ)
    )
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 1 << 16)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return rc, b"".join(chunks).decode("utf-8", errors="replace")


def piped(argv: list[str], timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env or dict(os.environ)
    )
