"""Notebook 02 (cleaning pipeline): shingles and Jaccard for near duplicates, and two questions;
`grade_fix`, the find-and-fix grader."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from labkit.exercises import Choice, Quiz, answered, call, fail, passed
from labkit.i18n import N_, _

if TYPE_CHECKING:
    from labkit.exercises.transfer import Run

A = "本市今日召开新闻发布会，介绍今年一季度经济运行情况，地区生产总值同比增长5.2%。"
B = "本市今日召开新闻发布会，介绍今年一季度经济运行情况，地区生产总值同比增长5.3%。"  # one character differs
C = "受冷空气影响，明天全市将出现大风降温天气，请市民注意防寒保暖，出行注意安全。"


def _ref_shingles(text: str, k: int = 5) -> set[str]:
    return {text[i : i + k] for i in range(max(1, len(text) - k + 1))}


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def ex1(shingles, near_duplicate) -> bool:
    """Character k-gram shingles, and a near-duplicate decision by Jaccard similarity >= 0.8."""
    got = call(shingles, A, 5)
    answered(got)
    want = _ref_shingles(A, 5)
    if isinstance(got, (list, tuple)):
        fail(
            _(
                "shingles(text, k) returned a {type}: return a set -- a list keeps repeats and order, and "
                "Jaccard similarity is defined on sets (|A & B| / |A | B|)"
            ).format(type=type(got).__name__)
        )
    if not isinstance(got, (set, frozenset)):
        fail(_("shingles(text, k) should return a set of strings, got {type}").format(type=type(got).__name__))
    if set(got) != want:
        if set(got) == want - {A[-5:]}:
            fail(
                _(
                    "shingles(A, 5) has {got} items, expected {want}: range(len(text) - k) stops one window "
                    "short -- the last shingle text[-k:] = {last!r} is missing. Use range(len(text) - k + 1)"
                ).format(got=len(got), want=len(want), last=A[-5:])
            )
        fail(
            _(
                "shingles(A, 5) has {got} items, expected {want}: every window text[i:i+k] for "
                "i in range(len(text) - k + 1)"
            ).format(got=len(got), want=len(want))
        )
    if call(near_duplicate, A, B) is not True:
        fail(
            _("A and B differ in one character (Jaccard {jaccard:.2f}): near_duplicate(A, B) must return True").format(
                jaccard=_jaccard(want, _ref_shingles(B))
            )
        )
    if call(near_duplicate, A, C) is not False:
        fail(N_("A and C are different articles: near_duplicate must return False (Jaccard of their shingles < 0.8)"))
    if call(near_duplicate, A, A + C) is not False:
        j = _jaccard(want, _ref_shingles(A + C))
        fail(
            _(
                "near_duplicate(A, A + C) returned True, but A is only half of A + C (Jaccard {j:.2f}): you measured "
                "how much of A is in the other text. Jaccard divides the shared shingles by the union of both sets"
            ).format(j=j)
        )
    return passed(
        _(
            "Jaccard(A, B) = {jaccard:.2f} -> duplicate; the pipeline estimates the same "
            "number with MinHash so it never compares every pair"
        ).format(jaccard=_jaccard(want, _ref_shingles(B)))
    )


EX2 = Quiz(
    "D",
    {
        "A": Choice(
            N_("ftfy is switched off for U+FFFD"),
            N_("ftfy runs on every text field; it simply has nothing to work with here."),
        ),
        "B": Choice(
            N_("the record was too long to repair"),
            N_(
                "Length checks come after repair and have their own reasons (title_too_long); this record's reason is "
                "mojibake."
            ),
        ),
        "C": Choice(
            N_("the encoding detector guessed wrong inside the pipeline"),
            N_(
                "The encoding detector is only consulted while decoding bytes; the damage happened before the pipeline "
                "saw them."
            ),
        ),
        "D": Choice(
            N_("the bytes were thrown away at decode time"),
            N_(
                "Right: U+FFFD is what a decoder writes when it *threw bytes away* (errors='replace'); the original "
                "characters are gone. `æ–°é—»` still holds every byte, decoded with the wrong table, so ftfy can reverse "
                "it."
            ),
        ),
    },
)


def ex2(answer) -> bool:
    """Why is a record with U+FFFD rejected while `æ–°é—»` is repaired?"""
    return EX2(answer)


EX3 = Quiz(
    "BD",
    {
        "A": Choice(
            N_("it made fewer optimizer updates than the dirty arm did"),
            N_("Both arms train for the same number of steps with the same batch size: neither made fewer updates."),
        ),
        "B": Choice(
            N_("each of its steps learned from a real title/body pair"),
            N_("Right: every step of the clean arm learns the task itself, from a real title and its article."),
            missed=N_("one true statement is about what each of the clean arm's steps learns from."),
        ),
        "C": Choice(
            N_("its tokenizer got a better vocabulary"),
            N_("The tokenizer is trained on both sets together, so neither arm has a vocabulary advantage."),
        ),
        "D": Choice(
            N_("the dirty arm trained on furniture and damaged text"),
            N_(
                "Right: section 5's audit counts them with notebook 01's instruments -- every such pair spends a step "
                "teaching the model something other than the article's title."
            ),
            missed=N_(
                "one true statement is about what the dirty arm trained on (section 5 audits both arms' records)."
            ),
        ),
    },
)


def ex3(answer) -> bool:
    """Less but clean beats more but dirty, with the same step budget: which statements explain it? (select all)"""
    return EX3(answer)


# ---- find and fix: `grade_fix` grades what `labkit.exercises.transfer` measured running the repaired script
DUMP_ARTICLES, DUMP_SEED = 200, 7  # the check's crawl: the same generator as the notebooks, a seed they do not use
MOJIBAKE_KINDS = ("U+FFFD", "mojibake", "control chars")  # damaged text
MARKUP_KINDS = ("JavaScript", "CSS", "HTML tags")  # page code left in the text
MAX_BAD_SHARE = 0.01  # of the records returned, per kind of damage (ftfy's heuristic may flag a rare clean text)
MIN_KEPT = 0.7  # of the records a correct cleaner keeps


def prepare_fix(out: Path) -> dict:
    from labkit.corpus import generate
    from labkit.corpus.dump import write_dump

    info = write_dump(generate(DUMP_ARTICLES, seed=DUMP_SEED), out / "dump", seed=DUMP_SEED)
    return {
        "kwargs": {"crawl_dir": str(info.crawl_dir)},
        "n_records": info.n_records,
        "n_clean": info.expected.get("clean", 0),
    }


def _shown(record: dict, n: int = 50) -> str:
    title, body = str(record.get("title") or ""), str(record.get("body") or "")
    return _("title {title}, body {body}").format(
        title=repr(title[:n]) + ("..." if len(title) > n else ""),
        body=repr(body[:n]) + ("..." if len(body) > n else ""),
    )


def cleaning_audit(records: list[dict]) -> dict:
    """Notebook 01's instruments on what a loader returned: noise flags and field-length outliers per record."""
    from labkit.corpus import inspection as ins

    flags = ins.noise_flags(records)
    lengths = ins.field_lengths(records)
    return {
        "records": len(records),
        "mojibake": [i for i in range(len(records)) if flags.loc[i, list(MOJIBAKE_KINDS)].any()],
        "markup": [i for i in range(len(records)) if flags.loc[i, list(MARKUP_KINDS)].any()],
        "outliers": {i: v for i, v in enumerate(lengths["outlier"]) if v != "ok"},
    }


def _damage_hint(records: list[dict], damaged: list[int], n: int) -> str:
    """What kind of damaged text the loader kept (U+FFFD, latin-1 mojibake, control characters), most common first."""
    from labkit.corpus import inspection as ins

    flags = ins.noise_flags([records[i] for i in damaged])
    kinds = {
        "U+FFFD": _(
            "U+FFFD where bytes were thrown away: decoding every file as UTF-8 with errors='replace' destroys "
            "GBK/Big5/UTF-16 text -- decode by the real encoding (BOM, strict UTF-8, a detector) and reject what "
            "still carries U+FFFD"
        ),
        "mojibake": _("UTF-8 read as latin-1 (æ–°é—») that nobody repaired -- ftfy undoes it (labkit.cleaning.repair)"),
        "control chars": _("control characters -- strip them"),
    }
    counts = {k: int(flags[k].sum()) for k in kinds}
    order = sorted((k for k in kinds if counts[k]), key=lambda k: -counts[k])
    first = next(i for i, row in zip(damaged, flags[order[0]]) if row)
    parts = _("; ").join(_("{count} with {kind}").format(count=counts[k], kind=kinds[k]) for k in order)
    return _(
        "{damaged} of {n} records carry damaged text, e.g. {example}: {parts}. labkit.cleaning does all of it "
        "(clean_paths, or readers + validate.clean_record)"
    ).format(damaged=len(damaged), n=n, example=_shown(records[first]), parts=parts)


def grade_fix(run: Run) -> bool:
    records = run.context.get("records")
    if records is None:
        fail(_("main(...) must return the records it trained on: a list of dicts with 'title' and 'body'"))
    if not records:
        fail(_("your loader kept no record at all: a cleaner that throws everything away is not a cleaner"))
    a = cleaning_audit(records)
    n, limit = a["records"], max(1, int(MAX_BAD_SHARE * a["records"]))
    if len(a["mojibake"]) > limit:
        fail(_damage_hint(records, a["mojibake"], n))
    if len(a["markup"]) > limit:
        r = records[a["markup"][0]]
        fail(
            _(
                "{count} of {n} records still carry script/style code or tags, e.g. {example}. The regex "
                "<script.*?>.*?</script> has no re.DOTALL and no re.IGNORECASE: multi-line and <SCRIPT> blocks slip "
                "through. Extract the text with an HTML parser (or labkit.cleaning)"
            ).format(count=len(a["markup"]), n=n, example=_shown(r))
        )
    if len(a["outliers"]) > limit:
        kinds = sorted(set(a["outliers"].values()))
        i = next(iter(a["outliers"]))
        fail(
            _(
                "{count} of {n} records have fields out of shape ({kinds}; titles must be 10-60 characters, bodies at "
                "least 50), e.g. {example}. A CSV row with a column too many or too few shifts every field (the title "
                "becomes a category or the body, the body a URL), and a swapped row puts the body in the title: check "
                "each row's fields (reject misaligned rows, swap back swapped ones) and reject titles that are "
                "missing, too short or too long"
            ).format(count=len(a["outliers"]), n=n, kinds=", ".join(kinds), example=_shown(records[i]))
        )
    want = run.context.get("n_clean", 0)
    if n < MIN_KEPT * want:
        fail(
            _(
                "clean now, but your loader kept only {n} records where a correct cleaner keeps {want}: it throws away "
                "good data (a whole container, or every record with a repairable defect)"
            ).format(n=n, want=want)
        )
    return passed(
        _(
            "the cleaning audit on the {n} records you trained on: {mojibake} with mojibake/U+FFFD, {markup} with "
            "script/markup, {outliers} with fields out of shape; a correct cleaner keeps {want} of this crawl's "
            "{records} records"
        ).format(
            n=n,
            mojibake=len(a["mojibake"]),
            markup=len(a["markup"]),
            outliers=len(a["outliers"]),
            want=want,
            records=run.context.get("n_records"),
        )
    )
