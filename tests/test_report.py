"""`runs/report.md`: a table cell never breaks the table (pipes and newlines in names, values, reasons)."""

import json
from dataclasses import dataclass

from labkit.course.report import render_md, write_reports


@dataclass
class _Info:
    stem: str
    title: str


def _cells(row: str) -> list[str]:
    """Split a markdown table row the way GitHub does: on pipes not escaped with a backslash."""
    import re

    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def test_pipes_in_expected_and_observed_text_are_escaped(tmp_path):
    d = tmp_path / "08_serving"
    d.mkdir()
    (d / "status.json").write_text(json.dumps({"status": "passed", "seconds": 3, "reason": ""}))
    (d / "results.json").write_text(
        json.dumps(
            {
                "expectations": [
                    {
                        "name": "int8 keeps quality | a|b",
                        "passed": True,
                        "observed": "x|y",
                        "expected": "|ROUGE-L delta| <= 0.05",
                    },
                    {"name": "two\nlines", "passed": False, "observed": 1.5, "expected": "a\nb"},
                ]
            }
        )
    )
    md, _ = write_reports(tmp_path, [_Info("08_serving", "Serving | fast")], "smoke")
    rows = [l for l in md.read_text().splitlines() if l.startswith("| PASS") or l.startswith("| FAIL")]
    assert len(rows) == 2
    for row in rows:
        assert len(_cells(row)) == 4, row  # mark, expectation, observed, expected
    assert _cells(rows[0])[3] == r"\|ROUGE-L delta\| <= 0.05"
    assert _cells(rows[0])[2] == r"x\|y"
    assert "\n" not in rows[1] and _cells(rows[1])[3] == "a<br>b"


def test_summary_table_keeps_four_columns_for_odd_stems():
    rows = [{"stem": "01|x", "title": "t", "status": "passed", "seconds": 1, "reason": "", "results": None}]
    line = next(l for l in render_md(rows, "smoke").splitlines() if l.startswith("| 01"))
    assert len(_cells(line)) == 4
