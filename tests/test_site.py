"""The course website (`labkit course site`): built from a run's executed notebooks, checked as a reader would.

* fast: the landing page, a notebook's run box and the notebook copy from a tiny fake run (no Sphinx, no browser);
  the refusals (no run, a run that stopped before its claims, a skipped run, an --out that is not a site): exit 2,
  one line, nothing written; a Sphinx build of a fake run whose notebook failed a claim shows it as failed
  everywhere; a second edition (`notebooks/zh_CN/`) gets a language switch on every page, one edition none;
* built from the proof (`notebook`; it waits for the runs of tests/test_notebooks.py, tests/course_runs.py): the
  site of the notebooks this session runs, from `runs/pytest/` -> `runs/pytest/site`, its size bounded;
* in Chromium (`browser`, also `notebook`: it comes last): that site -- or, when this session runs no whole course,
  one built from this session's runs of 00 and 05 -- served by `python -m http.server` on loopback and crawled: every
  page loads without a console error or a failed request, every image has a size, every internal link and anchor
  resolves, search finds `set_epoch`, 05's claims table shows its pass marks, Chinese text has a CJK font.
"""

from __future__ import annotations

import base64
import io
import html
import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest
from course_runs import course_run, lock, mark_this_session, out_dir, ran_this_session

from labkit import i18n
from labkit.course import site
from labkit.course.site_pages import binder_url, guide_times, landing, readme_parts, run_box

ROOT = Path(__file__).resolve().parents[1]
PYTEST_RUNS = out_dir()  # where tests/test_notebooks.py runs the course
MAX_BYTES_PER_NOTEBOOK = 1_500_000  # the site's bound: theme (~3 MB) + this per notebook page (plots compressed)
THEME_BYTES = 4_000_000


# ------------------------------------------------------------------------------------------ a fake run
def _png(width: int = 320, height: int = 160) -> str:
    from PIL import Image, ImageDraw

    img = Image.new("RGBA", (width, height), "white")
    draw = ImageDraw.Draw(img)
    for i in range(0, width, 4):  # a plot-like curve with antialiasing-like shades
        draw.line([(i, height - 1), (i, int(height / 2 + 40 * ((i / width) - 0.5) ** 2 * 4))], fill=(31, 119, i % 256))
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()


def _notebook(title: str, executed: bool) -> nbformat.NotebookNode:
    code = nbformat.v4.new_code_cell("sampler.set_epoch(epoch)  # the fix\nplot()")
    if executed:
        code.outputs = [
            nbformat.v4.new_output("stream", name="stdout", text="set_epoch called 标题\n"),
            nbformat.v4.new_output("display_data", data={"image/png": _png(), "text/plain": "<Figure>"}),
        ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {title}\n\nIntro."), code])
    nb.metadata["labkit"] = {"title": title, "minutes": 1}
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def _claim(name: str, passed: bool, kind: str | None = "fix") -> dict:
    e = {"name": name, "passed": passed, "observed": 0.5 if passed else 7, "expected": "< 1 | the bar"}
    return {**e, "kind": kind} if kind else e


def fake_course(tmp: Path, runs: dict[str, list[dict] | str | None], folder: str = "") -> tuple[Path, Path]:
    """notebooks/ and runs/ for stems -> claims (a run that recorded them), "crashed", "skipped" or None (no run)."""
    nbs, out = tmp / "notebooks" / folder, tmp / "runs" / folder
    nbs.mkdir(parents=True, exist_ok=True)
    for stem, claims in runs.items():
        title = stem[3:].replace("_", " ").capitalize()
        nbformat.write(_notebook(title, executed=False), nbs / f"{stem}.ipynb")
        if claims is None:
            continue
        d = out / stem
        d.mkdir(parents=True)
        status = {"stem": stem, "title": title, "status": "passed", "seconds": 3.0, "reason": ""}
        if claims == "skipped":
            status |= {"status": "skipped", "reason": "needs 2 GPU(s), this machine has 0"}
        else:
            nbformat.write(_notebook(title, executed=True), d / f"{stem}.ipynb")
        if claims == "crashed":
            status |= {"status": "failed", "reason": "ZeroDivisionError: division by zero\nTraceback ..."}
        elif isinstance(claims, list):
            failed = [c for c in claims if not c["passed"]]
            status["status"] = "failed" if failed else "passed"
            results = {"notebook": stem, "profile": "smoke", "seed": 3, "seconds": 2.5}
            results |= {"date": "2026-11-30T08:15:00+00:00", "expectations": claims, "metrics": {}, "skipped": []}
            (d / "results.json").write_text(json.dumps(results), encoding="utf-8")
        (d / "status.json").write_text(json.dumps(status), encoding="utf-8")
    return tmp / "notebooks", tmp / "runs"


def tiny_docs(tmp: Path) -> Path:
    docs = tmp / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "workshop.md").write_text(
        "# Workshop\n\n## Timing (2 CPU cores)\n\n| # | notebook | run (measured) | exercises (min) | x |\n"
        "|---|---|---|---|---|\n| 00 | start | 7 s | – | – |\n| 05 | samplers | 28 s | 7 | y |\n",
        encoding="utf-8",
    )
    return docs


GOOD = [_claim("no sampler: overlap", True, "pitfall"), _claim("set_epoch: overlap 0", True)]
ONE_FAILED = [_claim("no sampler: overlap", True, "pitfall"), _claim("set_epoch: overlap 0 *_|", False)]


# ------------------------------------------------------------------------------------------ fast
def test_landing_run_box_and_notebook_copy_from_a_fake_run(tmp_path):
    nbs, runs = fake_course(tmp_path, {"00_start_here": GOOD, "05_samplers_and_seeds": ONE_FAILED})
    ed = site.editions(ROOT, runs, nbs, tiny_docs(tmp_path))[0]
    pages = site.read_pages(ed, ROOT)
    assert [p.stem for p in pages] == ["00_start_here", "05_samplers_and_seeds"]
    readme = "# labkit\n\nThe story here.\n\n## The two commands\n\n```bash\nmake run\nmake test\n```\n"
    readme += "| 05 | `05_samplers_and_seeds` | missing `set_epoch` | `distributed` |\n"
    md = landing(pages, readme, (ed.docs / "workshop.md").read_text(), ["workshop"])
    assert "The story here." in md and "make run\nmake test" in md
    row05 = next(line for line in md.splitlines() if line.startswith("| 05 |"))
    assert "{doc}`Samplers and seeds <notebooks/05_samplers_and_seeds>`" in row05
    assert "missing `set_epoch`" in row05 and "FAIL" in row05 and "1/2" in row05
    assert "| 2 s | 28 s | 7 |" in row05  # this run's seconds, then the workshop guide's table
    assert "**5 s**" in md and "notebooks/00_start_here" in md.split("```{toctree}")[1]

    box = run_box(pages[1], {"the notebook as committed (no outputs)": "../source/x.ipynb"})
    assert "FAILED 1 of 2 claims" in box and "seed 3 · profile smoke · run 2026-11-30 08:15 UTC" in box
    assert box.count("✘ FAIL") == 1 and box.count("✔ PASS") == 1 and ":class: warning" in box
    assert r"overlap 0 \*\_\|" in box  # markup in a claim stays text
    assert "--repo-url" in box  # no repository: no Binder link, and it says how to get one

    nb = site.page_notebook(runs / "05_samplers_and_seeds" / "05_samplers_and_seeds.ipynb", box)
    assert "".join(nb["cells"][0]["source"]).startswith("# ") and nb["cells"][1]["source"] == box
    png = nb["cells"][2]["outputs"][1]["data"]["image/png"]
    assert len(png) <= len(_png()) and base64.b64decode(png)[:4] == b"\x89PNG"


def test_the_readme_and_the_workshop_guide_feed_the_landing_page():
    parts = readme_parts((ROOT / "README.md").read_text(encoding="utf-8"))
    assert "T5" in parts["story"] and "make run" in parts["commands"][1] and "make test" in parts["commands"][1]
    assert {f"{i:02d}" for i in range(10)} <= set(parts["pitfalls"])
    # the guide's timing table as `labkit course times --update` writes it (from docs/times.json): # | notebook |
    # run on its own | exercises (min) | ...; the landing page shows columns 3 and 4 beside this run's seconds
    generated = (
        "## Timing (2 CPU cores, smoke profile)\n\n<!-- times: ... -->\n| # | notebook | run on its own | exercises (min) "
        "| beside 1 busy process |\n|---|---|---|---|---|\n| 00 | 00_start_here | 7 s | – | not measured |\n"
        "| 05 | 05_samplers_and_seeds | 28 s | 9 | 41 s |\n<!-- /times -->\n\n## Agenda: 3 hours\n\n| 0:00 | 00 |\n"
    )
    assert guide_times(generated) == {"00": ("7 s", "–"), "05": ("28 s", "9")}
    times = guide_times((ROOT / "docs" / "workshop.md").read_text(encoding="utf-8"))
    assert all(re.fullmatch(r"\d\d", k) and v[0] for k, v in times.items()), times


def test_repository_source_and_binder_links(monkeypatch):
    assert site.web_url("git@github.com:acme/labkit.git") == "https://github.com/acme/labkit"
    assert site.web_url("https://token@gitlab.com/acme/sub/labkit.git") == "https://gitlab.com/acme/sub/labkit"
    assert binder_url("https://github.com/acme/labkit", "abc123", "notebooks/05_x.ipynb") == (
        "https://mybinder.org/v2/gh/acme/labkit/abc123?urlpath=lab%2Ftree%2Fnotebooks%2F05_x.ipynb"
    )
    assert binder_url("https://gitlab.com/acme/sub/labkit", "main", "n.ipynb").startswith(
        "https://mybinder.org/v2/gl/acme%2Fsub%2Flabkit/main?"
    )
    assert binder_url("https://example.org/git/labkit", "main", "n.ipynb") is None
    for var in ("LABKIT_REPO_URL", "CI_PROJECT_URL", "CI_COMMIT_SHA"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/labkit")
    monkeypatch.setenv("GITHUB_SHA", "f00d")
    assert site.repository(ROOT) == ("https://github.com/acme/labkit", "f00d")
    assert site.repository(ROOT, "https://gitlab.com/x/y/", "v1") == ("https://gitlab.com/x/y", "v1")


def _site_cli(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "labkit.cli", "course", "site", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize(
    "run, says",
    [
        (None, "05_samplers_and_seeds has no run in"),
        ("crashed", "stopped before recording its claims (failed: ZeroDivisionError: division by zero)"),
        ("skipped", "was skipped by its run (needs 2 GPU(s)"),
    ],
)
def test_a_notebook_without_a_usable_run_is_refused_in_one_line(tmp_path, run, says):
    nbs, runs = fake_course(tmp_path, {"00_start_here": GOOD, "05_samplers_and_seeds": run})
    r = _site_cli("--notebooks", str(nbs), "--runs", str(runs), "--out", str(tmp_path / "site"))
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("labkit course site: "), r.stderr
    assert says in r.stderr and ("--only" in r.stderr or "run `labkit course run" in r.stderr), r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "site").exists()


def test_an_out_folder_that_is_not_a_site_is_never_replaced(tmp_path):
    nbs, runs = fake_course(tmp_path, {"00_start_here": GOOD})
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("keep me")
    r = _site_cli("--notebooks", str(nbs), "--runs", str(runs), "--out", str(tmp_path / "mine"))
    assert r.returncode == 2 and "is not a site this command built" in r.stderr, r.stderr
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "keep me"


def _offsite_refs(html: str) -> list[str]:
    """What a page would load from another host (links to other sites are fine, loading from them is not)."""
    refs = re.findall(r"<(?:script|img|iframe)[^>]*\ssrc=\"([^\"]+)\"", html)
    refs += re.findall(r"<link[^>]*\shref=\"([^\"]+)\"", html)
    return [r for r in refs if re.match(r"^(https?:)?//", r)]


@pytest.mark.slow  # a Sphinx build: 10-30 s
def test_a_failed_claim_is_built_and_shown_as_failed(tmp_path):
    nbs, runs = fake_course(tmp_path, {"00_start_here": GOOD, "05_samplers_and_seeds": ONE_FAILED})
    out = tmp_path / "site"
    summary = site.build(out, runs, notebooks_dir=nbs, docs_dir=tiny_docs(tmp_path), repo_url="https://github.com/a/b")
    page = (out / "notebooks" / "05_samplers_and_seeds.html").read_text(encoding="utf-8")
    assert page.count('class="labkit-fail"') == 1 and page.count('class="labkit-pass"') == 1
    assert "FAILED 1 of 2 claims" in page and "set_epoch called" in page and "<img" in page
    assert 'href="https://mybinder.org/v2/gh/a/b/' in page and 'href="https://github.com/a/b/blob/' in page
    assert (out / "source" / "notebooks" / "05_samplers_and_seeds.ipynb").is_file()  # the committed copy
    assert "labkit-fail" in (out / "index.html").read_text(encoding="utf-8")
    assert "FAIL" in (out / "report.html").read_text(encoding="utf-8")
    assert summary["notebooks"]["05_samplers_and_seeds"]["failed"] == 1 and summary["pages"] >= 6
    assert json.loads((out / site.MARKER).read_text())["bytes"] == summary["bytes"]
    for html_file in out.rglob("*.html"):
        text = html_file.read_text(encoding="utf-8")
        assert not _offsite_refs(text), f"{html_file.name} loads from another host: {_offsite_refs(text)}"
        assert "labkit-lang" not in text  # one edition: no language switch
    assert not list(out.rglob("*.map")) and summary["bytes"] < THEME_BYTES + 2 * MAX_BYTES_PER_NOTEBOOK
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs", "notebooks", "runs", "site"]  # nothing beside it
    site.build(out, runs, notebooks_dir=nbs, docs_dir=tmp_path / "docs")  # a previous site is replaced


@pytest.mark.slow  # two Sphinx builds: 15-30 s
def test_a_second_edition_plugs_in_with_a_language_switch_on_every_page(tmp_path):
    nbs, runs = fake_course(tmp_path, {"05_samplers_and_seeds": GOOD})
    fake_course(tmp_path, {"05_samplers_and_seeds": GOOD}, folder="zh_CN")
    out = tmp_path / "site"
    summary = site.build(out, runs, notebooks_dir=nbs, docs_dir=tiny_docs(tmp_path))
    assert summary["editions"] == ["en", "zh_CN"] and (out / "zh_CN" / "index.html").is_file()
    pages = list(out.rglob("*.html"))
    assert len(pages) == 2 * 6  # landing, report, the notebook, one guide, search, index; in each edition
    for p in pages:
        switch = re.search(r'<nav class="labkit-lang"[^>]*>(.*?)</nav>', p.read_text(encoding="utf-8"), re.S)
        assert switch, f"{p.relative_to(out)} has no language switch"
        hrefs = re.findall(r'href="([^"]+)"', switch.group(1))
        assert len(hrefs) == 1 and (p.parent / hrefs[0]).resolve().is_file(), (p.relative_to(out), hrefs)
        assert (p.parent / hrefs[0]).resolve().relative_to(out.resolve()).parts[0] != p.relative_to(out).parts[0]


# ------------------------------------------------------------------------------------------ built from the proof
def _this_sessions_course(session) -> tuple[list[str], list[str]]:
    """The notebooks this session runs (tests/test_notebooks.py), and those it also runs in Chinese
    (tests/test_notebooks_zh.py): their runs, made now or waited for (tests/course_runs.py)."""
    ran = {it.path.name: [] for it in session.items}
    for it in session.items:
        if it.get_closest_marker("notebook") and hasattr(it, "callspec"):
            ran[it.path.name].append(it.callspec.params.get("stem"))
    stems = [s for s in ran.get("test_notebooks.py", []) if s]
    zh = set(s for s in ran.get("test_notebooks_zh.py", []) if s)
    if "test_the_chinese_start_here_through_the_command_line" in {it.name for it in session.items}:
        zh.add("00_start_here")
    for stem in stems:
        course_run(stem)
    for stem in sorted(zh):
        course_run(stem, "zh_CN")
    return stems, sorted(s for s in zh if s in stems)


def _session_site(session) -> tuple[Path | None, list[str], list[str]]:
    """(folder, notebooks, Chinese notebooks) of the site of this session's course run, runs/pytest/site: built by
    the first test that asks (in any xdist worker), None when this session runs no course notebook."""
    stems, zh = _this_sessions_course(session)
    if not stems:
        return None, stems, zh
    out = PYTEST_RUNS / "site"
    with lock(out):
        if not ran_this_session(out):
            r = _site_cli("--runs", str(PYTEST_RUNS), "--out", str(out), "--only", *[s[:2] for s in stems])
            assert r.returncode == 0, r.stderr[-3000:]
            print(r.stdout.strip())
            mark_this_session(out)
    return out, stems, zh


@pytest.mark.notebook
def test_the_site_is_built_from_this_sessions_course_run(request):
    """`make test`'s own run -> its site (runs/pytest/site); a failed claim there would be shown as failed."""
    out, stems, zh = _session_site(request.session)
    if out is None:
        pytest.skip("no course notebook runs in this session (tests/test_notebooks.py makes the run this site needs)")
    summary = json.loads((out / site.MARKER).read_text())
    for stem in stems:
        results = json.loads((PYTEST_RUNS / stem / "results.json").read_text())
        page = (out / "notebooks" / f"{stem}.html").read_text(encoding="utf-8")
        n_failed = sum(not e["passed"] for e in results["expectations"])
        assert page.count('class="labkit-fail"') == n_failed, stem
        assert page.count('class="labkit-pass"') == len(results["expectations"]) - n_failed, stem
    if zh:  # the Chinese edition, from the Chinese run: its claims in Chinese, a switch to the English page
        assert summary["editions"] == ["en", "zh_CN"], summary["editions"]
        for stem in zh:
            page = (out / "zh_CN" / "notebooks" / f"{stem}.html").read_text(encoding="utf-8")
            results = json.loads((PYTEST_RUNS / "zh_CN" / stem / "results.json").read_text())
            shown = [i18n.claim(stem, e["name"], "zh_CN") for e in results["expectations"]]
            assert all(html.escape(t, quote=False) in page for t in shown), stem
            assert "English" in page and "断言" in page, stem
    n_editions = len(summary["editions"])
    assert summary["bytes"] < n_editions * THEME_BYTES + MAX_BYTES_PER_NOTEBOOK * (len(stems) + len(zh)), summary[
        "bytes"
    ]


# ------------------------------------------------------------------------------------------ in a browser
@pytest.fixture(scope="module")
def served(request, tmp_path_factory):
    """(base URL, site folder, runs folder) of a site on a loopback http.server: this session's course site, or one
    built from this session's runs of 00 and 05 (made now if no test made them yet)."""
    from test_browser import CHROMIUM, _free_port, _unavailable

    if not Path(CHROMIUM).is_file():
        _unavailable(f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium)")
    runs, out = PYTEST_RUNS, _session_site(request.session)[0]
    notebooks = json.loads((out / site.MARKER).read_text())["notebooks"] if out else {}
    if not {"00_start_here", "05_samplers_and_seeds"} <= set(notebooks):
        for stem in ("00_start_here", "05_samplers_and_seeds"):
            run = course_run(stem)
            assert run.status == "passed", f"{stem}: {run.reason[-3000:]}"
        out = tmp_path_factory.mktemp("site") / "site"
        r = _site_cli("--runs", str(runs), "--out", str(out), "--only", "00", "05")
        assert r.returncode == 0, r.stderr[-3000:]
        print(r.stdout.strip())
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base, timeout=2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield base, out, runs
    finally:
        server.terminate()
        server.wait(timeout=10)


IMAGES_JS = """() => Promise.all([...document.images].map(async (i) => {
  i.loading = "eager";
  try { await i.decode(); } catch (e) {}
  return [i.getAttribute("src"), i.naturalWidth, i.naturalHeight];
}))"""
LINKS_JS = "() => [...document.querySelectorAll('a[href]')].map(a => a.href)"
IDS_JS = "() => [...document.querySelectorAll('[id]')].map(e => e.id)"
CJK_PROBE_JS = """() => {
  const own = (e) => [...e.childNodes].some((n) => n.nodeType === 3 && /[\\u4e00-\\u9fff]/.test(n.textContent));
  const el = [...document.querySelectorAll('article *')].find(own);
  el.setAttribute('data-cjk-probe', '');
  return el.textContent;
}"""
CJK_FONT = re.compile(r"CJK|WenQuanYi|Micro ?Hei|Source Han|Droid Sans Fallback|Noto Sans (SC|TC|JP)", re.I)


def crawl(page, base: str) -> tuple[set[str], list[str]]:
    """Every page reachable from index.html by internal links: (pages seen, problems found)."""
    problems, current = [], [""]
    page.on("console", lambda m: m.type == "error" and problems.append(f"{current[0]}: console error: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"{current[0]}: page error: {e}"))
    # a request the next navigation cancels (the favicon, fetched after "load") is not a defect; a missing file
    # answers 404, caught below
    page.on(
        "requestfailed",
        lambda r: r.failure != "net::ERR_ABORTED" and problems.append(f"{current[0]}: request failed: {r.url}"),
    )
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{current[0]}: HTTP {r.status}: {r.url}"))
    seen, queue, ids, links = set(), ["index.html", "search.html"], {}, []
    while queue:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        current[0] = path
        page.goto(base + path, wait_until="load")
        for src, w, h in page.evaluate(IMAGES_JS):
            if not (w and h):
                problems.append(f"{path}: image {src[:80]} has no size ({w}x{h})")
        ids[path] = set(page.evaluate(IDS_JS))
        for href in page.evaluate(LINKS_JS):
            if not href.startswith(base):
                continue  # another site (GitHub, Binder): not ours to check offline
            u = urlsplit(href)
            target = u.path.lstrip("/") or "index.html"
            target += "index.html" if target.endswith("/") else ""
            links.append((path, target, u.fragment))
            if target.endswith(".html") and target not in seen:
                queue.append(target)
    for src, target, frag in links:
        if not target.endswith(".html"):
            with urllib.request.urlopen(base + target, timeout=10) as r:  # raises on 404
                assert r.status == 200, (src, target)
        elif frag and frag not in ids.get(target, ()):
            problems.append(f"{src}: link to {target}#{frag}: no such anchor")
    return seen, problems


@pytest.mark.notebook
@pytest.mark.browser
@pytest.mark.timeout(1200)
def test_the_site_in_a_browser(served):
    from playwright.sync_api import sync_playwright
    from test_browser import CHROMIUM, CHROMIUM_ARGS

    base, out, runs = served
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page()
            seen, problems = crawl(page, base)
            built = json.loads((out / site.MARKER).read_text())
            assert {f"notebooks/{s}.html" for s in built["notebooks"]} | {"report.html", "search.html"} <= seen
            assert not problems, "\n".join(problems[:30])

            page.goto(base + "search.html?q=set_epoch")
            page.wait_for_selector("#search-results ul.search li a", timeout=30_000)
            hits = page.eval_on_selector_all("#search-results ul.search li a", "as => as.map(a => a.href)")
            assert any(h.split("#")[0].endswith("notebooks/05_samplers_and_seeds.html") for h in hits), hits

            if "zh_CN" in built["editions"]:  # Chinese search: jieba segments the pages, the stemmer loads
                page.goto(base + "zh_CN/search.html?q=随机")
                page.wait_for_selector("#search-results ul.search li a", timeout=30_000)
                hits = page.eval_on_selector_all("#search-results ul.search li a", "as => as.map(a => a.href)")
                assert any("/zh_CN/notebooks/" in h for h in hits), hits

            page.goto(base + "notebooks/05_samplers_and_seeds.html")
            claims = json.loads((runs / "05_samplers_and_seeds" / "results.json").read_text())["expectations"]
            marks = page.locator(".labkit-run table tbody tr td:first-child").all_inner_texts()
            assert marks == ["✔ PASS" if e["passed"] else "✘ FAIL" for e in claims] and all(e["passed"] for e in claims)

            page.goto(base + "index.html")
            text = page.evaluate(CJK_PROBE_JS)
            cdp = page.context.new_cdp_session(page)
            cdp.send("DOM.enable")
            cdp.send("CSS.enable")
            root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
            node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "[data-cjk-probe]"})["nodeId"]
            fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
            assert any(CJK_FONT.search(f["familyName"]) and f["glyphCount"] for f in fonts), (text[:60], fonts)
        finally:
            browser.close()
    print(f"site: {len(seen)} pages crawled, {built['pages']} pages, {built['bytes'] / 1e6:.1f} MB")
