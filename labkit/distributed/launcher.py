"""Launch the ranks from a notebook: `torchrun` as a subprocess, watched.

A Jupyter kernel cannot host the ranks itself (each rank is a process with its
own interpreter), so `launch()` starts `torchrun` (or plain `python`, or
`accelerate launch`) in its own process group, streams every line tagged with
its rank, enforces a timeout that names the rank everyone waits for (and, asked
with `stall_s`, stops a job as soon as it has visibly stopped moving), and reads
each rank's report (`<out>/ranks/rank<R>.json`).  A run is judged by the ranks'
recorded completion, not only by the exit code: gloo on CPU sometimes aborts
(SIGABRT) at interpreter exit *after* all work is done.  That case -- and only
that case -- is accepted (or retried once when the abort took a still-working
peer down with it); every other failure is reported with the log's tail.
"""

from __future__ import annotations

import queue
import re
from collections import deque
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from labkit import procs, threads
from labkit.distributed.reports import clear_reports, read_reports  # noqa: F401  (read_reports: public here too)

# accelerate-fsdp: `accelerate launch --use_fsdp --fsdp_version 2`, which labkit.train follows with --strategy fsdp
LAUNCHERS = ("torchrun", "python", "accelerate", "accelerate-cpu", "accelerate-fsdp")
SIGABRT_EXIT = -signal.SIGABRT
_TAG = re.compile(r"^\[(?:default|[a-z]+)(\d+)\]:")
# a job whose processes together use less than this share of one core is waiting, not working: beside a full test
# suite on this 2-core machine, two ranks hung in a gloo collective plus torchrun's agent used 0.009 of a core
# together, while a working rank gets >= 0.4 of one
IDLE_CORE_SHARE = 0.05
_FAIL = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)")


class LaunchError(RuntimeError):
    """The job cannot be started as asked; the message says why and what to do."""


class LaunchFailed(LaunchError):
    def __init__(self, msg: str, result: "LaunchResult"):
        super().__init__(msg)
        self.result = result


class LaunchTimeout(LaunchFailed):
    def __init__(self, msg: str, result: "LaunchResult", hung_ranks: list[int]):
        super().__init__(msg, result)
        self.hung_ranks = hung_ranks


@dataclass
class LaunchResult:
    command: list[str]
    requested: int  # processes asked for
    returncode: int | None = None
    ranks: dict[int, dict] = field(default_factory=dict)
    progress: dict[int, dict] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    seconds: float = 0.0
    attempts: int = 1
    notes: list[str] = field(default_factory=list)
    failed_ranks: dict[int, int] = field(default_factory=dict)  # rank -> exit code (from torchrun's summary)
    ok: bool = False  # the verdict: every rank completed, no real failure

    @property
    def world_size(self) -> int:
        return max((r["env"]["world_size"] for r in self.ranks.values() if "env" in r), default=0)

    @property
    def completed(self) -> bool:
        """Every rank of the world the processes joined recorded completion."""
        w = self.world_size
        return w > 0 and all(self.ranks.get(r, {}).get("completed") for r in range(w))

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log[-n:])


# ---- refusals ---------------------------------------------------------------
def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    try:
        return procs.free_port(host)
    except OSError as exc:
        raise LaunchError(f"no free TCP port on {host} ({exc}): free one or pass port= explicitly") from exc


def check_port(port: int, host: str = "127.0.0.1") -> None:
    """Refuse a rendezvous port that is already taken, naming its owner when known."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            return
        except OSError:
            pass
    owner = ""
    try:
        import psutil

        for c in psutil.net_connections("tcp"):
            if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN and c.pid:
                owner = f" by pid {c.pid} ({psutil.Process(c.pid).name()})"
                break
    except Exception:  # listing sockets may need privileges; the refusal stands without the owner
        pass
    raise LaunchError(
        f"port {port} on {host} is already in use{owner}: pass another port= (or port=None to pick a free one), "
        f"or stop the job still holding it"
    )


def check_devices(nproc: int | None, device: str = "auto") -> tuple[int, str]:
    """(processes, device type) for this machine, or a clear refusal."""
    torch = sys.modules.get("torch")
    # a CPU launch (gloo) needs no GPU: the kernel's CUDA context takes nothing from it
    if device != "cpu" and torch is not None and torch.cuda.is_initialized():
        raise LaunchError(
            "this kernel has already initialised CUDA (it holds a context and memory on a GPU the ranks need); "
            "restart the kernel and call launch() before any CUDA work in the notebook"
        )
    import torch

    n_gpu = torch.cuda.device_count() if device in ("auto", "cuda") else 0
    if device == "cuda" and n_gpu == 0:
        raise LaunchError(
            "device='cuda' asked for, but this machine has no visible GPU: use device='auto' (gloo on CPU)"
        )
    kind = "cuda" if n_gpu else "cpu"
    if nproc is None or nproc <= 0:
        nproc = n_gpu or 2  # CPU: 2 gloo processes, enough to show real DDP in CI
    if kind == "cuda" and nproc > n_gpu:
        raise LaunchError(
            f"{nproc} processes asked for, but this machine has {n_gpu} GPU(s): one process per GPU "
            f"means nproc <= {n_gpu} (or device='cpu' for gloo processes)"
        )
    if nproc < 1 or nproc > 64:
        raise LaunchError(f"impossible world size nproc={nproc}: use 1..{max(n_gpu, threads.cores())}")
    return nproc, kind


# ---- the command ------------------------------------------------------------
def build_command(
    launcher: str,
    module: str,
    args: Sequence[str],
    nproc: int,
    port: int,
    nnodes: int = 1,
    node_rank: int = 0,
    max_restarts: int = 0,
    host: str = "127.0.0.1",
    run_id: str | None = None,
) -> list[str]:
    py = sys.executable
    if launcher == "python":
        return [py, "-m", module, *args]
    # [fix:torchrun]
    if launcher == "torchrun":
        return [
            py,
            "-m",
            "torch.distributed.run",
            f"--nnodes={nnodes}",
            f"--nproc-per-node={nproc}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={host}:{port}",
            f"--rdzv-id={run_id or uuid.uuid4().hex[:8]}",
            f"--rdzv-conf=is_host={'true' if node_rank == 0 else 'false'}",
            f"--max-restarts={max_restarts}",
            "--tee=3",
            "-m",
            module,
            *args,
        ]
    # [/fix:torchrun]
    # [fix:accelerate_launch]
    if launcher.startswith("accelerate"):
        mode = {"accelerate": ["--multi_gpu"], "accelerate-cpu": ["--cpu"]}.get(
            launcher,
            ["--use_fsdp", "--fsdp_version=2"],  # one of them at a time, says accelerate
        )
        return [
            py,
            "-m",
            "accelerate.commands.launch",
            *mode,
            f"--num_processes={nproc}",
            "--num_machines=1",
            "--mixed_precision=no",
            "--dynamo_backend=no",
            f"--main_process_port={port}",
            "-m",
            module,
            *args,
        ]
    # [/fix:accelerate_launch]
    raise LaunchError(f"unknown launcher {launcher!r}: choose one of {LAUNCHERS}")


def rank_tagged(line: str, multi_node: bool = False) -> str:
    """torchrun's "[default0]:" prefix as "[rank 0]" (single node: the local rank is the rank; "[local rank 0]" on
    several nodes) -- left out where the rank's own line already starts with its rank ("[rank 0/2] ...",
    `labkit.train`'s lines), so that no line reads "[rank 0] [rank 0/2]"."""
    m = _TAG.match(line)
    if not m:
        return line
    rest = line[m.end() :].lstrip(" ")
    if not multi_node and re.match(rf"\[rank {m.group(1)}[/\]]", rest):
        return rest
    return f"[{'local ' if multi_node else ''}rank {m.group(1)}] {rest}"


class StallWatch:
    """Has the job stopped moving?  A hang (a collective one rank never reaches) is a job whose heartbeats stand
    still and whose processes sleep; a slow job still beats or still burns CPU.

    Armed only once every rank's heartbeat has reached training (stage "train" or "done"): before that a rank may
    sleep in a rendezvous or wait for a peer that is still importing.  Stalled when, for `stall_s` seconds, no
    heartbeat changed and the job's process tree used less than `IDLE_CORE_SHARE` of one core."""

    def __init__(self, root_pid: int, stall_s: float, expected: int):
        self.root, self.stall_s, self.expected = root_pid, stall_s, expected
        self.samples: deque[tuple[float, float]] = deque()  # (time, the tree's CPU seconds)
        self.beats: dict | None = None
        self.idle_cpu = 0.0

    def stalled(self, beats: dict[int, dict], now: float | None = None, cpu: float | None = None) -> bool:
        from labkit.usage import live_cpu_seconds

        now = time.monotonic() if now is None else now
        armed = len(beats) >= self.expected and all(b.get("stage") in ("train", "done") for b in beats.values())
        if not armed or beats != self.beats:  # a heartbeat moved: the window starts again
            self.beats = beats
            self.samples.clear()
        if not armed:
            return False
        self.samples.append((now, live_cpu_seconds(self.root) if cpu is None else cpu))
        # keep the newest sample at least `stall_s` old as the window's start
        while len(self.samples) > 1 and self.samples[1][0] <= now - self.stall_s:
            self.samples.popleft()
        t0, cpu0 = self.samples[0]
        span = now - t0
        if span < self.stall_s:  # the window starts at the last heartbeat that moved, at the latest
            return False
        self.idle_cpu = self.samples[-1][1] - cpu0
        return self.idle_cpu < IDLE_CORE_SHARE * span


def laggards(progress: dict[int, dict], ranks: dict[int, dict], expected: int) -> list[int]:
    """The ranks the others are waiting for: missing, or least far along."""
    order = {"start": 0, "data": 1, "model": 2, "train": 3, "done": 4}
    missing = [r for r in range(expected) if r not in progress]
    if missing:
        return missing

    def key(r):
        b = progress[r]
        return (
            1 if ranks.get(r, {}).get("completed") else 0,
            order.get(b.get("stage"), 0),
            b.get("step", 0),
            1 if b.get("phase") == "backward" else 0,
        )

    live = {r: key(r) for r in progress}
    low = min(live.values())
    return sorted(r for r, k in live.items() if k == low)


def preflight(module: str, args: Sequence[str], out_dir: str | Path, world: int | None = None) -> None:
    """The launched module's own check of its arguments, before any rank starts: `module.preflight(argv)` when the
    module has one (`labkit.train` does), raising `LaunchError` with its one-line reason instead of starting
    processes that would all fail the same way.  The launcher knows no program: it asks the module."""
    import importlib

    from labkit.cli.errors import UsageError

    check = getattr(importlib.import_module(module), "preflight", None)
    if check is None:
        return
    argv = list(args) if any(a == "--out" or a.startswith("--out=") for a in args) else [*args, "--out", str(out_dir)]
    import inspect

    # the job's size too, when the module's check takes it (`--strategy fsdp` on one process is refused here)
    kwargs = {"world": world} if world is not None and "world" in inspect.signature(check).parameters else {}
    try:
        check(argv, **kwargs)
    except UsageError as exc:
        raise LaunchError(f"{module}: {exc}") from None


# ---- launch -----------------------------------------------------------------
def launch(
    args: Sequence[str] = (),
    nproc: int | None = None,
    *,
    out_dir: str | Path,
    module: str = "labkit.train",
    launcher: str = "torchrun",
    device: str = "auto",
    timeout_s: float = 600.0,
    stall_s: float | None = None,
    port: int | None = None,
    nnodes: int = 1,
    node_rank: int = 0,
    max_restarts: int = 0,
    run_id: str | None = None,
    env: dict | None = None,
    preset: str = "tiny",
    fresh: bool = True,
    retry_abort: bool = True,
    check: bool = True,
    echo: Callable[[str], None] | None = print,
) -> LaunchResult:
    """Run `module` on `nproc` processes and return every rank's report.

    `out_dir` is handed to the ranks as `$LABKIT_OUT`, `preset` (the model they train) picks their threads
    (`labkit.threads.child_env`), `env` is added last.  On CPU the default is 2
    gloo processes; on GPUs one process per visible GPU with NCCL.  Raises
    `LaunchError` before starting when the request cannot work, `LaunchTimeout`
    (naming the rank the others wait for) after `timeout_s` -- or, with `stall_s`, as soon as every rank is
    training and the job has not moved for `stall_s` seconds (`StallWatch`) --, and `LaunchFailed`
    when a rank did not complete (with `check=False` the result is returned).
    """
    if launcher not in LAUNCHERS:
        raise LaunchError(f"unknown launcher {launcher!r}: choose one of {LAUNCHERS}")
    nproc, kind = check_devices(nproc, device)
    if nnodes < 1 or not 0 <= node_rank < nnodes:
        raise LaunchError(f"impossible node layout: node_rank={node_rank} with nnodes={nnodes}")
    if port is None:
        port = free_port()
    elif node_rank == 0:
        check_port(port)
    # e.g. labkit.train's bad --schedule (or --strategy fsdp on one process) fails here, before any rank starts
    preflight(module, args, out_dir, nproc * nnodes)
    out = Path(out_dir)
    # the ranks' threads follow the policy (labkit.threads): 1 each for the small presets, else their share of
    # this node's cores (ranks x threads <= cores), idle OpenMP threads asleep; what `env` names explicitly wins
    child_env = {
        **threads.child_env(preset=preset, processes=nproc),
        **(env or {}),
        "LABKIT_OUT": str(out),
        "PYTHONUNBUFFERED": "1",
    }
    if kind == "cpu":
        if child_env.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL":
            child_env["TORCH_DISTRIBUTED_DEBUG"] = "INFO"  # DETAIL crashes gloo on CPU with this torch build
            if echo:
                echo("[launch] TORCH_DISTRIBUTED_DEBUG=DETAIL segfaults on CPU here; using INFO")
    cmd = build_command(
        launcher, module, list(args), nproc, port, nnodes, node_rank, max_restarts, run_id=run_id or f"labkit-{port}"
    )
    total = LaunchResult(cmd, requested=nproc * nnodes)
    t0 = time.perf_counter()
    for attempt in (1, 2):
        if fresh:
            clear_reports(out)
        child_env["LABKIT_LAUNCH_ATTEMPT"] = str(attempt)
        res = _run_once(
            cmd,
            child_env,
            out,
            timeout_s - (time.perf_counter() - t0),
            nproc * nnodes,
            echo,
            multi_node=nnodes > 1,
            stall_s=stall_s,
        )
        total.returncode, total.ranks, total.progress = res.returncode, res.ranks, res.progress
        total.log += res.log
        total.failed_ranks, total.attempts = res.failed_ranks, attempt
        total.notes += res.notes
        aborted = {r for r, c in res.failed_ranks.items() if c == SIGABRT_EXIT}
        # the launcher's SIGTERM/SIGKILL to the peers of a failed rank is collateral, not a cause
        collateral = {r for r, c in res.failed_ranks.items() if c in (-signal.SIGTERM, -signal.SIGKILL)}
        done = {r for r, rep in res.ranks.items() if rep.get("completed")}
        teardown_only = bool(aborted) and set(res.failed_ranks) <= aborted | collateral
        if res.completed and (res.returncode == 0 or (teardown_only and set(res.failed_ranks) <= done)):
            total.ok = True
            if res.returncode != 0:
                total.notes.append(
                    f"rank(s) {sorted(aborted)} aborted (SIGABRT) at interpreter exit after recording "
                    f"completion: the known gloo teardown crash on CPU; the work is complete"
                )
            break
        if retry_abort and attempt == 1 and teardown_only and aborted <= done:
            total.notes.append(
                f"attempt 1: rank(s) {sorted(aborted)} completed, then aborted at exit and the launcher "
                f"stopped unfinished peers {sorted(collateral - done)}; retrying once"
            )
            if echo:
                echo(f"[launch] {total.notes[-1]}")
            continue
        break
    total.seconds = time.perf_counter() - t0
    if check and not total.ok:
        missing = [
            r for r in range(max(total.world_size, total.requested)) if not total.ranks.get(r, {}).get("completed")
        ]
        raise LaunchFailed(
            f"{launcher} exited with code {total.returncode}; ranks without recorded completion: {missing}; "
            f"failures reported by torchrun: {total.failed_ranks or 'none'}. Last lines:\n{total.tail(25)}",
            total,
        )
    return total


def _run_once(
    cmd, env, out: Path, timeout_s: float, expected: int, echo, multi_node: bool, stall_s: float | None = None
) -> LaunchResult:
    res = LaunchResult(list(cmd), requested=expected)
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        env=env,
        start_new_session=True,
        errors="replace",
    )
    lines: queue.Queue = queue.Queue()

    def pump():
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    started = time.perf_counter()
    deadline = started + max(timeout_s, 1.0)
    # local ranks only: on a multi-node job the other node's ranks are another machine's processes
    watch = StallWatch(proc.pid, stall_s, expected) if stall_s and not multi_node else None
    watched = 0.0
    timed_out, stalled, eof = False, False, False
    try:
        while not eof:
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                line = False  # nothing came (a line may be "" and the end is None)
            # checked whether or not a line came: a hung job may still print (a warning repeated every second)
            if watch is not None and time.perf_counter() - watched >= 1.0:
                watched = time.perf_counter()
                if watch.stalled(read_reports(out)[1]):
                    timed_out = stalled = True
                    break
            if line is False:
                if time.perf_counter() > deadline:
                    timed_out = True
                    break
                continue
            if line is None:
                eof = True
                break
            line = rank_tagged(line, multi_node)
            res.log.append(line)
            if echo:
                echo(line)
        if not timed_out:
            try:
                proc.wait(timeout=max(deadline - time.perf_counter(), 1.0))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        res.ranks, res.progress = read_reports(out)
        if timed_out or proc.poll() is None:
            procs.stop_group(proc)
        elif procs.stop_group(proc, grace=2.0):
            res.notes.append("processes outlived the launcher and were killed")
        res.returncode = proc.poll()
    summary = "\n".join(res.log[-200:])
    res.failed_ranks = {int(r): int(c) for r, c in _FAIL.findall(summary)}
    if res.returncode is not None and res.returncode < 0 and not res.failed_ranks and len(res.ranks) == 1:
        res.failed_ranks = {next(iter(res.ranks)): res.returncode}  # plain python: the process is the rank
    if timed_out:
        hung = laggards(res.progress, res.ranks, max(res.world_size, expected))
        where = "; ".join(
            f"rank {r}: {res.progress.get(r, {}).get('stage', 'never started')} step "
            f"{res.progress.get(r, {}).get('step', '-')} {res.progress.get(r, {}).get('phase', '')}".rstrip()
            for r in sorted(set(range(max(res.world_size, expected))) | set(res.progress))
        )
        why = (
            f"stopped after {time.perf_counter() - started:.0f} s, no rank having moved for {stall_s:.0f} s "
            f"({watch.idle_cpu:.2f} CPU-s used meanwhile)"
            if stalled
            else f"timed out after {timeout_s:.0f} s"
        )
        raise LaunchTimeout(
            f"{why}: rank(s) {hung} stopped making progress and the others "
            f"wait for them ({where}); every process of the job was killed",
            res,
            hung,
        )
    return res
