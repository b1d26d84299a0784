"""Notebook 01 (dirty data): a rule for a new kind of crawl noise, the script regex, a question."""
from __future__ import annotations

import re

from labkit.exercises import answered, call, fail, passed, quiz

# share bars the crawler picked up (positives) and lines that merely mention sharing (negatives)
SHARE_BARS = ["分享到：微信 微博 QQ空间", "分享到: 微信朋友圈", "  分享到：新浪微博  ", "分享至：微信 | 微博 | 豆瓣"]
NOT_SHARE_BARS = ["记者分享到了现场的最新情况。", "该公司表示将分享技术成果。", "微信用户数量持续增长。", "分享经济规模扩大"]


def ex1(is_share_bar) -> bool:
    """A rule that flags share-bar lines (`分享到：微信 微博`) and nothing else."""
    missed = [s for s in SHARE_BARS if not call(is_share_bar, s)]
    wrong = [s for s in NOT_SHARE_BARS if call(is_share_bar, s)]
    if missed:
        fail(f"your rule misses {missed[0]!r}: share bars start with 分享到/分享至, then a full- or half-width "
             "colon; strip the line first")
    if wrong:
        fail(f"your rule also flags {wrong[0]!r}, an ordinary sentence: anchor the pattern at the start "
             "of the line and require the colon")
    return passed(f"{len(SHARE_BARS)} share bars flagged, {len(NOT_SHARE_BARS)} sentences kept")


PAGES = [
    '<p>正文</p><script type="text/javascript">\nvar a = 1;\n</script><p>续</p>',
    "<p>正文</p><SCRIPT>track();</SCRIPT><p>续</p>",
    "<p>正文</p><script>ad()</script><p>续</p>",
]


def ex2(script_re) -> bool:
    """A compiled regex that removes every script block, multi-line and upper-case ones included."""
    answered(script_re)
    if not isinstance(script_re, re.Pattern):
        fail("compile it: script_re = re.compile(r'...', flags)")
    for page in PAGES:
        left = script_re.sub("", page)
        if re.search(r"script", left, re.I) or "var a" in left or "track" in left:
            fail(f"after script_re.sub('', page) this is left: {left!r}. The classic regex lacks two flags: "
                 "re.DOTALL (so . crosses newlines) and re.IGNORECASE (so <SCRIPT> matches)")
        if "正文" not in left or "续" not in left:
            fail(f"your regex removed article text too: {left!r}. Use a lazy .*? so one match stops at the first </script>")
    return passed("multi-line and upper-case script blocks removed, the text kept (a parser is still the safer tool)")


def ex3(answer) -> bool:
    """Why did the team's model babble?"""
    return quiz(answer, "C", {
        "A": "A learning rate that is too high gives spikes and NaN (notebook 06), not mojibake and page furniture in "
             "the outputs: the model wrote what the data showed it.",
        "B": "The tiny model is small, but notebook 02 trains the same model for the same steps on cleaned data and it "
             "does better: the size was not the problem.",
        "C": "Right: the model learned from what the naive loader kept -- mojibake, scripts, footers, shifted columns. "
             "Looking at 1,000 samples would have shown it in minutes.",
        "D": "More steps on the same dirty data learn the dirt better; the held-out ROUGE-L stays below a "
             "no-model baseline (copy the first 20 characters).",
    })
