"""Progress you can see: `labkit train`, `clean` and `export` in a terminal (a tqdm bar) and piped (lines).

Each command runs as a real process of the installed `labkit`: once on a pty (what a user at a
terminal sees) and once with stdout piped (what a log file gets), plus --quiet.
"""

from __future__ import annotations

import json
import re

import pytest

from cli_helpers import LABKIT, SAMPLES, in_terminal, piped
from labkit.progress import Progress, progress_mode

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

LINE = re.compile(
    r"^train (\d+)/6 step \| loss \d+\.\d{4} \| lr \d\.\d\de[-+]\d\d \| samples/s \d+\.\d \| "
    r"\d+\.\d\d step/s \| \d\d:\d\d elapsed(, ETA \d\d:\d\d)?$"
)


@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
    rows = (SAMPLES / "articles.jsonl").read_text(encoding="utf-8").splitlines()[:80]
    path = tmp_path_factory.mktemp("data") / "mine.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _train(data, out, *extra):
    return [
        LABKIT,
        "train",
        "--data",
        str(data),
        "--out",
        str(out),
        "--steps",
        "6",
        "--batch-size",
        "4",
        "--threads",
        "1",
        *extra,
    ]


# ---- the helper itself (fast) ----------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_lines_come_every_n_and_at_the_end(capsys):
    p = Progress(7, "train", "step", "lines", every=3)
    for i in range(7):
        p.update(1, loss=f"{i:.1f}")
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(" | ")[0] for ln in lines] == ["train 3/7 step", "train 6/7 step", "train 7/7 step"]
    assert "ETA" in lines[0] and "ETA" not in lines[-1] and "loss 6.0" in lines[-1]


@pytest.mark.timeout(30)
def test_quiet_is_off_and_a_pipe_is_lines(capsys):
    assert progress_mode(quiet=True) == "off"
    assert progress_mode() == "lines"  # pytest captures stdout: not a terminal
    Progress(3, "x", "y", "off").update(3)
    assert capsys.readouterr().out == ""


# ---- labkit train ---------------------------------------------------------------------------------


def test_train_piped_prints_a_line_every_n_steps_and_quiet_prints_none(small_data, tmp_path):
    r = piped(_train(small_data, tmp_path / "a", "--log-every", "2"))
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("train ")]
    assert [int(LINE.match(ln).group(1)) for ln in lines] == [2, 4, 6], r.stdout
    assert "\r" not in r.stdout + r.stderr and "it/s" not in r.stderr  # no bar in a log
    auto = piped(_train(small_data, tmp_path / "b"))  # default: about ten lines a run -> every step of 6
    assert len([ln for ln in auto.stdout.splitlines() if LINE.match(ln)]) == 6, auto.stdout
    quiet = piped(_train(small_data, tmp_path / "c", "--quiet"))
    assert quiet.returncode == 0 and not [ln for ln in quiet.stdout.splitlines() if ln.startswith("train ")]
    assert "[rank 0] done: 6 steps" in quiet.stdout


def test_train_in_a_terminal_shows_a_tqdm_bar(small_data, tmp_path):
    rc, screen = in_terminal(_train(small_data, tmp_path / "t", "--log-every", "2"))
    assert rc == 0, screen
    frames = [f for f in re.split(r"[\r\n]+", screen) if f.startswith("train:")]
    assert frames, screen
    last = frames[-1]
    assert "6/6" in last and "100%" in last and "step/s" in last, last
    assert re.search(r"loss=\d+\.\d{4}, lr=\d\.\d\de-\d\d, samples/s=\d+\.\d", last), last
    assert any(re.search(r"\[\d\d:\d\d<\d\d:\d\d,", f) for f in frames), frames  # [elapsed<ETA, ...
    assert not LINE.search(screen.replace("\r", "")), "a terminal gets the bar, not log lines"


# ---- labkit clean ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    out = tmp_path_factory.mktemp("dump")
    r = piped([LABKIT, "corpus", "make", "--n", "1500", "--seed", "3", "--out", str(out)])
    assert r.returncode == 0, r.stderr
    return out / "crawl"


def test_clean_piped_prints_periodic_lines_then_the_summary(crawl, tmp_path):
    # the whole clean takes ~0.6 s on a CI machine (0.3 s gave one periodic line there): a period far below it
    r = piped([LABKIT, "clean", str(crawl), "--out", str(tmp_path / "o"), "--log-every", "0.02"])
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("clean ")]
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert len(lines) >= 3, r.stdout
    counts = [
        tuple(int(x) for x in re.match(r"clean (\d+)/(\d+) files \| records (\d+) \| clean (\d+) \|", ln).groups())
        for ln in lines
    ]
    assert all(total == report["files"] for _, total, _, _ in counts)
    assert [c[0] for c in counts] == sorted(c[0] for c in counts) and counts[-1][0] == report["files"]
    assert counts[-1][2:] == (report["records"], report["clean"])
    assert r.stdout.index(lines[-1]) < r.stdout.index('"records"')  # progress first, the summary after
    quiet = piped([LABKIT, "clean", str(crawl), "--out", str(tmp_path / "q"), "--quiet"])
    assert quiet.returncode == 0 and quiet.stdout == ""


def test_clean_in_a_terminal_shows_a_bar_of_files_and_records(tmp_path):
    rc, screen = in_terminal([LABKIT, "clean", str(SAMPLES / "crawl"), "--out", str(tmp_path / "o")])
    assert rc == 0, screen
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    frames = [f for f in re.split(r"[\r\n]+", screen) if f.startswith("clean:")]
    assert frames, screen
    assert f"{report['files']}/{report['files']}" in frames[-1] and "files/s" in frames[-1], frames[-1]
    assert f"records={report['records']}, clean={report['clean']}" in frames[-1], frames[-1]
    assert '"records"' in screen  # the summary still follows


# ---- labkit export --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    import serving_helpers as h

    return h.build_tiny(tmp_path_factory.mktemp("m") / "model")


def test_export_piped_names_each_stage_before_it_runs(model_dir, tmp_path):
    r = piped(
        [
            LABKIT,
            "export",
            "--model",
            str(model_dir),
            "--out",
            str(tmp_path / "onnx"),
            "--int8",
            "--n",
            "3",
            "--max-new-tokens",
            "4",
        ]
    )
    assert r.returncode == 0, r.stderr
    stages = [ln for ln in r.stdout.splitlines() if ln.startswith("export [")]
    assert stages == [
        "export [1/4] fp32 ONNX export",
        "export [2/4] fp32 parity vs PyTorch",
        "export [3/4] int8 quantization",
        "export [4/4] int8 quality vs fp32",
    ], r.stdout
    out = r.stdout
    assert out.index(stages[1]) < out.index("fp32 parity: 3/3") < out.index(stages[2]) < out.index("int8: ")
    quiet = piped(
        [
            LABKIT,
            "export",
            "--model",
            str(model_dir),
            "--out",
            str(tmp_path / "onnx"),
            "--n",
            "3",
            "--max-new-tokens",
            "4",
            "--quiet",
        ]
    )  # an earlier export at --out is replaced whole
    assert quiet.returncode == 0 and "export [" not in quiet.stdout and "fp32 parity: 3/3" in quiet.stdout
    assert json.loads((tmp_path / "onnx" / "export_report.json").read_text())["int8"] is False


def test_export_in_a_terminal_shows_its_stages_on_a_bar(model_dir, tmp_path):
    rc, screen = in_terminal(
        [
            LABKIT,
            "export",
            "--model",
            str(model_dir),
            "--out",
            str(tmp_path / "onnx"),
            "--n",
            "3",
            "--max-new-tokens",
            "4",
        ]
    )
    assert rc == 0, screen
    frames = [f for f in re.split(r"[\r\n]+", screen) if f.startswith("export:")]
    assert any("export: fp32 ONNX export" in f for f in frames), screen
    assert any("export: fp32 parity vs PyTorch" in f and "2/2" in f for f in frames), frames
    assert "fp32 parity: 3/3" in screen and "export [" not in screen
