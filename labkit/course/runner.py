"""The headless course runner: the selected notebooks through papermill, in order, one kernel each.

Executes the numbered notebooks with the same parameters for each, then writes `report.md` / `report.html` from
what the notebooks recorded (`<out>/<stem>/results.json`) and what the runner saw (`<out>/<stem>/status.json`).
A notebook whose declared needs (e.g. GPUs) this machine cannot meet is reported as *skipped* with the reason --
never as passed.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from labkit.atomic import atomic_write_text
from labkit.cli.errors import UsageError
from labkit.config import PROFILES, get_config
from labkit.course.discovery import NotebookInfo, discover, edition_notebooks, select, unmet_needs
from labkit.i18n import check_language, using
from labkit.paths import project_root
from labkit.procs import environ
from labkit.results import read_run
from labkit.threads import child_env
from labkit.usage import TreeUsage


@dataclass
class NotebookRun:
    stem: str
    title: str
    status: str  # passed | failed | skipped
    seconds: float = 0.0
    reason: str = ""  # error or skip reason
    output: str = ""  # executed copy
    results: dict | None = None  # the notebook's results.json
    # what the kernel and every process it started used (labkit.usage): `labkit workshop plan` reads them
    cpu_seconds: float | None = None
    peak_rss_mb: float | None = None


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
        usage = TreeUsage()  # the runner's children during the run: the kernel and its own
        try:
            with environ(kernel_env), usage:
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
        run.cpu_seconds, run.peak_rss_mb = round(usage.usage.cpu_seconds, 1), round(usage.usage.peak_rss_mb, 1)
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
    from labkit.course.report import write_reports

    write_reports(out, discover(notebooks_dir), cfg.profile)
    if junit:
        from labkit.course.junit import write_junit

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
