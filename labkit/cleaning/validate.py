"""One raw record -> a clean record or a reject with a reason code (no I/O, no state).

Reason codes (`labkit.codes.REASONS`), in the order they are checked (the first that applies wins):
`unreadable`, `empty`, `not_text`, `encoding_undecodable`, `malformed_record`,
`misaligned_fields` (set by the readers), `mojibake`, `title_missing`,
`title_too_short`, `title_too_long`, `body_too_short`, `body_too_long` (only
with a `max_body`); `duplicate` is decided later, in input order, by `dedup`.
`processing_error` is the safety net: a record that made a step raise is
rejected with the exception as its detail instead of stopping the run.
Lengths count characters after normalisation; the limits are inclusive.
"""

from __future__ import annotations

from dataclasses import dataclass

from labkit.cleaning.extract import extract_article, looks_like_markup, strip_markup
from labkit.cleaning.readers import RawRecord
from labkit.cleaning.repair import (
    drop_furniture,
    has_damage,
    messy_lines,
    normalize_body,
    normalize_title,
    repair_mojibake,
    strip_controls,
)

_SCRIPTY = {"script", "style", "noscript", "template"}
_ROWS = ("jsonl", "csv", "tsv")


@dataclass(frozen=True)
class Limits:
    min_title: int = 10
    max_title: int = 60
    min_body: int = 50
    max_body: int | None = None  # no maximum by default: a long article is still an article

    def title_ok(self, t: str | None) -> bool:
        return t is not None and self.min_title <= len(t) <= self.max_title


@dataclass
class Outcome:
    """What happened to one record: `reason is None` means clean."""

    id: str
    source: str
    title: str | None
    body: str | None
    fixes: list[str]
    reason: str | None = None
    detail: str = ""
    original: object = None
    raw_b64: str | None = None


def _messy_whitespace(text: str, count_blank_lines: bool) -> bool:
    """Indentation, trailing or doubled spaces, tabs -- and blank lines, unless markup removal made them."""
    text = text.strip("\r\n")  # keep the first line's indentation: it is the dirt
    if messy_lines(text):
        return True
    # a whitespace-only line is messy already: what is left of a blank line is an empty one
    return count_blank_lines and (not text or "\n\n" in text)


def _plain(text: str, fixes: set[str]) -> str:
    """Markup inside a text field (a scraper that kept the HTML) -> its text, via the parser."""
    if looks_like_markup(text):
        text, dropped, other = strip_markup(text)
        if other:
            fixes.add("html_extracted")
        if dropped & _SCRIPTY:
            fixes.add("script_removed")
        if dropped - _SCRIPTY:
            fixes.add("boilerplate_removed")
    return text


def _repair(text: str, fixes: set[str]) -> str:
    """Mojibake first (ftfy needs the C1 characters that mojibake is made of), then controls."""
    text, changed = repair_mojibake(text)
    if changed:
        fixes.add("mojibake_repaired")
    text, changed = strip_controls(text)
    if changed:
        fixes.add("control_chars_removed")
    return text


def _swapped(title: str | None, body: str | None, limits: Limits) -> bool:
    """Title and body exchanged: the 'title' reads like a body and the 'body' like a title.

    A real title is at most max_title chars and a real body at least min_body,
    so a title twice as long as a one-line, title-sized body is no accident."""
    if title is None or body is None:
        return False
    t, b = title.strip(), body.strip()
    return len(t) >= 2 * len(b) and "\n" not in b and limits.title_ok(normalize_title(b)) and len(t) >= limits.min_body


def clean_record(rec: RawRecord, limits: Limits = Limits()) -> Outcome:
    """Decoded record -> extracted, repaired, normalised and validated record."""
    out = Outcome(rec.id, rec.source, None, None, list(rec.fixes), rec.reason, rec.detail, rec.original, rec.raw_b64)
    if rec.reason:
        return out
    fixes = set(rec.fixes)
    title, body = rec.title, rec.body
    if rec.kind == "html":
        page = extract_article(_repair(rec.body or "", fixes))
        title, body = page.title, page.body
        fixes.add("html_extracted")
    else:
        title = _repair(title, fixes) if title is not None else None
        body = _repair(body, fixes) if body is not None else ""
        if rec.kind in _ROWS and _swapped(title, body, limits):
            title, body = body, title
            fixes.add("fields_swapped")
        title = _plain(title, fixes) if title is not None else None
        markup = looks_like_markup(body)
        body = _plain(body, fixes)
        # extracted HTML is laid out by the parser, not by the crawl: only text fields count
        if _messy_whitespace(body, count_blank_lines=not markup):
            fixes.add("whitespace_normalized")
    if title is not None:
        title = normalize_title(title)
    body, dropped = drop_furniture(normalize_body(body))
    fixes.update(dropped)
    out.title, out.body = title or None, body
    if has_damage(title or "") or has_damage(body):
        return _reject(out, fixes, "mojibake", f"{rec.source}: U+FFFD or mojibake that ftfy cannot undo")
    return _check_lengths(out, fixes, limits)


def _check_lengths(out: Outcome, fixes: set[str], limits: Limits) -> Outcome:
    t, b = out.title, out.body or ""
    if not t:
        return _reject(out, fixes, "title_missing", f"{out.source}: no title")
    if len(t) < limits.min_title:
        return _reject(out, fixes, "title_too_short", f"title has {len(t)} chars < {limits.min_title}")
    if len(t) > limits.max_title:
        return _reject(out, fixes, "title_too_long", f"title has {len(t)} chars > {limits.max_title}")
    if len(b) < limits.min_body:
        return _reject(out, fixes, "body_too_short", f"body has {len(b)} chars < {limits.min_body}")
    if limits.max_body is not None and len(b) > limits.max_body:
        return _reject(out, fixes, "body_too_long", f"body has {len(b)} chars > {limits.max_body}")
    out.fixes = sorted(fixes)
    return out


def _reject(out: Outcome, fixes: set[str], reason: str, detail: str) -> Outcome:
    out.fixes, out.reason, out.detail = sorted(fixes), reason, detail
    return out
