"""Options several commands share: `-p NAME VALUE` (papermill's spelling) and `--lang` (a course edition).

`labkit course run/seeds`, `labkit bench course` and `labkit workshop hub` add them here, so a topic needs no other
topic's command module for them.
"""

from __future__ import annotations

from labkit.i18n import LANGUAGES


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


def add_parameter_option(parser, help_text: str) -> None:
    """`-p NAME VALUE`, papermill's own spelling, for every command that runs notebooks (read with `parse_value`)."""
    parser.add_argument(
        "-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"), help=help_text
    )


def add_language_option(parser, help_text: str) -> None:
    parser.add_argument("--lang", default=None, choices=LANGUAGES, help=f"{help_text} (default en)")
