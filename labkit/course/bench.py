"""`labkit bench course`: a notebook's wall time idle, then beside N CPU-bound processes, in one run.

A workshop machine is never idle (docs/workshop.md recommends a shared JupyterHub).  This bench
answers "how much slower does the course get when someone else computes?" the way a learner meets
it: the same notebook, through the same runner, once alone and once beside `busy` processes that
each keep one core at 100 %.  Target on 2 cores beside 1 busy process: <= 2x the idle time
(docs/decisions.md §18; before the thread policy, notebook 01 took 18.5x).

    labkit bench course --only 01 06 --busy 1
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from labkit.cli.errors import UsageError, existing_dir, positive_int, writable_dir, writable_file
from labkit.procs import environ, stop_group
from labkit.threads import cores

TARGET_RATIO = 2.0
BUSY_LOOP = "while True:\n    pass\n"


@contextmanager
def busy_processes(n: int):
    """`n` processes spinning on the CPU (pure Python, one core each) for the duration of the block."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", BUSY_LOOP],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(n)
    ]
    try:
        time.sleep(0.5)  # let the scheduler see them before the timed run starts
        yield procs
    finally:
        for p in procs:
            stop_group(p, grace=1.0)


@dataclass
class ContentionRow:
    notebook: str
    idle_s: float
    busy_s: float
    idle_status: str
    busy_status: str
    busy: int
    profile: str = "smoke"
    date: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))  # measured

    @property
    def ratio(self) -> float:
        return self.busy_s / self.idle_s if self.idle_s else float("inf")

    @property
    def ok(self) -> bool:
        return self.idle_status == self.busy_status == "passed" and self.ratio <= TARGET_RATIO


def measure(
    only: list[str],
    busy: int = 1,
    out: str | Path | None = None,
    params: dict | None = None,
    env: dict[str, str] | None = None,
    notebooks_dir: str | Path | None = None,
    echo=print,
) -> list[ContentionRow]:
    """Run each selected notebook idle, then beside `busy` spinning processes; one row per notebook.

    `env` is added to the environment the notebook kernels inherit (e.g. `LABKIT_THREADS=0` to see
    the machine without the thread policy)."""
    from labkit.config import get_config
    from labkit.course.discovery import discover, select
    from labkit.course.runner import run_notebook

    cfg = get_config((params or {}).get("PROFILE", "smoke"))
    parameters = {"PROFILE": cfg.profile, **(params or {})}
    rows = []
    # without --out the executed notebooks go to a temporary folder, removed when the rows are measured
    with environ(env or {}), tempfile.TemporaryDirectory(prefix="labkit-contention-") as tmp:
        root = Path(out) if out else Path(tmp)
        for info in select(discover(notebooks_dir), only):
            echo(f"{info.stem}: idle ...")
            idle = run_notebook(info, root / "idle", parameters, cfg.profile, cfg.cell_timeout, progress=False)
            echo(f"{info.stem}: idle {idle.seconds:.0f} s ({idle.status}); beside {busy} busy process(es) ...")
            with busy_processes(busy):
                loaded = run_notebook(
                    info, root / f"busy{busy}", parameters, cfg.profile, cfg.cell_timeout, progress=False
                )
            rows.append(
                ContentionRow(info.stem, idle.seconds, loaded.seconds, idle.status, loaded.status, busy, cfg.profile)
            )
            echo(f"{info.stem}: beside {busy} busy: {loaded.seconds:.0f} s ({loaded.status}), {rows[-1].ratio:.2f}x")
    return rows


def table(rows: list[ContentionRow]) -> str:
    lines = [f"{'notebook':<36} {'idle s':>7} {'busy s':>7} {'ratio':>6}  (target <= {TARGET_RATIO:g}x)"]
    for r in rows:
        mark = "ok" if r.ok else ("FAILED RUN" if "failed" in (r.idle_status, r.busy_status) else "OVER")
        lines.append(f"{r.notebook:<36} {r.idle_s:7.1f} {r.busy_s:7.1f} {r.ratio:6.2f}  {mark}")
    return "\n".join(lines)


def _parse_env(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--env {pair}: write NAME=VALUE, e.g. --env LABKIT_THREADS=0")
        env[name] = value
    return env


def _main(args: argparse.Namespace) -> int:
    from labkit.cli.options import parse_value
    from labkit.course.discovery import discover, select

    params = {name: parse_value(value) for name, value in args.parameter}
    env = _parse_env(args.env)
    select(discover(args.notebooks), args.only)  # an unknown --only fails before anything runs
    print(f"{cores()} core(s); beside {args.busy} busy process(es); env {env or 'as is'}", flush=True)
    rows = measure(args.only, args.busy, args.out, params, env, args.notebooks)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(
            json.dumps([{**asdict(r), "ratio": round(r.ratio, 3)} for r in rows], indent=2), encoding="utf-8"
        )
    return 0 if all(r.ok for r in rows) else 1


def register(subparsers) -> None:
    from labkit.cli.options import add_parameter_option

    p = subparsers.add_parser(
        "course", help="a notebook's time idle and beside N busy processes (shared-machine ratio)"
    )
    p.add_argument("--only", nargs="+", required=True, metavar="NN", help="notebook numbers or stems, e.g. 01 06")
    p.add_argument(
        "--busy",
        type=positive_int,
        default=1,
        help="CPU-bound processes running beside the second run (default 1: one core of a 2-core machine)",
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="environment for the notebook kernels, repeatable (e.g. LABKIT_THREADS=0: no thread policy)",
    )
    add_parameter_option(p, "papermill parameter for the notebooks (repeatable), e.g. -p SEED 3")
    p.add_argument(
        "--out", type=writable_dir, default=None, help="keep the executed notebooks here (default: a temp dir)"
    )
    p.add_argument("--notebooks", type=existing_dir, default=None, help="notebooks directory (default: notebooks/)")
    p.add_argument("--json", type=writable_file, help="write the rows here")
    p.set_defaults(func=_main)
