"""`labkit workshop hub` as a room meets it: a real JupyterHub on loopback, 3 learners in Chromium.

Each learner logs in with their own password, opens notebook 03 of their own copy of the release in
JupyterLab, writes a guess for the predict-then-run question 03.4 and runs it, answers exercise 03.2 and runs its
check (✅), and saves.  Learner 2 then tries to read learner 1's
notebook through the hub (learner 2's cookies on learner 1's contents API: refused) and through the file system
(as learner 2's account: permission denied).  Learner 3's cell allocates beyond the room's memory cap and gets
`MemoryError`; the same kernel runs the next cell.  Stopping leaves no process behind: none of the hub's, none of
a learner account's.  The instructor then collects the room (`labkit workshop collect --room`) and grades it (`labkit course grade`): the
gradebook holds the 3 learners, 03.2 passed and 03.4 *answered* with each learner's guess and the measured value,
and every notebook nobody typed in is listed without being run.  The accounts (random names, so a real room on this
machine is never touched) are removed.

The course's Python may sit under a folder closed to other accounts (pyenv under `/root`, mode 0700: this machine
and CI's container): the room opens exactly those folders to its learners' group by ACL while it runs, and stopping
hands each back as it was (mode and ACL).

Needs root (the room makes Unix accounts: CI's container and this course's machines run as root), Chromium,
configurable-http-proxy (both installed by `make setup`) and jupyterhub (the `lab` extra).
"""

from __future__ import annotations

import csv
import grp
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_browser import CHROMIUM, CHROMIUM_ARGS, RENDER_MS, _grade_cell, _unavailable, learner_release, run_cell
from test_browser import type_into

ROOT = Path(__file__).parents[1]
NOTEBOOK, GRADE_ID = "03_memory_and_accumulation.ipynb", "nb03_ex2"
PREDICT_ID, PREDICTIONS = "nb03_ex4", (4, 8, 16)  # the predict-then-run question; each learner's guess
CAP = 2 * 2**30  # each learner's address space; torch, numpy and labkit imported take ~0.6 GiB of it (decisions §27)
LEARNERS = 3

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(720)]


def _needs():
    if os.geteuid() != 0:
        _unavailable("the room makes one Unix account per learner: run as root (CI's container does)")
    if not Path(CHROMIUM).is_file():
        _unavailable(f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium)")
    if shutil.which("configurable-http-proxy") is None:
        _unavailable("no configurable-http-proxy (Debian: apt-get install node-configurable-http-proxy)")
    for module in ("jupyterhub", "jupyterhub_idle_culler", "playwright"):
        pytest.importorskip(module, reason=f"{module} is not installed: pip install -e '.[lab,dev]'")


def _acl(folder: Path) -> str:
    return subprocess.run(["getfacl", "-cpn", str(folder)], capture_output=True, text=True, check=True).stdout


def _solution() -> str:
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / NOTEBOOK, as_version=4)
    src = nb.cells[_grade_cell(nb, GRADE_ID)].source
    return "\n".join(line for line in src.splitlines() if "BEGIN SOLUTION" not in line and "END SOLUTION" not in line)


def _prediction(guess: int) -> str:
    return f'from labkit.exercises.predictions import predict\nprediction_03 = {guess}\npredict("03", prediction_03)'


def _gradebook(grades: Path) -> dict[tuple[str, str], dict]:
    with open(grades / "gradebook.csv", encoding="utf-8") as f:
        return {(row["learner"], row["exercise"]): row for row in csv.DictReader(f)}


def _login(browser, url: str, learner):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(f"{url}/hub/login", timeout=RENDER_MS)
    page.fill("#username_input", learner.name)
    page.fill("#password_input", learner.password)
    page.click("#login_submit")
    page.wait_for_url(f"**/user/{learner.name}/lab**", timeout=RENDER_MS)  # the hub spawned their server
    return page


def _open(page, url: str, learner):
    page.goto(f"{url}/user/{learner.name}/lab/workspaces/hub/tree/notebooks/{NOTEBOOK}?reset", timeout=RENDER_MS)
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=RENDER_MS)
    page.wait_for_function(
        "() => /\\| Idle/.test(document.querySelector('#jp-main-statusbar')?.innerText ?? '')", timeout=RENDER_MS
    )
    return page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")


def _add_cell_below(page, cells, k: int, text: str) -> str:
    """A new cell under cell `k` holding `text`, run; returns its output."""
    cells.nth(k).locator(".jp-InputArea-prompt").click()
    page.keyboard.press("b")
    added = cells.nth(k + 1)
    type_into(page, added, text)
    return run_cell(page, added)


def test_a_room_of_three_learners(tmp_path):
    _needs()
    import nbformat
    from playwright.sync_api import sync_playwright

    from labkit.classroom import hub

    t0 = time.monotonic()
    release = learner_release(tmp_path / "release").parent
    released = nbformat.read(release / "notebooks" / NOTEBOOK, as_version=4)
    index, predict_at = _grade_cell(released, GRADE_ID), _grade_cell(released, PREDICT_ID)
    tag = secrets.token_hex(2)
    (tmp_path / "names.txt").write_text("".join(f"lkt{tag}-{k}\n" for k in range(1, LEARNERS + 1)))
    names = hub.learner_names(names_file=tmp_path / "names.txt")
    state = tmp_path / "state"
    folders = hub.folders_on_the_way(hub.learner_paths())
    closed = [str(d) for d in folders if not d.stat().st_mode & 0o001]  # no learner passes: not owner, not group
    before = {d: (_acl(d), d.stat().st_mode) for d in folders}
    room = None
    try:
        room = hub.start(
            release,
            state,
            names,
            port=0,
            memory=CAP,
            idle_timeout=600,
            lab_settings={"@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"}},  # every cell in the DOM
        )
        one, two, three = room.learners
        homes = {learner.name: learner.home for learner in room.learners}
        assert all(oct(h.stat().st_mode & 0o777) == "0o700" for h in homes.values()), homes
        assert hub.learner_notebooks(state) == {n: h / "workshop" / "notebooks" for n, h in homes.items()}
        culler = [p for p in room.seen if "jupyterhub_idle_culler" in " ".join(p.cmdline())]
        assert culler, "the idle culler is not running as a hub service"
        grants = hub.read_grants(state)
        assert [g["path"] for g in grants] == closed, (grants, closed)  # exactly the closed ones, by ACL
        gid = grp.getgrnam(hub.read_room(state)["group"]).gr_gid
        assert all(f"group:{gid}:--x" in _acl(Path(g["path"])) for g in grants)
        print(f"hub up in {room.started_s:.1f} s; opened to the room's group: {closed or 'nothing'}")

        solution = _solution()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            pages = {}
            try:
                for learner, guess in zip(room.learners, PREDICTIONS):
                    page = pages[learner.name] = _login(browser, room.url, learner)
                    cells = _open(page, room.url, learner)
                    # the predict-then-run question first, as the lesson asks: a guess, run (recorded, not graded)
                    cells.nth(predict_at).scroll_into_view_if_needed()
                    guessed = type_into(page, cells.nth(predict_at), _prediction(guess))
                    assert f"prediction_03 = {guess}" in guessed, guessed
                    run_cell(page, cells.nth(predict_at))
                    exercise, check = cells.nth(index), cells.nth(index + 1)
                    exercise.scroll_into_view_if_needed()
                    typed = type_into(page, exercise, solution)
                    assert "YOUR CODE HERE" not in typed and "sum(" in typed, typed
                    run_cell(page, exercise)
                    out = run_cell(page, check)
                    assert "✅ pass" in out and "❌" not in out, f"{learner.name}'s check:\n{out}"
                    page.keyboard.press("ControlOrMeta+s")
                    print(f"{learner.name}: logged in, 03.2 ✅ at {time.monotonic() - t0:.0f} s")

                # the saved answer is in learner 1's own copy: what collecting reads
                saved = hub.learner_notebooks(state)[one.name] / NOTEBOOK
                deadline = time.monotonic() + 30
                while "sum(l * n" not in saved.read_text(encoding="utf-8") and time.monotonic() < deadline:
                    time.sleep(0.5)
                assert "sum(l * n" in saved.read_text(encoding="utf-8"), f"{saved} was not saved"

                # learner 2 reads their own notebook through the contents API, and is refused learner 1's
                api = "api/contents/notebooks/" + NOTEBOOK
                own = pages[two.name].request.get(f"{room.url}/user/{two.name}/{api}")
                assert own.status == 200 and "window_loss" in own.text(), own.status
                other = pages[two.name].request.get(f"{room.url}/user/{one.name}/{api}")
                assert other.status == 403 and "sum(l * n" not in other.text(), (other.status, other.text()[:300])

                # ... and through the file system, as their own account (learner 1 reads it: the control)
                path = str(saved)
                mine = subprocess.run(["runuser", "-u", one.name, "--", "cat", path], capture_output=True, text=True)
                theirs = subprocess.run(["runuser", "-u", two.name, "--", "cat", path], capture_output=True, text=True)
                assert mine.returncode == 0 and "sum(l * n" in mine.stdout, mine.stderr
                assert theirs.returncode != 0 and "Permission denied" in theirs.stderr, (
                    theirs.returncode,
                    theirs.stderr,
                )

                # learner 3's runaway cell meets the cap; the kernel survives it, and so do the others'
                cells = pages[three.name].locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
                out = _add_cell_below(
                    pages[three.name], cells, index + 1, f"import numpy as np\nbig = np.ones({CAP + 2**30}, np.uint8)"
                )
                assert "MemoryError" in out, f"an allocation of 3 GiB under a 2 GiB cap:\n{out}"
                # ... and the room's thread share reached it: cores / learners, through the thread policy
                share = hub.learner_threads(LEARNERS)
                out = _add_cell_below(
                    pages[three.name],
                    cells,
                    index + 2,
                    "import os, torch\nprint('still', 6 * 7, os.environ['OMP_NUM_THREADS'], torch.get_num_threads())",
                )
                assert f"still 42 {share} {share}" in out, out
                cells1 = pages[one.name].locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
                assert "✅ pass" in run_cell(pages[one.name], cells1.nth(index + 1))
            finally:
                for page in pages.values():
                    page.context.close()
                browser.close()

        uids = {learner.uid for learner in room.learners}
        seen = list(room.seen)
        left = room.stop()
        room = None
        if left["left_by_hub"] or left["learner_processes"]:  # the whole story, where a failure shows it
            print("left:", *left["left_by_hub"] + left["learner_processes"], sep="\n  ")
            print((state / "hub.log").read_text(encoding="utf-8", errors="replace")[-6000:])
        assert left == {"left_by_hub": [], "learner_processes": [], "grants_removed": len(closed)}, left
        after = {d: (_acl(d), d.stat().st_mode) for d in folders}
        assert after == before, "stopping did not hand every folder back as it was"
        assert not any(f":{gid}:" in acl for acl, _ in after.values()) and not (state / hub.GRANTS).exists()
        assert not [p for p in seen if hub.running(p)], "a process the hub started is still running"
        assert not hub.processes_of(uids), "a learner's process outlived the room"
        print(f"room stopped at {time.monotonic() - t0:.0f} s")

        # the instructor collects the room and grades it: one row per learner per exercise of what they typed in
        subs, grades = tmp_path / "submissions", tmp_path / "grades"
        labkit = [sys.executable, "-m", "labkit.cli"]
        got = subprocess.run(
            [*labkit, "workshop", "collect", "--room", str(state), "--out", str(subs)], capture_output=True, text=True
        )
        assert got.returncode == 0 and f"of {LEARNERS} learner(s)" in got.stdout, got.stdout + got.stderr
        graded = subprocess.run(
            [*labkit, "course", "grade", str(subs), "--out", str(grades), "--release", str(release)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert graded.returncode == 0 and "Traceback" not in graded.stderr, graded.stdout + graded.stderr
        book = _gradebook(grades)
        assert {learner for learner, _ in book} == set(names), sorted(book)
        for learner, guess in zip(names, PREDICTIONS):
            assert book[learner, "03.2"]["status"] == "pass", book[learner, "03.2"]
            predicted = book[learner, "03.4"]
            assert predicted["status"] == "answered", predicted  # a prediction is never a pass or a fail
            assert float(predicted["prediction"]) == guess and float(predicted["measured"]) > 1, predicted
            untouched = [row for (who, ex), row in book.items() if who == learner and not ex.startswith("03.")]
            assert untouched and all(row["note"] == "unchanged from the release: not run" for row in untouched)
        print(f"collected and graded; {time.monotonic() - t0:.0f} s in all")
    finally:
        if room is not None:
            room.stop()
        removed = hub.teardown(state) if (state / hub.ROOM_FILE).exists() else hub.remove_learners(names)
    assert sorted(removed) == sorted(names)
    assert not any(Path("/home", n).exists() for n in names)
    with pytest.raises(KeyError):
        grp.getgrnam(hub.room_group(state))  # the room's group went with its accounts
