"""One learner notebook in a child process of its own, and the parent's side of it.

The child (`python -m labkit.classroom.kernel NB CWD EVENTS STATUS EXECUTED LIMIT MEMORY`) first limits itself and
what it starts (`labkit.classroom.sandbox.apply_limits`: MEMORY bytes of address space), then drives the kernel through
nbclient -- the engine under papermill -- with `allow_errors`, so a failed check never stops the later exercises;
each executed code cell's outputs go to EVENTS as they happen (JSON lines: a parent that has to kill the child still
has them), the end to STATUS, the executed notebook to EXECUTED. `run` starts the child in its own session, gives it
LIMIT seconds plus a grace for the kernel's shutdown, then stops its group and the kernel's, and returns what it saw.

The end also carries the kernel tree's CPU seconds and peak memory (`labkit.usage`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from labkit.atomic import atomic_write_text
from labkit.classroom.sandbox import apply_limits
from labkit.procs import stop_group
from labkit.results import read_json
from labkit.usage import TreeUsage

GRACE_S = 30  # the child's own cleanup (kernel shutdown) before the parent kills it
TEXT_MAX = 4000


class _TimeLimit(Exception):
    pass


def _outputs(cell) -> dict:
    """What a cell showed: its stream text and its error (ename, evalue), both truncated."""
    text, error = [], None
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream":
            text.append(str(out.get("text", "")))
        elif kind == "error" and error is None:
            error = [str(out.get("ename", "")), str(out.get("evalue", ""))[:TEXT_MAX]]
    return {"text": "".join(text)[:TEXT_MAX], "error": error}


def execute(
    notebook: str, cwd: str, events: str, status: str, executed: str, limit: float, memory: int | None = None
) -> None:
    """Run `notebook` with its kernel's cwd at `cwd`, errors allowed, until done or `limit` seconds: each
    executed code cell's outputs are appended to `events` (JSON lines, as they happen: a grader that has to
    kill this process still has them), the end to `status`, the executed notebook to `executed`. With `memory`,
    this process and the kernel may hold that many bytes of address space (set before the kernel starts)."""
    if memory:
        apply_limits(memory)
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    t0 = time.monotonic()
    deadline = t0 + limit
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name="python3",
        allow_errors=True,
        interrupt_on_timeout=False,
        startup_timeout=int(max(10, min(120, limit))),
        resources={"metadata": {"path": cwd}},
        timeout_func=lambda cell: max(1, int(deadline - time.monotonic()) + 1),
    )
    state = {"cell": -1}
    log = open(events, "a", encoding="utf-8")

    def on_start(notebook):
        pid = getattr(client.km.provisioner, "pid", None) if client.km else None
        log.write(json.dumps({"kernel_pid": pid}) + "\n")
        log.flush()

    def on_cell_start(cell, cell_index):
        state["cell"] = cell_index
        if time.monotonic() > deadline:
            raise _TimeLimit()

    def on_cell_executed(cell, cell_index, execute_reply):
        log.write(json.dumps({"cell": cell_index, **_outputs(cell)}, ensure_ascii=False) + "\n")
        log.flush()

    client.on_notebook_start = on_start
    client.on_cell_start = on_cell_start
    client.on_cell_executed = on_cell_executed
    end = {"status": "done"}
    usage = TreeUsage()  # this process's children: the kernel and what it started
    try:
        with usage:
            client.execute()
    except (_TimeLimit, CellTimeoutError):
        end = {"status": "time limit", "cell": state["cell"]}
    except DeadKernelError as exc:
        end = {"status": "kernel died", "cell": state["cell"], "error": str(exc)[:TEXT_MAX]}
    except Exception as exc:  # noqa: BLE001 -- a kernel that never started, a notebook nbclient rejects ...
        end = {"status": "error", "cell": state["cell"], "error": f"{type(exc).__name__}: {exc}"[:TEXT_MAX]}
    finally:
        log.close()
    end["seconds"] = round(time.monotonic() - t0, 1)
    end |= {"cpu_seconds": round(usage.usage.cpu_seconds, 1), "peak_rss_mb": round(usage.usage.peak_rss_mb, 1)}
    try:
        nbformat.write(nb, executed)
    except Exception:  # noqa: BLE001 -- the grade does not depend on the copy
        pass
    atomic_write_text(status, json.dumps(end, ensure_ascii=False))


def kill_kernel(events: Path) -> None:
    """The backstop: the kernel leads its own process group (jupyter_client starts it so); SIGKILL it."""
    try:
        pids = [e["kernel_pid"] for e in read_events(events) if e.get("kernel_pid")]
    except OSError:
        return
    for pid in pids:
        try:
            os.killpg(int(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError, ValueError):
            pass


def read_events(path: Path) -> list[dict]:
    """The child's events; a line cut short by a kill is skipped (never a crash)."""
    out = []
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


@dataclass
class ChildRun:
    events: list[dict]  # each executed cell's outputs ({"cell", "text", "error"}), and the kernel's pid
    end: dict  # {"status": "done" | "time limit" | "kernel died" | "error", "cell", "error", "seconds"}
    seconds: float  # the child's wall time, as the parent saw it
    started: float = 0.0  # when the parent started it (time.time())


def run(
    notebook: Path,
    cwd: Path,
    env: dict,
    events: Path,
    status: Path,
    executed: Path,
    limit: float,
    memory: int | None = None,
) -> ChildRun:
    """Run `notebook` in a child process (kernel cwd `cwd`, environment `env`) for at most `limit` seconds (plus
    `GRACE_S`) and, with `memory`, that many bytes of address space; the events and the status file are the
    child's, read back here."""
    argv = [sys.executable, "-m", "labkit.classroom.kernel", str(notebook), str(cwd)]
    argv += [str(events), str(status), str(executed), str(limit), str(int(memory or 0))]
    t0 = time.monotonic()
    started = time.time()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    killed = False
    try:
        _, err = proc.communicate(timeout=limit + GRACE_S)
    except subprocess.TimeoutExpired:
        killed = True
        stop_group(proc, grace=2, kill_wait=5)
        kill_kernel(events)
        _, err = proc.communicate()
    seconds = round(time.monotonic() - t0, 1)
    evs = read_events(events)
    end = read_json(status)
    if end is None:  # the child never wrote its end (killed, or it crashed)
        end = {"status": "time limit" if killed else "error", "cell": None}
        if not killed:
            tail = (err or b"").decode("utf-8", "replace").strip().splitlines()
            end["error"] = f"the grading process exited {proc.returncode}: {(tail or [''])[-1][:200]}"
    return ChildRun(evs, end, seconds, started)


if __name__ == "__main__":  # the child: python -m labkit.classroom.kernel NB CWD EVENTS STATUS EXECUTED LIMIT MEMORY
    nb_, cwd_, events_, status_, executed_, limit_, memory_ = sys.argv[1:8]
    execute(nb_, cwd_, events_, status_, executed_, float(limit_), int(memory_) or None)
