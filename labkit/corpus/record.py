"""`Rec`: one record of the dirty crawl -- its article, container, drawn defects and final place.

`layout` draws a record's container and defects, `pages` serialises records into files and
says where each one landed, `layout.write_files` places them (`Rec.place`), `dump` writes the
labels (`Rec.label`). The record id rule lives here because the cleaning readers follow it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from labkit.codes import DEFECT_REASONS
from labkit.corpus.generator import Article


@dataclass
class Rec:
    article: Article
    container: str
    title: str | None = None
    body: str = ""
    defects: list[str] = field(default_factory=list)
    expected: str = "clean"
    fixes: set[str] = field(default_factory=set)
    protected: bool = False  # original of a duplicate: stays clean, comes first
    is_dup: bool = False
    title_style: str = ""  # title_missing in a JSONL row: "absent" (no key), "null" or "empty" ("")
    misaligned: str = ""  # csv_misaligned: "extra" (a column too many) or "missing" (one too few)
    swapped: bool = False  # csv_swapped: the title and body columns exchanged
    file: str = ""
    id: str = ""
    row: int = 0

    @property
    def order_key(self) -> tuple[str, int]:
        return (self.file, self.row)

    @staticmethod
    def export_id(rel: str, row: int) -> str:
        """The id column an export carries for its `row`-th record, e.g. `part-0001-007`."""
        return f"{rel.split('/')[-1].split('.')[0]}-{row:03d}"

    def place(self, file: str, row: int = 0, id_field: str | None = None) -> None:
        """Put the record at `file` (row `row` of an export, from 1; 0 for a whole file) and set its id.

        The id rule of the cleaning readers (the labels must match it): the record's own id
        field when it has one, else the path relative to crawl/, plus `:<row>` for export rows."""
        self.file, self.row = file, row
        self.id = id_field or (f"{file}:{row}" if row else file)

    def reject(self, kind: str) -> None:
        self.defects.append(kind)
        self.expected = DEFECT_REASONS[kind]

    def label(self) -> dict:
        return {
            "id": self.id,
            "file": self.file,
            "article_id": self.article.id,
            "defects": self.defects,
            "expected": self.expected,
            "expected_fixes": sorted(self.fixes) if self.expected == "clean" else [],
        }
