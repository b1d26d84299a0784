"""Look at the data before tuning anything: the diagnostics notebook 01 runs on 1,000 samples.

Every function takes records (`{id, title, body, source}` dicts, e.g. from
`naive_load`) or a crawl directory and returns a pandas DataFrame or a dict,
so a notebook shows it as a table and plots it with `plot_diagnostics`.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path
from typing import Sequence

import chardet
import pandas as pd

from labkit.corpus.naive import SCRIPT_RE

# What a reader spots by eye in crawled text, as patterns.  Mojibake is judged
# by ftfy's own badness heuristic rather than a hand-written character list.
NOISE_PATTERNS: dict[str, re.Pattern] = {
    "U+FFFD": re.compile("\ufffd"),
    "JavaScript": re.compile(r"\bvar\s+\w+\s*=|function\s*\(|document\.\w+|window\.\w+"),
    "CSS": re.compile(r"[.#]?[\w-]+\s*\{[^{}]*:[^{}]*\}"),
    "HTML tags": re.compile(r"</?[A-Za-z][^>]{0,80}>"),
    "boilerplate": re.compile(r"责任编辑|版权所有|点击查看更多|【纠错】|分享到：|免责声明|扫描二维码"),
    "nav/footer": re.compile(r"首页\s+\S+\s+\S+|关于我们|网站地图|相关新闻"),
    "control chars": re.compile(r"[\x00-\x08\x0e-\x1f\x7f]"),
}


def sample_records(records: Sequence[dict], n: int = 1000, seed: int = 0) -> list[dict]:
    """`n` records drawn without replacement (all of them when there are fewer)."""
    records = list(records)
    return random.Random(seed).sample(records, min(n, len(records)))


def _is_mojibake(text: str) -> bool:
    from ftfy.badness import is_bad

    return bool(text) and is_bad(text)


def noise_flags(records: Sequence[dict]) -> pd.DataFrame:
    """One row per record, one boolean column per noise kind (plus latin-1 'mojibake' via ftfy)."""
    rows = []
    for r in records:
        text = f"{r.get('title') or ''}\n{r.get('body') or ''}"
        row = {"id": r.get("id"), "source": r.get("source")}
        row.update({name: bool(p.search(text)) for name, p in NOISE_PATTERNS.items()})
        row["mojibake"] = _is_mojibake(text)
        rows.append(row)
    return pd.DataFrame(rows)


def noise_table(records: Sequence[dict]) -> pd.DataFrame:
    """Records hit per noise kind, and the share with any noise, sorted by hits."""
    flags = noise_flags(records)
    kinds = [c for c in flags.columns if c not in ("id", "source")]
    table = pd.DataFrame({"records": flags[kinds].sum(), "share": flags[kinds].mean()})
    table.loc["any noise"] = [int(flags[kinds].any(axis=1).sum()), float(flags[kinds].any(axis=1).mean())]
    return table.sort_values("records", ascending=False).astype({"records": int})


def replacement_counts(records: Sequence[dict]) -> pd.DataFrame:
    """U+FFFD count and share per record (title and body together)."""
    rows = []
    for r in records:
        text = f"{r.get('title') or ''}{r.get('body') or ''}"
        n = text.count("\ufffd")
        rows.append({"id": r.get("id"), "fffd": n, "share": n / max(1, len(text))})
    return pd.DataFrame(rows)


def field_lengths(
    records: Sequence[dict], min_title: int = 10, max_title: int = 60, min_body: int = 50
) -> pd.DataFrame:
    """Title/body lengths in characters and the outlier class of each (the cleaning limits by default)."""
    rows = []
    for r in records:
        t, b = (r.get("title") or "").strip(), (r.get("body") or "").strip()
        flag = (
            "title missing"
            if not t
            else "title too short"
            if len(t) < min_title
            else "title too long"
            if len(t) > max_title
            else "body too short"
            if len(b) < min_body
            else "ok"
        )
        rows.append({"id": r.get("id"), "title_len": len(t), "body_len": len(b), "outlier": flag})
    return pd.DataFrame(rows)


def encoding_histogram(crawl_dir, n: int | None = 1000, seed: int = 0) -> pd.DataFrame:
    """chardet's verdict per file (BOMs named), for `n` sampled files: counts by container and encoding."""
    root = Path(crawl_dir)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    if n is not None and len(files) > n:
        files = sorted(random.Random(seed).sample(files, n))
    counts: Counter = Counter()
    for p in files:
        raw = p.read_bytes()
        enc = chardet.detect(raw[:20000])["encoding"] or "none (binary?)"
        counts[(p.parent.name, enc.lower())] += 1
    df = pd.DataFrame([{"container": c, "encoding": e, "files": k} for (c, e), k in counts.items()])
    return df.sort_values(["files"], ascending=False).reset_index(drop=True)


def script_regex_vs_parser(crawl_dir, n: int | None = None, seed: int = 0) -> pd.DataFrame:
    """Per HTML file: <script> blocks the classic regex finds vs those an HTML parser finds.

    The regex has no DOTALL and no IGNORECASE, so multi-line blocks and
    upper-case <SCRIPT> tags slip through; their JavaScript then ends up in the
    "text" once the tags are stripped.
    """
    from bs4 import BeautifulSoup

    from labkit.corpus.naive import naive_decode

    files = sorted((Path(crawl_dir) / "html").glob("*.html"))
    if n is not None and len(files) > n:
        files = sorted(random.Random(seed).sample(files, n))
    rows = []
    for p in files:
        text = naive_decode(p.read_bytes())
        scripts = BeautifulSoup(text, "lxml").find_all("script")
        rows.append(
            {
                "file": p.name,
                "regex": len(SCRIPT_RE.findall(text)),
                "parser": len(scripts),
                "multi_line": sum("\n" in (s.string or "") for s in scripts),
                "upper_case": len(re.findall(r"<SCRIPT\b", text)),
            }
        )
    return pd.DataFrame(rows)


_ANY_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script\s*>", re.S | re.I)  # what a parser sees as one block


def scripts_the_regex_misses(path) -> list[str]:
    """The <script> blocks of one crawled page that the classic `SCRIPT_RE` does not remove, as written in the page."""
    from labkit.corpus.naive import naive_decode

    text = naive_decode(Path(path).read_bytes())
    removed = {m.start() for m in SCRIPT_RE.finditer(text)}
    return [m.group(0) for m in _ANY_SCRIPT.finditer(text) if m.start() not in removed]


def first_missed_script(pages) -> tuple[str, str] | None:
    """(file name, block) of the first page among `pages` holding a script block the regex misses, or None."""
    for page in pages:
        missed = scripts_the_regex_misses(page)
        if missed:
            return Path(page).name, missed[0]
    return None


def plot_diagnostics(noise: pd.DataFrame, lengths: pd.DataFrame, fffd: pd.DataFrame, encodings: pd.DataFrame):
    """Four panels: noise kinds, field-length scatter, U+FFFD per record, detected encodings."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 2, figsize=(13, 9))
    nt = noise.drop(index="any noise", errors="ignore")
    ax[0, 0].barh(nt.index[::-1], nt["share"][::-1] * 100, color="tab:red")
    ax[0, 0].set_xlabel("% 的样本 (share of records)")
    ax[0, 0].set_title("噪声类型 noise hits")
    for label, grp in lengths.groupby("outlier"):
        ax[0, 1].scatter(
            grp["body_len"].clip(upper=3000),
            grp["title_len"].clip(upper=200),
            s=8,
            label=f"{label} ({len(grp)})",
            alpha=0.7,
        )
    ax[0, 1].axhspan(10, 60, color="green", alpha=0.08)
    ax[0, 1].set_xlabel("正文长度 body chars (clipped at 3000)")
    ax[0, 1].set_ylabel("标题长度 title chars")
    ax[0, 1].set_title("字段长度离群值 field-length outliers")
    ax[0, 1].legend(fontsize=8)
    damaged = fffd[fffd["fffd"] > 0]["fffd"]
    ax[1, 0].hist(damaged, bins=30, color="tab:purple")
    ax[1, 0].set_title(f"U+FFFD �：{len(damaged)} / {len(fffd)} 条记录受损")
    ax[1, 0].set_xlabel("每条记录的 U+FFFD 数 (records with any)")
    enc = encodings.groupby("encoding")["files"].sum().sort_values()
    ax[1, 1].barh(enc.index, enc.values, color="tab:blue")
    ax[1, 1].set_title("chardet 检测到的编码 detected encodings")
    ax[1, 1].set_xlabel("文件数 files")
    fig.tight_layout()
    return fig
