"""Text-level defects a crawl picks up, each a pure function of (text, rng).

`labkit.corpus.dump` decides which record gets which defect and records it in
the labels; the functions here only damage text, the way real crawlers and
exporters do.
"""

from __future__ import annotations

import random

import ftfy

from labkit.corpus import lexicon as L

SITES = ("新华网", "人民网", "中国新闻网", "央视网", "澎湃新闻", "环球网", "光明网", "中国日报网")

BOILERPLATE = (
    "责任编辑：{name}",
    "版权所有：{site} 2024 未经授权禁止转载",
    "点击查看更多>>",
    "【纠错】【打印】【关闭】",
    "分享到：微信 微博 QQ空间",
    "本文来源：{site}，转载请注明出处。",
    "扫描二维码，关注{site}官方微信",
    "免责声明：本文仅代表作者观点，不代表本站立场。",
)

# what page scripts really look like: analytics snippets and ad loaders
SCRIPTS_INLINE = (
    '<script type="text/javascript">var _hmt = _hmt || []; _hmt.push(["_trackPageview"]);</script>',
    "<script>window.dataLayer = window.dataLayer || []; function gtag(){{dataLayer.push(arguments);}}</script>",
)
SCRIPT_MULTILINE = (
    '<script type="text/javascript">\n'
    '  var ad_slot = document.getElementById("ad-{n}");\n'
    '  if (ad_slot) {{ ad_slot.innerHTML = "<a href=\\"/ad?id={n}\\">广告</a>"; }}\n'
    "  (function(){{ var s = document.createElement('script'); s.async = true; }})();\n"
    "</script>"
)
SCRIPT_UPPER = (
    '<SCRIPT LANGUAGE="JavaScript">document.write("<img src=\'/stat.gif?id={n}\'>"); var pv_{n} = 1;</SCRIPT>'
)
STYLE_BLOCK = "<style>\n.share-bar {{ display: none; }}\n#ad-{n} {{ width: 300px; height: 250px; }}\n</style>"

# C0 controls and DEL that survive JSON/CSV round trips and do not count as
# line breaks for str.splitlines() (\x0b \x0c \x1c-\x1e do, so they are left out)
CONTROL_CHARS = [chr(c) for c in (*range(0x01, 0x09), *range(0x0E, 0x1C), 0x1F, 0x7F)]


def boilerplate_lines(rng: random.Random, k: int) -> list[str]:
    """`k` distinct page-furniture lines (editor, copyright, 'see more'...)."""
    name = rng.choice(L.SURNAMES) + rng.choice(L.GIVEN)
    site = rng.choice(SITES)
    return [t.format(name=name, site=site) for t in rng.sample(BOILERPLATE, k)]


def add_boilerplate(body: str, rng: random.Random) -> str:
    """Furniture lines before and/or after the article paragraphs."""
    lines = boilerplate_lines(rng, rng.randint(2, 4))
    head = lines[:1] if rng.random() < 0.3 else []
    return "\n".join(head + [body] + lines[len(head) :])


def script_block(kind: str, rng: random.Random) -> str:
    """A script/style block: "inline" (the classic regex catches it), "multiline", "upper", "style"."""
    n = rng.randint(100, 999)
    if kind == "inline":
        return rng.choice(SCRIPTS_INLINE)
    if kind == "multiline":
        return SCRIPT_MULTILINE.format(n=n)
    if kind == "upper":
        return SCRIPT_UPPER.format(n=n)
    if kind == "style":
        return STYLE_BLOCK.format(n=n)
    raise ValueError(f"unknown script kind {kind!r}")


def insert_between_paragraphs(body: str, block: str, rng: random.Random) -> str:
    paras = body.split("\n")
    paras.insert(rng.randint(1, len(paras)), block)
    return "\n".join(paras)


def mojibake(text: str, codec: str) -> str:
    """UTF-8 bytes read back as latin-1 or cp1252: 'æ–°é—»' for '新闻'.

    Raises ValueError if ftfy could not undo it, so a label never promises a
    repair that the field's own tool cannot make.
    """
    broken = text.encode("utf-8").decode("sloppy-windows-1252" if codec == "cp1252" else "latin-1")
    if ftfy.fix_encoding(broken) != text:
        raise ValueError("mojibake not reversible by ftfy")
    return broken


def replacement_damage(text: str, rng: random.Random, fraction: float = 0.2) -> str:
    """Replace runs of characters with U+FFFD until about `fraction` of the text is gone."""
    chars = list(text)
    target = int(len(chars) * fraction)
    damaged = 0
    while damaged < target:
        start = rng.randrange(len(chars))
        for i in range(start, min(len(chars), start + rng.randint(2, 6))):
            if chars[i] not in "\n\ufffd":
                chars[i] = "\ufffd"
                damaged += 1
    return "".join(chars)


def add_control_chars(text: str, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(rng.randint(2, 5)):
        chars.insert(rng.randint(1, len(chars) - 1), rng.choice(CONTROL_CHARS))
    return "".join(chars)


def add_whitespace(text: str, rng: random.Random) -> str:
    """Indentation, full-width spaces, tabs and blank lines that an exporter leaves behind."""
    paras = text.split("\n")
    out = []
    for p in paras:
        indent = rng.choice(("\u3000\u3000", "    ", "\t", " \u3000 "))
        out.append(indent + p + rng.choice(("  ", "\t", " ")))
        out.extend([""] * rng.randint(1, 2))
    return "\n".join(out)


def short_title(title: str, rng: random.Random) -> str:
    return title[: rng.randint(3, 8)]


def long_title(title: str, body: str, rng: random.Random) -> str:
    """Title glued to the lead and the site name, as a bad <title> extraction does: > 60 chars."""
    lead = body.replace("\n", "")
    out = f"{title}——{lead[: rng.randint(60, 110)]}_{rng.choice(SITES)}"
    return out


def short_body(body: str, rng: random.Random) -> str:
    return body.replace("\n", "")[: rng.randint(8, 36)] + "……（详见附件）"


def extreme_body(body: str, rng: random.Random) -> str:
    """A scraper stuck in a pagination loop: the same body over and over (20k-50k chars)."""
    reps = rng.randint(20_000, 50_000) // max(1, len(body)) + 1
    return "\n".join([body] * reps)


def near_duplicate(body: str, rng: random.Random) -> str:
    """The same story re-published elsewhere: a source tag in front, one sentence added.

    Character 5-gram Jaccard with the original stays >= 0.8 (distinct generated
    articles share fillers but rarely exceed 0.6), so a near-duplicate detector
    has a clear margin.
    """
    paras = body.split("\n")
    extra = rng.choice(("此消息一经发布便引发网友热议。", "更多详情请关注后续报道。", "（完）"))
    paras[-1] = paras[-1] + extra
    return f"（{rng.choice(SITES)}讯）" + "\n".join(paras)
