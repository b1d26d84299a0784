"""Serialise records as a crawled HTML page, a .txt file, or JSONL / CSV exports.

Pages look like a news site's: head scripts and styles, a nav bar, a sidebar
with other headlines, a footer with the copyright line.  The article text is
always inside `<div class="article-content">` (with `<h1>` above it); the rest
is page furniture that a real extractor drops and a regex tag-stripper keeps.
"""

from __future__ import annotations

import csv
import html
import io
import json
import random
import re

from labkit.corpus.dirt import SITES
from labkit.corpus.record import Rec

# where an export put each of its records, in the chunk's order: (row from 1, the id column or None)
Placements = list[tuple[int, str | None]]

_MARKUP = re.compile(r"(<(?:script|SCRIPT|style)\b.*?</(?:script|SCRIPT|style)>)", re.S)
_NAV = ("首页", "国内", "国际", "财经", "科技", "体育", "健康", "教育", "文化", "视频", "图片", "专题")


def html_page(title: str | None, body: str, rng: random.Random, declared: str | None, other_titles: list[str]) -> str:
    """A full page; script/style blocks in `body` stay raw markup, each other line becomes a <p>."""
    site = rng.choice(SITES)
    if declared is None:
        meta = ""
    elif rng.random() < 0.5:
        meta = f'<meta charset="{declared}">\n'
    else:
        meta = f'<meta http-equiv="Content-Type" content="text/html; charset={declared}">\n'
    head_title = f"<title>{html.escape(title)}</title>\n" if title is not None else ""
    h1 = f"<h1>{html.escape(title)}</h1>\n" if title is not None else ""
    paras = []
    for part in _MARKUP.split(body):
        if _MARKUP.fullmatch(part):
            paras.append(part)  # a script/style block stays one raw block, newlines and all
        else:
            paras.extend(f"<p>{html.escape(line)}</p>" for line in part.split("\n") if line.strip())
    nav = " ".join(f'<a href="/{i}/">{n}</a>' for i, n in enumerate(rng.sample(_NAV, 8)))
    related = "\n".join(
        f'<li><a href="/news/{rng.randint(10**5, 10**6)}.html">{html.escape(t)}</a></li>' for t in other_titles
    )
    return (
        '<!DOCTYPE html>\n<html lang="zh-CN">\n<head>\n'
        + meta
        + head_title
        + '<script src="https://static.example.com/js/jquery.min.js"></script>\n'
        + "<script>var _hmt = _hmt || [];</script>\n"
        + '<style>body { font-family: "Microsoft YaHei"; } .nav a { margin: 0 8px; }</style>\n'
        + "</head>\n<body>\n"
        + f'<div class="nav">{nav}</div>\n'
        + '<div class="main">\n'
        + h1
        + f'<div class="info">来源：{site}　{rng.randint(2019, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}</div>\n'
        + '<div class="article-content">\n'
        + "\n".join(paras)
        + "\n</div>\n</div>\n"
        + f'<div class="sidebar"><h3>相关新闻</h3><ul>\n{related}\n</ul></div>\n'
        + f'<div class="footer"><p>关于我们 | 联系我们 | 网站地图</p><p>版权所有 {site} 京ICP备0000000号</p></div>\n'
        + "</body>\n</html>\n"
    )


def txt_file(title: str, body: str) -> str:
    """First line the title, the rest the body."""
    return f"{title}\n{body}\n"


def _row_meta(r: Rec, row_no: int) -> tuple[str, str]:
    """The url and publication time columns an export carries next to title/body."""
    a = r.article
    return f"https://news.example.com/{a.id}.html", f"2024-{row_no % 12 + 1:02d}-{row_no % 28 + 1:02d} 08:00"


def jsonl_text(chunk: list[Rec], rel: str, has_id: bool, rng: random.Random) -> tuple[str, Placements]:
    """A JSONL export of `chunk`, truncating malformed rows, and where each record landed.

    A truncated row keeps no readable id, so the reader (and the label) falls back to `rel:row`."""
    lines, placed = [], []
    for line_no, r in enumerate(chunk, start=1):
        url, pub = _row_meta(r, line_no)
        obj: dict = {}
        crawl_id = r.export_id(rel, line_no)
        if has_id:
            obj["id"] = crawl_id
        if r.title_style != "absent":
            obj["title"] = None if r.title_style == "null" else ("" if r.title is None else r.title)
        obj.update(body=r.body, url=url, pub_time=pub)
        line = json.dumps(obj, ensure_ascii=False)
        if r.expected == "malformed_record":
            line = line[: rng.randint(10, len(line) - 10)]
        placed.append((line_no, crawl_id if has_id and r.expected != "malformed_record" else None))
        lines.append(line)
    return "\n".join(lines) + "\n", placed


def csv_text(chunk: list[Rec], rel: str, has_id: bool) -> tuple[str, Placements]:
    """A CSV export of `chunk` (swapped / misaligned rows as drawn), and where each record landed."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow((["id"] if has_id else []) + ["title", "body", "url", "pub_time"])
    placed = []
    for row_no, r in enumerate(chunk, start=1):
        url, pub = _row_meta(r, row_no)
        crawl_id = r.export_id(rel, row_no)
        title, body = ("" if r.title is None else r.title), r.body
        if r.swapped:
            title, body = body, title
        values = [title, body, url, pub]
        if r.misaligned == "extra":
            values.insert(0, r.article.category)
        elif r.misaligned == "missing":
            values.pop(0)
        w.writerow(([crawl_id] if has_id else []) + values)
        placed.append((row_no, crawl_id if has_id else None))
    return buf.getvalue(), placed
