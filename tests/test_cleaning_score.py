"""Scoring against labels, and the benchmark command on a tiny dump."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from labkit.cleaning.score import score


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def test_precision_recall_per_code_and_recall_per_defect(tmp_path: Path):
    labels = [
        {"id": "a", "defects": ["encoding:gbk"], "expected": "clean", "expected_fixes": ["decoded:gb18030"]},
        {"id": "b", "defects": ["title_too_short"], "expected": "title_too_short", "expected_fixes": []},
        {"id": "c", "defects": ["near_duplicate"], "expected": "duplicate", "expected_fixes": []},
        {"id": "d", "defects": [], "expected": "clean", "expected_fixes": []},
        {"id": "e", "defects": ["meta_charset_lie"], "expected": "clean", "expected_fixes": []},
    ]
    _write(
        tmp_path / "clean.jsonl",
        [
            {"id": "a", "title": "t", "body": "b", "source": "s", "fixes": ["decoded:gb18030"]},
            {"id": "c", "title": "t", "body": "b", "source": "s", "fixes": []},  # missed duplicate
            {"id": "e", "title": "t", "body": "b", "source": "s", "fixes": ["charset_mismatch"]},
        ],
    )
    _write(
        tmp_path / "rejects.jsonl",
        [
            {"id": "b", "source": "s", "reason": "title_too_short", "detail": "", "fixes": []},
            {"id": "d", "source": "s", "reason": "title_too_short", "detail": "", "fixes": []},  # wrongly rejected
        ],
    )
    r = score(labels, tmp_path)
    assert r["accuracy"] == pytest.approx(3 / 5)
    assert r["by_code"]["title_too_short"] == {"precision": 0.5, "recall": 1.0, "tp": 1, "fp": 1, "fn": 0}
    assert r["by_code"]["duplicate"]["recall"] == 0.0 and math.isnan(r["by_code"]["duplicate"]["precision"])
    assert r["by_code"]["charset_mismatch"]["precision"] == 1.0
    assert r["by_defect"]["near_duplicate"] == {"n": 1, "recall": 0.0}
    assert r["confusion"]["clean -> title_too_short"] == 1
    assert {e["id"] for e in r["errors"]} == {"c", "d"}


@pytest.mark.slow
@pytest.mark.timeout(170)
def test_bench_command_reports_figures(tmp_path: Path, capsys):
    from labkit.cli import main

    out = tmp_path / "bench.json"
    assert main(["bench", "clean", "--n", "80", "--seed", "2", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    names = [r["run"] for r in result["runs"]]
    assert names == ["naive recipe", "pipeline, 1 worker", "pipeline, 2 workers"]
    assert result["identical_outputs"] is True
    for r in result["runs"]:
        assert r["records_per_s"] > 0 and r["mb_per_s"] > 0
    assert result["runs"][1]["accuracy"] >= 0.95
    assert set(result["detectors"]) == {"chardet", "charset_normalizer"}
    assert "records/s" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_whole_process_bench_races_labkit_clean_against_the_naive_recipe(tmp_path: Path, capsys):
    """Issue 28's measure: `labkit clean --workers 1` and the naive recipe each a fresh process, alternating,
    spawn to exit; medians per size and the ratio against its goal."""
    from labkit.cleaning.bench import WHOLE_GOAL
    from labkit.cli import main

    out = tmp_path / "whole.json"
    assert main(["bench", "clean", "--whole-process", "--sizes", "30,60", "--repeat", "2", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [(r["articles"], r["run"]) for r in result["runs"]] == [(n, r) for n in (30, 60) for r in ("naive", "clean")]
    for r in result["runs"]:
        assert r["seconds"] > 0 and r["cpu_s"] > 0 and r["records"] >= r["articles"] and len(r["seconds_each"]) == 2
    commands = {r["run"]: r["command"] for r in result["runs"]}
    assert " clean CRAWL --out OUT --workers 1" in commands["clean"] and "naive_load" in commands["naive"]
    by = {(r["articles"], r["run"]): r["seconds"] for r in result["runs"]}
    assert result["targets"]["ratios"]["vs_naive_60"] == round(by[(60, "naive")] / by[(60, "clean")], 3)
    assert result["targets"]["goals"] == {"vs_naive_30": WHOLE_GOAL, "vs_naive_60": WHOLE_GOAL} and WHOLE_GOAL == 1.2
    assert "vs_naive_60" in capsys.readouterr().out
    assert main(["bench", "clean", "--whole-process", "--scaling"]) == 2  # two different runs: one line, exit 2
    assert "choose one" in capsys.readouterr().err
