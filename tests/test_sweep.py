"""The seed sweep (`labkit course seeds`): seeds parsed, the table and each claim's spread written."""

from __future__ import annotations

import json

import pytest

from labkit.cli.errors import UsageError
from labkit.course.runner import NotebookRun
from labkit.course.seeds import markdown, parse_seeds, sweep, write


def test_parse_seeds():
    assert parse_seeds(["0-3", "7"]) == [0, 1, 2, 3, 7]
    assert parse_seeds(["0,2", "2"]) == [0, 2]
    for bad in (["x"], ["1-"], []):
        with pytest.raises(UsageError, match="--seeds"):
            parse_seeds(bad)


def _run(stem, status, claims, reason=""):
    exps = [{"name": n, "observed": o, "passed": p, "expected": "< 5 %"} for n, o, p in claims]
    return NotebookRun(stem, stem, status, 1.0, reason, "", {"expectations": exps})


def test_the_table_names_every_failure_and_the_claims_spread(tmp_path):
    outcomes = {
        0: [_run("07_x", "passed", [("gap", 0.031, True)])],
        1: [_run("07_x", "failed", [("gap", 0.0503, False)])],
        2: [_run("07_x", "failed", [], reason="AttributeError: 'NoneType' object has no attribute 'group'\ntrace")],
    }
    seen = []

    def run_seed(seed, out):
        seen.append(out.name)
        return outcomes[seed]

    result = sweep([0, 1, 2], run_seed, tmp_path, echo=lambda *_: None)
    assert seen == ["seed0", "seed1", "seed2"]
    table_md, claims_md = markdown(result)
    assert "| 07_x | PASS | FAIL | FAIL |" in table_md and "1 of 3 runs without a failed claim" in table_md
    assert "- 07_x, seed 1: gap" in table_md and "seed 2: AttributeError: 'NoneType'" in table_md
    assert "| gap | < 5 % | 0.031 .. 0.0503 | 1 |" in claims_md
    assert json.loads((tmp_path / "table.json").read_text())["table"]["07_x"]["1"]["failed_claims"] == ["gap"]
    assert (tmp_path / "table.md").read_text() == table_md and write(result, tmp_path).name == "table.md"
