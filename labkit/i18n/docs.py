"""Translated documents: a markdown file of `docs/` in sections, each kept under the same stale check as a notebook cell.

`labkit/i18n/<lang>/docs/<name>.json`::

    {"document": "workshop.md", "sections": {"<key>": {"en": "...", "sha": "...", "zh": "..."}}}

A section runs from one heading (outside code fences) to the next; its key is its heading, slugged (the text
before the first heading is `_intro`), numbered when a heading repeats. `build` writes `docs/<lang>/<name>`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from labkit.i18n import CATALOGS
from labkit.i18n.notebooks import Problem, _diff, carry, sha

DOCUMENTS = ("workshop.md", "instructor/answers.md")  # what a learner or an instructor of the edition reads


def sections(text: str) -> list[tuple[str, str]]:
    """(key, section text) in order; the sections joined give `text` back."""
    out: list[tuple[str, list[str]]] = [("_intro", [])]
    fence = False
    seen: dict[str, int] = {}
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        if not fence and re.match(r"#{1,6} ", line):
            slug = re.sub(r"[^\w]+", "-", line.lstrip("#").strip().lower()).strip("-") or "section"
            seen[slug] = seen.get(slug, 0) + 1
            out.append((slug if seen[slug] == 1 else f"{slug}-{seen[slug]}", []))
        out[-1][1].append(line)
    return [(k, "".join(lines)) for k, lines in out if lines]


def catalog_path(name: str, lang: str) -> Path:
    return CATALOGS / lang / "docs" / f"{Path(name).stem}.json"


def load(name: str, lang: str) -> dict:
    path = catalog_path(name, lang)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"document": name, "sections": {}}


def digest(text: str) -> str:
    """A section's hash: blank lines at its end belong to the layout (a section appended below), not the text."""
    return sha(text.rstrip() + "\n")


def extract(docs_dir: Path, name: str, lang: str, accept: frozenset[str] = frozenset()) -> Path:
    old = load(name, lang)["sections"]
    cat = {"document": name, "sections": {}}
    for key, text in sections((docs_dir / name).read_text(encoding="utf-8")):
        cat["sections"][key] = carry(old.get(key, {}), text, key in accept, digest)
    path = catalog_path(name, lang)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cat, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def render(docs_dir: Path, name: str, lang: str) -> str:
    cat = load(name, lang)["sections"]
    parts = [
        cat.get(key, {}).get("zh") or text for key, text in sections((docs_dir / name).read_text(encoding="utf-8"))
    ]
    return "".join(p if p.endswith("\n") else p + "\n" for p in parts)


def present(docs_dir: Path) -> list[str]:
    """The translated documents `docs_dir` holds (a copy of the guide alone, in a test, has no instructor part)."""
    return [name for name in DOCUMENTS if (docs_dir / name).is_file()]


def build(docs_dir: Path, lang: str) -> list[Path]:
    written = []
    for name in present(docs_dir):
        target = docs_dir / lang / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render(docs_dir, name, lang), encoding="utf-8")
        written.append(target)
    return written


def check(docs_dir: Path, lang: str) -> list[Problem]:
    problems: list[Problem] = []
    for name in present(docs_dir):
        cat = load(name, lang)["sections"]
        keys = set()
        for key, text in sections((docs_dir / name).read_text(encoding="utf-8")):
            keys.add(key)
            entry, where = cat.get(key, {}), f"docs/{name} § {key}"
            if not entry.get("zh"):
                problems.append(Problem("missing", where, f"no translation of: {text[:80]!r}"))
            elif entry.get("sha") != digest(text):
                problems.append(
                    Problem(
                        "stale",
                        where,
                        "the English changed after it was translated:\n" + _diff(entry.get("en", ""), text),
                    )
                )
        for key in set(cat) - keys:
            problems.append(
                Problem("unused", f"docs/{name} § {key}", "the catalog translates a section the document no longer has")
            )
        target = docs_dir / lang / name
        if not target.is_file() or target.read_text(encoding="utf-8") != render(docs_dir, name, lang):
            problems.append(
                Problem(
                    "generated-differs",
                    str(target),
                    "differs from what its catalog gives: run `labkit course i18n build`",
                )
            )
    return problems
