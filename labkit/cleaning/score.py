"""Score a cleaning run against a dump's labels: per reason/fix precision and recall, per defect recall.

A label says what a correct cleaner does with each record: `expected` is
"clean" or a reason code, `expected_fixes` the fixes a kept record needs.  A
reason code is a positive prediction for its records; a fix code is one only
on a record that was kept.  Defect kinds (the generator's names, e.g.
`script_multiline`, `encoding:gbk`) get a recall: the share of records carrying
that defect whose outcome is exactly right (same reason, or kept with every
expected fix).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from labkit.codes import DEFECT_FIXES
from labkit.jsonl import read_jsonl


def load_outcomes(out_dir) -> dict[str, dict]:
    """id -> row of clean.jsonl (reason None) or rejects.jsonl."""
    rows: dict[str, dict] = {}
    for name in ("clean.jsonl", "rejects.jsonl"):
        for r in read_jsonl(Path(out_dir) / name):
            r.setdefault("reason", None)
            rows[r["id"]] = r
    return rows


def load_labels(path) -> list[dict]:
    return read_jsonl(path)


def _correct(label: dict, got: dict | None) -> bool:
    if got is None:
        return False
    if label["expected"] != "clean":
        return got["reason"] == label["expected"]
    return got["reason"] is None and set(label["expected_fixes"]) <= set(got["fixes"])


def _prf(tp: int, fp: int, fn: int) -> dict:
    p = tp / (tp + fp) if tp + fp else float("nan")
    r = tp / (tp + fn) if tp + fn else float("nan")
    return {"precision": p, "recall": r, "tp": tp, "fp": fp, "fn": fn}


def score(labels: list[dict] | str | Path, out_dir) -> dict:
    """Compare outcomes in `out_dir` with `labels` (a list or the labels.jsonl path).

    Returns {"accuracy", "missing", "by_code": {code: P/R}, "by_defect": {defect: recall},
    "confusion": {(expected, got): n}, "errors": [first 50 wrong records]}."""
    if not isinstance(labels, list):
        labels = load_labels(labels)
    got = load_outcomes(out_dir)
    counts: dict[str, Counter] = defaultdict(Counter)
    by_defect: dict[str, Counter] = defaultdict(Counter)
    confusion: Counter = Counter()
    errors = []
    for lab in labels:
        g = got.get(lab["id"])
        pred = None if g is None else g["reason"] or "clean"
        confusion[(lab["expected"], pred or "missing")] += 1
        truth_codes = {lab["expected"]} - {"clean"} | (
            set(lab["expected_fixes"]) if lab["expected"] == "clean" else set()
        )
        if lab["expected"] == "clean":  # defects the labels carry without naming a fix code
            truth_codes |= {DEFECT_FIXES[d] for d in lab["defects"] if d in DEFECT_FIXES}
        pred_codes = set() if g is None else ({g["reason"]} if g["reason"] else set(g["fixes"]))
        for code in truth_codes | pred_codes:
            key = "tp" if code in truth_codes and code in pred_codes else "fn" if code in truth_codes else "fp"
            counts[code][key] += 1
        ok = _correct(lab, g)
        for d in lab["defects"] or ["none"]:
            by_defect[d]["n"] += 1
            by_defect[d]["ok"] += ok
        if not ok and len(errors) < 50:
            errors.append(
                {
                    "id": lab["id"],
                    "defects": lab["defects"],
                    "expected": lab["expected"],
                    "expected_fixes": lab["expected_fixes"],
                    "got": pred,
                    "fixes": None if g is None else g["fixes"],
                    "detail": None if g is None else g.get("detail"),
                }
            )
    correct = sum(_correct(lab, got.get(lab["id"])) for lab in labels)
    return {
        "records": len(labels),
        "accuracy": correct / max(1, len(labels)),
        "missing": sum(1 for lab in labels if lab["id"] not in got),
        "unlabelled": len(set(got) - {lab["id"] for lab in labels}),
        "by_code": {c: _prf(v["tp"], v["fp"], v["fn"]) for c, v in sorted(counts.items())},
        "by_defect": {d: {"n": v["n"], "recall": v["ok"] / v["n"]} for d, v in sorted(by_defect.items())},
        "confusion": {f"{e} -> {p}": n for (e, p), n in sorted(confusion.items())},
        "errors": errors,
    }


def score_table(result: dict):
    """`by_code` as a pandas DataFrame (precision, recall, support), worst recall first."""
    import pandas as pd

    df = pd.DataFrame(result["by_code"]).T
    df["support"] = df["tp"] + df["fn"]
    return df[["precision", "recall", "support", "tp", "fp", "fn"]].sort_values("recall")
