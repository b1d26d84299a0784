"""Notebook 01 (dirty data): a rule for a new kind of crawl noise, the script regex, a question."""

from __future__ import annotations

import re

from labkit.exercises import UNANSWERED, Choice, Quiz, answered, call, fail, passed
from labkit.i18n import N_, _

# share bars the crawler picked up (positives) and lines that merely mention sharing (negatives)
SHARE_BARS = ["分享到：微信 微博 QQ空间", "分享到: 微信朋友圈", "  分享到：新浪微博  ", "分享至：微信 | 微博 | 豆瓣"]
NOT_SHARE_BARS = [
    "记者分享到了现场的最新情况。",
    "该公司表示将分享技术成果。",
    "微信用户数量持续增长。",
    "分享经济规模扩大",
    "用户可一键分享到：微信、微博等平台。",
]


def _missed_hint(line: str) -> str:
    if line != line.strip():
        return _("it has spaces around it: strip the line (or allow \\s* at the start) before matching")
    if "分享至" in line:
        return _("share bars also start with 分享至, not only 分享到")
    if ":" in line and "：" not in line:
        return _("its colon is the half-width ':'; accept the full-width '：' and the half-width ':'")
    return _("share bars start with 分享到/分享至, then a full- or half-width colon")


def ex1(is_share_bar) -> bool:
    """A rule that flags share-bar lines (`分享到：微信 微博`) and nothing else."""
    got = {s: call(is_share_bar, s) for s in SHARE_BARS + NOT_SHARE_BARS}
    if all(v is None for v in got.values()):
        fail(
            _("{unanswered} (is_share_bar returned None for every line: return True or False)").format(
                unanswered=_(UNANSWERED)
            )
        )
    missed = [s for s in SHARE_BARS if not got[s]]
    wrong = [s for s in NOT_SHARE_BARS if got[s]]
    if missed:
        fail(_("your rule misses {line}: {hint}").format(line=repr(missed[0]), hint=_missed_hint(missed[0])))
    if wrong:
        w = wrong[0]
        if w.strip().startswith("分享"):
            fail(
                _(
                    "your rule also flags {line}, an ordinary sentence that starts with 分享: require the colon "
                    "right after 分享到/分享至"
                ).format(line=repr(w))
            )
        fail(
            _(
                "your rule also flags {line}, an ordinary sentence with 分享 in the middle: anchor the pattern at "
                "the start of the line (re.match, or ^)"
            ).format(line=repr(w))
        )
    return passed(
        _("{bars} share bars flagged, {sentences} sentences kept").format(
            bars=len(SHARE_BARS), sentences=len(NOT_SHARE_BARS)
        )
    )


PAGES = [
    '<p>正文</p><script type="text/javascript">\nvar a = 1;\n</script><p>续</p>',
    "<p>正文</p><SCRIPT>track();</SCRIPT><p>续</p>",
    "<p>正文</p><script>ad()</script><p>续</p>",
    "<script>a()</script><p>正文</p><script>b()</script><p>续</p>",
]


def ex2(script_re) -> bool:
    """A compiled regex that removes every script block, multi-line and upper-case ones included."""
    answered(script_re)
    if not isinstance(script_re, re.Pattern):
        fail(N_("compile it: script_re = re.compile(r'...', flags)"))
    for page in PAGES:
        left = script_re.sub("", page)
        if re.search(r"script", left, re.I) or any(js in left for js in ("var a", "track", "ad()", "a()", "b()")):
            if "\n" in page and not script_re.flags & re.DOTALL:
                fail(
                    _(
                        "after script_re.sub('', page) this is left: {left}. Without re.DOTALL `.` stops at a "
                        "newline, so a multi-line block survives"
                    ).format(left=repr(left))
                )
            if "SCRIPT" in page and not script_re.flags & re.IGNORECASE:
                fail(
                    _(
                        "after script_re.sub('', page) this is left: {left}. Without re.IGNORECASE <SCRIPT> is not "
                        "<script>"
                    ).format(left=repr(left))
                )
            fail(
                _(
                    "after script_re.sub('', page) this is left: {left}. The pattern must match the whole block, "
                    "attributes included: <script\\b.*?</script>"
                ).format(left=repr(left))
            )
        if "正文" not in left or "续" not in left:
            fail(
                _(
                    "your regex removed article text too: {left}. A greedy .* runs from the first <script> to the "
                    "last </script>: use a lazy .*? so one match stops at the first </script>"
                ).format(left=repr(left))
            )
    return passed(
        N_("multi-line and upper-case script blocks removed, the text kept (a parser is still the safer tool)")
    )


EX3 = Quiz(
    "AC",
    {
        "A": Choice(
            N_("the naive loader kept nearly every record, dirt and all"),
            N_(
                "Right: the claim 'the naive loader keeps almost everything' (> 85% of the records) is measured on every "
                "run, and the sample shows what it kept: noise, mojibake, shifted fields."
            ),
            missed=N_("one true statement is about how many records the naive loader kept (section 2's stats)."),
        ),
        "B": Choice(
            N_("the dirt is what made the model write bad titles"),
            N_(
                "Not from this notebook alone: a tiny model trained this briefly writes poor titles from clean data too. "
                "Only a control run (same model, same steps, clean data) can blame the dirt -- that is why the ROUGE-L "
                "here is a metric, not a claim."
            ),
        ),
        "C": Choice(
            N_("the classic script regex misses blocks that a parser finds"),
            N_(
                "Right: section 5 counts script blocks with the regex and with a parser; the multi-line and upper-case "
                "ones get through (no re.DOTALL, no re.IGNORECASE)."
            ),
            missed=N_("one true statement is about section 5's count of script blocks."),
        ),
        "D": Choice(
            N_("a lower learning rate would have fixed the generated titles"),
            N_(
                "Nothing here varies the learning rate: the notebook measures the data, and the story's lesson is that "
                "tuning the learning rate first is what cost the team days."
            ),
        ),
    },
)


def ex3(answer) -> bool:
    """What does notebook 01 alone establish? (select all that apply)"""
    return EX3(answer)
