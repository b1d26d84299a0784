"""`labkit course site --out DIR [--runs RUNS]`: the course as a static website, built from a run.

The pages are the executed notebooks the course runner wrote (`RUNS/<notebook>/<notebook>.ipynb`), never the
committed, output-free ones: what a reader sees is what that run proved.  A notebook whose run is missing, was
skipped or stopped before it recorded its claims (no `results.json`) is refused -- one line, exit 2, nothing
written; a run that recorded failed claims is built, and its page, the landing table and the report show them as
failed.  Sphinx with myst-nb and the book theme renders the pages (docs/decisions.md says why that tool); the
text around the notebooks comes from `labkit.course.site_pages`.  The site needs nothing at view time but a static file
server (`python -m http.server -d DIR`): no page loads anything from another host.

Editions: English from `notebooks/`; a translated edition plugs in as `notebooks/<lang>/` with its run in
`RUNS/<lang>/` (and its guides in `docs/<lang>/` when they exist), built into `DIR/<lang>/`, showing the notebooks
that run executed (`labkit course run --lang zh_CN --out RUNS/zh_CN`); with more than one edition every page gets a
language switch, with one there is none.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from labkit.atomic import publish
from labkit.cli.errors import RunFailed, UsageError, existing_dir, writable_dir
from labkit.course.discovery import NB_PATTERN, discover, select
from labkit.i18n import using
from labkit.paths import project_root
from labkit.course.report import collect, render_md
from labkit.results import read_run
from labkit.course.site_pages import (
    CSS,
    FAVICON,
    LANGUAGE_SWITCH,
    Page,
    conf_py,
    landing,
    report_page,
    run_box,
    source_links,
)

# (language, its name in the switch, its folder under notebooks/, RUNS/, docs/ and the site; "" = the first)
EDITIONS = (("en", "English", ""), ("zh_CN", "简体中文", "zh_CN"))
DOCS_ORDER = ("workshop", "architecture", "serving", "distributed", "cleaning_at_scale", "decisions")
MARKER = ".labkit-site.json"  # at the site's root: what it was built from; a folder without it is never replaced
SPHINX_TIMEOUT_S = 900


@dataclass
class Edition:
    lang: str
    label: str
    folder: str  # "" for the first edition, else the language: notebooks/<folder>, RUNS/<folder>, DIR/<folder>
    notebooks: Path
    runs: Path
    docs: Path


def editions(root: Path, runs: Path, notebooks_dir: Path | None = None, docs_dir: Path | None = None) -> list[Edition]:
    """English, then every translated edition whose `notebooks/<lang>/` holds course notebooks."""
    nb = Path(notebooks_dir) if notebooks_dir else root / "notebooks"
    en_docs = Path(docs_dir) if docs_dir else root / "docs"
    lang, label, _ = EDITIONS[0]
    out = [Edition(lang, label, "", nb, runs, en_docs)]
    for lang, label, folder in EDITIONS[1:]:
        if any(NB_PATTERN.match(p.name) for p in (nb / folder).glob("*.ipynb")):
            docs = en_docs / folder
            out.append(Edition(lang, label, folder, nb / folder, runs / folder, docs if docs.is_dir() else en_docs))
    return out


def _first_line(text: str, n: int = 200) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= n else line[: n - 3] + "..."


def read_pages(ed: Edition, root: Path, only: list[str] | None = None) -> list[Page]:
    """Every selected notebook's run, or a UsageError naming the first one that cannot be a page and what to do."""
    try:
        infos = select(discover(ed.notebooks), only)
    except FileNotFoundError as exc:
        raise UsageError(f"{exc}") from None
    if not infos:
        raise UsageError(f"no notebooks in {ed.notebooks}; pass --notebooks DIR holding NN_name.ipynb files")
    pages = []
    for info in infos:
        d = ed.runs / info.stem
        run = read_run(d)
        status = run.status
        rerun = f"run `labkit course run --only {info.number} --out {ed.runs}`"
        no_run = f"{info.stem} has no run in {ed.runs}: {rerun} first, or leave it out with --only"
        if status is None:
            raise UsageError(no_run)
        if status.get("status") == "skipped":
            raise UsageError(
                f"{info.stem} was skipped by its run ({_first_line(status.get('reason', ''))}); "
                f"leave it out with --only, or run it on a machine that meets its needs"
            )
        if not (d / f"{info.stem}.ipynb").is_file():
            raise UsageError(no_run)
        results = run.results
        if not results or not results.get("expectations"):
            why = _first_line(status.get("reason", "")) or "no results.json"
            raise UsageError(
                f"{info.stem}: its run in {d} stopped before recording its claims ({status.get('status')}: {why}); "
                f"fix it and {rerun} -- a page is only built from a run that reached its claims"
            )
        date = run.date
        try:
            source = info.path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            source = f"notebooks/{ed.folder + '/' if ed.folder else ''}{info.path.name}"
        pages.append(Page(info.stem, info.number, info.title, results, status, date, source, {"info": info}))
    return pages


# ---- the notebook copies -------------------------------------------------------------------------------------


def compress_png(data: str) -> str:
    """A base64 PNG re-encoded with a 256-colour palette (plots: a third of the bytes or less), if that is smaller."""
    from PIL import Image

    raw = base64.b64decode(data)
    try:
        img = Image.open(io.BytesIO(raw))
        small = img.convert("RGBA").quantize(256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    except (OSError, ValueError):
        return data
    buf = io.BytesIO()
    small.save(buf, "PNG", optimize=True)
    return base64.b64encode(buf.getvalue()).decode("ascii") if buf.tell() < len(raw) else data


def page_notebook(executed: Path, box: str) -> dict:
    """The executed notebook with the run box under its title and its plots compressed (the run's file untouched)."""
    nb = json.loads(executed.read_text(encoding="utf-8"))
    nb["metadata"].pop("widgets", None)  # no widget runs on a static page: outputs fall back to their HTML snapshot
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            png = o.get("data", {}).get("image/png")
            if png:
                o["data"]["image/png"] = compress_png("".join(png) if isinstance(png, list) else png)
    cell = {"cell_type": "markdown", "metadata": {}, "source": box}
    if nb.get("nbformat_minor", 0) >= 5:
        cell["id"] = "labkit-run"
    cells = nb["cells"]
    first = cells[0] if cells else None
    titled = first and first["cell_type"] == "markdown" and "".join(first["source"]).lstrip().startswith("# ")
    cells.insert(1 if titled else 0, cell)
    return nb


# ---- where the source lives --------------------------------------------------------------------------------------


def _git(root: Path, *args: str) -> str:
    try:
        r = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


def web_url(remote: str) -> str | None:
    """A git remote as its web address: git@github.com:o/r.git and https://github.com/o/r.git -> https://github.com/o/r."""
    m = re.match(r"^(?:git@([^:]+):|ssh://git@([^/]+)/|https?://(?:[^@/]+@)?([^/]+)/)(.+?)(?:\.git)?/?$", remote)
    return f"https://{m.group(1) or m.group(2) or m.group(3)}/{m.group(4)}" if m else None


def repository(root: Path, repo_url: str | None = None, ref: str | None = None) -> tuple[str | None, str]:
    """(web address of the repository, the commit or branch to link): the arguments, else LABKIT_REPO_URL, the CI's
    own variables (GitHub Actions, GitLab CI), else the checkout's `origin`; the ref defaults to the commit built."""
    env = os.environ
    url = repo_url or env.get("LABKIT_REPO_URL")
    if not url and env.get("GITHUB_REPOSITORY"):
        url = f"{env.get('GITHUB_SERVER_URL', 'https://github.com')}/{env['GITHUB_REPOSITORY']}"
    url = url or env.get("CI_PROJECT_URL") or web_url(_git(root, "remote", "get-url", "origin"))
    ref = ref or env.get("GITHUB_SHA") or env.get("CI_COMMIT_SHA") or _git(root, "rev-parse", "HEAD") or "main"
    return (url.rstrip("/") if url else None), ref


# ---- the build -------------------------------------------------------------------------------------------------


def _docs(ed: Edition) -> list[str]:
    names = [p.stem for p in ed.docs.glob("*.md")]
    return [d for d in DOCS_ORDER if d in names] + sorted(set(names) - set(DOCS_ORDER))


def page_names(ed: Edition, pages: list[Page]) -> list[str]:
    """The Sphinx page names an edition's site has (the language switch links only to those)."""
    return ["index", "report", "search", "genindex", *(f"notebooks/{p.stem}" for p in pages)] + [
        f"docs/{d}" for d in _docs(ed)
    ]


def write_sources(
    build: Path,
    ed: Edition,
    pages: list[Page],
    root: Path,
    repo: tuple[str | None, str],
    eds: list[Edition],
    names: dict[str, list[str]],
) -> Path:
    """The Sphinx project of one edition under `build`: src/ (conf.py, pages, notebooks), extra/, static/, templates/."""
    src = build / "src"
    (src / "notebooks").mkdir(parents=True)
    docs = _docs(ed)
    switch = [(e.lang, e.label, e.folder + "/" if e.folder else "", names[e.lang]) for e in eds]
    (src / "conf.py").write_text(conf_py(ed.lang, switch[eds.index(ed)][2], repo[0], switch), encoding="utf-8")
    readme = root / "README.md"
    guide = ed.docs / "workshop.md"
    (src / "index.md").write_text(
        landing(
            pages,
            readme.read_text(encoding="utf-8") if readme.is_file() else "",
            guide.read_text(encoding="utf-8") if guide.is_file() else "",
            docs,
            ed.lang,
        ),
        encoding="utf-8",
    )
    profile = pages[0].results.get("profile", "smoke")
    infos = [p.extras["info"] for p in pages]
    (src / "report.md").write_text(report_page(render_md(collect(ed.runs, infos), profile), ed.lang), encoding="utf-8")
    for name in docs:
        (src / "docs").mkdir(exist_ok=True)
        shutil.copyfile(ed.docs / f"{name}.md", src / "docs" / f"{name}.md")
    for p in pages:
        copy = build / "extra" / "source" / "notebooks" / f"{p.stem}.ipynb"
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p.extras["info"].path, copy)
        links = source_links(p, repo[0], repo[1], f"../source/notebooks/{p.stem}.ipynb", ed.lang)
        nb = page_notebook(ed.runs / p.stem / f"{p.stem}.ipynb", run_box(p, links, ed.lang))
        (src / "notebooks" / f"{p.stem}.ipynb").write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    (build / "static").mkdir()
    (build / "static" / "labkit.css").write_text(CSS, encoding="utf-8")
    (build / "static" / "favicon.svg").write_text(FAVICON, encoding="utf-8")
    (build / "templates").mkdir()
    (build / "templates" / "language-switch.html").write_text(LANGUAGE_SWITCH, encoding="utf-8")
    return src


def sphinx(src: Path, out: Path, doctrees: Path) -> None:
    """Sphinx's HTML builder (quiet: warnings only), as its own process."""
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-d", str(doctrees), str(src), str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=SPHINX_TIMEOUT_S)
    if r.stderr.strip():
        print(r.stderr.rstrip(), file=sys.stderr)
    if r.returncode != 0:
        raise RunFailed(
            f"sphinx-build exited {r.returncode}: {_first_line(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else '')}"
        )


def _require_tools() -> None:
    try:
        import myst_nb  # noqa: F401
        import sphinx  # noqa: F401
        import sphinx_book_theme  # noqa: F401
    except ModuleNotFoundError as exc:
        raise UsageError(
            f"the site is built with Sphinx and myst-nb, and {exc.name} is missing: run `make setup` (or pip install -e '.[site]')"
        ) from None


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise UsageError(
            f"--out {out} exists and is not a site this command built (no {MARKER}); name a new or empty folder"
        )


def size_of(site: Path) -> tuple[int, int]:
    """(HTML pages, total bytes) of a built site."""
    files = [p for p in site.rglob("*") if p.is_file()]
    return sum(p.suffix == ".html" for p in files), sum(p.stat().st_size for p in files)


def build(
    out: str | Path,
    runs: str | Path | None = None,
    only: list[str] | None = None,
    notebooks_dir: str | Path | None = None,
    repo_url: str | None = None,
    ref: str | None = None,
    docs_dir: str | Path | None = None,
) -> dict:
    """Build the site into `out` (replaced whole, only at the end); return what `MARKER` records."""
    root = project_root()
    runs = Path(runs) if runs else root / "runs"
    out = Path(out)
    _require_tools()
    _check_out(out)
    eds = editions(root, runs, notebooks_dir, docs_dir)
    pages = {eds[0].lang: read_pages(eds[0], root, only)}  # every refusal before anything is written
    for ed in eds[1:]:
        # a translated edition shows what its own run executed (RUNS/<lang>/), of the notebooks selected; one whose
        # run holds none of them is left out (and with it the language switch)
        ran = [i.number for i in select(discover(ed.notebooks), only) if (ed.runs / i.stem / "status.json").is_file()]
        if ran:
            pages[ed.lang] = read_pages(ed, root, ran)
    eds = [ed for ed in eds if ed.lang in pages]
    names = {ed.lang: page_names(ed, pages[ed.lang]) for ed in eds}
    repo = repository(root, repo_url, ref)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="labkit-site-") as tmp, publish(out, directory=True) as (stage,):
        for ed in eds:
            build_dir = Path(tmp) / ed.lang
            with using(ed.lang):  # the report page and the claims' text in the edition's language
                src = write_sources(build_dir, ed, pages[ed.lang], root, repo, eds, names)
            sphinx(src, build_dir / "html", build_dir / "doctrees")  # myst-nb writes beside its outdir: not in --out
            for junk in ("_sources", ".buildinfo", "objects.inv"):  # Sphinx's own files; no source is copied
                shutil.rmtree(build_dir / "html" / junk, ignore_errors=True)
                (build_dir / "html" / junk).unlink(missing_ok=True)
            for path in [*(build_dir / "html").rglob("*.map"), *(build_dir / "html" / "_static").glob("*.html")]:
                path.unlink()  # source maps (a third of the theme's bytes) and the theme's build macros
            target = stage / ed.folder if ed.folder else stage
            target.mkdir(exist_ok=True)
            for child in (build_dir / "html").iterdir():
                shutil.move(child, target / child.name)
        n_pages, n_bytes = size_of(stage)
        summary = {
            "built": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - t0, 1),
            "pages": n_pages,
            "bytes": n_bytes,
            "runs": str(runs),
            "repository": repo[0],
            "ref": repo[1],
            "editions": [ed.lang for ed in eds],
            "notebooks": {
                p.stem: {"claims": len(p.claims), "failed": len(p.failed), "date": p.date}
                for ed in eds
                for p in pages[ed.lang]
            },
        }
        (stage / MARKER).write_text(json.dumps(summary, ensure_ascii=False, indent=2), encoding="utf-8")
    return summary


# ---- the command ----------------------------------------------------------------------------------------------


def web_address(value: str) -> str:
    """An http(s) address of a repository's web page, e.g. https://github.com/OWNER/REPO."""
    if not re.match(r"^https?://[^/\s]+/\S+$", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a web address; write e.g. https://github.com/OWNER/REPO")
    return value


def register(csub) -> None:
    """`labkit course site` (added to `labkit course`'s actions by labkit.cli)."""
    st = csub.add_parser(
        "site", help="build the course website from a run's executed notebooks: static, with docs, report, search"
    )
    st.add_argument(
        "--out", required=True, type=writable_dir, help="folder to write the site into (new, empty or a previous site)"
    )
    st.add_argument(
        "--runs",
        type=existing_dir,
        default=None,
        help="the run to build from, as `labkit course run --out RUNS` wrote it (default: runs/)",
    )
    st.add_argument("--only", nargs="+", metavar="NN", help="only these notebooks, e.g. 00 05 (default: every one)")
    st.add_argument("--notebooks", type=existing_dir, default=None, help="notebooks directory (default: notebooks/)")
    st.add_argument(
        "--repo-url",
        type=web_address,
        default=None,
        metavar="URL",
        help="the repository's web address, for source and Binder links (default: LABKIT_REPO_URL, the CI's "
        "repository, else git's origin; without one the pages link the committed notebook copied into the site)",
    )
    st.add_argument("--ref", default=None, help="branch or commit the links open (default: the commit built)")
    st.set_defaults(func=cmd_site)


def cmd_site(args) -> int:
    s = build(args.out, args.runs, args.only, args.notebooks, args.repo_url, args.ref)
    failed = {k: v["failed"] for k, v in s["notebooks"].items() if v["failed"]}
    print(
        f"site: {args.out} -- {s['pages']} pages ({len(s['notebooks'])} notebooks), {s['bytes'] / 1e6:.1f} MB, "
        f"built in {s['seconds']:.0f} s; view it with `python3 -m http.server -d {args.out}`"
    )
    if failed:
        print(f"failed claims shown as failed: {', '.join(f'{k} ({v})' for k, v in failed.items())}", file=sys.stderr)
    return 0
