"""The translated editions: complete, current, generated as the catalogs give them, and each check shown to fail when
provoked (a changed English cell, a missing translation, a hand-edited generated notebook, code that differs)."""

import json
import shutil
from pathlib import Path

import nbformat
import pytest
from cli_helpers import LABKIT, piped

from labkit import i18n
from labkit.i18n import messages, notebooks
from labkit.paths import RELEASE_MARKER, project_root

ROOT = project_root()
NOTEBOOKS = ROOT / "notebooks"
STEM = "03_memory_and_accumulation"


def test_the_zh_CN_edition_is_complete_and_current():
    problems = notebooks.check_edition(NOTEBOOKS, "zh_CN") + messages.check("zh_CN")
    assert not problems, "\n".join(map(str, problems[:40])) + "\n(run `make i18n` after translating; see docs/i18n.md)"


def test_every_course_notebook_has_its_zh_CN_edition():
    english = {p.name for p in notebooks.english_notebooks(NOTEBOOKS)}
    assert english and english == {p.name for p in (NOTEBOOKS / "zh_CN").glob("*.ipynb")}


# ---- each check, provoked --------------------------------------------------------------------------------------


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A copy of notebook 03 and its catalog, the edition generated from them, the catalogs read from the copy."""
    cats = tmp_path / "catalogs"
    (cats / "zh_CN" / "notebooks").mkdir(parents=True)
    shutil.copy(notebooks.catalog_path(STEM, "zh_CN"), cats / "zh_CN" / "notebooks")
    monkeypatch.setattr(notebooks, "CATALOGS", cats)
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    shutil.copy(NOTEBOOKS / f"{STEM}.ipynb", nb_dir)
    notebooks.build(nb_dir, "zh_CN")
    assert notebooks.check_edition(nb_dir, "zh_CN") == []
    return nb_dir


def _edit(path: Path, change) -> None:
    nb = nbformat.read(path, as_version=4)
    change(nb)
    nbformat.write(nb, path)


def _first(nb, kind: str):
    return next(c for c in nb.cells if c.cell_type == kind and (kind != "code" or "print(" in c.source))


def test_a_changed_english_cell_is_stale_and_the_failure_shows_the_english_diff(sandbox):
    def change(nb):
        _first(nb, "markdown").source += "\n\nA sentence added after the translation."

    _edit(sandbox / f"{STEM}.ipynb", change)
    cell = _first(nbformat.read(sandbox / f"{STEM}.ipynb", as_version=4), "markdown")
    problems = [p for p in notebooks.check_edition(sandbox, "zh_CN") if p.kind == "stale"]
    assert len(problems) == 1 and cell.id in problems[0].where
    assert "+A sentence added after the translation." in problems[0].message


def test_a_new_cell_without_translation_is_missing(sandbox):
    def change(nb):
        nb.cells.insert(1, nbformat.v4.new_markdown_cell("A new paragraph nobody translated yet."))

    _edit(sandbox / f"{STEM}.ipynb", change)
    problems = notebooks.check_edition(sandbox, "zh_CN")
    assert any(p.kind == "missing" and "A new paragraph" in p.message for p in problems), problems


def test_a_new_printed_string_needs_a_decision(sandbox):
    def change(nb):
        _first(nb, "code").source += '\nprint("a new line the learner reads")'

    _edit(sandbox / f"{STEM}.ipynb", change)
    problems = notebooks.check_edition(sandbox, "zh_CN")
    assert any(p.kind == "missing" and "a new line the learner reads" in p.message for p in problems), problems


def test_a_hand_edited_generated_notebook_differs(sandbox):
    def change(nb):
        _first(nb, "markdown").source = "手工改过的译文"

    _edit(sandbox / "zh_CN" / f"{STEM}.ipynb", change)
    problems = notebooks.check_edition(sandbox, "zh_CN")
    assert [p.kind for p in problems] == ["generated-differs"], problems


def test_a_translated_code_cell_whose_code_differs_is_refused(sandbox):
    def change(nb):
        cell = _first(nb, "code")
        cell.source = cell.source.replace("print(", "print(1, ", 1)

    _edit(sandbox / "zh_CN" / f"{STEM}.ipynb", change)
    kinds = {p.kind for p in notebooks.check_edition(sandbox, "zh_CN")}
    assert kinds == {"generated-differs", "code-differs"}


def test_a_translated_f_string_must_format_the_same_values(sandbox):
    path = notebooks.catalog_path(STEM, "zh_CN")
    cat = json.loads(path.read_text(encoding="utf-8"))
    entry = next(s for e in cat["cells"].values() for s in e.get("strings", []) if s["en"].startswith('f"') and s["zh"])
    entry["zh"] = 'f"没有占位符"'
    path.write_text(json.dumps(cat, ensure_ascii=False), encoding="utf-8")
    assert any(p.kind == "not-a-string" for p in notebooks.check_edition(sandbox, "zh_CN"))


def test_generated_code_cells_are_the_english_code_with_only_strings_replaced():
    """Every zh_CN code cell, its string literals blanked, is token for token the English cell's code."""
    import ast

    def skeleton(src: str) -> str:
        tree = notebooks._parse(src)

        class Blank(ast.NodeTransformer):
            def visit_JoinedStr(self, node):
                values = [v for v in node.values if isinstance(v, ast.FormattedValue)]
                return ast.copy_location(ast.JoinedStr(values=sorted(values, key=ast.unparse)), node)

            def visit_Constant(self, node):
                return ast.copy_location(ast.Constant("") if isinstance(node.value, str) else node, node)

        return ast.unparse(Blank().visit(tree))

    for en_path in notebooks.english_notebooks(NOTEBOOKS):
        en = nbformat.read(en_path, as_version=4)
        zh = nbformat.read(NOTEBOOKS / "zh_CN" / en_path.name, as_version=4)
        assert [c.id for c in zh.cells] == [c.id for c in en.cells]
        for a, b in zip(en.cells, zh.cells):
            if a.cell_type == "code":
                assert skeleton(a.source) == skeleton(b.source), f"{en_path.name} cell {a.id}"


def test_code_literals_are_replaced_by_position_not_by_text():
    src = 'res.expect("peak memory", 1, True, "peak memory")\nprint("peak memory")'
    out = notebooks.translated_code(src, [{"en": '"peak memory"', "zh": '"峰值内存"'}])
    assert out == 'res.expect("peak memory", 1, True, "峰值内存")\nprint("峰值内存")'  # the claim name is a key


def test_a_changed_message_is_stale_and_shows_the_diff(tmp_path, monkeypatch):
    pkg = tmp_path / "labkit"
    (pkg / "i18n" / "zh_CN" / "messages").mkdir(parents=True)
    (pkg / "checks.py").write_text(
        'from labkit.i18n import _\n\ndef hint(n):\n    return _("overlap {n}%: iterate the sampler once per epoch").format(n=n)\n'
    )
    cat = {"module": "labkit.checks", "messages": {"overlap {n}%: iterate the sampler": "重叠 {n}%：遍历采样器"}}
    (pkg / "i18n" / "zh_CN" / "messages" / "checks.json").write_text(json.dumps(cat, ensure_ascii=False))
    monkeypatch.setattr(messages, "PACKAGE", pkg)
    monkeypatch.setattr(messages, "CATALOGS", pkg / "i18n")
    problems = messages.check("zh_CN")
    assert {p.kind for p in problems} == {"missing", "stale"}
    stale = next(p for p in problems if p.kind == "stale")
    assert "+overlap {n}%: iterate the sampler once per epoch" in stale.message
    (pkg / "checks.py").write_text('from labkit.i18n import _\n\ndef hint(n):\n    return _(f"overlap {n}%")\n')
    assert any(p.kind == "not-a-string" for p in messages.check("zh_CN"))


# ---- the language at run time ----------------------------------------------------------------------------------


def test_the_language_comes_from_the_env_then_the_release_then_the_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("LABKIT_LANG", raising=False)
    folder = tmp_path / "course" / "notebooks" / "zh_CN"
    folder.mkdir(parents=True)
    monkeypatch.chdir(folder)
    assert i18n.language() == "zh_CN"
    monkeypatch.chdir(tmp_path)
    assert i18n.language() == "en"
    release = tmp_path / "release"  # a kernel started inside a Chinese workshop release
    release.mkdir()
    (release / RELEASE_MARKER).write_text(json.dumps({"language": "zh_CN", "notebooks": {}}))
    monkeypatch.chdir(release)
    assert i18n.language() == "zh_CN"
    monkeypatch.setenv("LABKIT_LANG", "en")
    assert i18n.language() == "en"
    monkeypatch.setenv("LABKIT_LANG", "fr")
    with pytest.raises(i18n.UnknownLanguage):
        i18n.language()


def test_the_language_is_found_once_and_an_explicit_change_is_seen_at_once(tmp_path, monkeypatch):
    """`_()` runs for every message: the walk up from the cwd and the marker's JSON are read once (they were read
    on every call, ~100 us each), while LABKIT_LANG and `using` still switch the language at once."""
    import labkit.paths

    monkeypatch.delenv("LABKIT_LANG", raising=False)
    monkeypatch.chdir(tmp_path)
    looked, real = [], labkit.paths.project_root
    monkeypatch.setattr(labkit.paths, "project_root", lambda: looked.append(1) or real())
    i18n._FOUND.clear()
    assert {i18n._("passed") for _ in range(100)} == {"passed"} and len(looked) == 1
    with i18n.using("zh_CN"):
        assert i18n._("passed") == i18n.message_table("zh_CN")["passed"] != "passed"
    assert i18n._("passed") == "passed"
    monkeypatch.setenv("LABKIT_LANG", "zh_CN")
    assert i18n._("passed") != "passed"
    monkeypatch.delenv("LABKIT_LANG")
    assert i18n._("passed") == "passed" and len(looked) == 2  # looked at again after `using`, once


def test_checks_hint_in_chinese_and_stay_english_by_default(monkeypatch, capsys):
    from labkit.exercises import ExerciseFailed, UNANSWERED, answered

    monkeypatch.setenv("LABKIT_LANG", "zh_CN")
    with pytest.raises(ExerciseFailed) as exc:
        answered(None)
    assert "占位符" in str(exc.value) and "❌ 未通过" in capsys.readouterr().out
    monkeypatch.setenv("LABKIT_LANG", "en")
    with pytest.raises(ExerciseFailed) as exc:
        answered(None)
    assert str(exc.value) == UNANSWERED


def test_the_report_is_written_in_the_course_language(tmp_path, monkeypatch):
    from labkit.course.discovery import discover
    from labkit.course.report import write_reports
    from labkit.results import Results

    monkeypatch.setenv("LABKIT_LANG", "zh_CN")
    res = Results(STEM, out_dir=tmp_path / STEM)
    name = next(iter(i18n.notebook_catalog("zh_CN", STEM)["claims"]))
    res.expect(name, 1.0, True, "> 0", kind="fix")
    res.save()
    md, _ = write_reports(tmp_path, discover(NOTEBOOKS / "zh_CN"), "smoke")
    text = md.read_text(encoding="utf-8")
    assert "# labkit 课程报告" in text and i18n.claim(STEM, name) in text and i18n.claim(STEM, name) != name
    saved = json.loads((tmp_path / STEM / "results.json").read_text(encoding="utf-8"))
    assert saved["expectations"][0]["name"] == name  # the key stays the English name in every edition


def test_the_workshop_release_in_chinese(tmp_path):
    out = tmp_path / "release"
    r = piped([LABKIT, "course", "workshop", "--lang", "zh_CN", "--out", str(out)])
    assert r.returncode == 0, r.stderr
    marker = json.loads((out / RELEASE_MARKER).read_text(encoding="utf-8"))
    assert marker["language"] == "zh_CN"
    assert "## 从哪里开始" in (out / "README.md").read_text(encoding="utf-8")
    nb = nbformat.read(out / "notebooks" / f"{STEM}.ipynb", as_version=4)
    assert any("的" in c.source for c in nb.cells if c.cell_type == "markdown")
    assert (out / "data_samples").is_dir()


def test_extract_keeps_a_stale_translation_stale_until_it_is_accepted(sandbox):
    def change(nb):
        _first(nb, "markdown").source += "\n\nA sentence added after the translation."

    _edit(sandbox / f"{STEM}.ipynb", change)
    cell = _first(nbformat.read(sandbox / f"{STEM}.ipynb", as_version=4), "markdown")
    notebooks.save_catalog(notebooks.extract(sandbox / f"{STEM}.ipynb", "zh_CN"), "zh_CN")  # a routine re-extract
    assert [p.kind for p in notebooks.check_catalog(sandbox / f"{STEM}.ipynb", "zh_CN")] == ["stale"]
    notebooks.save_catalog(notebooks.extract(sandbox / f"{STEM}.ipynb", "zh_CN", frozenset({cell.id})), "zh_CN")
    assert notebooks.check_catalog(sandbox / f"{STEM}.ipynb", "zh_CN") == []


def test_a_changed_section_of_the_workshop_guide_is_stale(tmp_path, monkeypatch):
    from labkit.i18n import docs

    cats = tmp_path / "catalogs" / "zh_CN" / "docs"
    cats.mkdir(parents=True)
    shutil.copy(docs.catalog_path("workshop.md", "zh_CN"), cats)
    monkeypatch.setattr(docs, "CATALOGS", tmp_path / "catalogs")
    guide = tmp_path / "docs"
    guide.mkdir()
    text = (ROOT / "docs" / "workshop.md").read_text(encoding="utf-8")
    (guide / "workshop.md").write_text(text, encoding="utf-8")
    docs.build(guide, "zh_CN")
    assert docs.check(guide, "zh_CN") == []
    (guide / "workshop.md").write_text(text + "\nOne more line for the last section.\n", encoding="utf-8")
    problems = docs.check(guide, "zh_CN")
    stale = [p for p in problems if p.kind == "stale"]
    assert len(stale) == 1 and "+One more line for the last section." in stale[0].message, problems
    (guide / "workshop.md").write_text(text + "\n\n## A new section\n\nNot translated.\n", encoding="utf-8")
    assert {p.kind for p in docs.check(guide, "zh_CN")} == {"missing", "generated-differs"}


def test_comments_are_translated_by_position_and_a_new_one_needs_a_decision(sandbox):
    src = 'x = 1  # the first value here\n%time y = 2\ns = "# not a comment here"  # a real comment here\n'
    out = notebooks.translated_code(
        src, [], [{"en": "# the first value here", "zh": "# 第一个值"}, {"en": "# a real comment here", "zh": None}]
    )
    assert out == 'x = 1  # 第一个值\n%time y = 2\ns = "# not a comment here"  # a real comment here\n'
    assert notebooks.code_comments("### BEGIN SOLUTION\nx = 1  # noqa: F401 two words\n%time y  # magic line\n") == []

    def change(nb):
        _first(nb, "code").source += "\n# a comment written after the translation"

    _edit(sandbox / f"{STEM}.ipynb", change)
    problems = notebooks.check_edition(sandbox, "zh_CN")
    assert any(p.kind == "missing" and "a comment written after" in p.message for p in problems), problems
