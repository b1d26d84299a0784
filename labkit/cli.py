"""`labkit` command line: one entry point, each command living next to its topic.

Every command module exposes `register(subparsers)` that adds its parser and
sets `func`; imports are lazy so `labkit --help` stays fast and a missing
optional extra only breaks the command that needs it.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# command name -> module with register(subparsers)
COMMANDS = {
    "course": "labkit.course",
    "doctor": "labkit.doctor",
    "corpus": "labkit.corpus.cli",
    "clean": "labkit.cleaning.cli",
    "train": "labkit.train",
    "serve": "labkit.serving.cli",
}
# `labkit bench NAME`: name -> module with register(subparsers)
BENCHES = {
    "clean": "labkit.cleaning.bench",
    "train": "labkit.training.bench",
    "serve": "labkit.serving.loadgen",
}


def _register_all(sub, table: dict[str, str]) -> None:
    for name, modname in table.items():
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("labkit"):
                continue  # topic not built yet
            msg = f"needs {exc.name}: run `make setup` (or pip install -e '.[serve]')"
            p = sub.add_parser(name, help=f"(unavailable: {msg})")
            p.set_defaults(func=lambda args, m=msg: sys.exit(f"labkit: {m}"))
            continue
        mod.register(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="labkit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _register_all(sub, COMMANDS)
    bench = sub.add_parser("bench", help="benchmarks: clean, train, serve")
    _register_all(bench.add_subparsers(dest="bench", metavar="BENCH"), BENCHES)
    bench.set_defaults(func=lambda args: bench.print_help() or 2)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    rc = args.func(args)
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
