"""The headless course runner: `labkit course run|list`.

Executes the numbered notebooks through papermill, in order, with the same
parameters for each, then writes `report.md` / `report.html` from what the
notebooks recorded (`<out>/<stem>/results.json`) and what the runner saw
(`<out>/<stem>/status.json`).  A notebook whose declared needs (e.g. GPUs)
this machine cannot meet is reported as *skipped* with the reason — never as
passed.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from labkit.atomic import atomic_write_text
from labkit.cli_errors import (
    RunFailed,
    UsageError,
    existing_dir,
    positive_float,
    positive_int,
    writable_dir,
    writable_file,
)
from labkit.config import PROFILES, get_config
from labkit.i18n import LANGUAGES, SOURCE, check_language, language, using
from labkit.paths import project_root
from labkit.procs import environ
from labkit.results import read_run
from labkit.threads import child_env

NB_PATTERN = re.compile(r"^(\d\d)_[\w-]+\.ipynb$")


@dataclass
class NotebookInfo:
    path: Path
    stem: str
    number: str
    title: str
    minutes: float

    def needs_for(self, profile: str) -> dict:
        meta = _labkit_meta(self.path)
        return {**meta.get("needs", {}), **meta.get(f"needs_{profile}", {})}


def _labkit_meta(path: Path) -> dict:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return nb.get("metadata", {}).get("labkit", {})


def default_notebooks_dir() -> Path:
    """The notebooks of the course language's edition (a Chinese kernel's `discover()` lists the Chinese ones)."""
    return edition_notebooks(language())


def edition_notebooks(lang: str) -> Path:
    """The notebooks of one edition: `notebooks/` (English, the source) or `notebooks/<lang>/` (generated); a
    workshop release holds one edition in `notebooks/` itself."""
    base = project_root() / "notebooks"
    return base / lang if lang != SOURCE and (base / lang).is_dir() else base


def discover(notebooks_dir: str | Path | None = None) -> list[NotebookInfo]:
    """The course's notebooks (`NN_name.ipynb`), in numbered order."""
    nb_dir = Path(notebooks_dir) if notebooks_dir else default_notebooks_dir()
    if not nb_dir.is_dir():
        raise FileNotFoundError(f"notebooks directory not found: {nb_dir} (run from the checkout or pass --notebooks)")
    out = []
    for p in sorted(nb_dir.glob("*.ipynb")):
        m = NB_PATTERN.match(p.name)
        if not m:
            continue
        meta = _labkit_meta(p)
        out.append(
            NotebookInfo(
                path=p,
                stem=p.stem,
                number=m.group(1),
                title=meta.get("title", p.stem),
                minutes=meta.get("minutes", 0),
            )
        )
    return out


def gpu_count() -> int:
    """The GPUs this machine shows torch (counted via NVML: CUDA is not initialised).

    A torch that does not import is the run's failure, not "no GPU": counting it as 0 reported every GPU notebook
    as skipped on a machine whose GPUs were there all along."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 -- ImportError, or OSError from a missing CUDA library
        raise RunFailed(
            f"torch does not import ({type(exc).__name__}: {exc}), so the GPUs cannot be counted: "
            "run `labkit doctor env`, which names what is missing"
        ) from exc
    return torch.cuda.device_count()


def unmet_needs(needs: dict, gpus: int | None = None) -> str | None:
    """Why this machine cannot run a notebook with these needs, or None."""
    want = int(needs.get("gpus", 0) or 0)
    have = gpu_count() if gpus is None else gpus
    if want > have:
        return f"needs {want} GPU(s), this machine has {have}"
    return None


def parse_value(value: str):
    """Papermill's own `-p` typing: True/False/None, int, float, else str."""
    if value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[value]
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


@dataclass
class NotebookRun:
    stem: str
    title: str
    status: str  # passed | failed | skipped
    seconds: float = 0.0
    reason: str = ""  # error or skip reason
    output: str = ""  # executed copy
    results: dict | None = None  # the notebook's results.json


def run_notebook(
    info: NotebookInfo, out: Path, parameters: dict, profile: str, cell_timeout: int, progress: bool = True
) -> NotebookRun:
    import papermill as pm

    nb_out = out / info.stem
    nb_out.mkdir(parents=True, exist_ok=True)
    for stale in ("results.json", "status.json"):
        (nb_out / stale).unlink(missing_ok=True)
    executed = nb_out / f"{info.stem}.ipynb"
    skip = unmet_needs(info.needs_for(profile))
    if skip:
        run = NotebookRun(info.stem, info.title, "skipped", reason=skip)
    else:
        t0 = time.perf_counter()
        status, reason = "passed", ""
        # the kernel inherits this process's environment (papermill takes none of its own): the results folder,
        # and the child-process policy for the profile's model (labkit.threads)
        kernel_env = {**child_env(preset=get_config(profile).model_preset), "LABKIT_RUNS_DIR": str(out.resolve())}
        try:
            with environ(kernel_env):
                pm.execute_notebook(
                    str(info.path),
                    str(executed),
                    parameters=parameters,
                    cwd=str(info.path.parent),
                    kernel_name="python3",
                    language="python",
                    progress_bar=progress,
                    execution_timeout=cell_timeout,
                )
        except Exception as exc:  # PapermillExecutionError, timeouts, dead kernels
            status, reason = "failed", _error_text(exc)
        run = NotebookRun(info.stem, info.title, status, round(time.perf_counter() - t0, 1), reason, str(executed))
        run.results = read_run(nb_out).results
        if run.results is None and run.status == "passed":
            run.status, run.reason = (
                "failed",
                "the notebook wrote no results.json (its last cell must call res.finish())",
            )
    atomic_write_text(
        nb_out / "status.json",
        json.dumps({k: v for k, v in asdict(run).items() if k != "results"}, ensure_ascii=False, indent=2),
    )
    return run


def _error_text(exc: Exception) -> str:
    ename, evalue = getattr(exc, "ename", None), getattr(exc, "evalue", None)
    text = f"{ename}: {evalue}" if ename else f"{type(exc).__name__}: {exc}"
    return text.strip()[:4000]


def run_course(
    profile: str = "smoke",
    only: list[str] | None = None,
    out: str | Path | None = None,
    params: dict | None = None,
    notebooks_dir: str | Path | None = None,
    progress: bool = True,
    junit: str | Path | None = None,
    lang: str | None = None,
) -> list[NotebookRun]:
    """Execute the selected notebooks in order; write the report (and `junit`, the claims as JUnit XML,
    when given); return each run.

    `params={"PROFILE": "full"}` is the same as `profile="full"` (cell timeout, needs and all)."""
    profile = resolve_profile(profile, params)
    if lang is not None:
        notebooks_dir = notebooks_dir or edition_notebooks(check_language(lang))
    with using(lang):  # the kernels inherit it, and the report is written in it
        return _run_selected(profile, only, out, params, notebooks_dir, progress, junit)


def _run_selected(profile, only, out, params, notebooks_dir, progress, junit) -> list[NotebookRun]:
    cfg = get_config(profile)
    out = Path(out) if out else project_root() / "runs"
    out.mkdir(parents=True, exist_ok=True)
    selected = select(discover(notebooks_dir), only)
    parameters = {"PROFILE": cfg.profile, **(params or {})}
    runs = []
    for i, info in enumerate(selected, 1):
        print(f"[{i}/{len(selected)}] {info.stem} ({info.title}) ...", flush=True)
        run = run_notebook(info, out, parameters, cfg.profile, cfg.cell_timeout, progress)
        extra = f" - {run.reason.splitlines()[0] if run.reason else ''}" if run.status != "passed" else ""
        print(f"[{i}/{len(selected)}] {info.stem}: {run.status.upper()} in {run.seconds:.0f}s{extra}", flush=True)
        runs.append(run)
    from labkit.report import write_reports

    write_reports(out, discover(notebooks_dir), cfg.profile)
    if junit:
        from labkit.junit import write_junit

        print(f"junit: {write_junit(junit, out, selected, cfg.profile)}")
    return runs


def default_junit(out: Path) -> Path | None:
    """Under CI (CI=true: GitHub Actions, GitLab CI, Buildkite ...) the runner writes `<out>/junit.xml` unasked."""
    return out / "junit.xml" if os.environ.get("CI", "").lower() in ("true", "1") else None


def resolve_profile(profile: str | None, params: dict | None) -> str:
    """One profile from `--profile` and/or `-p PROFILE ...` (papermill's spelling of the same thing)."""
    via_p = (params or {}).get("PROFILE")
    if via_p is not None and str(via_p).lower() not in PROFILES:
        raise UsageError(f"-p PROFILE {via_p} is not a profile; use one of {', '.join(sorted(PROFILES))}")
    if via_p is not None and profile is not None and str(via_p).lower() != profile.lower():
        raise UsageError(f"--profile {profile} and -p PROFILE {via_p} disagree; pass only one of them")
    return str(via_p).lower() if via_p is not None else (profile or "smoke")


def select(infos: list[NotebookInfo], only: list[str] | None) -> list[NotebookInfo]:
    if not only:
        return infos
    wanted = [o.removesuffix(".ipynb") for o in only]
    chosen = [i for i in infos if any(i.number == w or i.stem == w or i.stem.startswith(w) for w in wanted)]
    missing = [w for w in wanted if not any(i.number == w or i.stem.startswith(w) for i in infos)]
    if missing:
        raise UsageError(f"no notebook matches --only {' '.join(missing)}; see `labkit course list` for the numbers")
    return chosen


# ---- CLI -------------------------------------------------------------------


def add_parameter_option(parser, help_text: str) -> None:
    """`-p NAME VALUE`, papermill's own spelling, for every command that runs notebooks (read with `parse_value`)."""
    parser.add_argument(
        "-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"), help=help_text
    )


def add_language_option(parser, help_text: str) -> None:
    parser.add_argument("--lang", default=None, choices=LANGUAGES, help=f"{help_text} (default en)")


def register(sub) -> None:
    p = sub.add_parser("course", help="run or list the course notebooks headless; build the course website")
    csub = p.add_subparsers(dest="course_cmd", metavar="ACTION")
    r = csub.add_parser("run", help="execute notebooks through papermill and write runs/report.md")
    r.add_argument(
        "--profile",
        default=None,
        choices=sorted(PROFILES),
        help="smoke: CPU-sized minutes; full: GPU-sized runs (default smoke; same as -p PROFILE NAME)",
    )
    r.add_argument("--only", nargs="+", metavar="NN", help="notebook numbers or stems, e.g. 00 03")
    r.add_argument("--out", type=writable_dir, default=None, help="results directory (default: runs/)")
    r.add_argument("--notebooks", type=existing_dir, default=None, help="notebooks directory (default: notebooks/)")
    add_parameter_option(
        r, "papermill parameter passed to every notebook (repeatable; -p PROFILE full = --profile full)"
    )
    r.add_argument("--no-progress", action="store_true", help="hide papermill's per-cell progress bar")
    add_language_option(r, "the edition to run: its notebooks (notebooks/<lang>/), its messages and report")
    r.add_argument(
        "--junit",
        type=writable_file,
        default=None,
        metavar="FILE",
        help="also write every claim as a JUnit XML test case (one suite per notebook) for CI dashboards "
        "(default under CI=true: <out>/junit.xml)",
    )
    r.set_defaults(func=_cmd_run)
    sw = csub.add_parser(
        "seeds", help="the course over a list of seeds: a notebook x seed table and each claim's spread"
    )
    sw.add_argument(
        "--seeds", nargs="+", default=["0-19"], metavar="S", help="seeds or ranges, e.g. 0-19 or 0 3 7 (default 0-19)"
    )
    sw.add_argument("--only", nargs="+", metavar="NN", help="notebook numbers or stems, e.g. 01 07")
    sw.add_argument(
        "--out",
        type=writable_dir,
        default=None,
        help="results directory: seed<N>/ per seed, table.md, claims.md (default: runs/seeds)",
    )
    sw.add_argument("--notebooks", type=existing_dir, default=None, help="notebooks directory (default: notebooks/)")
    add_parameter_option(sw, "another papermill parameter for every run (repeatable); SEED comes from --seeds")
    sw.set_defaults(func=_cmd_seeds)
    ls = csub.add_parser("list", help="print order, title, estimated minutes and hardware needs")
    ls.add_argument("--notebooks", type=existing_dir, default=None, help="notebooks directory (default: notebooks/)")
    ls.set_defaults(func=_cmd_list)
    w = csub.add_parser("workshop", help="write the learner's release: notebooks without solutions, checks kept, data")
    w.add_argument(
        "--out", required=True, type=writable_dir, help="directory to write the release into (created if missing)"
    )
    w.add_argument(
        "--notebooks", type=existing_dir, default=None, help="instructor notebooks directory (default: notebooks/)"
    )
    w.add_argument(
        "--solutions",
        action="store_true",
        help="write the solutions release instead: the instructor notebooks, outputs stripped (for after the workshop)",
    )
    add_language_option(w, "the edition to release (its notebooks and the language of its checks)")
    w.set_defaults(func=_cmd_workshop)
    g = csub.add_parser(
        "grade", help="run every learner's notebooks and write a gradebook: pass / fail / not attempted per exercise"
    )
    g.add_argument(
        "submissions", type=existing_dir, metavar="SUBMISSIONS", help="one folder per learner, with their notebooks"
    )
    g.add_argument(
        "--out", required=True, type=writable_dir, help="where gradebook.csv, gradebook.html and executed/ go"
    )
    g.add_argument(
        "--release",
        type=existing_dir,
        default=None,
        help="the release the learners got (its .labkit-release.json holds the check cells' checksums); default: "
        "the release holding the cwd, else one written from --notebooks into a temporary folder",
    )
    g.add_argument(
        "--notebooks", type=existing_dir, default=None, help="instructor notebooks directory (default: notebooks/)"
    )
    g.add_argument(
        "--timeout",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="time limit per notebook (default: 4x the notebook's minutes, at least 120 s)",
    )
    g.add_argument("--jobs", type=positive_int, default=1, help="notebooks graded at once (default 1)")
    g.set_defaults(func=_cmd_grade)
    from labkit.i18n.cli import register as register_i18n

    register_i18n(csub)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def _cmd_run(args) -> int:
    params = {name: parse_value(value) for name, value in args.parameter}
    resolve_profile(args.profile, params)  # a bad or conflicting profile fails before any kernel starts
    notebooks_dir = args.notebooks or (edition_notebooks(args.lang) if args.lang else None)
    selected = select(discover(notebooks_dir), args.only)  # so does an unknown --only
    if not selected:
        raise UsageError(
            f"no notebooks found in {args.notebooks or default_notebooks_dir()}; "
            "pass --notebooks DIR holding NN_name.ipynb files"
        )
    out = Path(args.out) if args.out else project_root() / "runs"
    junit = args.junit or default_junit(out)
    runs = run_course(
        args.profile, args.only, args.out, params, notebooks_dir, not args.no_progress, junit, lang=args.lang
    )
    failed = [r.stem for r in runs if r.status == "failed"]
    print(f"report: {out / 'report.md'}")
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _cmd_seeds(args) -> int:
    from labkit.sweep import parse_seeds, sweep, write

    seeds = parse_seeds(args.seeds)
    params = {name: parse_value(value) for name, value in args.parameter}
    if "SEED" in params:
        raise UsageError("-p SEED: the sweep sets SEED itself; name the seeds with --seeds")
    profile = resolve_profile(None, params)
    select(discover(args.notebooks), args.only)  # an unknown --only fails before any kernel starts
    out = Path(args.out) if args.out else project_root() / "runs" / "seeds"

    def run_seed(seed: int, seed_out: Path) -> list[NotebookRun]:
        return run_course(profile, args.only, seed_out, {**params, "SEED": seed}, args.notebooks, progress=False)

    result = sweep(seeds, run_seed, out, profile)
    print(f"table: {write(result, out)}")
    failed = any(c["status"] == "failed" for row in result["table"].values() for c in row.values())
    return 1 if failed else 0


def _cmd_workshop(args) -> int:
    from labkit.workshop import write_release

    notebooks_dir = args.notebooks or (edition_notebooks(args.lang) if args.lang else None)
    written = write_release(
        args.out, [info.path for info in discover(notebooks_dir)], solutions=args.solutions, language=args.lang
    )
    what = "solutions release" if args.solutions else "learner release"
    how = "solved, outputs stripped" if args.solutions else "solutions removed, checks kept"
    print(f"{what}: {len(written)} notebooks in {Path(args.out) / 'notebooks'} ({how}); start with its README.md")
    return 0


def _cmd_grade(args) -> int:
    import shutil
    import tempfile

    from labkit.grading import check_release, grade, learner_folders, summary
    from labkit.paths import RELEASE_MARKER
    from labkit.workshop import write_release

    release, tmp = args.release, None
    if release:
        check_release(release)  # not a release: one line, exit 2, before any kernel starts
    learner_folders(args.submissions)  # so does a SUBMISSIONS without learners
    if not release and (project_root() / RELEASE_MARKER).is_file():
        release = project_root()  # graded from inside the release the learners got
    elif not release:  # the release the instructor notebooks give now (check cells are released as they are)
        try:
            infos = discover(args.notebooks)
        except FileNotFoundError as exc:
            raise UsageError(f"{exc}; or pass --release DIR (a folder `labkit course workshop` wrote)") from None
        tmp = Path(tempfile.mkdtemp(prefix="labkit-release-"))
        release = tmp / "release"
        write_release(release, [info.path for info in infos])
    try:
        rows = grade(args.submissions, args.out, release, args.timeout, args.jobs)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{summary(rows)} -> {Path(args.out) / 'gradebook.html'}")
    return 0


def _cmd_list(args) -> int:
    infos = discover(args.notebooks)
    have = gpu_count()
    print(f"{'#':<3} {'notebook':<36} {'min':>4}  {'needs':<10} title")
    for i in infos:
        needs = i.needs_for("smoke")
        need_txt = f"{needs.get('gpus', 0)} GPU" if needs.get("gpus") else "CPU ok"
        full = i.needs_for("full")
        if full.get("gpus") and not needs.get("gpus"):
            need_txt += f" (full: {full['gpus']} GPU)"
        flag = "" if not unmet_needs(needs, have) else "  [skipped here]"
        print(f"{i.number:<3} {i.stem:<36} {i.minutes:>4}  {need_txt:<10} {i.title}{flag}")
    return 0
