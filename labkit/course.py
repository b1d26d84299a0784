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
from dataclasses import asdict, dataclass, field
from pathlib import Path

from labkit.cli_errors import UsageError, existing_dir, writable_dir
from labkit.config import PROFILES, get_config
from labkit.results import project_root

NB_PATTERN = re.compile(r"^(\d\d)_[\w-]+\.ipynb$")


@dataclass
class NotebookInfo:
    path: Path
    stem: str
    number: str
    title: str
    minutes: float
    needs: dict = field(default_factory=dict)

    def needs_for(self, profile: str) -> dict:
        meta = _labkit_meta(self.path)
        return {**meta.get("needs", {}), **meta.get(f"needs_{profile}", {})}


def _labkit_meta(path: Path) -> dict:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return nb.get("metadata", {}).get("labkit", {})


def default_notebooks_dir() -> Path:
    return project_root() / "notebooks"


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
        out.append(NotebookInfo(
            path=p, stem=p.stem, number=m.group(1),
            title=meta.get("title", p.stem), minutes=meta.get("minutes", 0),
            needs=meta.get("needs", {}),
        ))
    return out


def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()  # counts via NVML; does not initialise CUDA
    except Exception:
        return 0


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
    status: str                  # passed | failed | skipped
    seconds: float = 0.0
    reason: str = ""             # error or skip reason
    output: str = ""             # executed copy
    results: dict | None = None  # the notebook's results.json


def run_notebook(info: NotebookInfo, out: Path, parameters: dict, profile: str,
                 cell_timeout: int, progress: bool = True) -> NotebookRun:
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
        old = os.environ.get("LABKIT_RUNS_DIR")
        os.environ["LABKIT_RUNS_DIR"] = str(out.resolve())  # the kernel inherits it
        try:
            pm.execute_notebook(
                str(info.path), str(executed), parameters=parameters,
                cwd=str(info.path.parent), kernel_name="python3", language="python",
                progress_bar=progress, execution_timeout=cell_timeout,
            )
        except Exception as exc:  # PapermillExecutionError, timeouts, dead kernels
            status, reason = "failed", _error_text(exc)
        finally:
            if old is None:
                os.environ.pop("LABKIT_RUNS_DIR", None)
            else:
                os.environ["LABKIT_RUNS_DIR"] = old
        run = NotebookRun(info.stem, info.title, status, round(time.perf_counter() - t0, 1),
                          reason, str(executed))
        res_path = nb_out / "results.json"
        if res_path.exists():
            run.results = json.loads(res_path.read_text(encoding="utf-8"))
        elif run.status == "passed":
            run.status, run.reason = "failed", "the notebook wrote no results.json (its last cell must call res.finish())"
    (nb_out / "status.json").write_text(
        json.dumps({k: v for k, v in asdict(run).items() if k != "results"}, ensure_ascii=False, indent=2),
        encoding="utf-8")
    return run


def _error_text(exc: Exception) -> str:
    ename, evalue = getattr(exc, "ename", None), getattr(exc, "evalue", None)
    text = f"{ename}: {evalue}" if ename else f"{type(exc).__name__}: {exc}"
    return text.strip()[:4000]


def run_course(profile: str = "smoke", only: list[str] | None = None, out: str | Path | None = None,
               params: dict | None = None, notebooks_dir: str | Path | None = None,
               progress: bool = True) -> list[NotebookRun]:
    """Execute the selected notebooks in order; write the report; return each run.

    `params={"PROFILE": "full"}` is the same as `profile="full"` (cell timeout, needs and all)."""
    profile = resolve_profile(profile, params)
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
    return runs


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

def register(sub) -> None:
    p = sub.add_parser("course", help="run or list the course notebooks headless")
    csub = p.add_subparsers(dest="course_cmd", metavar="ACTION")
    r = csub.add_parser("run", help="execute notebooks through papermill and write runs/report.md")
    r.add_argument("--profile", default=None, choices=sorted(PROFILES),
                   help="smoke: CPU-sized minutes; full: GPU-sized runs (default smoke; same as -p PROFILE NAME)")
    r.add_argument("--only", nargs="+", metavar="NN", help="notebook numbers or stems, e.g. 00 03")
    r.add_argument("--out", type=writable_dir, default=None, help="results directory (default: runs/)")
    r.add_argument("--notebooks", type=existing_dir, default=None, help="notebooks directory (default: notebooks/)")
    r.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="papermill parameter passed to every notebook (repeatable; -p PROFILE full = --profile full)")
    r.add_argument("--no-progress", action="store_true", help="hide papermill's per-cell progress bar")
    r.set_defaults(func=_cmd_run)
    ls = csub.add_parser("list", help="print order, title, estimated minutes and hardware needs")
    ls.add_argument("--notebooks", type=existing_dir, default=None, help="notebooks directory (default: notebooks/)")
    ls.set_defaults(func=_cmd_list)
    w = csub.add_parser("workshop", help="write the learner's release: notebooks without solutions, checks kept, data")
    w.add_argument("--out", required=True, type=writable_dir, help="directory to write the release into (created if missing)")
    w.add_argument("--notebooks", type=existing_dir, default=None, help="instructor notebooks directory (default: notebooks/)")
    w.set_defaults(func=_cmd_workshop)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def _cmd_run(args) -> int:
    params = {name: parse_value(value) for name, value in args.parameter}
    resolve_profile(args.profile, params)  # a bad or conflicting profile fails before any kernel starts
    selected = select(discover(args.notebooks), args.only)  # so does an unknown --only
    if not selected:
        raise UsageError(f"no notebooks found in {args.notebooks or default_notebooks_dir()}; "
                         "pass --notebooks DIR holding NN_name.ipynb files")
    runs = run_course(args.profile, args.only, args.out, params, args.notebooks, not args.no_progress)
    failed = [r.stem for r in runs if r.status == "failed"]
    out = Path(args.out) if args.out else project_root() / "runs"
    print(f"report: {out / 'report.md'}")
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _cmd_workshop(args) -> int:
    from labkit.workshop import write_release

    written = write_release(args.out, args.notebooks)
    print(f"learner release: {len(written)} notebooks in {Path(args.out) / 'notebooks'} (solutions removed, checks kept)")
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
