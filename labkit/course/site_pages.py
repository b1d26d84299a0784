"""The text of the course site's pages, as MyST Markdown for Sphinx (`labkit.course.site` builds them).

Everything a reader sees that is not a notebook's own cells comes from here: the landing page (what the course
teaches, the story, who it is for, the two commands, the measured times), the box at the top of each notebook page
(the run's verdict, seed, profile, date, claims, source and Binder links) and the Sphinx configuration.  Text that
a translated edition replaces lives in `TEXT`, keyed by language; the story and the two commands are read from the
README, the per-notebook pitfalls from its notebook table and the workshop guide's timing table from
`docs/workshop.md`, so the site never holds a second copy of them.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from urllib.parse import quote

from labkit.i18n import claim
from labkit.course.report import _fmt, _name

# pass/fail as the report marks them (glyphs every font has: ✔ ✘), coloured by the site's CSS
MARK = {
    True: '<span class="labkit-pass">✔ PASS</span>',
    False: '<span class="labkit-fail">✘ FAIL</span>',
    None: '<span class="labkit-skip">– SKIP</span>',
}

TEXT = {
    "en": {
        "title": "labkit — the course",
        "teaches": "What the course teaches",
        "story": "The story",
        "who": "Who it is for",
        "who_text": (
            "Engineers who train or fine-tune sequence-to-sequence models and want to recognise the classic traps "
            "before they cost a week: dirty crawled data, out-of-memory, a distributed launch that is not "
            "distributed, unsynchronised samplers and seeds, exploding gradients, a slow deployment. Team leads "
            "choosing onboarding material can read every notebook here with its real outputs before installing "
            "anything; instructors find the agendas in the {workshop}. You need Python and some PyTorch; a "
            "2-core machine without a GPU runs the whole course."
        ),
        "commands": "The two commands",
        "commands_text": "On a fresh clone (Python >= 3.11; nothing is downloaded at run time):",
        "times": "The notebooks and their measured times",
        "times_text": (
            "Every page below is the notebook as the course runner executed it: outputs, plots and claims are "
            "those of that run, never edited by hand. *Run* is that run's time (the notebook's `results.json` "
            "`seconds`); *workshop guide* is the timing table of the {workshop} (an idle 2-core machine)."
        ),
        "cols": ("#", "notebook", "the pitfall", "claims", "run", "workshop guide", "exercises (min)"),
        "total": "total",
        "box": "From the run this page shows",
        "box_failed": "This run FAILED {failed} of {n} claims",
        "box_passed": "This run passed all {n} claims",
        "facts": "seed {seed} · profile {profile} · run {date} · {seconds:.0f} s",
        "claims_cols": ("", "claim", "observed", "expected"),
        "skipped": "skipped: {reason}",
        "source": "the notebook's source",
        "source_here": "the notebook as committed (no outputs)",
        "binder": "launch it in Binder",
        "no_binder": "(Binder: build the site with `--repo-url` to link it)",
        "report": "Report",
        "notebooks": "Notebooks",
        "results": "Results",
        "guides": "Guides",
        "workshop": "workshop guide",
        "date_unknown": "date not recorded",
        "readme_section": "The two commands",  # where the README's story and commands are read from
        "timing_heading": "## timing",
    },
    "zh_CN": {
        "title": "labkit —— 课程",
        "teaches": "这门课教什么",
        "story": "故事",
        "who": "适合谁",
        "who_text": (
            "训练或微调序列到序列模型、想在经典的坑让你白白损失一周之前就认出它们的工程师：脏的爬取数据、显存不足、"
            "根本没有分布式的分布式启动、不同步的采样器和随机种子、梯度爆炸、慢吞吞的部署。挑选入职培训材料的团队负责人"
            "不用装任何东西，就能在这里读到每个笔记本和它真实的输出；讲师可以在{workshop}里找到日程安排。你需要会 Python "
            "和一点 PyTorch；一台没有 GPU 的 2 核机器就能跑完整门课。"
        ),
        "commands": "两条命令",
        "commands_text": "在刚克隆的仓库里（Python >= 3.11；运行时不下载任何东西）：",
        "times": "笔记本和实测用时",
        "times_text": (
            "下面每一页都是课程运行器执行过的笔记本：输出、图和断言都来自那次运行，从不手工修改。*运行* 是那次运行的用时"
            "（笔记本 `results.json` 里的 `seconds`）；*讲师指南* 是{workshop}里的用时表（一台空闲的 2 核机器）。"
        ),
        "cols": ("#", "笔记本", "坑", "断言", "运行", "讲师指南", "练习（分钟）"),
        "total": "合计",
        "box": "本页展示的这次运行",
        "box_failed": "这次运行有 {failed} / {n} 条断言未通过",
        "box_passed": "这次运行全部 {n} 条断言通过",
        "facts": "随机种子 {seed} · 配置 {profile} · 运行于 {date} · {seconds:.0f} 秒",
        "claims_cols": ("", "断言", "实测", "期望"),
        "skipped": "跳过：{reason}",
        "source": "笔记本源文件",
        "source_here": "提交时的笔记本（没有输出）",
        "binder": "在 Binder 中打开",
        "no_binder": "（Binder：用 `--repo-url` 构建站点才会有链接）",
        "report": "报告",
        "notebooks": "笔记本",
        "results": "结果",
        "guides": "指南",
        "workshop": "讲师指南",
        "date_unknown": "未记录日期",
        "readme_section": "中文版",
        "timing_heading": "## 时间",
    },
}


def text(lang: str) -> dict:
    """The edition's words; English until an edition has its own."""
    return TEXT.get(lang, TEXT["en"])


@dataclass
class Page:
    """One notebook page: the notebook, its run's results and status, and where its source lives."""

    stem: str
    number: str
    title: str
    results: dict
    status: dict
    date: str  # ISO 8601, UTC
    source_path: str  # the committed notebook, relative to the repository root
    extras: dict = field(default_factory=dict)

    @property
    def claims(self) -> list[dict]:
        return self.results.get("expectations", [])

    @property
    def failed(self) -> list[dict]:
        return [e for e in self.claims if not e["passed"]]


def cell(x) -> str:
    """Any value as text safe in a MyST table cell: HTML-escaped, markup characters escaped, breaks as <br>."""
    s = html.escape(x if isinstance(x, str) else str(x), quote=False)
    s = re.sub(r"([\\`*_{}\[\]|$#])", r"\\\1", s)
    return s.replace("\r\n", "\n").replace("\n", "<br>")


def when(iso: str, lang: str = "en") -> str:
    try:
        return datetime.fromisoformat(iso).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except (TypeError, ValueError):
        return text(lang)["date_unknown"]


# ---- what other files already say ----------------------------------------------------------------------------


def readme_parts(readme: str, lang: str = "en") -> dict:
    """From the README: the story (the paragraph(s) under the title), the two commands' code block, and each
    notebook's pitfall from its notebook table (`| 05 | ... | the pitfall | ... |`)."""
    if lang == "en":
        story = re.search(r"^# [^\n]*\n+(.*?)\n## ", readme, re.S | re.M)
    else:  # a translated edition's story: the first paragraph of its README section
        story = re.search(rf"^## {re.escape(text(lang)['readme_section'])}[^\n]*\n+(.*?)\n\n", readme, re.S | re.M)
    section = re.escape(text(lang)["readme_section"])
    cmds = re.search(rf"^## {section}[^\n]*\n.*?```(\w*)\n(.*?)```", readme, re.S | re.M)
    pitfalls = {}
    for line in readme.splitlines():
        m = re.match(r"^\|\s*(\d\d)\s*\|\s*`?\w+`?\s*\|\s*(.*?)\s*\|\s*.*\|\s*$", line)
        if m:
            pitfalls[m.group(1)] = m.group(2)
    return {
        "story": story.group(1).strip() if story else "",
        "commands": (cmds.group(1) or "bash", cmds.group(2).rstrip()) if cmds else None,
        "pitfalls": pitfalls,
    }


def guide_times(guide: str, lang: str = "en") -> dict[str, tuple[str, str]]:
    """The workshop guide's timing table (`## Timing ...`): notebook number -> (measured run, exercise minutes)."""
    out: dict[str, tuple[str, str]] = {}
    inside = False
    for line in guide.splitlines():
        if line.startswith("#"):
            inside = line.lower().startswith(text(lang)["timing_heading"])
            continue
        cols = [c.strip() for c in line.strip().strip("|").split("|")] if inside and line.startswith("|") else []
        if len(cols) >= 4 and re.fullmatch(r"\d\d", cols[0]):
            out[cols[0]] = (cols[2], cols[3])
    return out


# ---- the pages -----------------------------------------------------------------------------------------------


def _doc(path: str, title: str) -> str:
    return f"{{doc}}`{title.replace('<', '&lt;').replace('`', '')} <{path}>`"


def landing(pages: list[Page], readme: str, guide: str, docs: list[str], lang: str = "en") -> str:
    t = text(lang)
    parts = readme_parts(readme, lang)
    if lang != "en":
        parts["pitfalls"] = readme_parts(readme)["pitfalls"]  # the notebook table is the English README's
    times = guide_times(guide, lang)
    workshop = _doc("docs/workshop", t["workshop"]) if "workshop" in docs else t["workshop"]
    lines = [f"# {t['title']}", ""]
    if parts["story"]:
        lines += [f"## {t['story']}", "", parts["story"], ""]
    lines += [f"## {t['who']}", "", t["who_text"].format(workshop=workshop), ""]
    if parts["commands"]:
        lang_tag, code = parts["commands"]
        lines += [f"## {t['commands']}", "", t["commands_text"], "", f"```{lang_tag}", code, "```", ""]
    lines += [f"## {t['teaches']}", "", f"### {t['times']}", "", t["times_text"].format(workshop=workshop), ""]
    lines += ["| " + " | ".join(t["cols"]) + " |", "|" + "---|" * len(t["cols"])]
    total = 0.0
    for p in pages:
        secs = float(p.results.get("seconds") or p.status.get("seconds") or 0)
        total += secs
        ok = sum(e["passed"] for e in p.claims)
        verdict = f"{MARK[not p.failed]} {ok}/{len(p.claims)}"
        run, exercises = times.get(p.number, ("–", "–"))
        row = [p.number, _doc(f"notebooks/{p.stem}", p.title), parts["pitfalls"].get(p.number, ""), verdict]
        lines.append("| " + " | ".join(row + [f"{secs:.0f} s", run, exercises]) + " |")
    lines.append(f"| | **{t['total']}** | | | **{total:.0f} s** ({total / 60:.1f} min) | | |")
    return "\n".join(lines) + "\n" + toctree(pages, docs, lang)


def toctree(pages: list[Page], docs: list[str], lang: str = "en") -> str:
    t = text(lang)
    blocks = [
        (t["notebooks"], [f"notebooks/{p.stem}" for p in pages]),
        (t["results"], ["report"]),
        (t["guides"], [f"docs/{d}" for d in docs]),
    ]
    out = []
    for caption, entries in blocks:
        if entries:
            out += ["", "```{toctree}", ":hidden:", f":caption: {caption}", "", *entries, "```"]
    return "\n".join(out) + "\n"


def run_box(page: Page, links: dict, lang: str = "en") -> str:
    """The markdown cell put under a notebook's title: the run's verdict and facts, its claims, the links."""
    t = text(lang)
    n, failed = len(page.claims), len(page.failed)
    head = t["box_failed"].format(failed=failed, n=n) if failed else t["box_passed"].format(n=n)
    facts = t["facts"].format(
        seed=page.results.get("seed", "?"),
        profile=page.results.get("profile", "?"),
        date=when(page.date, lang),
        seconds=float(page.results.get("seconds") or 0),
    )
    rows = ["| " + " | ".join(t["claims_cols"]) + " |", "|---|---|---|---|"]
    for e in page.claims:
        rows.append(
            f"| {MARK[bool(e['passed'])]} | {cell(_name(e, page.stem, lang))} | {cell(_fmt(e['observed']))} | {cell(e['expected'])} |"
        )
    for x in page.results.get("skipped", []):
        rows.append(
            f"| {MARK[None]} | {cell(claim(page.stem, x['name'], lang))} | — | {cell(t['skipped'].format(reason=x['reason']))} |"
        )
    link_html = " · ".join(f'<a href="{html.escape(href)}">{html.escape(text)}</a>' for text, href in links.items())
    if not any(t["binder"] == k for k in links):
        link_html += " " + t["no_binder"]
    kind = "warning" if failed else "tip"
    return "\n".join(
        [
            f"```{{admonition}} {t['box']}",
            f":class: {kind} labkit-run",
            "",
            f"**{head}** · {facts}",
            "",
            link_html,
            "",
            *rows,
            "```",
        ]
    )


def source_links(page: Page, repo_url: str | None, ref: str, site_copy: str, lang: str = "en") -> dict[str, str]:
    """The notebook's source (the repository's file, else the committed copy in the site) and its Binder launch."""
    t = text(lang)
    links = {t["source_here"]: site_copy}
    if repo_url:
        links = {t["source"]: f"{repo_url}/blob/{ref}/{page.source_path}", **links}
        binder = binder_url(repo_url, ref, page.source_path)
        if binder:
            links[t["binder"]] = binder
    return links


def binder_url(repo_url: str, ref: str, path: str) -> str | None:
    """mybinder.org's launch link for a notebook of a GitHub or GitLab repository, opened in JupyterLab."""
    m = re.match(r"^https://(github\.com/[^/]+/[^/]+?|gitlab\.com/[^/]+/.+?)/?$", repo_url)
    if not m:
        return None
    host, repo = m.group(1).split("/", 1)
    kind = "gh" if host == "github.com" else "gl"
    repo = repo if kind == "gh" else quote(repo, safe="")
    return f"https://mybinder.org/v2/{kind}/{repo}/{quote(ref, safe='')}?urlpath={quote('lab/tree/' + path, safe='')}"


def report_page(md: str, lang: str = "en") -> str:
    """`report.md` as a site page: its own title, the rest as the runner wrote it."""
    return re.sub(r"^# .*$", f"# {text(lang)['report']}", md, count=1, flags=re.M)


def conf_py(lang: str, prefix: str, repo_url: str | None, editions: list[tuple[str, str, str]]) -> str:
    """Sphinx's conf.py: myst-nb renders the executed notebooks as they are (never executes them), widgets fall
    back to their static HTML snapshot, nothing is loaded from another host; `editions` (lang, label, root-relative
    prefix) makes the language switch, present only when there is more than one."""
    options = {
        "home_page_in_toc": True,
        "use_download_button": False,
        "show_toc_level": 2,
        "navigation_with_keys": False,
    }
    if repo_url:
        options |= {"repository_url": repo_url, "use_repository_button": True}
    if len(editions) > 1:
        options["article_header_end"] = ["language-switch.html", "article-header-buttons.html"]
    settings = {
        "project": "labkit",
        "language": lang,
        "extensions": ["myst_nb"],
        "nb_execution_mode": "off",
        "nb_merge_streams": True,
        "nb_mime_priority_overrides": [["html", "application/vnd.jupyter.widget-view+json", None]],
        "nb_ipywidgets_js": {},
        "myst_heading_anchors": 3,
        "smartquotes": False,  # observed values and code stay as the run printed them
        "html_favicon": "../static/favicon.svg",  # else the browser asks for /favicon.ico (a 404)
        "suppress_warnings": ["myst.header", "misc.highlighting_failure", "myst.xref_missing"],
        "html_theme": "sphinx_book_theme",
        "html_title": text(lang)["title"],
        "html_theme_options": options,
        "html_copy_source": False,
        "html_show_sourcelink": False,
        "html_show_copyright": False,
        "html_extra_path": ["../extra"],
        "html_static_path": ["../static"],
        "html_css_files": ["labkit.css"],
        "templates_path": ["../templates"],
        "html_context": {
            "labkit_editions": [list(e) for e in editions],
            "labkit_lang": lang,
            "labkit_prefix": prefix,
            "default_mode": "light",
        },
        "exclude_patterns": ["_build"],
    }
    conf = "".join(f"{k} = {v!r}\n" for k, v in settings.items())
    if lang.startswith("zh"):
        conf += ZH_SEARCH_FIX
    return conf


# Sphinx 9.0 names the search stemmer's JS class after the language ("ChineseStemmer"), but Chinese search ships
# the English stemmer: every page of a zh site throws "ChineseStemmer is not defined" and search finds nothing
# (sphinx-doc/sphinx#14229, fixed by #14416 after 9.0.4, the newest release on PyPI). The fix's rule, here.
ZH_SEARCH_FIX = """
import sphinx.search
from sphinx.search.zh import SearchChinese


class _SearchChinese(SearchChinese):
    language_name = "English"  # the JS class is `{language_name}Stemmer`: english-stemmer.js defines EnglishStemmer


sphinx.search.languages["zh"] = _SearchChinese
"""


CSS = """.labkit-run table{font-size:.85em}.labkit-run td{vertical-align:top}
.labkit-pass{color:#1a7f37;font-weight:600;white-space:nowrap}.labkit-fail{color:#cf222e;font-weight:600;white-space:nowrap}
.labkit-skip{color:#9a6700;white-space:nowrap}.bd-article table{font-size:.88em}
.labkit-lang{margin-left:auto;font-size:.9em}.labkit-lang a{margin-left:.6em}
"""

FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#1a7f37"/>'
    '<path d="M4 8.5l3 3 5-7" stroke="#fff" stroke-width="2" fill="none"/></svg>'
)

# the language switch: every other edition's copy of this page (`pagename` is the same in every edition; an
# edition's pages sit under its prefix, "" for the first, e.g. "zh_CN/" for another), or that edition's landing
# page where it has no copy (a translated edition shows only the notebooks and guides it has)
LANGUAGE_SWITCH = """{%- set up = '../' * (pagename.count('/') + labkit_prefix.count('/')) -%}
<nav class="labkit-lang" aria-label="language">
{%- for lang, label, prefix, pages in labkit_editions if lang != labkit_lang %}
{%- set target = pagename if pagename in pages else 'index' %}
<a href="{{ up }}{{ prefix }}{{ target }}.html" hreflang="{{ lang }}" lang="{{ lang }}">{{ label }}</a>
{%- endfor %}</nav>
"""
