"""`labkit course run|seeds|list|workshop|grade` (and `i18n`): the course's actions on the command line."""

from __future__ import annotations

import sys
from pathlib import Path

from labkit.cli.errors import UsageError, existing_dir, positive_float, positive_int, writable_dir, writable_file
from labkit.cli.options import add_language_option, add_parameter_option, parse_value
from labkit.config import PROFILES
from labkit.course.discovery import default_notebooks_dir, discover, edition_notebooks, gpu_count, select, unmet_needs
from labkit.course.runner import NotebookRun, default_junit, resolve_profile, run_course
from labkit.paths import project_root


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
    g.add_argument(
        "--jobs",
        type=positive_int,
        default=None,
        help="notebooks graded at once (default: the thread policy's share -- cores / threads per kernel)",
    )
    g.add_argument(
        "--memory",
        default=None,
        metavar="SIZE",
        help="address space each learner notebook may use, e.g. 2G (default: 80%% of the machine's memory / --jobs)",
    )
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
    from labkit.course.seeds import parse_seeds, sweep, write

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
    from labkit.classroom.release import write_release

    notebooks_dir = args.notebooks or (edition_notebooks(args.lang) if args.lang else None)
    written = write_release(
        args.out, [info.path for info in discover(notebooks_dir)], solutions=args.solutions, language=args.lang
    )
    what = "solutions release" if args.solutions else "learner release"
    how = "solved, outputs stripped" if args.solutions else "solutions removed, checks kept"
    print(f"{what}: {len(written)} notebooks in {Path(args.out) / 'notebooks'} ({how}); start with its README.md")
    return 0


def _cmd_grade(args) -> int:
    from labkit.classroom.hub import parse_size

    memory = parse_size(args.memory) if args.memory else None  # a bad size: one line, exit 2, before any kernel
    import shutil
    import tempfile

    from labkit.classroom.gradebook import summary
    from labkit.classroom.grader import check_release, grade, learner_folders
    from labkit.paths import RELEASE_MARKER
    from labkit.classroom.release import write_release

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
        rows = grade(args.submissions, args.out, release, args.timeout, args.jobs, memory=memory)
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
