"""Notebook catalogs: the translation of one English notebook, keyed by nbformat cell id.

`labkit/i18n/<lang>/notebooks/NN_name.json`::

    {"notebook": "03_memory_and_accumulation",
     "title": {"en": "...", "sha": "...", "zh": "..."},             # the notebook's title (metadata)
     "cells": {
       "<markdown cell id>": {"en": "...", "sha": "...", "zh": "..."},
       "<code cell id>": {"strings": [{"en": "\\"batch size\\"", "zh": "\\"批大小\\""},
                                      {"en": "\\"peak_mb\\"", "zh": null}],
                          "comments": [{"en": "# longest bodies first ...", "zh": "# 最长的正文排在前面 ..."}]}},
     "claims": {"<claim name>": "<its text in zh_CN>"}}

A markdown cell's entry keeps the English it translates (`en`, for a reviewer and for the stale diff) and its
hash (`sha`). A code cell is never translated by hand: the generated cell is the English cell with each listed
string literal replaced (`zh: null` keeps the English: a key, a column name, a code word). Every string literal a
code cell holds that reads as prose must carry a decision, so a new `print("...")` cannot slip through
untranslated; so must every comment of two words or more (`# why this line` is written for the reader too).
Claim names are never replaced (they are the keys in results.json, the same in every edition):
their displayed text comes from `claims`, through `labkit.i18n.claim`.
"""

from __future__ import annotations

import ast
import copy
import difflib
import hashlib
import io
import json
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import nbformat

from labkit.i18n import CATALOGS

CLAIM_CALLS = ("expect", "skip")  # res.expect(name, ...), res.skip(name, reason): the first argument is a key
WORD = re.compile(r"[A-Za-z]{2,}")


def is_prose(text: str) -> bool:
    """Two words with a space between: what a reader reads (`src_len`, `peak_mb[{}]`, `labkit.train` are names)."""
    return len(WORD.findall(text)) >= 2 and any(ch.isspace() for ch in text.strip())


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def catalog_path(stem: str, lang: str) -> Path:
    return CATALOGS / lang / "notebooks" / f"{stem}.json"


def load_catalog(stem: str, lang: str) -> dict:
    path = catalog_path(stem, lang)
    if not path.is_file():
        return {"notebook": stem, "title": {}, "cells": {}, "claims": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def save_catalog(cat: dict, lang: str) -> Path:
    path = catalog_path(cat["notebook"], lang)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cat, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


# ---- what a code cell shows a reader ---------------------------------------------------------------------------


def _literals(tree: ast.AST) -> list[ast.expr]:
    """Every string literal (plain or f-string), outermost only: an f-string's parts are not literals of their own."""
    out: list[ast.expr] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            out.append(node)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def _claim_names(tree: ast.AST) -> set[int]:
    """ids of the literal nodes that are claim names (first argument of `<x>.expect` / `<x>.skip`)."""
    out = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in CLAIM_CALLS
            and node.args
        ):
            out.add(id(node.args[0]))
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Tuple):  # for name in ("a claim", "another"):
            body = ast.unparse(node)
            if any(f".{c}(" in body for c in CLAIM_CALLS):
                out.update(id(e) for e in node.iter.elts)
    return out


DISPLAY_CALLS = {"print", "set_xlabel", "set_ylabel", "set_title", "suptitle", "xlabel", "ylabel", "title"}
DISPLAY_KWARGS = {"label", "title", "xlabel", "ylabel", "description"}
# a claim's shown text after its name: res.expect(name, observed, condition, EXPECTED), res.skip(name, REASON)
CLAIM_TEXT = {"expect": (3, "expected"), "skip": (1, "reason")}


def _displayed(tree: ast.AST) -> set[int]:
    """ids of the literals handed straight to something that shows them (a print, an axis label, a legend entry,
    a claim's expected value or skip reason): one word there is read too ("step", "records", "< 1e-5 relative")."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func in DISPLAY_CALLS:
                out.update(id(a) for a in node.args)
            out.update(id(k.value) for k in node.keywords if k.arg in DISPLAY_KWARGS)
            if isinstance(node.func, ast.Attribute) and func in CLAIM_TEXT:
                pos, kw = CLAIM_TEXT[func]
                shown = [node.args[pos]] if len(node.args) > pos else []
                shown += [k.value for k in node.keywords if k.arg == kw]
                # the literals themselves, or those of a conditional (`"a" if x else "b"`) or a concatenation
                out.update(id(lit) for arg in shown for lit in _literals(arg))
    return out


def _text(node: ast.expr) -> str:
    if isinstance(node, ast.Constant):
        return node.value
    return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)


def _parse(source: str) -> ast.AST | None:
    # notebook magics (%time, !cmd) are not Python: those lines are blanked, offsets kept
    lines = [("#" + ln[1:]) if ln.lstrip().startswith(("%", "!")) else ln for ln in source.split("\n")]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def code_strings(source: str) -> tuple[list[str], list[str]]:
    """(reader strings: the source segments of literals that read as prose, claim names) of a code cell."""
    tree = _parse(source)
    if tree is None:
        return [], []
    names = _claim_names(tree)
    claims = [_text(node) for node in _literals(tree) if id(node) in names]  # a formatted name's key holds `{}`
    readable = list(dict.fromkeys(seg for _, _, seg in _reader_literals(source, tree)))
    return readable, claims


def _placeholders(literal: str) -> list[str] | None:
    """The expressions an f-string formats, in order ([] for a plain string); None when not a string literal."""
    try:
        node = ast.parse(literal.strip(), mode="eval").body
    except SyntaxError:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return []
    if isinstance(node, ast.JoinedStr):
        return sorted(ast.unparse(v) for v in node.values if isinstance(v, ast.FormattedValue))
    return None


def _reader_literals(source: str, tree: ast.AST | None = None) -> list[tuple[int, int, str]]:
    """(start, end, source segment) of each literal a reader reads, by position in `source`: prose, or a word handed
    to something that shows it -- never a claim name.  The same text elsewhere in the cell (a column looked up by
    the label a print also shows, a claim name) is a different literal and stays as it is."""
    tree = tree or _parse(source)
    if tree is None:
        return []
    lines = source.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    def offset(lineno: int, col: int) -> int:  # ast's columns count UTF-8 bytes
        return starts[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode())

    names, shown = _claim_names(tree), _displayed(tree)
    out = []
    for node in _literals(tree):
        if id(node) in names:
            continue
        text = _text(node)
        if is_prose(text) or (id(node) in shown and WORD.search(text)):
            a, b = offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)
            out.append((a, b, source[a:b]))
    return out


def _comments(source: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of each comment a reader reads: two words at least, not nbgrader's `### BEGIN SOLUTION`
    markers, not a `# noqa` for the linter, not a notebook magic line."""
    lines = source.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    code = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in lines)
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            text = tok.string
            if (
                tok.type == tokenize.COMMENT
                and not text.startswith("###")
                and "noqa" not in text
                and is_prose(text[1:])
            ):
                a = starts[tok.start[0] - 1] + tok.start[1]
                out.append((a, a + len(text), text))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    return out


def code_comments(source: str) -> list[str]:
    return list(dict.fromkeys(text for _, _, text in _comments(source)))


def translated_code(source: str, strings: list[dict], comments: list[dict] = ()) -> str:
    """`source` with each reader literal and comment that has a translation replaced, by position: only the
    occurrences `code_strings` reads as reader text (a claim name, or a key with a shown label's text, stays)."""
    zh = {s["en"]: s["zh"] for s in [*strings, *comments] if s.get("zh") is not None}
    spans = sorted(
        [(a, b, seg) for a, b, seg in _reader_literals(source) if seg in zh]
        + [(a, b, seg) for a, b, seg in _comments(source) if seg in zh]
    )
    out, last = [], 0
    for a, b, seg in spans:
        if a >= last:
            out += [source[last:a], zh[seg]]
            last = b
    return "".join(out) + source[last:]


# ---- extract, build, check -------------------------------------------------------------------------------------


def carry(before: dict, en: str, accepted: bool = False, digest=None) -> dict:
    """The entry for English `en` given the entry `before`: a translation whose English changed keeps the English
    and hash it translates, so `check` calls it stale with the diff, until the translator who updated it accepts
    the English now (`labkit course i18n extract --accept KEY`)."""
    digest = digest or sha
    if before.get("zh") and before.get("sha") != digest(en) and not accepted:
        return {"en": before.get("en", ""), "sha": before.get("sha", ""), "zh": before["zh"]}
    return {"en": en, "sha": digest(en), "zh": before.get("zh", "")}


def extract(nb_path: Path, lang: str, accept: frozenset[str] = frozenset()) -> dict:
    """The catalog for one notebook with every cell, literal and claim it needs; what was translated is kept
    (stale where its English changed, unless its cell id, or `title`, is in `accept`)."""
    nb = nbformat.read(nb_path, as_version=4)
    old = load_catalog(nb_path.stem, lang)
    cat = {"notebook": nb_path.stem, "title": {}, "cells": {}, "claims": {}}
    title = nb.metadata.get("labkit", {}).get("title", "")
    cat["title"] = carry(old.get("title") or {}, title, "title" in accept)
    for cell in nb.cells:
        before = old.get("cells", {}).get(cell.id, {})
        if cell.cell_type == "markdown":
            cat["cells"][cell.id] = carry(before, cell.source, cell.id in accept)
        elif cell.cell_type == "code":
            readable, claims = code_strings(cell.source)
            known = {s["en"]: s for s in before.get("strings", [])}
            strings = [{"en": seg, "zh": known[seg]["zh"] if seg in known else ""} for seg in readable]
            said = {c["en"]: c for c in before.get("comments", [])}
            comments = [{"en": c, "zh": said[c]["zh"] if c in said else ""} for c in code_comments(cell.source)]
            entry = ({"strings": strings} if strings else {}) | ({"comments": comments} if comments else {})
            if entry:
                cat["cells"][cell.id] = entry
            for name in claims:
                cat["claims"][name] = old.get("claims", {}).get(name, "")
    # a formatted name's instances translated whole ("replicas identical after training: ..."): kept beside the
    # template, which covers the instances nobody wrote out
    templates = [re.compile("(.+?)".join(map(re.escape, k.split("{}"))), re.S) for k in cat["claims"] if "{}" in k]
    for name, text in old.get("claims", {}).items():
        if name not in cat["claims"] and text and any(t.fullmatch(name) for t in templates):
            cat["claims"][name] = text
    return cat


@dataclass
class Problem:
    kind: str  # stale | missing | unused | not-a-string | generated-differs | code-differs
    where: str  # notebook / cell id
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.kind}: {self.message}"


def _diff(old: str, new: str) -> str:
    return "\n".join(
        difflib.unified_diff(old.splitlines(), new.splitlines(), "translated English", "English now", lineterm="")
    )


def check_catalog(nb_path: Path, lang: str) -> list[Problem]:
    """What keeps this notebook's catalog from being complete and current."""
    nb = nbformat.read(nb_path, as_version=4)
    stem = nb_path.stem
    if not catalog_path(stem, lang).is_file():
        return [Problem("missing", stem, f"no catalog {catalog_path(stem, lang)}: run `labkit course i18n extract`")]
    cat = load_catalog(stem, lang)
    problems: list[Problem] = []
    title = nb.metadata.get("labkit", {}).get("title", "")
    t = cat.get("title") or {}
    if title and not t.get("zh"):
        problems.append(Problem("missing", f"{stem} title", f"no translation of {title!r}"))
    elif title and t.get("sha") != sha(title):
        problems.append(Problem("stale", f"{stem} title", _diff(t.get("en", ""), title)))
    ids = set()
    for cell in nb.cells:
        ids.add(cell.id)
        where = f"{stem} cell {cell.id}"
        entry = cat["cells"].get(cell.id, {})
        if cell.cell_type == "markdown":
            if not entry.get("zh"):
                problems.append(Problem("missing", where, f"no translation of: {cell.source[:80]!r}"))
            elif entry.get("sha") != sha(cell.source):
                problems.append(
                    Problem(
                        "stale",
                        where,
                        "the English changed after it was translated:\n" + _diff(entry.get("en", ""), cell.source),
                    )
                )
        elif cell.cell_type == "code":
            readable, claims = code_strings(cell.source)
            decided = {s["en"]: s for s in entry.get("strings", [])}
            for seg in readable:
                if seg not in decided or decided[seg].get("zh") == "":
                    problems.append(
                        Problem("missing", where, f"no decision for the string {seg[:80]} (translate, or null to keep)")
                    )
            comments = code_comments(cell.source)
            said = {c["en"]: c for c in entry.get("comments", [])}
            for c in comments:
                if c not in said or said[c].get("zh") == "":
                    problems.append(
                        Problem("missing", where, f"no decision for the comment {c[:80]} (translate, or null to keep)")
                    )
            for c in entry.get("comments", []):
                if c["en"] not in comments:
                    near = difflib.get_close_matches(c["en"], comments, n=1, cutoff=0.5)
                    problems.append(
                        Problem(
                            "stale",
                            where,
                            f"the comment {c['en'][:80]} is no longer in the cell"
                            + (f"; now:\n{_diff(c['en'], near[0])}" if near else ""),
                        )
                    )
                elif c.get("zh") and (not c["zh"].startswith("#") or "\n" in c["zh"]):
                    problems.append(Problem("not-a-string", where, f"{c['zh'][:80]} must be a one-line # comment"))
            for s in entry.get("strings", []):
                if s["en"] not in cell.source:
                    near = difflib.get_close_matches(s["en"], readable, n=1, cutoff=0.5)
                    problems.append(
                        Problem(
                            "stale",
                            where,
                            f"the string {s['en'][:80]} is no longer in the cell"
                            + (f"; now:\n{_diff(s['en'], near[0])}" if near else ""),
                        )
                    )
                elif s.get("zh") and _placeholders(s["zh"]) != _placeholders(s["en"]):
                    problems.append(
                        Problem(
                            "not-a-string",
                            where,
                            f"{s['zh'][:80]} must be a string literal formatting the same values as {s['en'][:80]}",
                        )
                    )
            for name in claims:
                text = cat.get("claims", {}).get(name)
                if not text:
                    problems.append(Problem("missing", where, f"no text for the claim {name!r}"))
                elif text.count("{}") != name.count("{}"):
                    problems.append(
                        Problem("not-a-string", where, f"{text!r} must hold {name.count('{}')} {{}} like {name!r}")
                    )
    for cid in set(cat["cells"]) - ids:
        problems.append(
            Problem("unused", f"{stem} cell {cid}", "the catalog translates a cell the notebook no longer has")
        )
    return problems


def build_notebook(nb_path: Path, lang: str) -> nbformat.NotebookNode:
    """The `lang` edition of one English notebook: markdown from the catalog, code with its reader strings replaced,
    the same cell ids, the same metadata (its title translated)."""
    nb = nbformat.read(nb_path, as_version=4)
    cat = load_catalog(nb_path.stem, lang)
    out = copy.deepcopy(nb)
    out.metadata.setdefault("labkit", {})["language"] = lang
    title = (cat.get("title") or {}).get("zh")
    if title:
        out.metadata["labkit"]["title"] = title
    for cell in out.cells:
        entry = cat["cells"].get(cell.id, {})
        if cell.cell_type == "markdown" and entry.get("zh"):
            cell.source = entry["zh"]
        elif cell.cell_type == "code" and (entry.get("strings") or entry.get("comments")):
            cell.source = translated_code(cell.source, entry.get("strings", []), entry.get("comments", []))
    return out


def edition_dir(notebooks_dir: Path, lang: str) -> Path:
    return notebooks_dir / lang


def render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def build(notebooks_dir: Path, lang: str, only: list[Path] | None = None) -> list[Path]:
    out_dir = edition_dir(notebooks_dir, lang)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for p in english_notebooks(notebooks_dir) if only is None else only:
        target = out_dir / p.name
        text = render(build_notebook(p, lang))
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


def english_notebooks(notebooks_dir: Path) -> list[Path]:
    return sorted(p for p in notebooks_dir.glob("[0-9][0-9]_*.ipynb"))


def check_edition(notebooks_dir: Path, lang: str, only: list[Path] | None = None) -> list[Problem]:
    """Every catalog complete and current, every generated notebook as the catalogs give it, every code cell
    the English code (only reader strings differ)."""
    problems: list[Problem] = []
    for p in english_notebooks(notebooks_dir) if only is None else only:
        problems += check_catalog(p, lang)
        target = edition_dir(notebooks_dir, lang) / p.name
        if not target.is_file():
            problems.append(Problem("generated-differs", str(target), "missing: run `labkit course i18n build`"))
            continue
        if target.read_text(encoding="utf-8") != render(build_notebook(p, lang)):
            problems.append(
                Problem(
                    "generated-differs",
                    str(target),
                    "differs from what its catalog gives: run `labkit course i18n build`",
                )
            )
        problems += code_differs(p, target, lang)
    return problems


def code_differs(english: Path, translated: Path, lang: str) -> list[Problem]:
    """A translated notebook's code cells must be the English code with only listed string literals replaced."""
    en = nbformat.read(english, as_version=4)
    tr = nbformat.read(translated, as_version=4)
    cat = load_catalog(english.stem, lang)
    problems = []
    en_cells = {c.id: c for c in en.cells}
    for cell in tr.cells:
        if cell.cell_type != "code":
            continue
        src = en_cells.get(cell.id)
        where = f"{translated.name} cell {cell.id}"
        if src is None or src.cell_type != "code":
            problems.append(Problem("code-differs", where, "a code cell the English notebook does not have"))
            continue
        entry = cat["cells"].get(cell.id, {})
        expected = translated_code(src.source, entry.get("strings", []), entry.get("comments", []))
        if cell.source != expected:
            diff = "\n".join(
                difflib.unified_diff(
                    expected.splitlines(),
                    cell.source.splitlines(),
                    "the English code, translated",
                    "this notebook",
                    lineterm="",
                )
            )
            problems.append(Problem("code-differs", where, "the code is not the English cell's:\n" + diff))
    if [c.id for c in tr.cells] != [c.id for c in en.cells]:
        problems.append(
            Problem("code-differs", translated.name, "the cells are not the English notebook's, in its order")
        )
    return problems
