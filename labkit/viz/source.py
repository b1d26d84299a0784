"""Show the code that ran: a function, or the lines between two marker comments, read at run time.

The notebooks never paste code by hand; they call

    show_source("labkit.training.trainer", marker="fix:set_epoch")   # the lines between the markers
    show_source("labkit.distributed.env:rank_device")                # one function, by qualified name
    show_diff(pitfall_text, fix_text)                                # a pitfall/fix pair as a unified diff

A marker region is delimited by two comment lines in labkit's own code path::

    # [fix:set_epoch]
    ...the lines the notebook shows...
    # [/fix:set_epoch]

Sources are read from the module's file with `ast` (nothing is imported, so showing
`labkit.serving.triton` does not need PyTriton). A missing module, function or marker raises
`LookupError` naming it: a rename breaks `tests/test_source.py`, never silently a notebook.
In Jupyter the text is rendered with syntax highlighting (`IPython.display.Code`); elsewhere it
is printed. Every function also returns the text, so tests can read it.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import inspect
import re
import textwrap
from pathlib import Path

from labkit.i18n import _

MARKER_LINE = re.compile(r"^\s*# \[/?[\w:.-]+\]\s*$")  # a marker comment line, hidden from what is shown


def module_file(module: str) -> Path:
    """The source file of `module` (found, not imported)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        raise LookupError(f"no module {module!r}: {exc}") from None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise LookupError(f"no Python source for module {module!r}")
    return Path(spec.origin)


def _qualname_lines(path: Path, qualname: str) -> tuple[int, int]:
    """1-based first (decorators included) and last line of `qualname` (e.g. `Trainer.backward`) in `path`."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    node = None
    for part in qualname.split("."):
        node = next(
            (
                n
                for n in body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == part
            ),
            None,
        )
        if node is None:
            raise LookupError(f"{path.name}: no function or class {qualname!r} (missing part {part!r})")
        body = node.body
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return first, node.end_lineno


def _region(text: str, marker: str, where: str) -> str:
    lines = text.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.strip() == f"# [{marker}]"]
    ends = [i for i, ln in enumerate(lines) if ln.strip() == f"# [/{marker}]"]
    if len(starts) != 1 or len(ends) != 1:
        raise LookupError(
            f"{where}: marker '# [{marker}]' ... '# [/{marker}]' found {len(starts)}/{len(ends)} "
            "times, expected exactly once each"
        )
    if ends[0] <= starts[0]:
        raise LookupError(f"{where}: '# [/{marker}]' comes before '# [{marker}]'")
    return "\n".join(lines[starts[0] + 1 : ends[0]])


def _clean(text: str) -> str:
    kept = [ln for ln in text.splitlines() if not MARKER_LINE.match(ln)]
    return textwrap.dedent("\n".join(kept)).strip("\n")


def source(target, marker: str | None = None, pattern: str | None = None, context: int = 0) -> str:
    """The source text of `target`, optionally narrowed.

    target: an object (function, class, module), `"module"` or `"module:Qualified.name"`.
    marker: keep only the lines between `# [marker]` and `# [/marker]` (exactly one pair must exist).
    pattern: keep only lines matching this regex, with `context` lines either side (at least one must match).
    Marker comment lines are removed from the result and the text is dedented.
    """
    if isinstance(target, str):
        mod, _colon, qual = target.partition(":")
        path = module_file(mod)
        text = path.read_text(encoding="utf-8")
        where = f"{mod}" + (f":{qual}" if qual else "")
        if qual:
            a, b = _qualname_lines(path, qual)
            text = "\n".join(text.splitlines()[a - 1 : b])
    else:
        where = getattr(target, "__qualname__", getattr(target, "__name__", repr(target)))
        try:
            text = inspect.getsource(target)
        except (OSError, TypeError) as exc:
            raise LookupError(f"no source for {where}: {exc}") from None
    if marker:
        text = _region(text, marker, where)
    if pattern:
        lines = text.splitlines()
        hits = [i for i, ln in enumerate(lines) if re.search(pattern, ln)]
        if not hits:
            raise LookupError(f"{where}: no line matches {pattern!r}")
        keep = sorted({j for i in hits for j in range(max(0, i - context), min(len(lines), i + context + 1))})
        text = "\n".join(lines[j] for j in keep)
    out = _clean(text)
    if not out.strip():
        raise LookupError(f"{where}: the selected source is empty")
    return out


def without(text: str, pattern: str) -> str:
    """`text` minus the lines matching `pattern`: the pitfall version of a fix, for `show_diff`."""
    kept = [ln for ln in text.splitlines() if not re.search(pattern, ln)]
    if len(kept) == len(text.splitlines()):
        raise LookupError(f"no line matches {pattern!r}: nothing to remove")
    return "\n".join(kept)


def _display(text: str, language: str, title: str | None) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import Code, Markdown, display

        shell = get_ipython()
        if shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell":
            if title:
                display(Markdown(f"**{title}**"))
            display(Code(text, language=language))
            return
    except ImportError:
        pass
    if title:
        print(f"# --- {title}")
    print(text)


def show_source(
    target, marker: str | None = None, pattern: str | None = None, context: int = 0, title: str | None = None
) -> str:
    """Display (and return) `source(target, marker, pattern, context)`; the title defaults to where it lives."""
    text = source(target, marker, pattern, context)
    if title is None:
        title = target if isinstance(target, str) else getattr(target, "__qualname__", "")
        title = f"{title}  [{marker}]" if marker else title
    _display(text, "python", title)
    return text


def show_diff(pitfall: str, fix: str, title: str | None = None, labels=None) -> str:
    """Display (and return) a unified diff from the pitfall's code to the fix's code (both plain text); `labels`
    name the two sides in the diff's header (default: "pitfall" and "fix", in the course language)."""
    if labels is None:
        labels = (_("pitfall"), _("fix"))
    diff = "\n".join(difflib.unified_diff(pitfall.splitlines(), fix.splitlines(), *labels, lineterm="", n=3))
    if not diff:
        raise LookupError("pitfall and fix are identical: there is no change to show")
    _display(diff, "diff", title)
    return diff
