"""Start a server as a real subprocess, wait until it answers, and always stop it (no orphans).

Each server runs in its own process group (`start_new_session`), so stopping it
(SIGTERM, then SIGKILL after a grace period) also ends what it spawned: Triton's
`tritonserver` binary and its Python-backend stubs.  On Linux each server also gets
SIGTERM when the process that started it dies, even by SIGKILL (`PR_SET_PDEATHSIG`),
so `labkit serve api --start-triton` killed hard does not leave Triton running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Sequence

from labkit.procs import LOOPBACK, free_port, stop_group
from labkit import threads as policy

__all__ = ["LOOPBACK", "ServerProcess", "free_port", "labkit_argv", "server_env"]


def server_env(threads: int = 0) -> dict[str, str]:
    """Environment for a server process: the child-process policy (`labkit.threads.child_env`) with a
    server's thread count -- `threads`, else every core this process may use (a server is the one process
    computing; `--threads 0` means the same) -- and what the servers need.

    Triton's Python-backend stub links libpython3.x.so; with a non-system Python the
    library directory must be on LD_LIBRARY_PATH or the stub fails with
    "'_thread.RLock' object has no attribute '_recursion_count'".
    """
    env = policy.child_env(threads or policy.cores())
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    if libdir:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (libdir, env.get("LD_LIBRARY_PATH", "")) if p)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _die_with_parent() -> None:
    """In the child before exec: ask the kernel for SIGTERM when the parent dies (Linux)."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def labkit_argv(*args: str) -> list[str]:
    """`labkit serve ...` run with this interpreter, through the serving CLI alone.

    `labkit.serving.cli` registers only `serve`, so a server process does not import
    every other topic (torch among them) that the full `labkit` command line registers.
    """
    if not args or args[0] != "serve":
        raise ValueError(f"labkit_argv starts servers only: got {args!r}")
    return [sys.executable, "-m", "labkit.serving.cli", *args]


class ServerProcess:
    """Context manager around one server subprocess.

    >>> with ServerProcess(labkit_argv("serve", "api", "--port", "8080"), "http://127.0.0.1:8080/health") as srv:  # doctest: +SKIP
    ...     httpx.post(srv.url + "/v1/generate", json={...})
    """

    def __init__(
        self,
        argv: Sequence[str],
        ready_url: str,
        timeout: float = 90.0,
        name: str | None = None,
        log_path: str | Path | None = None,
        env: dict[str, str] | None = None,
        ready_status: int = 200,
    ):
        self.argv = list(argv)
        self.ready_url = ready_url
        self.url = ready_url.split("/", 3)[0] + "//" + ready_url.split("/", 3)[2]
        self.timeout = timeout
        self.name = name or Path(self.argv[0]).name
        self.ready_status = ready_status
        self.env = env or server_env()
        self.log_path = (
            Path(log_path) if log_path else Path(tempfile.mkstemp(prefix=f"labkit-{self.name}-", suffix=".log")[1])
        )
        self.proc: subprocess.Popen | None = None
        self.startup_s = float("nan")

    def start(self) -> "ServerProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            self.argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.perf_counter() - t0
        return self

    def _wait_ready(self) -> None:
        import httpx

        deadline = time.monotonic() + self.timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with code {self.proc.returncode} before it was ready:\n{self.log_tail()}"
                )
            try:
                r = httpx.get(self.ready_url, timeout=2.0)
                if r.status_code == self.ready_status:
                    return
                last = f"HTTP {r.status_code}"
            except httpx.HTTPError as exc:
                last = type(exc).__name__
            time.sleep(0.2)
        raise TimeoutError(
            f"{self.name} not ready at {self.ready_url} after {self.timeout:.0f}s ({last}):\n{self.log_tail()}"
        )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the whole process group, SIGKILL it if it lingers; idempotent."""
        if self.proc is None:
            return
        # children (tritonserver, stubs) may outlive the leader: the whole group is stopped
        stop_group(self.proc, grace=grace, kill_wait=10.0)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=5)
        self._log.close()

    def log_tail(self, n: int = 40) -> str:
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
