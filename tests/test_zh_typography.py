"""The Chinese edition reads as Chinese: its catalogs' typography, and no English left where a learner reads a run.

Typography (every catalog: notebooks, messages, documents): no ASCII space between two Chinese characters (`随 批大小`
is a stray space; a space stays between a Chinese word and Latin text or a number, as the glossary writes), and a
multiplier is 倍, never `x` after a number (`15.8 x`, `单位：x`; `4 x 64` and `4x4`, a product, are not
multipliers). Inline code and fenced code blocks are not prose and are left alone.

English at run time: the claim lines' marks, a claim's expected text (an extraction decision like any printed
string), the multiplier unit of a prediction's reveal and the missing-CJK-font warning are Chinese in the edition.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from labkit import i18n
from labkit.i18n import notebooks

CJK = "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"
STRAY_SPACE = re.compile(rf"(?<={CJK})[ \t]+(?={CJK})")
# a number (or a formatted value `{...}`) followed by x: a multiplier, unless an operand follows (4 x 64, 4x4, {a} x {b})
X_MULTIPLIER = re.compile(r"(?:\d|\})[ \t]*[x×](?![A-Za-z0-9_])(?![ \t]*[\d{(])")
X_UNIT = re.compile(r"单位[:：][ \t]*[x×](?![A-Za-z0-9_])")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def problems(text: str) -> list[str]:
    """Each typography error of one translated text, with a little context."""
    prose = CODE.sub(lambda m: "\0" * len(m.group()), text)  # code keeps its offsets but is not read as text
    found = []
    for rx, what in (
        (STRAY_SPACE, "ASCII space between Chinese characters"),
        (X_MULTIPLIER, "x as a multiplier: write 倍"),
        (X_UNIT, "x as a unit: write 倍"),
    ):
        for m in rx.finditer(prose):
            found.append(f"{what}: {text[max(0, m.start() - 12) : m.end() + 12]!r}")
    return found


def translations(path: Path):
    """(where, translated text) of every translation a catalog holds."""
    cat = json.loads(path.read_text(encoding="utf-8"))
    for msgid, zh in cat.get("messages", {}).items():
        if zh:
            yield msgid[:60], zh
    for key, entry in cat.get("sections", {}).items():
        if entry.get("zh"):
            yield key, entry["zh"]
    for cid, cell in cat.get("cells", {}).items():
        if cell.get("zh"):
            yield cid, cell["zh"]
        for kind in ("strings", "comments"):
            for entry in cell.get(kind, []):
                if entry.get("zh"):
                    yield f"{cid} {kind[:-1]} {entry['en'][:40]}", entry["zh"]
    for name, zh in cat.get("claims", {}).items():
        if zh:
            yield f"claim {name[:40]}", zh
    if (cat.get("title") or {}).get("zh"):
        yield "title", cat["title"]["zh"]


CATALOGS = sorted((i18n.CATALOGS / "zh_CN").glob("*/*.json"))


def test_the_rules_catch_what_they_name_and_leave_the_rest():
    assert problems("激活值随 批大小 x 长度 增长") and problems("实测 15.8 x") and problems("单位：x")
    assert problems("代价是单步时间的 1.26x") and problems("尖峰 >= 5x") and problems("{slower:.2f}x 的时间")
    for fine in (
        "批大小 4 x 64 个 token",
        "4x4 梯度累积",
        "批大小 16 = {fit_b} x {accum} 步",
        "tiny 模型 0.90M 参数",
        "1.2 倍",
        "`分享到：微信 微博 QQ空间`",
        "ddp x2 与 fsdp x3",
        "```\n中文 中文\n```",
    ):
        assert not problems(fine), fine


@pytest.mark.parametrize("path", CATALOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_chinese_typography(path):
    found = [f"{where}: {p}" for where, text in translations(path) for p in problems(text)]
    assert not found, f"{path.name}:\n" + "\n".join(found)


def test_a_claims_expected_text_and_a_skip_reason_need_a_translation_decision():
    src = (
        'res.expect("loss at step 1", d, d < 1e-5, "< 1e-5 relative")\n'
        'res.skip("on GPUs", reason="CPU")\n'
        'res.expect("b", x, x, expected="True" if x else "never")\n'
    )
    readable, names = notebooks.code_strings(src)
    assert readable == ['"< 1e-5 relative"', '"CPU"', '"True"', '"never"'] and names == [
        "loss at step 1",
        "on GPUs",
        "b",
    ]


def test_claim_lines_are_marked_in_chinese(monkeypatch, capsys, tmp_path):
    from labkit.results import Results

    monkeypatch.setenv("LABKIT_LANG", "zh_CN")
    res = Results("03_memory_and_accumulation", out_dir=tmp_path)
    res.expect("largest vs smallest configuration", 16.6, True, "> 4")
    res.expect("largest vs smallest configuration", 1.0, False, "> 4")
    res.skip("activation checkpointing memory saving", "需要 CUDA GPU")
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split("]")[0] + "]" for ln in lines] == ["[通过]", "[未通过]", "[跳过]"], lines
    monkeypatch.setenv("LABKIT_LANG", "en")
    res.expect("largest vs smallest configuration", 16.6, True, "> 4")
    assert capsys.readouterr().out.startswith("[PASS] largest vs smallest configuration: observed 16.6")


def test_a_multiplier_is_revealed_as_bei(monkeypatch, capsys):
    from labkit.exercises import predictions

    monkeypatch.setenv("LABKIT_LANG", "zh_CN")
    monkeypatch.setitem(predictions._PREDICTIONS, "03", 12.0)
    predictions.reveal("03", 15.8)
    out = capsys.readouterr().out
    assert "15.8 倍" in out and not problems(out), out


def test_the_missing_font_warning_is_in_the_course_language(monkeypatch):
    from labkit.viz import fonts

    monkeypatch.setenv("LABKIT_LANG", "zh_CN")
    monkeypatch.setattr(fonts, "_configured", None)
    monkeypatch.setattr(fonts, "find_cjk_font", lambda: None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fonts.configure() is None
    assert any("没有找到 CJK 字体" in str(w.message) for w in caught), [str(w.message) for w in caught]
