"""The `labkit` command line: `labkit.cli.commands` builds it from each topic's `register()`; `labkit.cli.errors`
is its contract (usage errors exit 2 with one line, failed runs exit 1), imported by every topic's command.

`main` is imported from here (the console script `labkit.cli:main`, `python -m labkit.cli`) and loads the commands
only when called, so a topic that imports `labkit.cli.errors` does not load the dispatcher.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run one `labkit` command (`argv`, or this process's own arguments when None): its exit status."""
    from labkit.cli.commands import main as run

    return run(argv)


# the names the old module `labkit.cli` offered beside `main`, now in labkit.cli.commands
_OLD = (
    "BENCHES",
    "COMMANDS",
    "COURSE_ACTIONS",
    "build_parser",
    "_register_all",
    "_register_actions",
    "_unavailable",
    "_version",
    "_tag_progs",
    "_Version",
)


def __getattr__(name: str):
    # imported here: `labkit clean` loads this package and nothing it does not use (tests/test_cleaning_pipeline.py)
    from labkit.deprecation import moved_name

    return moved_name(__name__, name, dict.fromkeys(_OLD, "labkit.cli.commands"))
