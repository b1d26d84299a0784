"""Before/after viewer for a cleaning run: pick a reason or a fix, step through its records.

`CleaningViewer(out_dir)` reads `clean.jsonl` / `rejects.jsonl`; the "before"
of a kept record is re-read from its source file (the pipeline's own reader,
so it is exactly what the pipeline saw), the "after" is what it wrote.
Differences are highlighted character by character (removed: red, struck
through; added: green).

In a live notebook the viewer is an ipywidgets app (dropdown + slider +
prev/next); its mime bundle also carries a static HTML rendering of the first
records of every group, which is what nbviewer/GitHub/an executed-but-closed
notebook shows when no kernel is there to drive the widgets.
"""

from __future__ import annotations

import difflib
import html
from collections import defaultdict
from pathlib import Path

from labkit.i18n import N_, _
from labkit.jsonl import read_jsonl

MAX_CHARS = 2500  # per side: diffs of whole crawled pages are unreadable and slow
_STYLE = (
    "<style>.lkv{font-family:sans-serif;font-size:13px}.lkv pre{white-space:pre-wrap;margin:0;"
    "padding:6px;background:#fafafa;border:1px solid #ddd}.lkv del{background:#fdd;color:#900}"
    ".lkv ins{background:#dfd;color:#060;text-decoration:none}.lkv td{vertical-align:top;width:50%}"
    ".lkv .meta{color:#555;margin:4px 0}</style>"
)


# a group's key ("reason: <code>" / "fix: <code>") is a value (`widget(start=...)`); only its display is translated
_GROUP_LABELS = {"reason": N_("reason: {code}"), "fix": N_("fix: {code}")}


def _group_label(group: str) -> str:
    """A group's key as the learner reads it (the reason or fix code itself stays as the pipeline wrote it)."""
    kind, sep, code = group.partition(": ")
    return _(_GROUP_LABELS[kind]).format(code=code) if sep and kind in _GROUP_LABELS else group


def _read_rows(path: Path) -> list[dict]:
    return read_jsonl(path) if path.exists() else []


def _as_text(original) -> str:
    """A record as best decoded -> readable text (dict fields, csv cells, or the raw text)."""
    if original is None:
        return ""
    if isinstance(original, dict):
        return "\n".join(f"{k}: {v}" for k, v in original.items() if k in ("title", "body") or v)
    if isinstance(original, list):
        return " | ".join(str(c) for c in original)
    return str(original)


def diff_html(before: str, after: str) -> tuple[str, str]:
    """(before, after) as HTML with removed/added characters marked."""
    a, b = before[:MAX_CHARS], after[:MAX_CHARS]
    left, right = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        x, y = html.escape(a[i1:i2]), html.escape(b[j1:j2])
        if op == "equal":
            left.append(x)
            right.append(y)
        else:
            if x:
                left.append(f"<del>{x}</del>")
            if y:
                right.append(f"<ins>{y}</ins>")
    more = lambda s: "…" if len(s) > MAX_CHARS else ""  # noqa: E731
    return "".join(left) + more(before), "".join(right) + more(after)


class CleaningViewer:
    """Browse a cleaning run by reason code or fix code."""

    def __init__(self, out_dir, limit_per_group: int | None = 200):
        """`limit_per_group` records of each group are held for display (None: all of them); every record is
        counted, and a group holding fewer than it counts says so ("first 200 of 305")."""
        out = Path(out_dir)
        self.groups: dict[str, list[dict]] = defaultdict(list)
        self.counts: dict[str, int] = defaultdict(int)  # every record of the group, held or not
        self.n_records = 0  # every record the run wrote, each once

        def add(group: str, row: dict) -> None:
            self.counts[group] += 1
            if limit_per_group is None or len(self.groups[group]) < limit_per_group:
                self.groups[group].append(row)

        for row in _read_rows(out / "rejects.jsonl"):
            self.n_records += 1
            add(f"reason: {row['reason']}", row)
        for row in _read_rows(out / "clean.jsonl"):
            self.n_records += 1
            for fix in row["fixes"]:
                add(f"fix: {fix}", row)
        self.groups = dict(sorted(self.groups.items()))
        self.counts = dict(self.counts)
        self._files: dict[str, dict[str, object]] = {}

    def group_title(self, group: str) -> str:
        """A group as the dropdown and the static view name it, with the records it counts: "fix: x (305)", or
        "fix: x (first 200 of 305)" when it holds fewer than the run wrote."""
        held, total = len(self.groups[group]), self.counts[group]
        count = str(total) if held == total else _("first {held} of {total}").format(held=held, total=total)
        return f"{_group_label(group)} ({count})"

    # -- data -------------------------------------------------------------------------------
    def before(self, row: dict) -> str:
        """What the pipeline read: a reject's stored original, or a kept record re-read from its file."""
        if "reason" in row:
            return _as_text(row.get("original")) or (
                _("[raw bytes, base64]") + f" {row['raw_b64'][:400]}" if row.get("raw_b64") else ""
            )
        path = row["source"].rsplit(":", 1)[0] if not Path(row["source"]).exists() else row["source"]
        if path not in self._files:
            from labkit.cleaning.readers import read_file

            self._files[path] = {r.id: r.original for r in read_file(Path(path), Path(path).name)}
            self._files[path].update({r.source: r.original for r in read_file(Path(path), Path(path).name)})
        recs = self._files[path]
        return _as_text(recs.get(row["source"], recs.get(row["id"])))

    @staticmethod
    def after(row: dict) -> str:
        if "reason" in row:
            return _("[rejected: {reason}]").format(reason=row["reason"]) + f" {row.get('detail', '')}"
        return f"title: {row['title']}\nbody: {row['body']}"

    def record_html(self, group: str, i: int) -> str:
        rows = self.groups[group]
        row = rows[i]
        if "reason" in row:  # a reject has no "after" text to compare: show the input and the verdict
            left, right = html.escape(self.before(row)[:MAX_CHARS]), html.escape(self.after(row))
        else:
            left, right = diff_html(self.before(row), self.after(row))
        fixes = ", ".join(row.get("fixes") or []) or _("none")
        where = _("record {i} of {n}").format(i=i + 1, n=self.counts[group])
        if len(rows) < self.counts[group]:
            where += " " + _("(the first {held} are shown)").format(held=len(rows))
        fixed = _("fixes: {fixes}").format(fixes=html.escape(fixes))
        return (
            f"{_STYLE}<div class='lkv'><div class='meta'><b>{html.escape(_group_label(group))}</b> — {where} · "
            f"id <code>{html.escape(str(row['id']))}</code> · {fixed}</div>"
            f"<table><tr><th>{_('before (as read)')}</th><th>{_('after (as written)')}</th></tr>"
            f"<tr><td><pre>{left}</pre></td><td><pre>{right}</pre></td></tr></table></div>"
        )

    # -- views ------------------------------------------------------------------------------
    def to_html(self, per_group: int = 2) -> str:
        """Static view: the first `per_group` records of every group (no kernel needed)."""
        parts = [
            "<h4>"
            + _("Cleaning run: {records} records in {groups} groups (static view)").format(
                records=self.n_records, groups=len(self.groups)
            )
            + "</h4>"
        ]
        for g, rows in self.groups.items():
            body = "".join(self.record_html(g, i) for i in range(min(per_group, len(rows))))
            parts.append(f"<details><summary>{html.escape(self.group_title(g))}</summary>{body}</details>")
        return "".join(parts)

    def widget(self, start: str | None = None):
        """The interactive viewer: group dropdown, record slider, prev/next buttons."""
        import ipywidgets as W

        if not self.groups:
            return W.HTML("<i>" + _("nothing to show: the run wrote no records") + "</i>")
        names = list(self.groups)
        pick = W.Dropdown(
            options=[(self.group_title(g), g) for g in names],
            value=start if start in self.groups else names[0],
            description=_("show"),
        )
        slider = W.IntSlider(min=1, max=len(self.groups[pick.value]), value=1, description=_("record"))
        prev, nxt = W.Button(description=_("◀ prev")), W.Button(description=_("next ▶"))
        view = W.HTML()

        def render(*_args):
            view.value = self.record_html(pick.value, slider.value - 1)

        def regroup(change):
            slider.max, slider.value = len(self.groups[change["new"]]), 1
            render()

        pick.observe(regroup, names="value")
        slider.observe(render, names="value")
        prev.on_click(lambda _b: setattr(slider, "value", max(1, slider.value - 1)))
        nxt.on_click(lambda _b: setattr(slider, "value", min(slider.max, slider.value + 1)))
        render()
        return W.VBox([W.HBox([pick, prev, nxt, slider]), view])

    def _repr_mimebundle_(self, include=None, exclude=None):
        """Live kernel: the widget; anywhere else: the static HTML in the same bundle."""
        bundle = {"text/html": self.to_html(), "text/plain": f"CleaningViewer({len(self.groups)} groups)"}
        try:
            w = self.widget()
            bundle.update(w._repr_mimebundle_(include=include, exclude=exclude) or {})
            bundle["text/html"] = self.to_html()
        except Exception:  # noqa: BLE001 -- no ipywidgets / no comm: the static view still works
            pass
        return bundle
