"""Nothing is lost: every input record lands exactly once in clean.jsonl or rejects.jsonl.

Proven on a generated dirty dump (ids must equal the labels' ids) and, with
hypothesis, on random bytes under every supported extension.
"""

from __future__ import annotations

import codecs
import json
import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from labkit.cleaning import clean_paths
from labkit.cleaning.decode import sniff


def _rows(out: Path) -> list[dict]:
    rows = []
    for name in ("clean.jsonl", "rejects.jsonl"):
        with open(out / name, encoding="utf-8") as f:
            rows += [json.loads(line) for line in f]
    return rows


def test_generated_dump_every_labelled_record_exactly_once(tmp_path: Path):
    from labkit.corpus import generate
    from labkit.corpus.dump import write_dump

    info = write_dump(generate(150, 3), tmp_path / "dump", 3)
    report = clean_paths([info.crawl_dir], tmp_path / "out")
    got = Counter(r["id"] for r in _rows(tmp_path / "out"))
    with open(info.labels_path, encoding="utf-8") as f:
        want = Counter(json.loads(line)["id"] for line in f)
    assert got == want
    assert report["records"] == info.n_records == report["clean"] + report["rejected"]


# random bytes, plus bytes that look a little like the real thing
_chunks = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=80).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.text(max_size=40).map(lambda t: t.encode("gb18030", "replace")),
    st.sampled_from(
        [
            b"\n",
            b"\r\n",
            b",",
            b"\t",
            b'"',
            b"\x00",
            b"\xef\xbb\xbf",
            b"\xff\xfe",
            b"{",
            b"}",
            b'{"title": "',
            b'", "body": "',
            b"title,body\n",
            b"id,title,body\n",
            b"<html><title>",
            b"<script>",
            "标题新闻报道内容".encode(),
            "標題".encode("big5"),
            b"\x1f\x8b\x08",
        ]
    ),
)
_files = st.lists(
    st.tuples(
        st.sampled_from([".jsonl", ".csv", ".tsv", ".html", ".htm", ".txt", ".bin"]),
        st.lists(_chunks, max_size=12).map(b"".join),
    ),
    min_size=1,
    max_size=4,
)


def _check_conserved(files: list[tuple[str, bytes]]) -> list[dict]:
    """Clean `files` (extension, bytes) and check that each record came out once; the rows."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "in"
        root.mkdir()
        for i, (ext, data) in enumerate(files):
            (root / f"f{i}{ext}").write_bytes(data)
        report = clean_paths([root], Path(tmp) / "out")
        rows = _rows(Path(tmp) / "out")
        assert report["records"] == len(rows) == report["clean"] + report["rejected"]
        sources = Counter(r["source"] for r in rows)
        assert all(n == 1 for n in sources.values()), "a record came out twice"
        for r in rows:
            assert (r.get("reason") is None) == ("reason" not in r)
            if "reason" not in r:
                assert r["title"] and len(r["title"]) >= 10 and len(r["body"]) >= 50
        for i, (ext, data) in enumerate(files):
            path = str(root / f"f{i}{ext}")
            mine = [s for s in sources if s == path or s.startswith(path + ":")]
            if ext in (".html", ".htm", ".txt"):
                assert mine == [path]
            elif ext == ".bin":
                assert mine == []
            elif ext == ".jsonl":
                numbers = sorted(int(s.rsplit(":", 1)[1]) for s in mine)
                hint, _ = sniff(data[:65536])
                if not (hint or "").startswith(("utf-16", "utf-32")):
                    # a UTF-8 BOM marks the file's encoding, it is not a character of line 1 (Notepad saves an
                    # empty UTF-8 file as the BOM alone): a line that is blank behind it is blank
                    text = data[len(codecs.BOM_UTF8) :] if data.startswith(codecs.BOM_UTF8) else data
                    lines = text.split(b"\n")
                    if lines and lines[-1] == b"":
                        lines.pop()
                    want = [n for n, ln in enumerate(lines, 1) if ln.strip()]
                    assert numbers == want
            else:  # csv/tsv: data rows numbered 1..k, each exactly once
                numbers = sorted(int(s.rsplit(":", 1)[1]) for s in mine)
                assert numbers == list(range(1, len(numbers) + 1))
        return rows


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=_files)
@example(files=[(".jsonl", codecs.BOM_UTF8)])  # the fresh-clone run's falsifying example
def test_random_bytes_conserve_records(files):
    _check_conserved(files)


def test_a_bom_is_not_a_record_and_line_numbers_count_from_it():
    """The fresh-clone run's falsifying example, and its neighbours: a .jsonl holding only a UTF-8 BOM has no
    record (like an empty one); behind a BOM, a blank first line is skipped and the records keep their
    physical line numbers; a .txt holding only a BOM is still one (rejected) record, as its kind says."""
    record = b'{"title": "' + "标题新闻报道内容标题".encode() + b'", "body": "' + "正文".encode() * 30 + b'"}'
    rows = _check_conserved(
        [
            (".jsonl", codecs.BOM_UTF8),
            (".jsonl", codecs.BOM_UTF8 + b" \r\n" + record + b"\n\n" + record + b"\n"),
            (".txt", codecs.BOM_UTF8),
        ]
    )
    by_file = sorted((Path(r["source"]).name, r.get("reason"), "bom_stripped" in r["fixes"]) for r in rows)
    assert by_file == [
        ("f1.jsonl:2", None, True),
        ("f1.jsonl:4", "duplicate", True),
        ("f2.txt", "title_missing", True),
    ]
