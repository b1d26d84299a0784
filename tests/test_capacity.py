"""`labkit workshop plan`: the room's capacity from measured per-notebook figures (labkit.classroom.capacity).

The plan against the real thing -- N simulated learners executing a notebook at once on this machine -- is
`labkit bench room` (its recorded result: docs/decisions.md); here the model and the command's contract."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from labkit.classroom.capacity import (
    BINDER_MB,
    SERVER_MB,
    Figures,
    from_runs,
    from_times,
    max_learners,
    plan,
    predict_seconds,
    render,
)
from labkit.cli.errors import UsageError


def test_one_learner_takes_as_long_as_alone_and_a_crowd_shares_the_cores():
    assert predict_seconds(wall=30, cpu=20, learners=1, cores=2) == 30
    assert predict_seconds(wall=30, cpu=20, learners=2, cores=2) == 30  # one core each: no slower
    assert predict_seconds(wall=30, cpu=20, learners=4, cores=2) == pytest.approx(10 + 4 * 20 / 2)
    # a notebook that computes on 2 processes (cpu > wall) has nothing to wait on: the cores are shared
    assert predict_seconds(wall=10, cpu=18, learners=4, cores=2) == pytest.approx(36)


def test_a_run_alone_on_a_shared_machine_did_not_wait_for_itself():
    """Measured alone while the rest of the machine left it 0.59 of 2 cores (labkit bench room, notebook 03): its
    57.4 s were 34.7 CPU s at the rate it got, not 22.7 s of waiting; 2 learners on the 1.04 cores left then."""
    assert predict_seconds(57.4, 34.7, 2, 1.04, solo_cores=0.59) == pytest.approx(2 * 34.7 / 1.04)
    assert predict_seconds(57.4, 34.7, 2, 2) == 57.4  # the same figures read as an idle machine's


def test_plan_says_what_fits_in_memory_and_binder():
    figs = {"03": Figures("03", "03_memory", 25, 20, 900), "07": Figures("07", "07_multitask", 300, 500, 2100)}
    rows = {r.figures.number: r for r in plan(figs, learners=8, cores=16, memory_mb=16 * 1024)}
    assert rows["03"].fits and rows["03"].binder
    assert not rows["07"].fits and not rows["07"].binder  # 8 x (2100 + server) + reserve > 16 GB; 2.1 GB > Binder's
    assert rows["07"].room_mb == 8 * (2100 + SERVER_MB) + 1024
    assert max_learners(figs["07"], 16 * 1024) == (16 * 1024 - 1024) // (2100 + SERVER_MB)
    text = render(list(rows.values()), 16, 16 * 1024)
    assert "07 does not fit" in text and f"at most {max_learners(figs['07'], 16 * 1024)} learner(s)" in text
    assert "too big" in text and BINDER_MB == 2048


def test_figures_come_from_a_runs_folder_or_the_times_table(tmp_path):
    for stem, st in (
        ("03_memory", {"status": "passed", "seconds": 25.0, "cpu_seconds": 19.5, "peak_rss_mb": 880.0}),
        ("04_ddp", {"status": "failed", "seconds": 9.0, "cpu_seconds": 3.0, "peak_rss_mb": 400.0}),  # not a measure
        ("05_seeds", {"status": "passed", "seconds": 50.0}),  # an old run: no resource figures
    ):
        (tmp_path / stem).mkdir()
        (tmp_path / stem / "status.json").write_text(json.dumps({"stem": stem, **st}))
    assert list(from_runs(tmp_path)) == ["03"] and from_runs(tmp_path)["03"].cpu == 19.5
    times = tmp_path / "times.json"
    idle = {"seconds": 25.0, "cpu_seconds": 19.5, "peak_rss_mb": 880.0}
    table = {"notebooks": {"03": {"stem": "03_memory", "resources": idle}, "04": {"idle": {"seconds": 9.0}}}}
    times.write_text(json.dumps(table))
    assert list(from_times(times)) == ["03"] and from_times(times)["03"].peak_mb == 880.0


def test_a_room_of_no_one_is_refused():
    with pytest.raises(UsageError):
        plan({"03": Figures("03", "03", 1, 1, 1)}, learners=0)


def _cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "labkit.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_plan_command_reads_a_runs_folder_and_refuses_an_empty_one(tmp_path):
    (tmp_path / "runs" / "03_memory").mkdir(parents=True)
    st = {"stem": "03_memory", "status": "passed", "seconds": 25.0, "cpu_seconds": 19.5, "peak_rss_mb": 880.0}
    (tmp_path / "runs" / "03_memory" / "status.json").write_text(json.dumps(st))
    r = _cli("workshop", "plan", "--learners", "4", "--cores", "2", "--memory", "8G", "--runs", str(tmp_path / "runs"))
    assert r.returncode == 0, r.stderr
    assert "03_memory" in r.stdout and "every notebook fits 4 learner(s)" in r.stdout
    assert f"{predict_seconds(25, 19.5, 4, 2):.0f} s" in r.stdout
    (tmp_path / "empty").mkdir()
    r = _cli("workshop", "plan", "--learners", "4", "--runs", str(tmp_path / "empty"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "no CPU seconds" in r.stderr
