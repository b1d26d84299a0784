"""The rows a cleaning run writes, one serialiser each: a kept record's clean row, a reject row, and a
duplicate's reject row.

A row is one JSON object on one line, in UTF-8, ended by `os.linesep` (what a text-mode write ends a line
with); a row holding a lone surrogate (from `\\ud800`-style escapes in the input JSON) is written whole
with ASCII escapes instead. A kept record's JSON values are encoded once (`KeptRow.of`, in the worker);
its clean row -- or its duplicate row, should the parent's in-order dedup say so -- only joins those bytes.
Both engines (`pipeline`, `distributed`) write through these functions, so their files are byte-identical.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from labkit.cleaning.validate import Outcome

_JSON = json.JSONEncoder(ensure_ascii=False).encode  # what json.dumps(x, ensure_ascii=False) returns
_JSON_ASCII = json.JSONEncoder(ensure_ascii=True).encode
_STR = json.encoder.encode_basestring  # _JSON of a str
EOL = os.linesep.encode("ascii")


def line(obj: dict) -> bytes:
    """`obj` as one row: UTF-8 JSON, or all of it escaped when a value holds a lone surrogate."""
    try:
        return _JSON(obj).encode("utf-8") + EOL
    except UnicodeEncodeError:
        return _JSON_ASCII(obj).encode("ascii") + EOL


def reject_line(rec: Outcome) -> bytes:
    """{"id", "source", "reason", "detail", "fixes", "original"[, "raw_b64"]}: the row of a rejected record."""
    row = {
        "id": rec.id,
        "source": rec.source,
        "reason": rec.reason,
        "detail": rec.detail,
        "fixes": rec.fixes,
        "original": rec.original,
    }
    if rec.raw_b64 is not None:
        row["raw_b64"] = rec.raw_b64
    return line(row)


@dataclass(frozen=True)
class KeptRow:
    """A kept record's JSON values, each encoded once; `escaped`: all of them in ASCII escapes because one
    holds a lone surrogate (the whole row is then escaped, as `line` does)."""

    id: bytes
    title: bytes
    body: bytes
    source: bytes
    fixes: bytes
    escaped: bool

    @classmethod
    def of(cls, rec: Outcome) -> KeptRow:
        try:  # the four texts through the C string encoder _JSON itself calls for a str, without its dispatch
            return cls(
                _STR(rec.id).encode("utf-8"),
                _STR(rec.title).encode("utf-8"),
                _STR(rec.body).encode("utf-8"),
                _STR(rec.source).encode("utf-8"),
                _JSON(rec.fixes).encode("utf-8"),
                escaped=False,
            )
        except UnicodeEncodeError:
            vals = (rec.id, rec.title, rec.body, rec.source, rec.fixes)
            return cls(*(_JSON_ASCII(v).encode("ascii") for v in vals), escaped=True)

    def clean_line(self) -> bytes:
        """{"id", "title", "body", "source", "fixes"}: the row of a kept record."""
        return b"".join(
            (
                b'{"id": ',
                self.id,
                b', "title": ',
                self.title,
                b', "body": ',
                self.body,
                b', "source": ',
                self.source,
                b', "fixes": ',
                self.fixes,
                b"}",
                EOL,
            )
        )

    def duplicate_line(self, detail: str) -> bytes:
        """The reject row of this record found to duplicate an earlier one (`detail` names it)."""
        if self.escaped:
            d = _JSON_ASCII(detail).encode("ascii")
        else:
            try:
                d = _JSON(detail).encode("utf-8")
            except UnicodeEncodeError:  # the original's id holds a lone surrogate: the whole row escaped
                return line(
                    {
                        "id": json.loads(self.id),
                        "source": json.loads(self.source),
                        "reason": "duplicate",
                        "detail": detail,
                        "fixes": json.loads(self.fixes),
                        "original": {"title": json.loads(self.title), "body": json.loads(self.body)},
                    }
                )
        return b"".join(
            (
                b'{"id": ',
                self.id,
                b', "source": ',
                self.source,
                b', "reason": "duplicate", "detail": ',
                d,
                b', "fixes": ',
                self.fixes,
                b', "original": {"title": ',
                self.title,
                b', "body": ',
                self.body,
                b"}}",
                EOL,
            )
        )
