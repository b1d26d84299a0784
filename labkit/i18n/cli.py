"""`labkit course i18n extract|build|check`: the translated editions from their catalogs."""

from __future__ import annotations

from pathlib import Path

from labkit.cli.errors import existing_dir
from labkit.i18n import TRANSLATIONS


def register(csub) -> None:
    p = csub.add_parser("i18n", help="translated editions: update catalogs, generate notebooks/<lang>/, check them")
    isub = p.add_subparsers(dest="i18n_cmd", metavar="ACTION")
    for name, help_text, func in (
        ("extract", "add every new cell, string, claim and message to the catalogs (translations kept)", _extract),
        ("build", "write notebooks/<lang>/*.ipynb from the English notebooks and the catalogs", _build),
        ("check", "fail on a stale, missing or unused translation, or a generated notebook that differs", _check),
    ):
        c = isub.add_parser(name, help=help_text)
        c.add_argument("--lang", default=TRANSLATIONS[0], choices=TRANSLATIONS, help="the edition (default zh_CN)")
        c.add_argument("--notebooks", type=existing_dir, default=None, help="English notebooks (default: notebooks/)")
        c.add_argument("--only", nargs="+", metavar="NN", help="only these notebooks (numbers), e.g. 03 09")
        c.add_argument(
            "--module", nargs="+", metavar="MODULE", help="only these modules' messages, e.g. labkit.exercises.nb03"
        )
        if name == "extract":
            c.add_argument(
                "--accept",
                nargs="+",
                default=[],
                metavar="KEY",
                help="translations you updated after their English changed (cell ids, `title`, a document's section "
                "keys as `check` names them): they now translate the English as it is",
            )
        c.set_defaults(func=func)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def _dir(args) -> Path:
    from labkit.paths import project_root

    return Path(args.notebooks) if args.notebooks else project_root() / "notebooks"


def _selected(args) -> list[Path]:
    """The English notebooks `--only` names (all without it; none when only --module is given)."""
    from labkit.i18n import notebooks

    every = notebooks.english_notebooks(_dir(args))
    if args.only:
        return [p for p in every if p.name[:2] in args.only or p.stem in args.only]
    return [] if args.module else every


def _modules(args) -> list[str] | None:
    """The modules `--module` names; None (every module) without filters; [] when only --only is given."""
    if args.module:
        return args.module
    return [] if args.only else None


def _with_docs(args) -> bool:
    """The translated documents (docs/workshop.md ...) go with every run that names no notebook or module."""
    return not args.only and not args.module


def _docs_dir(args) -> Path:
    return _dir(args).parent / "docs"


def _extract(args) -> int:
    from labkit.i18n import docs, messages, notebooks

    for p in _selected(args):
        print(notebooks.save_catalog(notebooks.extract(p, args.lang, frozenset(args.accept)), args.lang))
    for path in messages.extract(args.lang, _modules(args)):
        print(path)
    if _with_docs(args):
        for name in docs.DOCUMENTS:
            print(docs.extract(_docs_dir(args), name, args.lang, frozenset(args.accept)))
    return 0


def _build(args) -> int:
    from labkit.i18n import notebooks

    written = notebooks.build(_dir(args), args.lang, _selected(args) if args.only else None)
    print(f"{len(written)} notebooks in {notebooks.edition_dir(_dir(args), args.lang)}")
    if _with_docs(args):
        from labkit.i18n import docs

        for path in docs.build(_docs_dir(args), args.lang):
            print(path)
    return 0


def _check(args) -> int:
    from labkit.i18n import messages, notebooks

    problems = notebooks.check_edition(_dir(args), args.lang, _selected(args)) + messages.check(
        args.lang, _modules(args)
    )
    if _with_docs(args):
        from labkit.i18n import docs

        problems += docs.check(_docs_dir(args), args.lang)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problems in the {args.lang} edition")
        return 1
    print(f"the {args.lang} edition is complete and current")
    return 0
