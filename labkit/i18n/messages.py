"""The messages `labkit` shows a learner: every `_("...")` / `N_("...")` in the package, and one catalog per module.

`labkit/i18n/<lang>/messages/<module>.json` (`labkit.exercises.nb05` -> `exercises.nb05.json`)::

    {"module": "labkit.exercises.nb05", "messages": {"<the English msgid>": "<its translation>"}}

gettext's own keying: the msgid is the English text, so a changed English message is a new msgid (missing) and
its old entry is left over (stale, shown as a diff against the nearest new message).
"""

from __future__ import annotations

import ast
import difflib
import json
from pathlib import Path

from labkit.i18n import CATALOGS
from labkit.i18n.notebooks import Problem

PACKAGE = CATALOGS.parent
MARKERS = ("_", "N_")


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def msgids(path: Path) -> list[str]:
    """The msgids marked in one module, in source order (a marker around anything but a plain string is refused by
    `check`: an f-string cannot be looked up)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in MARKERS and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value not in out:
                out.append(arg.value)
    return out


def dynamic_markers(path: Path) -> list[int]:
    """Lines where `_()` wraps something that is not a plain string (an f-string, a variable)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("_", "N_") and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.JoinedStr):
                lines.append(node.lineno)
    return lines


def catalog_file(module: str, lang: str) -> Path:
    return CATALOGS / lang / "messages" / (module.removeprefix("labkit.") + ".json")


def sources(modules: list[str] | None = None) -> dict[str, list[str]]:
    """module -> its msgids, for every module that marks any (or only `modules`)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if modules is not None and module_name(path) not in modules:
            continue
        ids = msgids(path)
        if ids:
            out[module_name(path)] = ids
    return out


def extract(lang: str, modules: list[str] | None = None) -> list[Path]:
    """Write each module's catalog with every msgid it marks; translations already made are kept, left-over
    entries dropped."""
    written = []
    for module, ids in sources(modules).items():
        path = catalog_file(module, lang)
        old = json.loads(path.read_text(encoding="utf-8"))["messages"] if path.is_file() else {}
        path.parent.mkdir(parents=True, exist_ok=True)
        cat = {"module": module, "messages": {m: old.get(m, "") for m in ids}}
        path.write_text(json.dumps(cat, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        written.append(path)
    return written


def check(lang: str, modules: list[str] | None = None) -> list[Problem]:
    problems: list[Problem] = []
    found = sources(modules)
    for path in sorted(PACKAGE.rglob("*.py")):
        if modules is not None and module_name(path) not in modules:
            continue
        for line in dynamic_markers(path):
            problems.append(
                Problem(
                    "not-a-string",
                    f"{module_name(path)}:{line}",
                    '_() of an f-string: write _("... {x} ...").format(x=...)',
                )
            )
    for module, ids in found.items():
        path = catalog_file(module, lang)
        have = json.loads(path.read_text(encoding="utf-8"))["messages"] if path.is_file() else {}
        for m in ids:
            if not have.get(m):
                problems.append(Problem("missing", module, f"no translation of {m[:100]!r}"))
        for m in set(have) - set(ids):
            near = difflib.get_close_matches(m, [i for i in ids if i not in have], n=1, cutoff=0.5)
            diff = (
                "\n".join(difflib.unified_diff([m], near, "translated English", "English now", lineterm=""))
                if near
                else ""
            )
            problems.append(
                Problem("stale", module, f"{m[:100]!r} is no longer in the module" + (f":\n{diff}" if diff else ""))
            )
        for key in have:
            if have[key] and _fields(key) != _fields(have[key]):
                problems.append(
                    Problem("not-a-string", module, f"{have[key][:80]!r} must format the same fields as {key[:80]!r}")
                )
    for path in sorted((CATALOGS / lang / "messages").glob("*.json")):
        module = json.loads(path.read_text(encoding="utf-8"))["module"]
        if module not in found and (modules is None or module in modules):
            problems.append(Problem("unused", str(path.name), f"{module} marks no message any more"))
    return problems


def _fields(text: str) -> list[str]:
    import string

    try:
        return sorted(f for _, f, _, _ in string.Formatter().parse(text) if f is not None)
    except ValueError:
        return ["<unbalanced braces>"]
