"""`labkit` command line: one entry point, each command living next to its topic.

Every command module exposes `register(subparsers)` that adds its parser and
sets `func`; imports are lazy so `labkit --help` stays fast and a missing
optional extra only breaks the command that needs it.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys

from labkit.cli.errors import Parser, RunFailed, UsageError

# command name -> module with register(subparsers)
COMMANDS = {
    "course": "labkit.course.cli",
    "doctor": "labkit.doctor",
    "corpus": "labkit.corpus.cli",
    "clean": "labkit.cleaning.cli",
    "train": "labkit.train",
    "serve": "labkit.serving.cli",
    "export": "labkit.serving.export_cli",
    "workshop": "labkit.classroom.cli",
}
# `labkit course NAME` actions that live in their own module, added to `course`'s subcommands here: they import
# labkit.course (its notebook discovery), so labkit.course cannot import them
COURSE_ACTIONS = {"site": "labkit.course.site", "times": "labkit.course.times"}
# `labkit bench NAME`: name -> module with register(subparsers)
BENCHES = {
    "clean": "labkit.cleaning.bench",
    "train": "labkit.training.bench",
    "serve": "labkit.serving.bench",
    "course": "labkit.course.bench",
    "room": "labkit.classroom.capacity",
}


def _register_all(sub, table: dict[str, str]) -> None:
    for name, modname in table.items():
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as exc:
            if not exc.name or exc.name.split(".")[0] == "labkit":
                # a labkit module that fails to import is a bug, not a missing command
                raise ImportError(f"labkit {name}: cannot import {modname}: {exc}") from exc
            msg = f"needs {exc.name}: run `make setup` (or pip install -e '.[serve]')"
            # no option prefix: whatever follows (--help, --port ...) lands in `rest` and gets the install hint
            p = sub.add_parser(name, help=f"(unavailable: {msg})", add_help=False, prefix_chars="\0")
            p.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
            p.set_defaults(func=lambda args, m=msg: _unavailable(m))
            continue
        mod.register(sub)


def _register_actions(parser: argparse.ArgumentParser | None, table: dict[str, str]) -> None:
    """Add each module's actions to `parser`'s subcommands (`labkit course site` ...)."""
    subs = [a for a in (parser._actions if parser else []) if isinstance(a, argparse._SubParsersAction)]
    for modname in table.values() if subs else ():
        importlib.import_module(modname).register(subs[0])


def _unavailable(msg: str):
    raise UsageError(msg)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("labkit")
    except PackageNotFoundError:  # a checkout on sys.path that was never pip-installed
        from labkit import __version__

        return __version__


def _tag_progs(parser: argparse.ArgumentParser) -> None:
    """Every (sub)parser records its own prog, so errors can name `labkit <cmd> <sub>`."""
    parser.set_defaults(_prog=parser.prog)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _tag_progs(child)


class _Version(argparse.Action):
    """`--version`, looked up when given: importlib.metadata costs every command ~50 ms of start-up."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        parser._print_message(f"labkit {_version()}\n", sys.stdout)
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with `only` (a name in COMMANDS) just that command's part.

    `main` builds only the command it runs: registering all of them imports every topic's module
    (numpy, pydantic, the servers ...), which cost `labkit clean` ~0.5 s of CPU before it read a file."""
    parser = Parser(prog="labkit", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action=_Version, help="print the installed labkit version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _register_all(sub, {only: COMMANDS[only]} if only else COMMANDS)
    _register_actions(sub.choices.get("course"), COURSE_ACTIONS)
    if only:
        _tag_progs(parser)
        return parser
    bench = sub.add_parser("bench", help="benchmarks: clean, train, serve")
    _register_all(bench.add_subparsers(dest="bench", metavar="BENCH"), BENCHES)
    bench.set_defaults(func=lambda args: bench.print_help() or 2)
    _tag_progs(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    from labkit.threads import prepare_this_process

    prepare_this_process()  # before any command imports torch: its OpenMP reads the wait policy once
    program = argv is None  # this process is `labkit ...` itself (the console script), not a caller's
    argv = sys.argv[1:] if argv is None else argv
    # a known command's own parser; anything else (--help, a typo, bench) gets the whole one
    parser = build_parser(argv[0]) if argv and argv[0] in COMMANDS else build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    args.program = program  # a command may act on it (`labkit clean` freezes the gc once its imports are done)
    try:
        rc = args.func(args)
    except UsageError as exc:  # bad arguments or input: one line, exit 2
        print(f"{args._prog}: {exc}", file=sys.stderr)
        return 2
    except RunFailed as exc:  # the run started and failed: its reason, exit 1
        print(f"{args._prog}: {exc}", file=sys.stderr)
        return 1
    if program and getattr(args, "freeze_at_exit", False):
        # The process exits next, and the interpreter's last garbage collections would walk every object the
        # command loaded (`labkit clean`: ~40k -- numpy, lxml, ftfy, the detectors' codecs and models -- 70-240 ms
        # on this shared machine). Frozen, they are skipped; reference counting still frees them. Only for commands
        # that close what they write before returning (no file left to a collection to flush).
        gc.freeze()
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
