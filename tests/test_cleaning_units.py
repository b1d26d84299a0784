"""Unit tests of the cleaning steps on hand-made inputs (decode, repair, extract, validate, dedup)."""

from __future__ import annotations


import pytest

from labkit.cleaning.decode import decode_bytes, declared_charset, detect, sniff
from labkit.cleaning.dedup import Deduper, jaccard, signature
from labkit.cleaning.extract import extract_article, looks_like_markup, strip_markup
from labkit.cleaning.readers import RawRecord
from labkit.cleaning.repair import drop_furniture, has_damage, normalize_body, repair_mojibake, strip_controls
from labkit.cleaning.validate import Limits, clean_record

ZH = "北京市今日召开新闻发布会，宣布“智慧城市”项目正式启动：首批试点覆盖三个区。记者了解到，该项目总投资约十二亿元，将在未来三年内完成建设。"
ZH2 = "上海某科技公司发布新一代人工智能芯片，性能较上一代提升百分之四十，预计明年量产。业内人士认为，这将推动国产芯片产业发展，带动上下游企业。"
TITLE = "北京智慧城市项目正式启动首批覆盖三区"
ZH_TW = (
    "北京市今日召開新聞發布會，宣布「智慧城市」項目正式啟動：首批試點覆蓋三個區。記者了解到，該項目總投資約十二億元。"
)


FIX = {
    "utf-8": [],
    "gb18030": ["decoded:gb18030"],
    "gbk": ["decoded:gb18030"],
    "big5": ["decoded:big5"],
    "utf-16": ["decoded:utf-16"],
    "utf-8-sig": ["bom_stripped"],
    "utf-32": ["decoded:utf-32"],
}


@pytest.mark.parametrize("enc", sorted(FIX))
def test_decode_roundtrips_every_encoding_of_the_dump(enc):
    text = (ZH_TW if enc == "big5" else ZH) * 2  # Big5 is traditional Chinese
    dec = decode_bytes(text.encode(enc))
    assert dec.reason is None, dec.detail
    assert dec.text == text
    assert dec.fixes == FIX[enc]


def test_a_wrong_single_byte_guess_loses_to_a_strict_cjk_decode():
    mojibake_in_gbk = ZH.encode("utf-8").decode("latin-1").encode("gb18030")
    dec = decode_bytes(mojibake_in_gbk, detector="chardet")
    assert dec.encoding == "gb18030" and dec.text == ZH.encode("utf-8").decode("latin-1")


@pytest.mark.parametrize("detector", ["chardet", "charset_normalizer"])
def test_both_detectors_tell_gbk_from_big5(detector):
    assert detect((ZH * 2).encode("gbk"), detector) == "gb18030"
    assert detect((ZH_TW * 2).encode("big5"), detector) == "big5hkscs"


def test_declared_charset_is_only_a_hint():
    page = f'<html><head><meta charset="gbk"></head><body>{ZH}</body></html>'.encode("utf-8")
    assert declared_charset(page) == "gb18030"
    assert decode_bytes(page).text.count("北京") == 1  # decoded as what it is: UTF-8


def test_binary_and_undecodable_bytes_are_rejected_with_reasons():
    assert decode_bytes(bytes(range(256)) * 8).reason == "not_text"
    assert sniff(b"\x00\x01\x02\x03" * 100)[1] == "not_text"
    damaged = ZH.encode("gbk") + b"\xff\xff\xff" + ZH.encode("gbk")
    dec = decode_bytes(damaged)
    assert dec.reason == "encoding_undecodable" and "UTF-8" in dec.detail


def test_sniff_finds_utf16_without_bom():
    assert sniff("title,body\nabc,def\n".encode("utf-16-le"))[0] == "utf-16-le"


@pytest.mark.parametrize("codec", ["latin-1", "sloppy-windows-1252"])
def test_ftfy_repairs_mojibake_but_keeps_fullwidth_punctuation(codec):
    mojibake = ZH.encode("utf-8").decode(codec)
    fixed, changed = repair_mojibake(mojibake)
    assert changed and fixed == ZH  # ，：“” survive: width fix and quote uncurling are off


def test_clean_chinese_text_never_reaches_ftfy(monkeypatch):
    import ftfy

    import labkit.cleaning.repair as repair

    monkeypatch.setattr(ftfy, "fix_text", lambda *a, **k: pytest.fail("ftfy ran on clean text"))
    text = ZH + "……版权所有 © 2024——“引号”·é"
    assert repair.repair_mojibake(text) == (text, False)


def test_damage_detection():
    assert has_damage(ZH[:10] + "\ufffd" + ZH[10:])
    assert not has_damage(ZH)


def test_controls_and_whitespace():
    text, changed = strip_controls("标题\x00正文\u200b\r\n第二行\x07")
    assert changed and text == "标题正文\n第二行"
    assert normalize_body("　　第一段  文字\n\n\n  第二段\t\t文字  ") == "第一段 文字\n第二段 文字"


def _random_texts(n: int, seed: int) -> list[str]:
    """Texts built from what the whole-text checks must treat as the per-line code did: every kind of whitespace
    (line breaks, CR, tabs, U+3000, NBSP, U+2028, U+0085), NFD accents, CJK and Latin, footer phrases with
    re.I's variant letters (İ, ı), sentence ends, code."""
    import random

    rng = random.Random(seed)
    pieces = [" ", "  ", "\t", "\u3000", "\u00a0", "\n", "\n\n", "\r", "\u2028", "\x85", "\x0b", "e\u0301", "é"]
    pieces += [
        "中文",
        "新闻。",
        "abc",
        "ICP备",
        "İCP備",
        "ıcp备",
        "COPYRIGHT",
        "(C) 2024",
        "(c)\n2024",
        "©",
        "责任编辑：王",
    ]
    pieces += ["來源：新华社", "来源:", "var x = 1;", "}) ", "编辑:", "All rights reserved", ZH[:30]]
    return ["".join(rng.choice(pieces) for _ in range(rng.randrange(0, 14))) for _ in range(n)]


def test_whole_text_checks_decide_as_the_per_line_code():
    """The whitespace check and drop_furniture's first look run over whole texts, and the re.I footer pattern
    starts with a look-ahead (all three profiled as faster); they must answer exactly what the per-line
    definitions below do."""
    import re
    import unicodedata

    from labkit.cleaning import repair

    messy_line = re.compile(r"^\s|\s$|\s\s|[^\S ]")
    cased = re.compile(repair._CASED_ALTERNATIVES, re.I)
    for text in _random_texts(4000, seed=1):
        per_line = any(
            ln and not (unicodedata.is_normalized("NFC", ln) and not messy_line.search(ln)) for ln in text.split("\n")
        )
        assert repair.messy_lines(text) == per_line, repr(text)
        body = normalize_body(text)
        assert drop_furniture(body) == repair._drop_furniture_lines(body), repr(body)
        for cut in (0, 3):
            a, b = repair._FURN_CASED.search(text, cut), cased.search(text, cut)
            assert (a and a.span()) == (b and b.span()), repr(text)


def test_boilerplate_lines_and_trailing_clauses_are_removed():
    body = f"{ZH}责任编辑：张三\n点击查看更多精彩内容\n版权所有 © 2024 某某网\n{ZH2}\nvar _hmt = _hmt || [];"
    out, fixes = drop_furniture(body)
    assert out == f"{ZH}\n{ZH2}"
    assert fixes == ["boilerplate_removed", "script_removed"]


def test_a_sentence_ending_in_a_half_width_period_survives_its_footer():
    # sites typed with Western punctuation end sentences in "." or "．": the sentence stays, the footer goes
    body = "新机场今年投入使用.责任编辑：张三\n新线路下月开通．编辑：李四\n点击查看更多"
    out, fixes = drop_furniture(body)
    assert out == "新机场今年投入使用.\n新线路下月开通．" and fixes == ["boilerplate_removed"]


def test_traditional_character_furniture_is_removed_too():
    # Big5 pages (Taiwan / Hong Kong sites) carry the same footers in traditional characters
    body = "市政府今日公布新措施。責任編輯：王小明\n免責聲明：本站內容僅供參考\n版權所有 未經授權禁止轉載\n新措施下月起實施。"
    out, fixes = drop_furniture(body)
    assert out == "市政府今日公布新措施。\n新措施下月起實施。" and fixes == ["boilerplate_removed"]


def test_the_written_out_traditional_phrases_are_what_opencc_gives():
    """repair.py lists the furniture phrases' traditional spellings instead of loading OpenCC on every run
    (~0.25 s of start-up); OpenCC must still agree with the list, order included."""
    import subprocess
    import sys

    from labkit.cleaning import repair

    assert repair._PHRASES == repair._with_traditional(repair._FURNITURE)
    code = "import sys, labkit.cleaning.pipeline; print('opencc' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_parser_drops_multiline_uppercase_scripts_the_regex_misses():
    html = (
        f"<html><head><title>{TITLE} - 某某新闻网</title></head><body><nav>首页 | 国内</nav>"
        f"<div class='article-content'><p>{ZH}</p><SCRIPT type='text/javascript'>\nvar x = '<p>不是正文</p>';\n"
        f"</SCRIPT><style>\np {{color: red}}</style><p>{ZH2}</p></div><footer>联系我们</footer></body></html>"
    )
    page = extract_article(html)
    assert page.title == TITLE
    assert "不是正文" not in page.body and "color" not in page.body and "首页" not in page.body
    assert ZH in page.body and ZH2 in page.body
    assert {"script", "style", "nav", "footer"} <= page.dropped


def test_h1_wins_over_title_and_xml_declaration_is_fine():
    page = extract_article(f'<?xml version="1.0" encoding="gbk"?><html><body><h1>{TITLE}</h1><p>{ZH}</p></body></html>')
    assert page.title == TITLE and page.body.strip() == ZH


def test_markup_in_text_fields():
    assert looks_like_markup("<p>段落</p>") and not looks_like_markup("a < b 且 c > d")
    text, dropped, other = strip_markup(f"<p>{ZH}</p><script>alert(1)</script>")
    assert text.strip() == ZH and dropped == {"script"} and other
    text, dropped, other = strip_markup(f"{ZH}\n<SCRIPT>\nvar a = 1;\n</SCRIPT>")
    assert text.strip() == ZH and dropped == {"script"} and not other


def _row(title, body, **kw):
    return RawRecord(id="x", source="s", kind=kw.pop("kind", "jsonl"), title=title, body=body, **kw)


def test_validate_lengths_are_inclusive_after_normalisation():
    lim = Limits()
    assert clean_record(_row("一" * 10, ZH), lim).reason is None
    assert clean_record(_row("一" * 60, ZH), lim).reason is None
    assert clean_record(_row("一" * 9 + "   ", ZH), lim).reason == "title_too_short"
    assert clean_record(_row("一" * 61, ZH), lim).reason == "title_too_long"
    assert clean_record(_row(None, ZH), lim).reason == "title_missing"
    assert clean_record(_row(TITLE, "太短了"), lim).reason == "body_too_short"
    assert clean_record(_row(TITLE, ZH * 400), lim).reason is None  # no maximum by default
    assert clean_record(_row(TITLE, ZH * 400), Limits(max_body=20_000)).reason == "body_too_long"


def test_validate_swaps_title_and_body_and_repairs_mojibake():
    out = clean_record(_row(ZH + ZH2, TITLE))
    assert out.reason is None and out.title == TITLE and "fields_swapped" in out.fixes
    out = clean_record(_row(TITLE, (ZH + ZH2).encode().decode("latin-1")))
    assert out.reason is None and out.body == ZH + ZH2 and "mojibake_repaired" in out.fixes
    assert clean_record(_row(TITLE, ZH + "\ufffd\ufffd" + ZH2)).reason == "mojibake"


def test_swap_is_not_applied_to_html_or_plausible_records():
    assert "fields_swapped" not in clean_record(_row("一" * 60, "二" * 50)).fixes
    assert clean_record(_row(ZH + ZH2, TITLE, kind="txt")).reason == "title_too_long"


def test_whitespace_fix_is_reported_for_crawl_whitespace_not_for_markup_removal():
    out = clean_record(_row(TITLE, f"{ZH}\n<script>\nvar a = 1;\n</script>\n{ZH2}"))
    assert out.fixes == ["script_removed"] and out.body == f"{ZH}\n{ZH2}"
    out = clean_record(_row(TITLE, f"　　{ZH}  \n\n\t{ZH2}"))
    assert out.fixes == ["whitespace_normalized"] and out.body == f"{ZH}\n{ZH2}"


def test_dedup_exact_near_and_distinct():
    d = Deduper()
    base = signature(TITLE, ZH + ZH2)
    assert d.check("a", base) is None
    assert d.check("b", signature(TITLE, ZH + ZH2)) == ("exact", "a")
    near = signature(TITLE + "！", ZH + ZH2.replace("四十", "五十"))
    assert jaccard(base.minhash, near.minhash) > 0.8
    kind, orig = d.check("c", near)
    assert kind.startswith("near") and orig == "a"
    assert d.check("d", signature("另一条新闻标题来了啊", ZH2 + ZH2[::-1])) is None


def test_signatures_are_deterministic_across_processes():
    import subprocess
    import sys

    code = f"from labkit.cleaning.dedup import signature;print(signature('t', {ZH!r}).minhash.hex())"
    runs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONHASHSEED": str(s)}
        ).stdout
        for s in (1, 2)
    }
    assert runs == {signature("t", ZH).minhash.hex() + "\n"}
