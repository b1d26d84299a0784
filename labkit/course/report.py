"""`runs/report.md` and `runs/report.html`: what each notebook proved.

Built from the files in the results directory, so a report written after a
partial run (`--only 03`) still shows the earlier notebooks' last results.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from labkit.i18n import N_, _, claim, using
from labkit.results import read_run

KINDS = {"pitfall": N_("pitfall"), "fix": N_("fix")}  # the tag's text; the kind itself is a key
STATUS_MARK = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "not run": "—"}


def collect(out: Path, infos) -> list[dict]:
    rows = []
    for info in infos:
        run = read_run(out / info.stem)
        status = run.status or {"status": "not run", "seconds": 0, "reason": ""}
        rows.append({"stem": info.stem, "title": info.title, **status, "results": run.results})
    return rows


def _fmt(x) -> str:
    s = json.dumps(x, ensure_ascii=False) if not isinstance(x, str) else x
    return s if len(s) <= 120 else s[:117] + "..."


def _cell(x) -> str:
    """Text safe inside a markdown table cell: pipes escaped, line breaks as <br>."""
    s = x if isinstance(x, str) else str(x)
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", "\n").replace("\n", "<br>")


def _name(e: dict, stem: str, lang: str | None = None) -> str:
    """An expectation's displayed name (in `lang`, default the course language), tagged with its kind (pitfall /
    fix) when it has one."""
    with using(lang):
        text = claim(stem, e["name"])
        return f"[{_(KINDS[e['kind']])}] {text}" if e.get("kind") else text


def _status(status: str) -> str:
    return {"passed": _("passed"), "failed": _("failed"), "skipped": _("skipped"), "not run": _("not run")}[status]


def render_md(rows: list[dict], profile: str) -> str:
    n = {k: sum(r["status"] == k for r in rows) for k in ("passed", "failed", "skipped", "not run")}
    lines = [
        _("# labkit course report ({profile} profile)").format(profile=profile),
        "",
        _("{passed} passed, {failed} failed, {skipped} skipped, {not_run} not run").format(
            passed=n["passed"], failed=n["failed"], skipped=n["skipped"], not_run=n["not run"]
        ),
        "",
        _("| notebook | status | seconds | expectations |"),
        "|---|---|---|---|",
    ]
    for r in rows:
        exps = (r["results"] or {}).get("expectations", [])
        ok = sum(e["passed"] for e in exps)
        lines.append(
            f"| {_cell(r['stem'])} | {STATUS_MARK[r['status']]} | {r.get('seconds', 0):.0f} | {ok}/{len(exps)} |"
        )
    for r in rows:
        lines += [
            "",
            f"## {r['stem']} — {r['title']}",
            "",
            _("Status: **{status}**").format(status=_status(r["status"]))
            + (f" ({r['seconds']:.0f} s)" if r.get("seconds") else ""),
        ]
        if r.get("reason"):
            lines += ["", "```", r["reason"], "```"]
        res = r["results"]
        if res:
            lines += ["", _("| | expectation | observed | expected |"), "|---|---|---|---|"]
            for e in res.get("expectations", []):
                lines.append(
                    f"| {'PASS' if e['passed'] else 'FAIL'} | {_cell(_name(e, r['stem']))} | "
                    f"{_cell(_fmt(e['observed']))} | {_cell(e['expected'])} |"
                )
            for x in res.get("skipped", []):
                skipped = _("skipped: {reason}").format(reason=x["reason"])
                lines.append(f"| SKIP | {_cell(claim(r['stem'], x['name']))} | — | {_cell(skipped)} |")
            if res.get("metrics"):
                lines += ["", _("Metrics: ") + ", ".join(f"`{k}` = {_fmt(v)}" for k, v in res["metrics"].items())]
    return "\n".join(lines) + "\n"


def render_html(rows: list[dict], profile: str) -> str:
    e = html.escape
    colors = {"passed": "#1a7f37", "failed": "#cf222e", "skipped": "#9a6700", "not run": "#57606a"}
    parts = [
        f"<!doctype html><meta charset='utf-8'><title>labkit report ({e(profile)})</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
        "text-align:left;vertical-align:top}pre{background:#f6f8fa;padding:8px;white-space:pre-wrap}</style>",
        "<h1>" + e(_("# labkit course report ({profile} profile)").format(profile=profile).lstrip("# ")) + "</h1>",
        "<table><tr>"
        + "".join(
            f"<th>{e(h.strip())}</th>"
            for h in _("| notebook | status | seconds | expectations |").strip("|").split("|")
        )
        + "</tr>",
    ]
    for r in rows:
        exps = (r["results"] or {}).get("expectations", [])
        parts.append(
            f"<tr><td><a href='#{e(r['stem'])}'>{e(r['stem'])}</a></td>"
            f"<td style='color:{colors[r['status']]}'><b>{e(_status(r['status']))}</b></td>"
            f"<td>{r.get('seconds', 0):.0f}</td><td>{sum(x['passed'] for x in exps)}/{len(exps)}</td></tr>"
        )
    parts.append("</table>")
    for r in rows:
        parts.append(
            f"<h2 id='{e(r['stem'])}'>{e(r['stem'])} — {e(r['title'])}</h2>"
            f"<p><b style='color:{colors[r['status']]}'>{e(_status(r['status']))}</b></p>"
        )
        if r.get("reason"):
            parts.append(f"<pre>{e(r['reason'])}</pre>")
        res = r["results"]
        if res and res.get("expectations"):
            heads = _("| | expectation | observed | expected |").strip("|").split("|")
            parts.append("<table><tr>" + "".join(f"<th>{e(h.strip())}</th>" for h in heads) + "</tr>")
            for x in res["expectations"]:
                mark = "&#10004;" if x["passed"] else "&#10008;"
                parts.append(
                    f"<tr><td>{mark}</td><td>{e(_name(x, r['stem']))}</td><td>{e(_fmt(x['observed']))}</td>"
                    f"<td>{e(x['expected'])}</td></tr>"
                )
            for x in res.get("skipped", []):
                parts.append(
                    f"<tr><td>SKIP</td><td>{e(claim(r['stem'], x['name']))}</td><td>—</td>"
                    f"<td>{e(_('skipped: {reason}').format(reason=x['reason']))}</td></tr>"
                )
            parts.append("</table>")
        if res and res.get("metrics"):
            parts.append(
                "<table><tr><th>metric</th><th>value</th></tr>"
                + "".join(f"<tr><td>{e(k)}</td><td>{e(_fmt(v))}</td></tr>" for k, v in res["metrics"].items())
                + "</table>"
            )
    return "\n".join(parts) + "\n"


def write_reports(out: Path, infos, profile: str) -> tuple[Path, Path]:
    rows = collect(out, infos)
    md, page = out / "report.md", out / "report.html"
    md.write_text(render_md(rows, profile), encoding="utf-8")
    page.write_text(render_html(rows, profile), encoding="utf-8")
    return md, page
