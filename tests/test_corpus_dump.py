"""The dump's labels are an answer key: check every label against the bytes actually written."""

import csv
import hashlib
import io
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import ftfy
import pytest
from bs4 import BeautifulSoup

from labkit.corpus import generate
from labkit.codes import FIXES, REASONS
from labkit.corpus.dump import DEFAULT_RATES, load_labels, write_dump


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    out = tmp_path_factory.mktemp("dump")
    info = write_dump(generate(600, seed=5), out, seed=5)
    return info, load_labels(out), {a["id"]: a for a in map(json.loads, open(out / "articles.jsonl", encoding="utf-8"))}


def _squeeze(text: str) -> str:
    return re.sub(r"[\s\x00-\x1f\x7f]", "", text)


def _encoding(label: dict) -> str:
    encs = [d.split(":", 1)[1] for d in label["defects"] if d.startswith("encoding:")]
    return encs[0] if encs else "utf-8"


def _records(info, labels):
    """(label, title, body, raw-fields) read back from crawl/ with the encoding the label names."""
    by_file = defaultdict(list)
    for lab in labels:
        by_file[lab["file"]].append(lab)
    for rel, labs in by_file.items():
        raw = (info.crawl_dir / rel).read_bytes()
        if labs[0]["expected"] == "not_text":
            yield labs[0], None, None, raw
            continue
        text = raw.decode(_encoding(labs[0]))
        if rel.endswith(".html"):
            soup = BeautifulSoup(text, "lxml")
            h1 = soup.find("h1")
            content = soup.find("div", class_="article-content")
            blocks = content.find_all(["script", "style"])
            assert len(blocks) == sum(d.startswith("script_") for d in labs[0]["defects"]), rel
            for s in blocks:
                s.decompose()
            assert "var " not in content.get_text() and "{" not in content.get_text(), rel
            yield labs[0], (h1.get_text() if h1 else None), content.get_text("\n").strip(), text
        elif rel.endswith(".txt"):
            title, _, body = text.partition("\n")
            yield labs[0], title, body.rstrip("\n"), text
        elif rel.endswith(".jsonl"):
            lines = text.split("\n")[:-1]
            assert len(lines) == len(labs), rel
            for lab, line in zip(labs, lines):
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    yield lab, None, None, line
                    continue
                yield lab, obj.get("title"), obj.get("body"), obj
        else:
            rows = list(csv.reader(io.StringIO(text)))
            assert len(rows) - 1 == len(labs), rel
            for lab, row in zip(labs, rows[1:]):
                yield lab, None, None, (rows[0], row)


def test_ids_unique_and_every_file_labelled(dump):
    info, labels, _ = dump
    assert len({lab["id"] for lab in labels}) == len(labels) == info.n_records
    files = {p.relative_to(info.crawl_dir).as_posix() for p in info.crawl_dir.rglob("*") if p.is_file()}
    assert files == {lab["file"] for lab in labels}
    assert not (info.crawl_dir / "labels.jsonl").exists()
    for lab in labels:
        assert lab["expected"] == "clean" or lab["expected"] in REASONS
        assert set(lab["expected_fixes"]) <= set(FIXES)
        if ":" in lab["id"]:
            assert lab["id"].startswith(lab["file"] + ":")


def test_default_rates_reject_about_thirty_percent(dump):
    info, labels, _ = dump
    assert 0.22 <= info.reject_share <= 0.38, info.expected
    kinds = Counter(d.split(":")[0] for lab in labels for d in lab["defects"])
    for k in (
        "encoding",
        "meta_charset_lie",
        "script_multiline",
        "script_upper",
        "boilerplate",
        "mojibake_latin-1",
        "mojibake_cp1252",
        "replacement_chars",
        "csv_swapped",
        "csv_misaligned",
        "json_truncated",
        "title_missing",
        "title_too_short",
        "title_too_long",
        "body_too_short",
        "exact_duplicate",
        "near_duplicate",
        "binary_file",
        "control_chars",
        "whitespace",
    ):
        assert kinds[k] > 0, k
    assert {e for lab in labels for e in [_encoding(lab)]} >= {"utf-8", "gbk", "gb18030", "utf-8-sig"}


def test_each_label_matches_the_bytes(dump):
    info, labels, truth = dump
    seen = Counter()
    for lab, title, body, raw in _records(info, labels):
        art = truth[lab["article_id"]]
        exp = lab["expected"]
        seen[exp] += 1
        if exp == "not_text":
            assert raw[:2] == b"\x1f\x8b"
        elif exp == "malformed_record":
            assert title is None and isinstance(raw, str)
        elif exp == "misaligned_fields":
            header, row = raw
            assert len(row) != len(header)
        elif isinstance(raw, tuple):  # csv row
            header, row = raw
            assert len(row) == len(header)
            rec = dict(zip(header, row))
            title, body = rec["title"], rec["body"]
            if "fields_swapped" in lab["expected_fixes"]:
                title, body = body, title
        if title is None and exp not in ("title_missing", "not_text", "malformed_record", "misaligned_fields"):
            raise AssertionError(lab)
        if exp == "title_missing":
            assert not title
        elif exp == "title_too_short":
            assert 0 < len(title) < 10
        elif exp == "title_too_long":
            assert len(title) > 60
        elif exp == "body_too_short":
            assert len(body) < 50
        elif exp == "mojibake":
            assert body.count("\ufffd") > 0.1 * len(body)
        elif exp == "clean":
            if "mojibake_repaired" in lab["expected_fixes"]:
                title, body = ftfy.fix_encoding(title), ftfy.fix_encoding(body)
            if "decoded:big5" in lab["expected_fixes"]:
                assert len(title) == len(art["title"])  # traditional characters, same length
                continue
            assert title == art["title"], lab
            lead = art["body"].split("。")[0]
            assert _squeeze(lead) in _squeeze(body), lab
    assert seen["clean"] > 0.6 * len(labels)


def test_duplicates_follow_a_clean_original(dump):
    _, labels, _ = dump
    order = {lab["id"]: i for i, lab in enumerate(labels)}
    first = {}
    for lab in labels:
        if lab["expected"] == "clean":
            first.setdefault(lab["article_id"], order[lab["id"]])
    dups = [lab for lab in labels if lab["expected"] == "duplicate"]
    assert dups
    for lab in dups:
        assert first[lab["article_id"]] < order[lab["id"]], lab


def test_deterministic_bytes(tmp_path):
    arts = generate(80, seed=2)

    def digest(d: Path) -> str:
        h = hashlib.sha256()
        for p in sorted(d.rglob("*")):
            if p.is_file():
                h.update(p.relative_to(d).as_posix().encode() + p.read_bytes())
        return h.hexdigest()

    write_dump(arts, tmp_path / "a", seed=2)
    write_dump(arts, tmp_path / "b", seed=2)
    write_dump(arts, tmp_path / "c", seed=3)
    assert digest(tmp_path / "a") == digest(tmp_path / "b") != digest(tmp_path / "c")


def test_zero_rates_give_a_clean_utf8_dump(tmp_path):
    info = write_dump(generate(120, seed=1), tmp_path, seed=1, rates={k: 0.0 for k in DEFAULT_RATES})
    labels = load_labels(tmp_path)
    assert info.reject_share == 0 and all(lab["expected"] == "clean" for lab in labels)
    assert {f for lab in labels for f in lab["expected_fixes"]} <= {"html_extracted"}


def test_bad_rates_and_reused_directory_are_clear_errors(tmp_path):
    arts = generate(5, seed=0)
    with pytest.raises(ValueError, match="unknown dirt rate 'nope'"):
        write_dump(arts, tmp_path / "x", seed=0, rates={"nope": 0.1})
    with pytest.raises(ValueError, match="within"):
        write_dump(arts, tmp_path / "x", seed=0, rates={"mojibake": 2})
    write_dump(arts, tmp_path / "y", seed=0)
    with pytest.raises(FileExistsError, match="not empty"):
        write_dump(arts, tmp_path / "y", seed=0)


def test_cli_make(tmp_path, capsys):
    from labkit.cli import main

    assert (
        main(
            [
                "corpus",
                "make",
                "--n",
                "40",
                "--seed",
                "4",
                "--out",
                str(tmp_path / "d"),
                "--rates",
                "title_missing=0.5,near_duplicate=0",
            ]
        )
        == 0
    )
    labels = load_labels(tmp_path / "d")
    assert sum(lab["expected"] == "title_missing" for lab in labels) > 5
    assert "rejects" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:  # checked while parsing, before anything is generated
        main(["corpus", "make", "--n", "5", "--out", str(tmp_path / "e"), "--rates", "bogus"])
    assert exit_.value.code == 2 and "--rates" in capsys.readouterr().err


def test_parse_rates_forms():
    from labkit.corpus.cli import parse_rates

    assert parse_rates("mojibake=0.1, title_missing=0") == {"mojibake": 0.1, "title_missing": 0.0}
    assert parse_rates('{"script": 0.5}') == {"script": 0.5}
    assert parse_rates(None) == {}
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_rates("mojibake")


def test_exports_say_where_records_landed_without_changing_them():
    """`pages` serialises and reports placements; only `layout.write_files` places records (`Rec.place`)."""
    import copy
    import random

    from labkit.corpus.pages import csv_text, jsonl_text
    from labkit.corpus.record import Rec

    arts = generate(4, seed=1)
    chunk = [
        Rec(arts[0], "jsonl", arts[0].title, arts[0].body),
        Rec(arts[1], "jsonl", None, arts[1].body, title_style="null"),
        Rec(arts[2], "jsonl", arts[2].title, arts[2].body, expected="malformed_record"),
    ]
    before = copy.deepcopy(chunk)
    text, placed = jsonl_text(chunk, "jsonl/part-0001.jsonl", True, random.Random(0))
    assert chunk == before, "a serialiser changed its records"
    # the truncated row has no readable id: the reader and the label fall back to file:row
    assert placed == [(1, "part-0001-001"), (2, "part-0001-002"), (3, None)]
    lines = text.splitlines()
    assert json.loads(lines[1])["title"] is None and len(lines) == 3

    rows = [Rec(a, "csv", a.title, a.body) for a in arts]
    rows[1].swapped, rows[2].misaligned, rows[3].misaligned = True, "extra", "missing"
    text, placed = csv_text(rows, "csv/export-0002.csv", False)
    assert placed == [(1, None), (2, None), (3, None), (4, None)]
    parsed = list(csv.reader(io.StringIO(text)))
    assert parsed[2][:2] == [arts[1].body, arts[1].title]  # swapped columns
    assert len(parsed[3]) == 5 and len(parsed[4]) == 3  # one column too many / too few
