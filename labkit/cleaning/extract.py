"""Article text from HTML with a real parser (lxml), never with regexes over tags.

The story's regex `<script.*?>.*?</script>` misses multi-line and upper-case
script blocks; a parser sees elements, whatever their case or line breaks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import lxml.html

# elements that are never article text
DROP_TAGS = (
    "script",
    "style",
    "noscript",
    "nav",
    "footer",
    "header",
    "aside",
    "form",
    "iframe",
    "template",
    "button",
    "select",
    "svg",
    "object",
    "embed",
)
# elements after which the text flows to a new line
_BLOCK = {
    "p",
    "div",
    "br",
    "li",
    "tr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "section",
    "article",
    "blockquote",
    "pre",
    "ul",
    "ol",
    "table",
    "dd",
    "dt",
}
_BODY_HINT = re.compile(r"article|content|story|post-body|entry|正文", re.I)
_MAIN_HINT = re.compile(r"main|post|text", re.I)
_LOOKS_LIKE_MARKUP = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]{0,2000})?/?>|<!--")
_SITE_SUFFIX = re.compile(r"\s+[-|｜_]\s+|_(?=[^_]{2,12}$)")
_XML_INCOMPATIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_PARSER = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)


@dataclass
class Extracted:
    title: str | None
    body: str
    dropped: set[str]  # tags of the script/style/nav/... elements removed


def looks_like_markup(text: str) -> bool:
    """Cheap pre-check: does a plain-text field carry tags that need the parser?"""
    return "<" in text and bool(_LOOKS_LIKE_MARKUP.search(text))


def _parse(text: str):
    # libxml2 refuses control characters and lone surrogates (callers strip and record them
    # first; this is the last line of defence), and str input with an XML encoding
    # declaration: hand it clean UTF-8 bytes
    text = _XML_INCOMPATIBLE.sub("", text)
    return lxml.html.document_fromstring(text.encode("utf-8"), parser=_PARSER)


def _text(el) -> str:
    for sub in el.iter():
        if isinstance(sub.tag, str) and sub.tag.lower() in _BLOCK:
            sub.tail = "\n" + (sub.tail or "")
    return el.text_content()


def _drop_furniture(root) -> set[str]:
    dropped = set()
    for el in list(root.iter(*DROP_TAGS)):
        dropped.add(el.tag.lower())
        el.drop_tree()
    return dropped


def _main_element(root):
    """The article container: <article>, else the largest article/content-named block,
    else a main-ish block, else <body> (a site's <div class="main"> also holds the dateline)."""
    found = root.find(".//article")
    if found is not None:
        return found
    for hint in (_BODY_HINT, _MAIN_HINT):
        best, best_len = None, 0
        for el in root.iter("div", "section", "main"):
            if hint.search(f"{el.get('id', '')} {el.get('class', '')}"):
                n = len(el.text_content())
                if n > best_len:
                    best, best_len = el, n
        if best is not None:
            return best
    body = root.find(".//body")
    return body if body is not None else root


def extract_article(html: str) -> Extracted:
    """Title (<h1>, else <title>) and body text of one HTML page."""
    root = _parse(html)
    dropped = _drop_furniture(root)
    title = None
    h1 = root.find(".//h1")
    if h1 is not None and h1.text_content().strip():
        title = h1.text_content()
    else:
        t = root.find(".//title")
        if t is not None and t.text_content().strip():
            # "<title>标题 - 某某新闻网</title>": keep the headline, drop the site name
            title = _SITE_SUFFIX.split(t.text_content().strip())[0]
    head = root.find(".//head")
    if head is not None:
        head.drop_tree()
    main = _main_element(root)
    for h in list(main.iter("h1")):  # the title is not part of the body
        h.drop_tree()
    return Extracted(title, _text(main), dropped)


def strip_markup(fragment: str) -> tuple[str, set[str], bool]:
    """Plain text of an HTML fragment found inside a text field.

    Returns (text, dropped tags, whether other markup than the dropped elements was there)."""
    root = _parse(f"<html><body><div>{fragment}</div></body></html>")
    dropped = _drop_furniture(root)
    body = root.find(".//body")
    body = body if body is not None else root
    other = sum(1 for el in body.iter() if isinstance(el.tag, str)) > 2  # more than <body><div>
    return _text(body), dropped, other
