"""The before/after viewer: groups by reason and fix, highlights differences, works with and without a kernel."""

from __future__ import annotations

from pathlib import Path

from labkit.cleaning import clean_paths
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
