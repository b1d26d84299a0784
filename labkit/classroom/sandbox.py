"""What a learner's notebook runs with when the grader executes it: a minimal environment and resource limits.

The grader runs other people's code. Each learner notebook runs in a child process (and the kernel that child
starts) with:

* a minimal environment -- the interpreter's PATH, a locale, a HOME and TMPDIR inside the notebook's throw-away
  folder, the thread policy, the results folder -- and none of the instructor's (tokens, cloud credentials, SSH
  agent, proxies): what a learner's code can read of the grader's process is what is written here;
* limits the kernel inherits from the child (`setrlimit` is inherited across fork and exec): its address space
  (`RLIMIT_AS`: an allocation past it fails with MemoryError instead of pushing the machine into swap or the OOM
  killer's choice of victim), no core files, and a cap on the size of any file it writes. Time is limited by the
  grader itself (it stops the child's process group).

The limits are set by the child on itself before it starts the kernel (`apply_limits`), not through
`preexec_fn`: the grader starts its children from worker threads, where `preexec_fn` is not safe.
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

from labkit import threads

FILE_LIMIT = 1 << 30  # the largest file a learner's notebook may write: 1 GiB
REVEALED = "revealed.json"  # in the notebook's throw-away folder: what its predict-then-run reveals compared
MIN_MEMORY = 1 << 30  # below ~1 GiB of address space a kernel that imports torch does not start (VmSize ~0.7 GiB)
# what the child keeps of the grader's environment: the locale (the learner's text, the course language)
KEEP = ("LANG", "LC_ALL", "LC_CTYPE", "LABKIT_LANG", "TZ")


def default_jobs(preset: str = "tiny") -> int:
    """Notebooks graded at once: the cores this process may use / the threads each kernel gets (the thread
    policy: one for the small presets a learner's notebook trains), at least 1."""
    return max(1, threads.cores() // max(1, threads.threads_for(preset)))


def default_memory(jobs: int) -> int:
    """Each notebook's address-space limit when none is given: 80 % of the machine's memory shared by the notebooks
    graded at once (what `labkit workshop hub` gives each learner), at least `MIN_MEMORY`."""
    import psutil

    return max(MIN_MEMORY, int(psutil.virtual_memory().total * 0.8) // max(1, jobs))


def learner_env(work: Path, runs: Path, preset: str = "tiny") -> dict[str, str]:
    """The environment a learner's notebook runs with (see the module's doc); its predict-then-run reveals write
    what they compared to `work/revealed.json` (`labkit.exercises.predictions`)."""
    from labkit.exercises.predictions import REVEALED_FILE_ENV

    home = work / "home"
    tmp = work / "tmp"
    for d in (home, tmp):
        d.mkdir(parents=True, exist_ok=True)
    bindir = str(Path(sys.executable).parent)
    env = {k: os.environ[k] for k in KEEP if k in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    env |= {
        "PATH": os.pathsep.join([bindir, "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "LABKIT_RUNS_DIR": str(runs),
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": str(home / ".matplotlib"),
        "HF_HUB_OFFLINE": "1",  # the course downloads nothing; a learner's notebook should not either
        "PYTHONNOUSERSITE": "1",  # the instructor's ~/.local packages are not the learner's
        REVEALED_FILE_ENV: str(work / REVEALED),
    }
    if "VIRTUAL_ENV" in os.environ:
        env["VIRTUAL_ENV"] = os.environ["VIRTUAL_ENV"]
    env |= {k: v for k, v in threads.child_env(preset=preset, base={}).items()}
    _seed_font_cache(home / ".matplotlib")
    return env


def _seed_font_cache(dest: Path) -> None:
    """A copy of the grader's matplotlib font list, so each notebook does not rebuild it (seconds of CPU, with the
    CJK fonts); a copy, so one learner's code cannot change what another's sees."""
    import shutil

    try:
        import matplotlib

        cache = Path(matplotlib.get_cachedir())
    except Exception:  # noqa: BLE001 -- no matplotlib, no cache dir: the kernel builds its own
        return
    dest.mkdir(parents=True, exist_ok=True)
    for f in cache.glob("fontlist-*.json"):
        shutil.copy2(f, dest / f.name)


def apply_limits(memory: int) -> None:
    """Limit this process and what it starts: `memory` bytes of address space, no core files, files up to
    `FILE_LIMIT`. Called by the grader's child before it starts the kernel."""
    for res, value in (
        (resource.RLIMIT_AS, max(MIN_MEMORY, int(memory))),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_FSIZE, FILE_LIMIT),
    ):
        soft, hard = resource.getrlimit(res)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(res, (cap, cap))  # the hard limit too: the learner's code cannot raise it back
