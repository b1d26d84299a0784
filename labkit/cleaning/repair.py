"""Text repair: mojibake (ftfy), control characters, whitespace, boilerplate lines.

ftfy is configured to keep Chinese typography: its default
`fix_character_width` folds full-width punctuation (`，` -> `,`, `：` -> `:`)
and `uncurl_quotes` turns `“”` into `""` -- both would rewrite correct
Chinese text, so both are off.  ftfy is also the slowest step, so it only
runs when a cheap scan finds characters mojibake is made of.
"""

from __future__ import annotations

import functools
import re
import unicodedata

# ftfy's settings (its TextFixerConfig fields)
FTFY_SETTINGS = dict(
    fix_character_width=False,  # keep ，：；（） full-width, as Chinese text writes them
    uncurl_quotes=False,  # keep “” ‘’
    unescape_html=False,  # entities are the HTML parser's job; plain text may mean "&lt;"
    remove_control_chars=False,  # strip_controls does it and reports it as its own fix
    fix_line_breaks=False,  # likewise strip_controls
    normalization=None,  # NFC happens in normalize_*; "changed" here must mean mojibake
    explain=False,
)


@functools.cache
def _ftfy():
    """(ftfy, its config), imported when a text first shows mojibake's signature (`_SUSPECT`): ftfy builds its
    character tables and regexes at import, ~60-90 ms of each `labkit clean`'s start-up (and each worker's),
    which a crawl without mojibake never needs."""
    import ftfy
    import ftfy.badness

    return ftfy, ftfy.TextFixerConfig(**FTFY_SETTINGS)


# The signature of UTF-8 read as latin-1/cp1252: a UTF-8 lead byte (C2-F4) shown as a Latin-1
# letter followed by a continuation byte (80-BF) shown as a C1 control, a Latin-1 symbol or a
# cp1252 special ('æ–°' for 新).  Clean Chinese text -- even with ……, ©, “” -- never has it,
# so ftfy (the slowest step) only sees records that need it.
_CONT = "\u0080-\u00bf\u0152\u0153\u0160\u0161\u0178\u017d\u017e\u0192\u02c6\u02dc\u2013\u2014\u2018-\u201e\u2020-\u2022\u2026\u2030\u2039\u203a\u20ac\u2122"
_SUSPECT = re.compile(f"[\u00c2-\u00f4][{_CONT}]")
# C0/C1 controls (but \n and \t), zero-width and bidi marks, BOMs inside text
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
_HSPACE = re.compile(r"[ \t\u00a0\u2000-\u200a\u202f\u205f]+")
_ANY_SPACE = re.compile(r"\s+")

# Lines (or trailing clauses) that are page furniture, not article text.
_FURNITURE = (
    "责任编辑 编辑: 编辑： 版权所有 版权声明 未经授权 禁止转载 转载请注明 点击查看更多 点击查看 查看更多 "
    "相关阅读 相关新闻 推荐阅读 热门推荐 分享到 扫码关注 扫一扫 二维码 关注我们 返回首页 返回顶部 上一篇 下一篇 "
    "免责声明 【纠错】 【打印】 【关闭】 ICP备 京公网安备 广告 本文来源: 本文来源："
).split()


# _FURNITURE's traditional spellings as OpenCC (s2t, s2tw, s2hk) writes them, in `_with_traditional`'s order.
# Written out: loading OpenCC's three dictionaries cost every `labkit clean` ~0.25 s of start-up (profiled), as
# much as cleaning 500 records; tests/test_cleaning_units.py derives the list with OpenCC and compares.
_TRADITIONAL = (
    "責任編輯 編輯: 編輯： 版權所有 版權聲明 未經授權 禁止轉載 轉載請註明 點擊查看更多 點擊查看 相關閱讀 相關新聞 推薦閱讀 熱門推薦 掃碼關注 掃一掃 "
    "二維碼 關注我們 返回首頁 返回頂部 免責聲明 【糾錯】 【關閉】 ICP備 京公網安備 廣告 本文來源: 本文來源： 相關閲讀 推薦閲讀"
).split()


def _with_traditional(phrases, traditional=None):
    """Each phrase and its traditional spellings (OpenCC's when `traditional` is None), longest first:
    Big5 pages from Taiwan/Hong Kong say 責任編輯, 免責聲明."""
    out = dict.fromkeys(phrases)
    if traditional is None:
        import opencc

        for cfg in ("s2t", "s2tw", "s2hk"):
            conv = opencc.OpenCC(cfg)
            out.update(dict.fromkeys(conv.convert(p) for p in phrases))
    else:
        out.update(dict.fromkeys(traditional))
    return sorted(out, key=len, reverse=True)  # longest first: 点击查看更多 before 点击查看


_PHRASES = _with_traditional(_FURNITURE, _TRADITIONAL)
BOILERPLATE = re.compile(  # the definition; drop_furniture runs the equivalent split below
    "|".join(re.escape(p) for p in _PHRASES)
    + r"|Copyright|All Rights Reserved|©|\(c\)\s*\d{4}|(?:来源|來源)[:：]\S{0,12}$",
    re.I,
)
# The same search, split for speed (profiled: the single re.I alternation was ~7% of a run's CPU):
# re.I disables sre's first-character scan, so the uncased (CJK) phrases go in a case-sensitive
# pattern whose alternatives all start with a literal -- sre then only tries them where such a
# character occurs -- and only the few cased ones (Copyright, ICP备...) stay re.I.  `_furniture_at`
# returns the start BOILERPLATE.search would (the leftmost of the two).  The re.I one starts with a
# look-ahead for the characters its phrases can start with (re.I's own variants included: ı, İ), which sre
# tests at each position before trying the alternatives: ~2x faster, the same matches.
_CASED = [p for p in _PHRASES if any(c.lower() != c.upper() for c in p)]
_FURN_PLAIN = re.compile(
    "|".join(re.escape(p) for p in _PHRASES if p not in _CASED) + r"|©|来源[:：]\S{0,12}$|來源[:：]\S{0,12}$"
)
_CASED_ALTERNATIVES = "|".join(re.escape(p) for p in _CASED) + r"|Copyright|All Rights Reserved|\(c\)\s*\d{4}"
_FURN_CASED = re.compile(f"(?=[ica(])(?:{_CASED_ALTERNATIVES})", re.I)


def _furniture_at(line: str, cut: int) -> int | None:
    a, b = _FURN_PLAIN.search(line, cut), _FURN_CASED.search(line, cut)
    if a is None:
        return None if b is None else b.start()
    return a.start() if b is None else min(a.start(), b.start())


_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_CODE_HINT = re.compile(
    r"function\s*\(|\bvar\s+\w|\bconst\s+\w|\blet\s+\w|=>|document\.|window\.|\}\s*\)|[{};]\s*$|^\s*[.#]?[\w-]+\s*\{"
)
# "．" (full-width) and "." end sentences on sites typed with Western punctuation: a sentence before
# "编辑：张三" ending in one must be kept like one ending in "。"
_SENTENCE_END = ("。", "！", "？", "!", "?", "”", "」", "…", "．", ".", "｡")
_MAX_BOILERPLATE_LINE = 80  # a boilerplate line is short; a long line mentioning 来源 is article text


def repair_mojibake(text: str) -> tuple[str, bool]:
    """Undo UTF-8-decoded-as-latin-1/cp1252 damage with ftfy; returns (text, changed)."""
    if not _SUSPECT.search(text):
        return text, False
    ftfy, config = _ftfy()
    fixed = ftfy.fix_text(text, config)
    return fixed, fixed != text


def strip_controls(text: str) -> tuple[str, bool]:
    """Drop control/zero-width characters and unify line breaks; returns (text, changed)."""
    if not _CONTROL.search(text) and "\u2028" not in text and "\u2029" not in text:
        return text, False  # one scan instead of six for the usual text (\r is one of _CONTROL's)
    out = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u2028", "\n").replace("\u2029", "\n")
    out = _CONTROL.sub("", out)
    return out, out != text.replace("\r\n", "\n")


def normalize_title(text: str) -> str:
    """One line, NFC, runs of whitespace collapsed, ends trimmed."""
    return _ANY_SPACE.sub(" ", unicodedata.normalize("NFC", text)).strip()


def normalize_body(text: str) -> str:
    """NFC; each line trimmed (incl. the 　　 paragraph indent), spaces collapsed, blank lines dropped."""
    # one regex pass over the whole text (_HSPACE never matches a line break), then per-line trims
    lines = (ln.strip(" \u3000") for ln in _HSPACE.sub(" ", unicodedata.normalize("NFC", text)).split("\n"))
    return "\n".join(ln for ln in lines if ln)


_ODD_SPACE = re.compile(r"[^\S\n ]")  # whitespace that is neither a space nor a line break


def messy_lines(text: str) -> bool:
    """Some line of `text` is not what `normalize_title` makes of it: not NFC, or whitespace other than single
    spaces inside the line.  Whole-text checks, no loop over lines (profiled: 3x faster): NFC holds for a text
    exactly when it holds for each line (a line break is a starter that composes with nothing), and a line's
    messy space is an odd one, or a space at a line's start or end, or next to another."""
    return (
        not unicodedata.is_normalized("NFC", text)
        or _ODD_SPACE.search(text) is not None
        or text.startswith(" ")
        or text.endswith(" ")
        or "  " in text
        or "\n " in text
        or " \n" in text
    )


def is_code(line: str) -> bool:
    """A line of left-over JavaScript/CSS: no Chinese at all and code punctuation."""
    return not _CJK.search(line) and bool(_CODE_HINT.search(line))


# drop_furniture's searches over a whole body at once (re.M: `$` at every line's end). Neither matching means
# no line holds furniture and every line holds Chinese, so none is code either: most bodies, left as they are
# without the per-line loop (profiled: its searches were half of drop_furniture).
# (Kept apart: one alternation of both would lose the plain one's literal-prefix scan, 5x slower.)
_BODY_FURN_PLAIN = re.compile(_FURN_PLAIN.pattern, re.M)
_BODY_FURN_CASED = re.compile(_FURN_CASED.pattern, re.I | re.M)
_LINE_WITHOUT_CJK = re.compile(r"^[^\u3400-\u9fff\uf900-\ufaff\n]*$", re.M)


def drop_furniture(body: str) -> tuple[str, list[str]]:
    """Remove boilerplate and code lines from a normalised body; returns (body, fix codes)."""
    if not (_BODY_FURN_PLAIN.search(body) or _BODY_FURN_CASED.search(body) or _LINE_WITHOUT_CJK.search(body)):
        return body, []
    return _drop_furniture_lines(body)


def _drop_furniture_lines(body: str) -> tuple[str, list[str]]:
    kept, fixes = [], set()
    for line in body.split("\n"):
        # furniture is a short line or a short clause at a line's end: only the tail can hold it
        cut = max(0, len(line) - _MAX_BOILERPLATE_LINE)
        at = _furniture_at(line, cut)
        if at is not None:
            fixes.add("boilerplate_removed")
            # "……完成建设。责任编辑：张三": keep the sentence, drop the appended furniture
            head = line[:at].rstrip()
            if head.endswith(_SENTENCE_END):
                kept.append(head)
        elif is_code(line):
            fixes.add("script_removed")
        else:
            kept.append(line)
    return "\n".join(kept), sorted(fixes)


def has_damage(text: str) -> bool:
    """Unrepairable damage left after repair: replacement characters or mojibake ftfy could not undo."""
    if "\ufffd" in text:
        return True
    return bool(_SUSPECT.search(text)) and _ftfy()[0].badness.is_bad(text)
