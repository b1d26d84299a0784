"""One source for every time (issue 18, item 6): docs/times.json, and what is derived from it.

The notebooks' `**Time:**` lines and `metadata.labkit` minutes, the workshop guide's timing table and its 3-hour
agenda all come from the measured table (`labkit course times --update` writes them); these tests fail when one
of them disagrees, when a measurement is missing its source, or when the agenda assigns more than its blocks hold.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import nbformat
import pytest

from labkit.course import times as ct
from labkit.classroom.release import agenda_exercises

ROOT = Path(__file__).resolve().parents[1]
TABLE = json.loads((ROOT / ct.TABLE).read_text(encoding="utf-8"))
GUIDE = (ROOT / ct.GUIDE).read_text(encoding="utf-8")
NOTEBOOKS = ct.notebooks(ROOT / "notebooks")


def test_every_notebook_is_in_the_table_with_its_measurements_sourced():
    assert set(TABLE["notebooks"]) == set(NOTEBOOKS)
    for number, entry in TABLE["notebooks"].items():
        assert entry["stem"] == NOTEBOOKS[number].stem
        assert entry["idle"], f"{number}: no idle measurement"
        for arm in ("idle", "shared"):
            m = entry[arm]
            if m is None:
                continue  # not measured: the guide and the heading say so
            assert m["seconds"] > 0 and m["date"] and m["source"], f"{number} {arm}: {m}"
            assert m["profile"] == "smoke"
    assert any(e["shared"] for e in TABLE["notebooks"].values()), "at least one shared-machine figure"


@pytest.mark.parametrize("number", sorted(NOTEBOOKS))
def test_the_notebook_states_the_tables_times(number):
    nb = nbformat.read(NOTEBOOKS[number], as_version=4)
    entry = TABLE["notebooks"][number]
    assert ct.exercises_of(nb, number) == entry.get("exercises", {}), "the exercise headings differ from the table"
    assert ct.prose_words(nb) == entry["words"], "the prose changed: `labkit course times --update`"
    assert ct.time_line(entry) in nb.cells[0].source
    lab = nb.metadata["labkit"]
    assert lab["minutes"] == ct.run_minutes(entry)
    assert lab.get("exercise_minutes", 0) == ct.exercise_minutes(entry)
    assert not ct.apply_to_notebook(copy.deepcopy(nb), entry)


def test_the_guides_timing_table_is_the_tables():
    assert ct.apply_to_guide(GUIDE, TABLE) == GUIDE, "docs/workshop.md's timing table: `labkit course times --update`"
    from labkit.course.site_pages import guide_times  # the course website reads its columns

    times = guide_times(GUIDE)
    for number, entry in TABLE["notebooks"].items():
        run, exercises = times[number]
        assert run == f"{ct.seconds(entry, 'idle'):.0f} s"
        assert exercises == str(ct.exercise_minutes(entry) or "–")


def test_the_3_hour_agenda_fits_the_measured_times_plus_exercise_minutes():
    assert ct.agenda_problems(GUIDE, TABLE) == []
    rows = ct.agenda_rows(GUIDE)
    assert sum(r["minutes"] for r in rows) == 180
    in_room, take_home = agenda_exercises(GUIDE)  # what the release's README lists
    assert in_room == [ex for r in rows for ex in r["exercises"]]
    assert take_home and take_home == [ex for r in rows for ex in r["take_home"]]
    kinds = {ex: TABLE["notebooks"][ex[:2]]["exercises"][ex]["kind"] for ex in in_room}
    assert list(kinds.values()).count("find-and-fix") >= 3, "the room does the transfer exercises"


def test_a_block_that_does_not_fit_is_reported():
    guide = """## Agenda: 3 hours

| time | block | notebooks | exercises | minutes needed |
|---|---|---|---|---|
| 0:00–0:05 | everything | 02 | 02.4, 02.5 | 3 |
| 0:05–3:00 | the rest | – | –; take-home: 09.9 | – |
"""
    problems = ct.agenda_problems(guide, TABLE)
    assert any("0:00–0:05: needs" in p and "in a 5 min block" in p for p in problems), problems
    assert any("says '3'" in p for p in problems) and any("09.9 is no exercise" in p for p in problems), problems


def test_refresh_reads_results_and_the_heading_follows(tmp_path):
    """`--runs DIR` takes each notebook's results.json seconds; the heading's minutes are the slower figure."""
    table = copy.deepcopy(TABLE)
    runs = tmp_path / "runs"
    stem = NOTEBOOKS["05"].stem
    (runs / stem).mkdir(parents=True)
    (runs / stem / "results.json").write_text(json.dumps({"seconds": 61.04, "profile": "smoke"}))
    changed = ct.refresh(table, ROOT / "notebooks", runs=runs, note="test")
    assert "05: idle 61.0 s" in changed and table["notebooks"]["05"]["idle"]["note"] == "test"
    entry = table["notebooks"]["05"]
    entry["shared"] = None
    assert ct.run_minutes(entry) == 2 and "~2 min to run" in ct.time_line(entry)
    assert "the slower measured run, 61 s" in ct.time_line(entry)
    entry["shared"] = {"seconds": 130.0}
    assert ct.run_minutes(entry) == 3
