"""The naive recipe is naive in exactly the story's ways, and the diagnostics see it."""

import pytest

from labkit.corpus import generate
from labkit.corpus import inspection as ins
from labkit.corpus.dirt import script_block
from labkit.corpus.dump import load_labels, write_dump
from labkit.corpus.naive import SCRIPT_RE, naive_load, strip_markup


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    out = tmp_path_factory.mktemp("naive")
    return write_dump(generate(300, seed=9), out, seed=9)


@pytest.fixture(scope="module")
def loaded(dump):
    stats: dict = {}
    return naive_load(dump.crawl_dir, stats), stats


def test_classic_script_regex_misses_multiline_and_uppercase():
    import random

    rng = random.Random(0)
    assert SCRIPT_RE.search(script_block("inline", rng))
    for kind in ("multiline", "upper"):
        block = script_block(kind, rng)
        assert not SCRIPT_RE.search(block)
        assert "var" in strip_markup(f"正文。\n{block}\n正文。")  # the JS survives as "text"


def test_naive_load_keeps_garbage_and_silently_drops_broken_lines(dump, loaded):
    recs, stats = loaded
    labels = load_labels(dump.out_dir)
    truncated = sum(lab["expected"] == "malformed_record" for lab in labels)
    assert stats["dropped_malformed"] == truncated > 0
    assert stats["records_seen"] + stats["dropped_malformed"] == len(labels)
    assert stats["kept"] == len(recs) > 0.85 * len(labels)  # keeps far more than the 70% that is clean
    ids = {lab["id"] for lab in labels}
    assert {r["id"] for r in recs} <= ids
    table = ins.noise_table(recs)
    assert table.loc["any noise", "share"] > 0.3
    assert table.loc["JavaScript", "records"] > 0 and table.loc["mojibake", "records"] > 0


def test_diagnostics_tables(dump, loaded):
    recs, _ = loaded
    sample = ins.sample_records(recs, 200, seed=1)
    assert len(sample) == 200 and ins.sample_records(recs, 200, seed=1) == sample
    lengths = ins.field_lengths(sample)
    assert set(lengths["outlier"]) >= {"ok", "title too long"}
    fffd = ins.replacement_counts(sample)
    assert (fffd["fffd"] > 0).any()
    enc = ins.encoding_histogram(dump.crawl_dir, n=None)
    assert enc["files"].sum() == dump.n_files
    assert {"utf-8", "gb18030"} <= set(enc["encoding"])
    scripts = ins.script_regex_vs_parser(dump.crawl_dir)
    assert (scripts["parser"] >= scripts["regex"]).all()
    missed = scripts["parser"].sum() - scripts["regex"].sum()
    assert missed >= scripts["multi_line"].sum() > 0


def test_the_blocks_the_regex_misses_are_found_in_any_case_and_layout(tmp_path):
    """Bug: 01's inline `re.search(...)` found no block on seed 3's pages and `.group(0)` raised on None."""
    from labkit.corpus.naive import SCRIPT_RE

    page = tmp_path / "a.html"
    page.write_text(
        '<p>x</p><script>var a=1;</script>\n<Script type="x">\nvar b=2;\n</Script >'
        '<SCRIPT LANGUAGE="JavaScript">document.write(1)</SCRIPT><p>y</p>',
        encoding="utf-8",
    )
    missed = ins.scripts_the_regex_misses(page)
    assert [m[:8] for m in missed] == ["<Script ", "<SCRIPT "] and not any(SCRIPT_RE.search(m) for m in missed)
    clean = tmp_path / "b.html"
    clean.write_text("<p>no scripts</p><script>var c=3;</script>", encoding="utf-8")
    assert ins.first_missed_script([clean]) is None  # nothing to show: no exception either
    assert ins.first_missed_script([clean, page]) == ("a.html", missed[0])


def test_naive_load_rejects_a_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a directory"):
        naive_load(tmp_path / "nope")


def test_plot_diagnostics_draws(dump, loaded):
    import matplotlib

    matplotlib.use("Agg")
    from labkit.viz import fonts

    fonts.configure()  # CJK labels render instead of warning about missing glyphs
    recs, _ = loaded
    fig = ins.plot_diagnostics(
        ins.noise_table(recs),
        ins.field_lengths(recs),
        ins.replacement_counts(recs),
        ins.encoding_histogram(dump.crawl_dir, n=50),
    )
    assert len(fig.axes) == 4
