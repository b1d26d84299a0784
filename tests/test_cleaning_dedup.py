"""Near-duplicate detection on real generated articles: folding, templates, bounded work, the scaling bench."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from labkit.cleaning.dedup import (
    BANDS,
    BUCKET_CAP,
    Deduper,
    _folded_codepoints,
    fold_for_signature,
    jaccard,
    signature,
    signatures,
)
from labkit.cleaning.readers import RawRecord
from labkit.cleaning.validate import clean_record
from labkit.corpus import generate


def _clean(rid: str, title: str, body: str):
    out = clean_record(RawRecord(id=rid, source=rid, kind="jsonl", title=title, body=body))
    assert out.reason is None, (rid, out.reason, out.detail)
    return out


def _reprinted(body: str, rng: random.Random) -> str:
    """A copy as another site reprints it: half-width commas/colons, stray and doubled spaces, a footer."""
    text = body.replace("，", ",").replace("：", ":")
    chars = list(text)
    for _ in range(12):
        i = rng.randrange(1, len(chars))
        if chars[i - 1] != "\n":
            chars.insert(i, rng.choice((" ", "  ", "\u3000")))
    return "".join(chars) + "\n本文来源:新华网,转载请注明出处.\n责任编辑:王伟"


def test_fold_is_for_the_signature_only():
    assert fold_for_signature("据悉，这一消息（完）引起了“关注”。\n\t下 一段") == '据悉,这一消息(完)引起了"关注".下一段'
    for text in ("据悉，这 一\u3000消息", "ab", "", "表情😀，符号"):
        assert "".join(map(chr, _folded_codepoints(text))) == fold_for_signature(text)
    out = _clean(
        "a", "常州报告支原体肺炎病例增加", "据常州市疾控中心消息，常州一周内报告病例2947例，比上周增加33.6%。" * 2
    )
    assert "，" in out.body and "," not in out.body  # the kept text keeps its CJK punctuation


def test_signatures_in_batches_are_the_per_record_values():
    """`signatures` signs a batch together (the records' shingles side by side in one block); the values must be
    each record's own -- no k-gram across two records, a long record in pieces, an empty body signing its title --
    and the ones the per-record code computed before batching (the digest below is of those)."""
    import hashlib

    pairs = [(a.title, a.body) for a in generate(60, seed=4)]
    pairs += [("", ""), ("标题", ""), ("标题", "短文"), ("t", "\u3000 \n\t"), ("t", "页" * 9000 + "文" * 5000)]
    pairs += [("t", "a😀b\ud800c，。" * 40)]
    one_by_one = [signature(t, b) for t, b in pairs]
    for size in (2, 7, 64, len(pairs)):
        assert [s for i in range(0, len(pairs), size) for s in signatures(pairs[i : i + size])] == one_by_one, size
    digest = hashlib.sha256()
    for s in signatures(pairs[:7]) + signatures(pairs[7:]):
        digest.update(s.exact + s.minhash + b"".join(k.to_bytes(8, "little") for k in s.bands))
    assert digest.hexdigest()[:16] == "edfb8efea70ccbaf"
    assert signatures([]) == []


def test_reprinted_copy_with_half_width_punctuation_spaces_and_footer_is_a_duplicate():
    rng = random.Random(3)
    arts = generate(40, seed=11)
    for art in arts:
        orig = _clean(art.id, art.title, art.body)
        copy = _clean(art.id + "-copy", art.title, _reprinted(art.body, rng))
        assert "本文来源" not in copy.body and "责任编辑" not in copy.body  # footers go before dedup
        assert copy.body != orig.body
        d = Deduper()
        assert d.check(orig.id, signature(orig.title, orig.body)) is None
        got = d.check(copy.id, signature(copy.title, copy.body))
        assert got is not None and got[0].startswith("near") and got[1] == orig.id, (art.id, got)


def test_distinct_articles_sharing_templates_are_all_kept():
    arts = generate(600, seed=5)
    outs = [_clean(a.id, a.title, a.body) for a in arts]
    sigs = [signature(o.title, o.body) for o in outs]
    # they do share templates: filler sentences in common, and band collisions (LSH candidates)
    sentences = [set(o.body.replace("\n", "").split("。")) for o in outs[:80]]
    shared = sum(len(a & b) >= 2 for a, b in itertools.combinations(sentences, 2))
    assert shared > 300
    d = Deduper()
    assert [d.check(o.id, s) for o, s in zip(outs, sigs)] == [None] * len(outs)
    assert d.verified > 0  # candidates were compared and rejected, not missed


def test_work_per_record_is_bounded_by_the_bucket_cap():
    # a crawl that is all template: every record shares most of its shingles with every other
    fillers = [a.body for a in generate(30, seed=7)]
    rng = random.Random(0)
    d = Deduper()
    checked = []
    for i in range(3000):
        body = (
            "".join(rng.sample(fillers, 2))
            + f"第{i}号通告："
            + "".join(rng.choice("甲乙丙丁戊己庚辛") for _ in range(30))
        )
        before = d.verified
        d.check(str(i), signature("标题" * 5, body))
        checked.append(d.verified - before)
    assert max(checked) <= BANDS * BUCKET_CAP
    assert np.mean(checked[-500:]) <= np.mean(checked[500:1000]) * 1.5 + 5  # flat, not growing with the crawl


def test_decisions_depend_only_on_the_order_of_checks():
    arts = generate(200, seed=9)
    rng = random.Random(1)
    rows = [(a.id, a.title, a.body) for a in arts] + [(a.id + "c", a.title, _reprinted(a.body, rng)) for a in arts[:50]]
    sigs = [signature(t, b) for _, t, b in rows]
    runs = []
    for _ in range(2):
        d = Deduper()
        runs.append([d.check(rid, s) for (rid, _, _), s in zip(rows, sigs)])
    assert runs[0] == runs[1]
    assert sum(r is not None for r in runs[0]) == 50
    assert jaccard(sigs[0].minhash, sigs[0].minhash) == 1.0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_scaling_bench_reports_sizes_runs_memory_and_targets(tmp_path):
    from labkit.cleaning.bench import SCALING_RUNS, run_scaling, scaling_markdown

    result = run_scaling([30, 60], seed=1, repeat=1, work=tmp_path, log=lambda m: None)
    assert [(r["articles"], r["run"]) for r in result["runs"]] == [(n, r) for n in (30, 60) for r in SCALING_RUNS]
    for r in result["runs"]:
        assert r["records_per_s"] > 0 and r["mb_per_s"] > 0 and r["peak_rss_mb"] > 0
        assert r["accuracy"] is None if r["run"] == "naive" else r["accuracy"] >= 0.95
    assert result["identical_outputs"] == {30: True, 60: True}
    assert set(result["targets"]["ratios"]) == {
        "linear_1_worker",
        "linear_2_workers",
        "vs_naive_30",
        "vs_naive_60",
        "speedup_2_workers_30",
        "speedup_2_workers_60",
    }
    assert "| 60 |" in scaling_markdown(result).replace(",", "")
