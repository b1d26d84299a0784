"""The course as a program: find the notebooks, run them headless, and report, time, sweep and publish the runs.

`discovery` (the notebooks and their needs), `runner` (papermill, one kernel per notebook), `cli` (`labkit course
...`), `seeds` (the course over seeds), `bench` (`labkit bench course`), `times` (the measured times table),
`report` / `junit` (what each notebook proved, as Markdown/HTML and as JUnit XML), `params_check` (the parameters
cell, a pre-commit hook), `site` / `site_pages` (the course website).
"""

from __future__ import annotations

from labkit.deprecation import moved_name

# the names the old module `labkit.course` offered, now in its package's modules
_OLD = {
    "labkit.course.discovery": "NB_PATTERN NotebookInfo _labkit_meta default_notebooks_dir edition_notebooks discover "
    "select gpu_count unmet_needs",
    "labkit.course.runner": "NotebookRun run_notebook _error_text run_course _run_selected default_junit "
    "resolve_profile",
    "labkit.course.cli": "register _cmd_run _cmd_seeds _cmd_workshop _cmd_grade _cmd_list",
    "labkit.cli.options": "parse_value add_parameter_option add_language_option",
}
_TABLE = {name: mod for mod, names in _OLD.items() for name in names.split()}


def __getattr__(name: str):
    return moved_name(__name__, name, _TABLE)
