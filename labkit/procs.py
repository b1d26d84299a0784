"""Child processes in their own process group: free ports, is the group alive, stop the whole group.

Both the serving stack (`labkit.serving.process.ServerProcess`) and the distributed
launcher (`labkit.distributed.launcher`) start children with `start_new_session=True`,
so the child leads a process group holding everything it spawns (Triton's stubs,
torchrun's ranks).  Stopping means SIGTERM to the group, a grace period, then
SIGKILL to whatever is left -- grandchildren included -- and waiting until the
group is gone.

Worker pools (`worker_start_method`) never fork the caller: a notebook's kernel holds
threads (ipykernel's, torch's OpenMP pool), and a child forked while one of them holds
a lock inherits the lock held forever -- `clean_paths(workers=2)` hung 900 s in CI.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping

LOOPBACK = "127.0.0.1"


def worker_start_method() -> str:
    """How worker pools start their processes: "forkserver" on POSIX, "spawn" on Windows.

    Not "fork": forking a multi-threaded parent (any Jupyter kernel) can deadlock the child.
    The fork server is a fresh single-threaded process started once; workers are forked from it.
    Measured cost in decisions §21."""
    return "spawn" if os.name == "nt" else "forkserver"


def free_ports(n: int, host: str = LOOPBACK) -> list[int]:
    """`n` different TCP ports nobody listens on right now (the OS picks them).

    Every socket stays bound until all are chosen: asking for one port twice in a row can return the same
    port twice, since the first is free again the moment its socket closes."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(n)]
        for s in socks:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nobody listens on right now (the OS picks it); two ports: `free_ports(2)`."""
    return free_ports(1, host)[0]


@contextlib.contextmanager
def environ(updates: Mapping[str, str]) -> Iterator[None]:
    """`os.environ` with `updates` applied for the block, then as it was: for a child this process starts through
    a library that takes no environment of its own (a Jupyter kernel inherits the starter's)."""
    saved = {k: os.environ.get(k) for k in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def group_alive(proc: subprocess.Popen) -> bool:
    """Is any process of the group `proc` leads still running? (`proc` was started with start_new_session=True.)"""
    proc.poll()  # reap the leader itself, or its zombie would count as alive
    try:
        os.killpg(proc.pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def stop_group(proc: subprocess.Popen, grace: float = 5.0, kill_wait: float = 5.0) -> bool:
    """SIGTERM the group `proc` leads, wait up to `grace` s for all of it, then SIGKILL what is left
    and wait up to `kill_wait` s; True if anything was alive.  Idempotent."""
    if not group_alive(proc):
        return False
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, kill_wait)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while group_alive(proc) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not group_alive(proc):
            break
    return True


def exit_without_teardown(code: int | None = 0) -> None:
    """End this process as a normal exit would, minus the interpreter's teardown.

    For a process whose work is done and recorded (a rank of a launched job): non-daemon threads are joined and
    the `atexit` handlers run (logging, multiprocessing and torch clean up there), stdout/stderr are flushed --
    then `os._exit`.  Skipped: freeing every module and object one by one and the C++ static destructors.  After
    torch and transformers are loaded that teardown took ~1.5 CPU-s a process on a 2-core machine (a 2-rank
    exercise check: 17.4 -> 13.8 CPU-s, 11.2 -> 8.9 s), and it is where gloo sometimes aborts on CPU (the
    launcher's SIGABRT-at-exit case)."""
    import atexit
    import sys
    import threading

    for t in threading.enumerate():
        if t is not threading.current_thread() and not t.daemon:
            t.join()
    atexit._run_exitfuncs()  # the handlers a normal exit runs, in the same (reverse) order
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # closed or replaced: nothing left to write
            pass
    os._exit(code or 0)  # None, as from a main() that returns nothing: success, like sys.exit(None)
