"""The course's claims as JUnit XML, the format CI dashboards read (`labkit course run --junit FILE`).

One `<testsuite>` per notebook that ran (classname = the notebook), one `<testcase>` per claim
(name = the claim's name):

* a failed claim is a `<failure>` whose message is "expected ..., observed ...";
* a demonstration the notebook skipped (GPU-only) is a `<skipped>` with its reason, and so is a
  notebook whose needs this machine cannot meet (one test case, "runs on this machine");
* a notebook that stopped for any other reason than a failed claim (an exception, a timeout, a dead
  kernel, no results.json) gets an `<error>` test case, "runs to the end", naming the cell that raised
  (papermill marks it in the executed copy) and the exception;
* the notebook's metrics, profile and seed are the suite's `<properties>`.

A claim's time is its cell's run time (papermill records each cell's duration in the executed copy;
the claims printed by one cell share it), else the notebook's time shared among its test cases.
Built from the same files as the report (`<out>/<stem>/status.json`, `results.json`, the executed
notebook), with the standard library's ElementTree (docs/decisions.md §18).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from labkit.atomic import atomic_write_text
from labkit.course.report import collect

# XML 1.0 forbids most control characters; tracebacks carry ANSI colour codes
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
MARKS = ("[PASS] ", "[FAIL] ", "[SKIP] ")  # how Results.expect / Results.skip print a claim


def _text(x) -> str:
    s = x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)
    return _NOT_XML.sub("", _ANSI.sub("", s))


def _short(x, n: int = 300) -> str:
    s = _text(x)
    return s if len(s) <= n else s[: n - 3] + "..."


def _seconds(x: float) -> str:
    return f"{max(float(x or 0), 0.0):.3f}"


def executed_cells(path: Path) -> list[dict]:
    """The code cells of papermill's executed copy: execution count, duration, whether it raised,
    source and printed text.  [] when the copy is missing or unreadable."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    cells = []
    for c in nb.get("cells", []):
        if c.get("cell_type") != "code":
            continue
        pm = c.get("metadata", {}).get("papermill", {})
        printed = "".join(
            "".join(o.get("text", "")) if isinstance(o.get("text"), list) else o.get("text", "")
            for o in c.get("outputs", [])
            if o.get("output_type") == "stream"
        )
        src = c.get("source", "")
        cells.append(
            {
                "count": c.get("execution_count"),
                "duration": pm.get("duration"),
                "raised": pm.get("exception") is True,
                "source": "".join(src) if isinstance(src, list) else src,
                "printed": printed,
            }
        )
    return cells


def _claim_cells(cells: list[dict], names: list[str]) -> dict[str, dict]:
    """claim name -> the cell that printed it (Results prints `[PASS] name: ...` as it records)."""
    found = {}
    for cell in cells:
        for line in cell["printed"].splitlines():
            if line[:7] in MARKS:
                rest = line[7:]
                for name in names:
                    if name not in found and rest.startswith(name + ":"):
                        found[name] = cell
    return found


def _case(suite: ET.Element, stem: str, name: str, seconds: float) -> ET.Element:
    return ET.SubElement(suite, "testcase", name=_text(name), classname=stem, time=_seconds(seconds))


def _cell_label(cell: dict | None) -> str:
    if not cell:
        return "no cell marked as failed in the executed copy"
    first = next((ln for ln in cell["source"].splitlines() if ln.strip()), "")
    return f"cell In[{cell['count']}] ({_short(first, 80)})"


def _error(row: dict, cell: dict | None) -> tuple[str, str, str]:
    """(type, message, text) of a notebook that did not run to the end; `cell` is the one that raised."""
    reason = _text(row.get("reason") or "the runner recorded no reason")
    head = reason.splitlines()[0] if reason else ""
    ename = head.split(":", 1)[0] if re.fullmatch(r"[A-Za-z_][\w.]*", head.split(":", 1)[0]) else "RunnerError"
    message = f"{_cell_label(cell)}: {_short(head, 400)}"
    text = reason + (f"\n\n--- {_cell_label(cell)} ---\n{_text(cell['source'])}" if cell else "")
    return ename, message, text


def _stopped_by_a_claim(row: dict) -> bool:
    """The run failed because `finish()` raised on failed claims (they are the failures), not a crash."""
    res = row.get("results") or {}
    return (row.get("reason") or "").startswith("ExpectationFailed") and any(
        not e["passed"] for e in res.get("expectations", [])
    )


def notebook_suite(row: dict, executed: Path) -> ET.Element:
    """One notebook's `<testsuite>` from its report row (labkit.course.report.collect) and executed copy."""
    stem, res = row["stem"], row.get("results") or {}
    suite = ET.Element("testsuite", name=stem)
    props = ET.SubElement(suite, "properties")
    meta = {"title": row.get("title"), "profile": res.get("profile"), "seed": res.get("seed")}
    for k, v in [*meta.items(), *res.get("metrics", {}).items()]:
        if v is not None:
            ET.SubElement(props, "property", name=_text(k), value=_text(v))
    exps, skips = res.get("expectations", []), res.get("skipped", [])
    cells = executed_cells(executed) if row["status"] != "skipped" else []
    crashed = row["status"] == "failed" and not _stopped_by_a_claim(row)
    n_cases = len(exps) + len(skips) + (row["status"] == "skipped") + crashed
    share = float(row.get("seconds") or 0) / max(n_cases, 1)
    where = _claim_cells(cells, [e["name"] for e in exps])
    per_cell: dict[int, int] = {}
    for cell in where.values():
        per_cell[id(cell)] = per_cell.get(id(cell), 0) + 1

    def claim_time(name: str) -> float:
        cell = where.get(name)
        if cell and cell["duration"] is not None:
            return float(cell["duration"]) / per_cell[id(cell)]
        return share

    for e in exps:
        case = _case(suite, stem, e["name"], claim_time(e["name"]))
        kind = f"[{e['kind']}] " if e.get("kind") else ""
        detail = f"{kind}{_text(e['name'])}\nexpected: {_text(e['expected'])}\nobserved: {_text(e['observed'])}" + (
            f"\nrecorded in {_cell_label(where[e['name']])}" if e["name"] in where else ""
        )
        if e["passed"]:
            ET.SubElement(case, "system-out").text = detail
        else:
            fail = ET.SubElement(
                case,
                "failure",
                type="ExpectationFailed",
                message=f"expected {_short(e['expected'])}, observed {_short(e['observed'])}",
            )
            fail.text = detail
    for x in skips:
        ET.SubElement(_case(suite, stem, x["name"], 0), "skipped", message=_text(x["reason"]))
    if row["status"] == "skipped":
        ET.SubElement(_case(suite, stem, "runs on this machine", 0), "skipped", message=_text(row.get("reason", "")))
    if crashed:
        cell = next((c for c in cells if c["raised"]), None)
        ename, message, text = _error(row, cell)
        case = _case(suite, stem, "runs to the end", (cell or {}).get("duration") or share)
        ET.SubElement(case, "error", type=ename, message=message).text = text
    failures = sum(not e["passed"] for e in exps)
    suite.set("tests", str(n_cases))
    suite.set("failures", str(failures))
    suite.set("errors", str(int(crashed)))
    suite.set("skipped", str(len(skips) + (row["status"] == "skipped")))
    suite.set("time", _seconds(row.get("seconds")))
    return suite


def build(out: Path, infos, profile: str) -> ET.ElementTree:
    """`<testsuites>` for the notebooks among `infos` that have a status in `out` (notebooks not run are left out)."""
    root = ET.Element("testsuites", name=f"labkit course ({profile} profile)")
    for row in collect(Path(out), infos):
        if row["status"] != "not run":
            root.append(notebook_suite(row, Path(out) / row["stem"] / f"{row['stem']}.ipynb"))
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(sum(int(s.get(key)) for s in root)))
    root.set("time", _seconds(sum(float(s.get("time")) for s in root)))
    tree = ET.ElementTree(root)
    ET.indent(tree)
    return tree


def write_junit(path: str | Path, out: str | Path, infos, profile: str) -> Path:
    """Write the JUnit XML for `infos` (the notebooks of this run) from the results directory `out`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    xml = ET.tostring(build(Path(out), infos, profile).getroot(), encoding="unicode", xml_declaration=False)
    return atomic_write_text(path, '<?xml version="1.0" encoding="utf-8"?>\n' + xml + "\n")
