"""Old import paths that still work for one release, each with a `DeprecationWarning` naming the new one.

Issue #28 moved the course machinery into packages (`labkit.course`, `labkit.classroom`, `labkit.cli`). `MOVED` is
the one old -> new table: each old module left behind is a shim that calls `moved(__name__)` and re-exports the new
module's names; a package that kept an old module's name (`labkit.course`, `labkit.cli`) answers the names that
moved out of it through `moved_name`. Nothing in the repository imports an old path (tests/test_architecture.py).
"""

from __future__ import annotations

import importlib
import warnings

# old module -> new module
MOVED = {
    "labkit.cleaning.distributed": "labkit.cleaning.datatrove_engine",
    "labkit.cli_errors": "labkit.cli.errors",
    "labkit.contention": "labkit.course.bench",
    "labkit.course_times": "labkit.course.times",
    "labkit.grading": "labkit.classroom.grader",  # and its gradebook and kernel
    "labkit.junit": "labkit.course.junit",
    "labkit.notebook_checks": "labkit.course.params_check",
    "labkit.report": "labkit.course.report",
    "labkit.site": "labkit.course.site",
    "labkit.site_pages": "labkit.course.site_pages",
    "labkit.sweep": "labkit.course.seeds",
    "labkit.workshop": "labkit.classroom.release",
}


def moved(old: str) -> None:
    """Called at the top of an old module's shim: warn whoever imported it (the frame above the import)."""
    new = MOVED[old]
    warnings.warn(f"{old} is deprecated and goes in the next release: import {new}", DeprecationWarning, stacklevel=3)


def moved_name(package: str, name: str, table: dict[str, str]):
    """For a package's module-level `__getattr__`: a name the old module of the same name offered (`table`: name ->
    the module that holds it now), imported when first asked for, with a warning for the code that asked."""
    if name not in table:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    new = table[name]
    warnings.warn(
        f"{package}.{name} is deprecated and goes in the next release: use {new}.{name}",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(new), name)
