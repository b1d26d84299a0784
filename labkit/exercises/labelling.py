"""Notebook 01's labelling exercise: look at N crawled records and say what is wrong with each.

`sample_records(n, seed)` writes a small crawl with the course's seeded generator (`labkit.corpus`, which
labels every defect it injects), draws `n` records of the text exports (JSONL, CSV, TXT) -- balanced over the
five labels below, each record carrying exactly one of them -- and returns them as the team's loader would
see them: `{n, id, source, title, body}` dicts, decoded correctly (an encoding alone is not dirt), fields as
the file has them. Inspect them with `show(sample)` or notebook 01's helpers (`labkit.corpus.inspection`:
`noise_flags(sample)`, `field_lengths(sample)`), then label each one:

| label | what the generator did |
|---|---|
| `mojibake` | UTF-8 text mis-decoded as latin-1/cp1252 (`æ–°é—»`), or `U+FFFD` damage |
| `script noise` | a `<script>` or `<style>` block pasted into the body |
| `misaligned` | a CSV row with a column too many or too few, or title and body swapped |
| `title too long` | a title over 60 characters |
| `clean` | nothing a reader can see |

`check_labels(sample, labels)` grades the labels against the generator's: at least `n - 1` of `n` right
(one slip allowed), with a line of feedback per record.
"""

from __future__ import annotations

import csv
import io
import json
import random
import shutil
import tempfile
from pathlib import Path

from labkit.exercises import answered, fail, passed
from labkit.i18n import N_, _

LABELS = ("mojibake", "script noise", "misaligned", "title too long", "clean")
SYNONYMS = {
    "script": "script noise",
    "scripts": "script noise",
    "style": "script noise",
    "js": "script noise",
    "javascript": "script noise",
    "noise": "script noise",
    "misaligned fields": "misaligned",
    "swapped": "misaligned",
    "shifted": "misaligned",
    "long title": "title too long",
    "title_too_long": "title too long",
    "too long": "title too long",
    "ok": "clean",
    "fine": "clean",
    "u+fffd": "mojibake",
    "garbled": "mojibake",
}
TEXT_CONTAINERS = ("csv", "jsonl", "txt")
DUMP_ARTICLES = 400
SLIPS = 1  # the tolerance: all but one right

# what each injected defect looks like, for the feedback on a wrong label
LOOK = {
    "mojibake": N_("look for latin letters with accents where Chinese should be (æ–°é—») or `�`"),
    "script noise": N_("look for `<script>`, `var ... =`, `function(` or `{...: ...}` in the body"),
    "misaligned": N_(
        "look at the fields: a category or a whole paragraph as the title, a URL or a short line as the body"
    ),
    "title too long": N_("count the title's characters: the limit is 60 (field_lengths shows title_len)"),
    "clean": N_("nothing a reader can see: the fields are a news title and its article"),
}


def category(defects: list[str]) -> str | None:
    """The one label a record's injected defects give, or None when it carries another visible defect or two."""
    seen = set()
    for d in defects:
        if d.startswith("encoding:") or d == "meta_charset_lie":
            continue  # invisible once the bytes are decoded by their real encoding
        if d.startswith("mojibake_") or d == "replacement_chars":
            seen.add("mojibake")
        elif d.startswith("script_"):
            seen.add("script noise")
        elif d in ("csv_misaligned", "csv_swapped"):
            seen.add("misaligned")
        elif d == "title_too_long":
            seen.add("title too long")
        else:
            return None  # boilerplate, duplicates, short bodies...: not this exercise's labels
    if len(seen) > 1:
        return None
    return seen.pop() if seen else "clean"


def _row(label: dict) -> int:
    """The record's row in its export (from 1): `file:row`, or an export id like `part-0001-007`."""
    rid = label["id"]
    return int(rid.rsplit(":", 1)[1]) if ":" in rid else int(rid.rsplit("-", 1)[1])


def _read(crawl: Path, label: dict) -> dict:
    """The record's title and body as its file holds them (decoded by the real encoding, nothing cleaned)."""
    from labkit.cleaning.decode import decode_bytes

    path = crawl / label["file"]
    text = decode_bytes(path.read_bytes()).text or ""
    kind = path.parent.name
    if kind == "txt":
        title, _sep, body = text.partition("\n")
        return {"title": title, "body": body.strip("\n")}
    if kind == "jsonl":
        row = json.loads(text.split("\n")[_row(label) - 1])
        return {"title": row.get("title"), "body": row.get("body")}
    rows = list(csv.DictReader(io.StringIO(text)))
    row = rows[_row(label) - 1]
    return {"title": row.get("title"), "body": row.get("body")}


class Sample(list):
    """The drawn records (a list of dicts) and how they were drawn, so the check can redraw the answer key."""

    def __init__(self, records: list[dict], n: int, seed: int):
        super().__init__(records)
        self.n, self.seed = n, seed


def _draw(n: int, seed: int) -> tuple[list[dict], dict[str, str], dict[str, list[str]]]:
    """(records, truth: id -> label, defects: id -> the generator's defect names), balanced over LABELS."""
    from labkit.corpus import generate
    from labkit.corpus.dump import load_labels, write_dump

    work = Path(tempfile.mkdtemp(prefix="labkit-labelling-"))
    try:
        info = write_dump(generate(DUMP_ARTICLES, seed=seed), work / "dump", seed=seed)
        pools: dict[str, list[dict]] = {k: [] for k in LABELS}
        for lab in load_labels(info.out_dir):
            cat = category(lab["defects"]) if lab["file"].split("/")[0] in TEXT_CONTAINERS else None
            if cat and not lab["file"].startswith("txt/scan-"):
                pools[cat].append(lab)
        rng = random.Random(f"labkit-labelling-{seed}")
        picked: list[tuple[str, dict]] = []
        used: set[str] = set()
        for i in range(n):  # round-robin over the labels, each record drawn from its label's pool
            for cat in LABELS[i % len(LABELS) :] + LABELS[: i % len(LABELS)]:
                pool = [lab for lab in pools[cat] if lab["id"] not in used]
                if pool:
                    lab = rng.choice(pool)
                    used.add(lab["id"])
                    picked.append((cat, lab))
                    break
        rng.shuffle(picked)
        records, truth, defects = [], {}, {}
        for k, (cat, lab) in enumerate(picked, start=1):
            rec = _read(info.crawl_dir, lab)
            records.append({"n": k, "id": lab["id"], "source": lab["file"], **rec})
            truth[lab["id"]], defects[lab["id"]] = cat, list(lab["defects"])
        return records, truth, defects
    finally:
        shutil.rmtree(work, ignore_errors=True)


def sample_records(n: int = 10, seed: int = 0) -> Sample:
    """`n` crawled records to label (about `n / 5` of each label), drawn from a crawl generated with `seed`."""
    if not 1 <= n <= 50:
        raise ValueError(_("n={n}: label between 1 and 50 records").format(n=n))
    records, _truth, _defects = _draw(n, seed)
    return Sample(records, n, seed)


def show(sample, width: int = 160) -> None:
    """Print each record: its number, where it came from, its title and the start of its body."""
    for r in sample:
        title, body = str(r.get("title")), str(r.get("body") or "")
        print(f"#{r['n']:<2} {r['source']}  (id {r['id']})")
        print(
            _("    title ({n} chars): {text}").format(
                n=len(title), text=repr(title[:width]) + (" ..." if len(title) > width else "")
            )
        )
        print(
            _("    body  ({n} chars): {text}").format(
                n=len(body), text=repr(body[:width]) + (" ..." if len(body) > width else "")
            )
        )


def _normal(label) -> str | None:
    if not isinstance(label, str):
        return None
    key = " ".join(label.strip().lower().replace("_", " ").replace("-", " ").split())
    return key if key in LABELS else SYNONYMS.get(key)


def check_labels(sample, labels) -> bool:
    """Grade `labels` (a list in the sample's order, or a dict by record number `n` or `id`) against the generator's
    labels: at least n - 1 of n right, with feedback on each record."""
    answered(labels)
    if not isinstance(sample, Sample):
        fail(N_("pass the sample that labelling.sample_records(...) returned, then your labels"))
    if isinstance(labels, dict):
        given = [labels.get(r["n"], labels.get(r["id"], labels.get(str(r["n"])))) for r in sample]
    elif isinstance(labels, (list, tuple)):
        if len(labels) != len(sample):
            fail(
                _("{labels} labels for {records} records: give one label per record, in the sample's order").format(
                    labels=len(labels), records=len(sample)
                )
            )
        given = list(labels)
    else:
        fail(N_("give your labels as a list in the sample's order, or a dict {record number: label}"))
    if all(g is None or g is Ellipsis for g in given):
        answered(None)
    unknown = [(r["n"], g) for r, g in zip(sample, given) if _normal(g) is None]
    if unknown:
        n, g = unknown[0]
        fail(
            _("record #{n}: {label} is not a label -- use one of {labels}").format(
                n=n, label=repr(g), labels=", ".join(LABELS)
            )
        )
    _records, truth, defects = _draw(sample.n, sample.seed)
    right = 0
    for r, g in zip(sample, given):
        want, got = truth[r["id"]], _normal(g)
        if got == want:
            right += 1
            print(f"  ✓ #{r['n']:<2} {want}")
        else:
            injected = ", ".join(d for d in defects[r["id"]] if not d.startswith("encoding:"))
            print(
                _("  ✗ #{n} you said {got}, the generator says {want} (it injected: {injected}) -- {look}").format(
                    n=f"{r['n']:<2}",
                    got=repr(got),
                    want=repr(want),
                    injected=injected or _("nothing"),
                    look=_(LOOK[want]),
                )
            )
    need = len(sample) - SLIPS
    if right < need:
        fail(
            _("{right} of {total} right; at least {need} needed -- read the ✗ lines above, look again, relabel").format(
                right=right, total=len(sample), need=need
            )
        )
    return passed(
        _("{right} of {total} right (at least {need} needed): you looked at the data").format(
            right=right, total=len(sample), need=need
        )
    )
