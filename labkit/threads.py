"""The thread policy: how many compute threads each process the course starts may use.

A workshop machine is shared: a JupyterHub node runs other people's kernels, a laptop runs a
browser.  Measured on this course's 2-core machines (docs/decisions.md §18), a tiny-T5 training
step takes 114-146 ms idle with torch's default 2 threads, and beside ONE busy process 348-1737 ms:
the two OpenMP threads spin-wait for a core they do not get.  With 1 thread it takes 170-192 ms idle
and beside a busy process alike; with 2 threads and `OMP_WAIT_POLICY=PASSIVE` 240-290 ms.

So, one rule for every process (notebook kernels, torchrun ranks, the training CLI, the baseline
server, cleaning workers):

* the small presets (`tiny`, `t5-small`) use 1 intra-op thread per process: their matrices are too
  small for a second thread to pay on a shared core;
* larger models use their share of the cores: `cores // processes` (ranks x threads <= cores);
* the cores are those this process may run on (its affinity: `taskset`, a cgroup's cpuset), never
  the machine's count;
* OpenMP threads that wait, sleep (`OMP_WAIT_POLICY=PASSIVE`) instead of spinning;
* an explicit setting wins: `Config.threads`, `--threads`, or `LABKIT_THREADS` in the environment
  (e.g. `LABKIT_THREADS=0` on a machine that is yours alone: all cores, as torch's default).

A child process gets the rule from its environment before it loads torch: `child_env` is the one
environment every starter hands on (the distributed launcher's ranks, the servers, the grader's and the
course runner's notebook kernels).  ONNX Runtime sessions follow the same idea through their own switch
(no spinning, all cores but one: `labkit.serving.ort_generate`).  `labkit doctor env` prints the policy
in force.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

WAIT_POLICY = "PASSIVE"
SMALL_PRESETS = frozenset({"tiny", "t5-small"})
ENV_OVERRIDE = "LABKIT_THREADS"


def cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def env_override() -> int | None:
    """`LABKIT_THREADS` as a number (0 = all cores / processes), or None when unset or not a number."""
    raw = os.environ.get(ENV_OVERRIDE, "").strip()
    return int(raw) if raw.isdigit() else None


def threads_for(preset: str = "tiny", processes: int = 1, setting: int = 0) -> int:
    """Intra-op threads for one of `processes` processes training or serving `preset`.

    `setting` > 0 (a config value or `--threads`) wins, then `LABKIT_THREADS`, then the rule.

    >>> threads_for("tiny", 2)
    1
    """
    if setting and setting > 0:
        return setting
    share = max(1, cores() // max(1, processes))
    override = env_override()
    if override is not None:
        return override if override > 0 else share
    return 1 if preset in SMALL_PRESETS else share


# every pool a child's numerics may start: OpenMP (torch), MKL (torch, numpy on Intel builds), OpenBLAS (numpy)
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def child_env(
    threads: int = 0, *, preset: str = "tiny", processes: int = 1, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment for a child process that computes: `base` (default this process's) with the policy.

    Its pools get `threads_for(preset, processes, threads)` threads (`threads` > 0 wins), idle OpenMP threads
    sleep, the Rust tokenizer starts no pool of its own.  The variables are read once, when the child loads
    torch or numpy, so they must be in its environment from the start.  A wait policy or tokenizer setting the
    user chose is kept; the thread counts are the policy's (`LABKIT_THREADS` is the way to change them).

    >>> child_env(2, base={})["OMP_NUM_THREADS"]
    '2'
    """
    n = threads_for(preset, processes, threads)
    env = dict(os.environ if base is None else base)
    for var in THREAD_VARS:
        env[var] = str(n)
    env.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")  # the Rust tokenizer's own pool spins too
    return env


def prepare_this_process() -> None:
    """Set the wait policy for this process's OpenMP, if torch has not started it yet (else no effect).

    Called by `labkit`'s command line and a notebook's `setup` before anything imports torch."""
    os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def apply(threads: int) -> int:
    """Give this process's torch `threads` intra-op threads; returns the number set."""
    import torch

    prepare_this_process()
    threads = max(1, threads)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads


def describe(preset: str = "tiny") -> str:
    """One line for `labkit doctor env`: the policy in force for `preset` on this machine."""
    override = env_override()
    how = (
        f"{ENV_OVERRIDE}={os.environ[ENV_OVERRIDE]}"
        if override is not None
        else ("1 per process for the small presets" if preset in SMALL_PRESETS else "cores / processes")
    )
    wait = os.environ.get("OMP_WAIT_POLICY", f"{WAIT_POLICY} (set when labkit starts)")
    return (
        f"{threads_for(preset)} torch thread(s) per process for {preset} on {cores()} core(s) ({how}); "
        f"2 ranks: {threads_for(preset, 2)} each; OMP_WAIT_POLICY={wait}"
    )
