"""The Simplified Chinese edition, executed headless: 00 through the command line (`labkit course run --lang zh_CN`),
three pitfall notebooks through the runner, and `-p FIX False` on one of them.

The two editions run the same code, so they must prove the same claims: the names (the keys in results.json), their
kinds and their verdicts are compared with the English run of the same notebook where one exists (test_notebooks.py
runs first), and every name must be a claim of the catalog. The learner reads Chinese: the executed notebook's claim
lines and the report are checked for it.
"""

import json
import re
from pathlib import Path

import nbformat
import pytest
from cli_helpers import LABKIT, piped
from course_runs import course_run, lock, mark_this_session, out_dir
from test_fix_switch import FIX_CLAIMS

from labkit import i18n

OUT = out_dir("zh_CN")  # the site's Chinese edition reads it (RUNS/<lang>/)
HAN = re.compile(r"[\u4e00-\u9fff]")
PITFALLS = ["03_memory_and_accumulation", "04_launching_ddp", "05_samplers_and_seeds"]


# how Results marks a claim in Chinese ([通过] ...): a line still marked [PASS] is left out, so an English mark fails
MARKS = tuple(f"[{i18n.message_table('zh_CN')[m]}]" for m in ("PASS", "FAIL", "SKIP"))


def claim_lines(executed: Path) -> list[str]:
    nb = nbformat.read(executed, as_version=4)
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    return [ln for ln in text.splitlines() if ln.startswith(MARKS)]


def assert_same_claims(stem: str, results: dict) -> None:
    claims = i18n.notebook_catalog("zh_CN", stem)["claims"]
    for e in results["expectations"] + results["skipped"]:
        assert i18n.claim(stem, e["name"], "zh_CN") != e["name"] or e["name"] in claims, (
            f"{stem}: {e['name']!r} is not a claim of the English edition"
        )
    en = course_run(stem).results  # this session's English run of the notebook (made now if no test made it yet)
    assert en, f"{stem}: the English run recorded no results"
    verdicts = {(e["name"], e.get("kind"), e["passed"]) for e in en["expectations"]}
    assert {(e["name"], e.get("kind"), e["passed"]) for e in results["expectations"]} == verdicts
    assert {s["name"] for s in results["skipped"]} == {s["name"] for s in en["skipped"]}


@pytest.mark.notebook
def test_the_chinese_start_here_through_the_command_line():
    with lock(OUT / "00_start_here"):  # course_run("00_start_here", "zh_CN") in another worker waits for it
        r = piped([LABKIT, "course", "run", "--lang", "zh_CN", "--only", "00", "--out", str(OUT), "--no-progress"], 900)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        mark_this_session(OUT / "00_start_here")
    report = (OUT / "report.md").read_text(encoding="utf-8")
    assert report.startswith("# labkit 课程报告") and "| 笔记本 | 状态 |" in report, report[:500]
    results = json.loads((OUT / "00_start_here" / "results.json").read_text(encoding="utf-8"))
    assert_same_claims("00_start_here", results)
    lines = claim_lines(OUT / "00_start_here" / "00_start_here.ipynb")
    assert lines and all(HAN.search(ln) for ln in lines), lines


@pytest.mark.notebook
@pytest.mark.parametrize("stem", PITFALLS)
def test_a_chinese_pitfall_notebook_proves_the_same_claims(stem):
    run = course_run(stem, "zh_CN")
    failed = [e for e in (run.results or {}).get("expectations", []) if not e["passed"]]
    assert run.status == "passed" and not failed, (
        f"{stem}: {run.reason}\nfailed: {json.dumps(failed, ensure_ascii=False)}"
    )
    assert_same_claims(stem, run.results)
    lines = claim_lines(OUT / stem / f"{stem}.ipynb")
    assert lines and all(HAN.search(ln) for ln in lines), [ln for ln in lines if not HAN.search(ln)]


@pytest.mark.notebook
def test_fix_off_in_chinese_fails_exactly_the_english_pins():
    stem = "03_memory_and_accumulation"
    run = course_run(stem, "zh_CN", fix=False)
    exps = run.results["expectations"]
    assert {e["name"] for e in exps if not e["passed"]} == FIX_CLAIMS[stem]
    assert run.status == "failed" and "未通过" in run.reason, run.reason[:500]
