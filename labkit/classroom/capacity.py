"""`labkit workshop plan --learners N`: will the room fit this machine, and how long will each notebook take?

From measured figures only: each notebook's run on its own -- wall seconds, CPU seconds of its kernel and every
process the kernel started, and the peak resident memory of that process tree -- which the course runner records
in every run (`<runs>/<notebook>/status.json`, `labkit.usage`) and `labkit course times --update` copies into
`docs/times.json`.

The model, for N learners who run the same notebook at once (the instructor says "run it now"):

* memory: the kernels hold N x peak at the same time, beside one Jupyter server per learner and the hub: it fits
  when that sum is at most the machine's memory;
* time: a notebook alone takes `wall` seconds, `cpu` of them computing. N learners ask for N x cpu CPU seconds
  from C cores; what is not computing (waiting for a child, the disk, a sleep) does not compete. So one learner's
  run takes `max(wall, max(0, wall - cpu) + N x cpu / C)`: no faster than alone, and once the cores are the
  bottleneck, as slow as sharing them evenly. The thread policy (`labkit.threads`: the small models use one
  thread per process) keeps a kernel from asking for more than its share.

Checked against the real thing: `labkit.classroom.capacity.simulate` starts N runner processes executing one
notebook at once and compares each one's wall time with the plan (`docs/decisions.md`, `tests/test_capacity.py`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from labkit.cli.errors import UsageError
from labkit.threads import cores as affinity_cores

MB_PER_GB = 1024
BINDER_MB = 2048  # mybinder.org's memory limit per user session
# beside the kernels, one Jupyter server per learner: JupyterLab's server held 131 MB RSS once `/lab` was loaded
# (measured here, docs/decisions.md section 28); and, once, the hub, its proxy and the system -- a reserve, stated in the
# plan's output, not a measurement
SERVER_MB = 131
ROOM_RESERVE_MB = 1024


@dataclass
class Figures:
    """One notebook's run on its own, measured."""

    number: str
    stem: str
    wall: float  # seconds
    cpu: float  # CPU seconds of the kernel and its children
    peak_mb: float  # peak RSS of the kernel's process tree


@dataclass
class Row:
    figures: Figures
    learners: int
    room_mb: float  # what the room's kernels and servers hold at once
    fits: bool
    seconds: float  # one learner's run with N learners at once
    binder: bool  # fits Binder's 2 GB (the kernel tree + JupyterLab's server)

    @property
    def slowdown(self) -> float:
        return self.seconds / self.figures.wall if self.figures.wall else 1.0


def predict_seconds(wall: float, cpu: float, learners: int, cores: float, solo_cores: float | None = None) -> float:
    """One learner's wall seconds when `learners` run the notebook at once on `cores` (the module's model).

    `solo_cores`: the cores the run alone had (default `cores`: an idle machine). On a shared machine the run alone
    also waited for a core; that wait is not the notebook's own and is not counted twice."""
    parallel = max(1.0, cpu / wall) if wall > 0 else 1.0  # the processes x threads the notebook keeps busy
    solo_rate = min(parallel, solo_cores if solo_cores else cores)
    waiting = max(0.0, wall - cpu / solo_rate)  # a child, the disk, a sleep: not computing
    rate = min(parallel, max(cores, 1e-9) / learners)
    return max(wall if solo_cores is None else 0.0, waiting + cpu / rate)


def from_runs(folder: str | Path) -> dict[str, Figures]:
    """Figures from a runs folder (`labkit course run --out DIR`): each `<stem>/status.json` that passed and holds
    the runner's resource figures."""
    out: dict[str, Figures] = {}
    for status in sorted(Path(folder).glob("*/status.json")):
        try:
            st = json.loads(status.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if st.get("status") != "passed" or st.get("cpu_seconds") is None or st.get("peak_rss_mb") is None:
            continue
        stem = st.get("stem") or status.parent.name
        out[stem[:2]] = Figures(
            stem[:2], stem, float(st["seconds"]), float(st["cpu_seconds"]), float(st["peak_rss_mb"])
        )
    return out


def from_times(path: str | Path) -> dict[str, Figures]:
    """Figures from `docs/times.json`: each notebook's `resources` (`labkit course times --runs DIR --update`)."""
    table = json.loads(Path(path).read_text(encoding="utf-8"))
    out: dict[str, Figures] = {}
    for number, entry in table.get("notebooks", {}).items():
        used = entry.get("resources") or {}
        if used.get("seconds") is None or used.get("cpu_seconds") is None or used.get("peak_rss_mb") is None:
            continue
        out[number] = Figures(
            number,
            entry.get("stem", number),
            float(used["seconds"]),
            float(used["cpu_seconds"]),
            float(used["peak_rss_mb"]),
        )
    return out


def load_figures(runs: str | Path | None = None, times: str | Path | None = None) -> dict[str, Figures]:
    """The measured figures from `runs` (a runs folder) or else `times` (default: the course's docs/times.json);
    a UsageError (one line, exit 2) when neither holds any."""
    if runs is not None:
        figures = from_runs(runs)
        where = f"--runs {runs}"
        hint = "run `labkit course run --out DIR` first: its status.json files hold the figures"
    else:
        if times is None:
            from labkit.paths import course_source

            root = course_source()
            times = root / "docs" / "times.json" if root else None
        if times is None or not Path(times).is_file():
            raise UsageError(
                f"no measured figures: {times or 'docs/times.json'} is not here; pass --runs DIR (a course run's folder)"
            )
        figures, where = from_times(times), str(times)
        hint = "run `labkit course times --update` after a course run, or pass --runs DIR"
    if not figures:
        raise UsageError(f"{where} holds no CPU seconds and peak memory per notebook; {hint}")
    return figures


def plan(
    figures: dict[str, Figures],
    learners: int,
    cores: float | None = None,
    memory_mb: float | None = None,
    server_mb: float = SERVER_MB,
    reserve_mb: float = ROOM_RESERVE_MB,
) -> list[Row]:
    """Each notebook's row for `learners` at once on `cores` (default: this process's) and `memory_mb` (default:
    this machine's)."""
    if learners < 1:
        raise UsageError(f"--learners {learners}: a room has at least 1 learner")
    cores = cores or affinity_cores()
    memory_mb = memory_mb or machine_memory_mb()
    rows = []
    for number in sorted(figures):
        f = figures[number]
        room = learners * (f.peak_mb + server_mb) + reserve_mb
        rows.append(
            Row(
                figures=f,
                learners=learners,
                room_mb=room,
                fits=room <= memory_mb,
                seconds=predict_seconds(f.wall, f.cpu, learners, cores),
                binder=f.peak_mb + server_mb <= BINDER_MB,
            )
        )
    return rows


def max_learners(
    f: Figures, memory_mb: float, server_mb: float = SERVER_MB, reserve_mb: float = ROOM_RESERVE_MB
) -> int:
    """The most learners whose kernels running this notebook at once fit in `memory_mb`."""
    return max(0, int((memory_mb - reserve_mb) // (f.peak_mb + server_mb)))


def machine_memory_mb() -> float:
    import psutil

    return psutil.virtual_memory().total / (1024 * 1024)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def render(rows: list[Row], cores: float, memory_mb: float, server_mb: float = SERVER_MB) -> str:
    """The plan as the instructor reads it: a table and what does not fit."""
    if not rows:
        return "no notebooks to plan"
    n = rows[0].learners
    lines = [
        f"{n} learner(s) running each notebook at once on {cores:g} core(s) and {memory_mb / MB_PER_GB:.1f} GB "
        f"(per learner: the notebook's kernel tree as measured + {server_mb:g} MB for their Jupyter server; "
        f"{ROOM_RESERVE_MB} MB for the hub and the system)",
        "",
        f"{'#':<3} {'notebook':<36} {'alone':>7} {'CPU s':>7} {'peak MB':>8} {'room GB':>8} {'fits':>5} "
        f"{'with ' + str(n):>9} {'slower':>7} {'Binder 2 GB':>12}",
    ]
    for r in rows:
        f = r.figures
        lines.append(
            f"{f.number:<3} {f.stem:<36} {_minutes(f.wall):>7} {f.cpu:>7.0f} {f.peak_mb:>8.0f} "
            f"{r.room_mb / MB_PER_GB:>8.1f} {'yes' if r.fits else 'NO':>5} {_minutes(r.seconds):>9} "
            f"{r.slowdown:>6.1f}x {'fits' if r.binder else 'too big':>12}"
        )
    short = [r for r in rows if not r.fits]
    lines.append("")
    if short:
        for r in short:
            k = max_learners(r.figures, memory_mb, server_mb)
            lines.append(
                f"{r.figures.number} does not fit: {n} x {r.figures.peak_mb + server_mb:.0f} MB + {ROOM_RESERVE_MB} MB "
                f"= {r.room_mb / MB_PER_GB:.1f} GB > {memory_mb / MB_PER_GB:.1f} GB; at most {k} learner(s) at once"
            )
    else:
        lines.append(f"every notebook fits {n} learner(s) at once")
    total = sum(r.seconds for r in rows)
    lines.append(f"the whole course, all {n} together, notebook after notebook: {_minutes(total)} of running")
    return "\n".join(lines)


# ---- the check: N simulated learners running one notebook at once ------------------------------------------


def _machine_busy() -> float:
    """CPU seconds the whole machine has computed since boot (every process, niced ones included)."""
    import psutil

    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)


def _children_cpu() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def simulate(
    notebook: str, learners: int, out: str | Path, notebooks_dir: str | Path | None = None, timeout: float = 900
) -> list[dict]:
    """Start `learners` course runners at once, each executing `notebook` into `out/learner<k>/`; returns each
    one's status.json (wall seconds, CPU seconds, peak MB) once all are done."""
    out = Path(out)
    procs = []
    for k in range(learners):
        argv = [sys.executable, "-m", "labkit.cli", "course", "run", "--only", notebook, "--no-progress"]
        argv += ["--out", str(out / f"learner{k + 1}")]
        if notebooks_dir:
            argv += ["--notebooks", str(notebooks_dir)]
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ)))
    deadline = time.monotonic() + timeout
    errors = []
    t0, busy0, ours0 = time.monotonic(), _machine_busy(), _children_cpu()
    for p in procs:
        try:
            _, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        if p.returncode != 0:
            errors.append((err or b"").decode("utf-8", "replace").strip().splitlines()[-1:])
    wall = time.monotonic() - t0
    # what the rest of the machine computed meanwhile (another user's job, on a shared machine): the room had
    # the cores minus that
    background = max(0.0, (_machine_busy() - busy0) - (_children_cpu() - ours0)) / max(wall, 1e-9)
    statuses = []
    for k in range(learners):
        found = sorted((out / f"learner{k + 1}").glob("*/status.json"))
        st = json.loads(found[0].read_text(encoding="utf-8")) if found else {"status": "missing"}
        statuses.append({**st, "background_cores": round(background, 2)})
    if errors:
        raise RuntimeError(f"{len(errors)} simulated learner(s) failed: {errors}")
    return statuses


def check(notebook: str, learners: list[int], out: str | Path, cores: float | None = None, progress=print) -> dict:
    """The plan against the real thing: `notebook` run alone (the figures), then by each N of `learners` simulated
    learners at once; each N's predicted and measured seconds per learner (`out/room.json`)."""
    out = Path(out)
    cores = cores or affinity_cores()
    (solo,) = simulate(notebook, 1, out / "solo")
    if solo.get("status") != "passed" or solo.get("cpu_seconds") is None:
        raise RuntimeError(f"the run alone did not pass or recorded no CPU seconds: {solo}")
    f = Figures(notebook, solo["stem"], float(solo["seconds"]), float(solo["cpu_seconds"]), float(solo["peak_rss_mb"]))
    progress(
        f"alone: {f.wall:.1f} s, {f.cpu:.1f} CPU s, peak {f.peak_mb:.0f} MB "
        f"(the rest of the machine used {solo.get('background_cores', 0):.2f} core(s) meanwhile)"
    )
    result = {"notebook": f.stem, "cores": cores, "alone": solo, "rooms": []}
    for n in learners:
        runs = simulate(notebook, n, out / f"room{n}")
        seconds = [float(r["seconds"]) for r in runs]
        predicted = predict_seconds(f.wall, f.cpu, n, cores)
        # the cores the room had, and those the run alone had: what the rest of a shared machine left
        free = max(0.1, cores - runs[0].get("background_cores", 0.0))
        solo_free = max(0.1, cores - solo.get("background_cores", 0.0))
        predicted_free = predict_seconds(f.wall, f.cpu, n, free, solo_free)
        mean = sum(seconds) / len(seconds)
        room = {
            "learners": n,
            "predicted_s": round(predicted, 1),
            "background_cores": runs[0].get("background_cores"),
            "predicted_free_cores_s": round(predicted_free, 1),
            "error_free_cores": round((mean - predicted_free) / predicted_free, 3),
            "measured_s": [round(s, 1) for s in seconds],
            "mean_s": round(mean, 1),
            "error": round((mean - predicted) / predicted, 3),
            "peak_rss_mb": [r.get("peak_rss_mb") for r in runs],
        }
        result["rooms"].append(room)
        progress(
            f"{n} learners: predicted {predicted:.1f} s each, measured {', '.join(f'{s:.1f}' for s in seconds)} s "
            f"(mean {mean:.1f}: {100 * room['error']:+.0f} %); the rest of the machine used "
            f"{room['background_cores']:.2f} core(s) meanwhile: on the {free:.2f} left, predicted {predicted_free:.1f} s "
            f"({100 * room['error_free_cores']:+.0f} %)"
        )
    (out / "room.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


# ---- `labkit bench room` ------------------------------------------------------------------------------------


def register(sub) -> None:
    """`labkit bench room`: the capacity plan against N simulated learners running one notebook at once."""
    from labkit.cli.errors import positive_int, writable_dir

    b = sub.add_parser("room", help="the capacity plan against N simulated learners running one notebook at once")
    b.add_argument("--only", required=True, metavar="NN", help="the notebook, e.g. 03")
    b.add_argument("--learners", type=positive_int, nargs="+", default=[2, 4], help="room sizes to run (default 2 4)")
    b.add_argument("--out", type=writable_dir, required=True, help="where the runs and room.json go")
    b.set_defaults(func=_cmd_bench)


def _cmd_bench(args) -> int:
    result = check(args.only, args.learners, args.out)
    print(f"room.json: {Path(args.out) / 'room.json'} ({len(result['rooms'])} room size(s))")
    return 0
