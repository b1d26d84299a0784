"""What a process tree used: CPU seconds (its children included) and peak resident memory.

The course runner and the grader start a notebook's kernel as a child, and the kernel starts its own (torchrun's
ranks, the servers of notebook 08). Two measurements, each the one that is exact for its quantity:

* CPU seconds: `resource.getrusage(RUSAGE_CHILDREN)` before and after -- the kernel's user + system time and that
  of every process it waited for, counted by the kernel (Linux adds a child's usage to its parent's when the
  parent reaps it; jupyter_client reaps the kernel at shutdown). Sampling CPU times instead misses whatever a
  process spent after the last sample, and a short-lived rank entirely. It counts every child this process reaps
  meanwhile: measure one tree at a time (the runner runs one notebook at a time; the grader measures in its
  per-notebook child).
* Peak memory: a thread samples the tree every `interval` s (psutil: the children of the root, recursively) and
  keeps the largest sum of resident set sizes -- what the tree held at once, the figure a machine's memory must
  hold. Between two samples a process can peak and fall back: each process's own high-water mark (VmHWM, kept by
  the kernel) is read at the same time, and the largest one is a floor for the tree's peak.
"""

from __future__ import annotations

import os
import resource
import threading
from dataclasses import dataclass

MB = 1024 * 1024
INTERVAL_S = 0.1


@dataclass
class Usage:
    cpu_seconds: float = 0.0  # user + system of the children reaped while measuring
    peak_rss_mb: float = 0.0  # the tree's largest sampled sum of RSS, at least its largest process's own peak
    peak_sum_mb: float = 0.0  # the largest sampled sum alone
    peak_process_mb: float = 0.0  # the largest single process's high-water mark (VmHWM)
    samples: int = 0

    def as_dict(self) -> dict:
        return {
            "cpu_seconds": round(self.cpu_seconds, 2),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "peak_process_mb": round(self.peak_process_mb, 1),
            "samples": self.samples,
        }


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _hwm_bytes(pid: int) -> int:
    """A process's resident high-water mark (/proc/<pid>/status VmHWM); 0 where not readable."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def live_cpu_seconds(root: int) -> float:
    """User + system seconds the live processes of the tree rooted at `root` (itself included) have used so far.

    A sampled figure (a process that already exited is missing): right for "is this job still working?", which
    compares two readings a few seconds apart (`labkit.distributed.launcher`'s stall watch); wrong for the
    total a job used, which is `TreeUsage`'s."""
    import psutil

    try:
        leader = psutil.Process(root)
        tree = [leader, *leader.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for p in tree:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:  # it exited between the listing and the read
            continue
    return total


class TreeUsage:
    """`with TreeUsage() as u: <start and wait for a child>`; then `u.usage` (a `Usage`).

    `root`: the process whose descendants are measured (default: this one; this process itself is left out)."""

    def __init__(self, root: int | None = None, interval: float = INTERVAL_S):
        self.root = os.getpid() if root is None else root
        self.interval = interval
        self.usage = Usage()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu0 = 0.0

    def sample(self) -> None:
        import psutil

        try:
            procs = psutil.Process(self.root).children(recursive=True)
        except psutil.Error:
            return
        total = 0
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.Error:  # it exited between the listing and the read
                continue
            self.usage.peak_process_mb = max(self.usage.peak_process_mb, _hwm_bytes(p.pid) / MB)
        self.usage.peak_sum_mb = max(self.usage.peak_sum_mb, total / MB)
        self.usage.samples += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> "TreeUsage":
        self._cpu0 = _children_cpu()
        self._thread = threading.Thread(target=self._loop, name="labkit-usage", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        u = self.usage
        u.cpu_seconds = max(0.0, _children_cpu() - self._cpu0)
        u.peak_rss_mb = max(u.peak_sum_mb, u.peak_process_mb)
