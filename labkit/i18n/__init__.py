"""The course's languages: one source (English), translations in catalogs that cannot go stale.

`_()` translates a message a learner reads (a check's hint, a report heading) into the course language;
`N_()` marks a message defined before the language is known (a quiz option) for `_()` to translate where it is
shown. Both are gettext's names, so the strings read as they always did and an extractor finds them
(`labkit.i18n.messages`). Notebook prose and the strings a notebook's code shows live in one catalog per
notebook (`labkit.i18n.notebooks`); `labkit course i18n build` writes `notebooks/zh_CN/` from them.

The language, first match wins: `$LABKIT_LANG` (set by `labkit course run --lang`), the workshop release's
marker (`labkit course workshop --lang`), a folder named after a language on the way up from the cwd (a
kernel started beside `notebooks/zh_CN/NN.ipynb`), else English.
"""

from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

SOURCE = "en"
LANGUAGES = ("en", "zh_CN")
TRANSLATIONS = tuple(lang for lang in LANGUAGES if lang != SOURCE)
CATALOGS = Path(__file__).resolve().parent  # <lang>/messages/*.json and <lang>/notebooks/*.json


class UnknownLanguage(ValueError):
    pass


def check_language(lang: str) -> str:
    if lang not in LANGUAGES:
        raise UnknownLanguage(f"unknown course language {lang!r}: choose one of {', '.join(LANGUAGES)}")
    return lang


# the language found without $LABKIT_LANG, per working directory: finding it walks up from the cwd and reads the
# release's marker, once -- `_()` asks for every message it translates
_FOUND: dict[str, str] = {}


def language() -> str:
    """The course language now (see the module's docstring for the order).

    `$LABKIT_LANG` is read on every call, so setting it (or `using(...)`) takes effect at once; the marker and
    the folders are looked at once per working directory."""
    env = os.environ.get("LABKIT_LANG")
    if env:
        return check_language(env)
    cwd = os.getcwd()
    if cwd not in _FOUND:
        _FOUND[cwd] = _find_language()
    return _FOUND[cwd]


def _find_language() -> str:
    """The release marker's language, else a folder named after a language on the way up from the cwd, else
    English."""
    from labkit.paths import RELEASE_MARKER, project_root

    marker = project_root() / RELEASE_MARKER
    if marker.is_file():
        try:
            lang = json.loads(marker.read_text(encoding="utf-8")).get("language", SOURCE)
        except (OSError, json.JSONDecodeError):
            lang = SOURCE
        if lang in LANGUAGES:
            return lang
    here = Path.cwd().resolve()
    for p in (here, *here.parents):
        if p.name in TRANSLATIONS:
            return p.name
    return SOURCE


@contextmanager
def using(lang: str | None):
    """The course language is `lang` inside the block (for this process and the kernels it starts); None: unchanged.

    The languages found from the folders are looked at again after the block (it may have written a release)."""
    if lang is None:
        yield
        return
    old = os.environ.get("LABKIT_LANG")
    os.environ["LABKIT_LANG"] = check_language(lang)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("LABKIT_LANG", None)
        else:
            os.environ["LABKIT_LANG"] = old
        _FOUND.clear()


@lru_cache(maxsize=None)
def message_table(lang: str) -> dict[str, str]:
    """Every translated message of `lang`: msgid (the English text) -> translation."""
    out: dict[str, str] = {}
    for path in sorted((CATALOGS / lang / "messages").glob("*.json")):
        out.update({k: v for k, v in json.loads(path.read_text(encoding="utf-8"))["messages"].items() if v})
    return out


def _(msgid: str) -> str:
    """`msgid` in the course language (English, or when no translation exists, the English itself)."""
    lang = language()
    if lang == SOURCE:
        return msgid
    return message_table(lang).get(msgid, msgid)


def N_(msgid: str) -> str:
    """Mark `msgid` for translation where it is shown (`_(...)` there); returns it unchanged."""
    return msgid


@lru_cache(maxsize=None)
def notebook_catalog(lang: str, notebook: str) -> dict:
    path = CATALOGS / lang / "notebooks" / f"{notebook}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def claim(notebook: str, name: str, lang: str | None = None) -> str:
    """A claim's displayed text: its name (the key in results.json, the same in every edition) translated by
    the notebook's catalog."""
    lang = lang or language()
    if lang == SOURCE:
        return name
    claims = notebook_catalog(lang, notebook).get("claims", {})
    if claims.get(name):
        return claims[name]
    # a name the notebook formats (f"{nproc}-process run ..."): its catalog key holds `{}` where the values go
    for key, text in claims.items():
        if "{}" in key and text:
            m = re.fullmatch("(.+?)".join(map(re.escape, key.split("{}"))), name, re.S)
            if m:
                parts = text.split("{}")
                return "".join(p + v for p, v in zip(parts, m.groups())) + parts[-1]
    return name
