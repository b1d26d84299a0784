"""The before/after viewer: groups by reason and fix, highlights differences, works with and without a kernel."""

from __future__ import annotations

from pathlib import Path

from labkit.cleaning import clean_paths
from labkit.corpus import generate
from labkit.viz.viewer import CleaningViewer, diff_html

TITLE = "北京智慧城市项目正式启动首批覆盖三区"
BODY = "北京市今日召开新闻发布会，宣布智慧城市项目正式启动，首批试点覆盖三个区。记者了解到，该项目总投资约十二亿元。"


def _run(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.txt").write_text(f"{TITLE}\n　　{BODY}\n责任编辑：张三\n", encoding="utf-8")
    (d / "b.txt").write_text("短标题\n" + BODY, encoding="utf-8")
    clean_paths([d], tmp_path / "out")
    return tmp_path / "out"


def test_diff_marks_removed_and_added_text():
    left, right = diff_html("标题\n正文<b>责任编辑</b>", "标题\n正文")
    assert "<del>" in left and "责任编辑" in left and "<ins>" not in right
    assert "&lt;b&gt;" in left  # escaped, never injected


def test_groups_and_static_view(tmp_path: Path):
    v = CleaningViewer(_run(tmp_path))
    assert set(v.groups) == {"fix: boilerplate_removed", "fix: whitespace_normalized", "reason: title_too_short"}
    page = v.to_html()
    assert page.count("<details>") == 3 and "<del>" in page
    before = v.before(v.groups["fix: boilerplate_removed"][0])
    assert "责任编辑" in before  # re-read from the source file, exactly as the pipeline saw it


def test_widget_steps_through_records(tmp_path: Path):
    v = CleaningViewer(_run(tmp_path))
    box = v.widget(start="reason: title_too_short")
    controls, view = box.children
    pick = controls.children[0]
    assert "title_too_short" in view.value
    pick.value = "fix: boilerplate_removed"
    assert "boilerplate_removed" in view.value and "<del>" in view.value
    bundle = v._repr_mimebundle_()
    assert "text/html" in bundle and "application/vnd.jupyter.widget-view+json" in bundle


def test_every_group_counts_what_the_report_counts_and_says_when_it_shows_fewer(tmp_path: Path):
    d = tmp_path / "in"
    d.mkdir()
    for i, a in enumerate(generate(3, 0)):  # three kept records, each with a footer the pipeline removes
        (d / f"{i}.txt").write_text(f"{a.title}\n　　{a.body}\n责任编辑：张三\n", encoding="utf-8")
    report = clean_paths([d], tmp_path / "out")
    group = "fix: boilerplate_removed"
    everything = CleaningViewer(tmp_path / "out", limit_per_group=None)
    assert everything.counts[group] == len(everything.groups[group]) == report["fixes"]["boilerplate_removed"] == 3
    assert everything.group_title(group) == f"{group} (3)"

    capped = CleaningViewer(tmp_path / "out", limit_per_group=2)
    assert len(capped.groups[group]) == 2 and capped.counts[group] == 3
    assert capped.group_title(group) == f"{group} (first 2 of 3)"
    assert "first 2 of 3" in capped.to_html() and "3 records in" in capped.to_html()
    assert "record 1 of 3 (the first 2 are shown)" in capped.record_html(group, 0)
    pick = capped.widget(start=group).children[0].children[0]
    assert (f"{group} (first 2 of 3)", group) in pick.options
