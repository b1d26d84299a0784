"""`labkit clean --engine datatrove` (2 tasks on 2 local worker processes) decides exactly as `labkit clean`.

Both run in the test on the same input -- the near-duplicate stage may change, the
agreement may not: the same clean rows, the same rejected ids with the same reasons
and details (which original a duplicate points at), nothing lost.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from labkit.cli import main as labkit

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # several worker processes per stage


def _rows(paths) -> list[dict]:
    rows = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            rows.extend(json.loads(line) for line in f)
    return rows


def _same_decisions(inputs: list[str], tmp_path: Path) -> dict:
    local, dist = tmp_path / "local", tmp_path / "datatrove"
    assert labkit(["clean", *inputs, "--out", str(local), "--quiet"]) == 0
    assert (
        labkit(
            ["clean", *inputs, "--out", str(dist), "--engine", "datatrove", "--workers", "2", "--tasks", "2", "--quiet"]
        )
        == 0
    )
    want_clean, want_rej = _rows([local / "clean.jsonl"]), _rows([local / "rejects.jsonl"])
    assert len(list((dist / "clean").glob("*.jsonl"))) == 2  # two shards, two tasks
    got_clean = _rows(sorted((dist / "clean").glob("*.jsonl")))
    got_rej = _rows(sorted((dist / "rejects").glob("*.jsonl")))

    def key(r):
        return json.dumps(r, sort_keys=True, ensure_ascii=False)

    assert Counter(r["id"] for r in got_clean) == Counter(r["id"] for r in want_clean)
    assert Counter((r["id"], r["reason"], r["detail"]) for r in got_rej) == Counter(
        (r["id"], r["reason"], r["detail"]) for r in want_rej
    )
    assert Counter(map(key, got_clean)) == Counter(map(key, want_clean))  # whole rows, not only ids
    assert Counter(map(key, got_rej)) == Counter(map(key, want_rej))
    # one serialiser per row (labkit.cleaning.rows): the same lines, byte for byte
    lines = lambda paths: Counter(ln for p in paths for ln in p.read_bytes().splitlines(keepends=True))  # noqa: E731
    assert lines(sorted((dist / "clean").glob("*.jsonl"))) == lines([local / "clean.jsonl"])
    assert lines(sorted((dist / "rejects").glob("*.jsonl"))) == lines([local / "rejects.jsonl"])
    report = json.loads((dist / "report.json").read_text(encoding="utf-8"))
    want = json.loads((local / "report.json").read_text(encoding="utf-8"))
    assert report["records"] == want["records"] == report["clean"] + report["rejected"] == len(got_clean) + len(got_rej)
    assert report["reasons"] == want["reasons"] and report["fixes"] == want["fixes"]
    assert not (dist / ".work").exists()  # intermediate files removed after a successful run
    return want


def test_datatrove_engine_matches_labkit_clean_on_the_sample_crawl(tmp_path):
    want = _same_decisions([str(REPO / "data_samples" / "crawl")], tmp_path)
    assert want["reasons"].get("duplicate", 0) >= 10  # exact and near duplicates across shards are exercised


def test_datatrove_engine_matches_labkit_clean_on_a_generated_dump(tmp_path):
    assert labkit(["corpus", "make", "--n", "300", "--seed", "7", "--out", str(tmp_path / "dump")]) == 0
    want = _same_decisions([str(tmp_path / "dump" / "crawl")], tmp_path)
    assert want["reasons"].get("duplicate", 0) > 0


def test_engine_options_are_checked(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        labkit(["clean", str(REPO / "data_samples" / "crawl"), "--out", str(tmp_path / "x"), "--engine", "spark"])
    assert exc.value.code == 2
    assert labkit(["clean", str(REPO / "data_samples" / "crawl"), "--out", str(tmp_path / "x"), "--tasks", "2"]) == 2
    assert "--engine datatrove" in capsys.readouterr().err
