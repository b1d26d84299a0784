"""Outputs that cannot lie: `labkit clean`, `labkit export` and `labkit train --save-model` interrupted
by SIGTERM and by SIGKILL while they write leave nothing that looks complete, and a rerun succeeds.

Each command runs as a real process of the installed `labkit`; the signal is sent when its output
is being written: clean's partial clean.jsonl has data, export's partial folder has its encoder
graph, train's model folder is staged whole (held there by LABKIT_HOLD_BEFORE_PUBLISH).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cli_helpers import LABKIT, SAMPLES, piped
from labkit.atomic import HOLD_ENV

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
SIGNALS = [signal.SIGTERM, signal.SIGKILL]


def _start(argv: list[str], env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _interrupt_when(proc: subprocess.Popen, ready, sig: signal.Signals, timeout: float = 240) -> int:
    """Send `sig` as soon as `ready()` is true (while `proc` writes); its exit code."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, f"finished before it could be interrupted: {proc.returncode}\n{proc.stderr.read()}"
        assert time.monotonic() < deadline, "never reached the moment to interrupt"
        time.sleep(0.02)
    proc.send_signal(sig)
    return proc.wait(timeout=60)


def _partials(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if ".partial-" in p.name) if d.exists() else []


def _exit_code(sig) -> int:
    return 143 if sig == signal.SIGTERM else -signal.SIGKILL  # SIGTERM: a clean exit that removed its partials


# ---- labkit clean ---------------------------------------------------------------------------------

OUTPUTS = ("clean.jsonl", "rejects.jsonl", "report.json")


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    out = tmp_path_factory.mktemp("dump")
    r = piped([LABKIT, "corpus", "make", "--n", "3000", "--seed", "5", "--out", str(out)])
    assert r.returncode == 0, r.stderr
    return out / "crawl"


def _clean(crawl, out) -> subprocess.Popen:
    return _start([LABKIT, "clean", str(crawl), "--out", str(out), "--quiet"])


def _writing_clean(out: Path):
    def ready():  # the partial clean.jsonl has data on disk: the run is mid-write
        return any(p.name.startswith(".clean.jsonl.partial-") and p.stat().st_size > 0 for p in out.glob(".*"))

    return ready


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_interrupted_clean_leaves_no_output_and_a_rerun_succeeds(crawl, tmp_path, sig):
    out = tmp_path / "out"
    rc = _interrupt_when(_clean(crawl, out), _writing_clean(out), sig)
    assert rc == _exit_code(sig)
    assert not any((out / name).exists() for name in OUTPUTS), sorted(p.name for p in out.iterdir())
    left = sorted(p.name for p in out.iterdir())
    if sig == signal.SIGTERM:
        assert left == [], left  # partials and the spool removed on the way out
    else:
        assert left and all(name.startswith(".") for name in left), left  # hidden, never complete-looking
    r = piped([LABKIT, "clean", str(crawl), "--out", str(out), "--quiet"])
    assert r.returncode == 0, r.stderr
    report = json.loads((out / "report.json").read_text())
    lines = sum(len((out / n).read_text(encoding="utf-8").splitlines()) for n in OUTPUTS[:2])
    assert lines == report["records"] == report["clean"] + report["rejected"] > 3000
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS)  # the killed run's leftovers are gone


def test_a_rerun_killed_mid_write_leaves_the_previous_outputs_as_they_were(crawl, tmp_path):
    out = tmp_path / "out"
    r = piped([LABKIT, "clean", str(crawl), "--out", str(out), "--quiet"])
    assert r.returncode == 0, r.stderr
    before = {n: (out / n).read_bytes() for n in OUTPUTS}
    _interrupt_when(_clean(crawl, out), _writing_clean(out), signal.SIGKILL)
    assert {n: (out / n).read_bytes() for n in OUTPUTS} == before


def test_clean_help_says_outputs_are_renamed_at_the_end():
    r = piped([LABKIT, "clean", "--help"])
    text = " ".join(r.stdout.split())
    assert "written under temporary names" in text and "an interrupted run leaves no file that looks complete" in text


# ---- labkit export --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    import serving_helpers as h

    return h.build_tiny(tmp_path_factory.mktemp("m") / "model")


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_interrupted_export_leaves_no_onnx_folder_and_a_rerun_succeeds(model_dir, tmp_path, sig):
    onnx = tmp_path / "runs" / "onnx"
    argv = [LABKIT, "export", "--model", str(model_dir), "--out", str(onnx), "--n", "3", "--max-new-tokens", "4"]

    def exporting():  # the encoder graph is in the staged folder: the export is mid-way
        return any((p / "encoder_model.onnx").exists() for p in onnx.parent.glob(".onnx.partial-*"))

    rc = _interrupt_when(_start(argv), exporting, sig)
    assert rc == _exit_code(sig)
    assert not onnx.exists()
    left = _partials(onnx.parent)
    assert (left == []) if sig == signal.SIGTERM else (left and all(n.startswith(".onnx.partial-") for n in left)), left
    r = piped(argv)
    assert r.returncode == 0, r.stderr
    assert json.loads((onnx / "export_report.json").read_text())["passed"] is True
    assert (onnx / "encoder_model.onnx").is_file() and _partials(onnx.parent) == []


def test_export_refuses_to_replace_a_folder_of_other_files(model_dir, tmp_path):
    keep = tmp_path / "mine"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    r = piped([LABKIT, "export", "--model", str(model_dir), "--out", str(keep), "--n", "3"])
    assert r.returncode == 2 and "holds other files" in r.stderr and r.stderr.count("\n") == 1
    assert (keep / "notes.txt").read_text() == "mine"


# ---- labkit train --save-model ----------------------------------------------------------------------


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_interrupted_save_model_leaves_no_model_folder_and_a_rerun_succeeds(tmp_path, sig):
    rows = (SAMPLES / "articles.jsonl").read_text(encoding="utf-8").splitlines()[:60]
    data = tmp_path / "mine.jsonl"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    argv = [
        LABKIT,
        "train",
        "--data",
        str(data),
        "--out",
        str(out),
        "--steps",
        "2",
        "--batch-size",
        "4",
        "--threads",
        "1",
        "--save-model",
        "--quiet",
    ]

    def staged():  # the whole model is written under its temporary name, not yet renamed
        return any(
            (p / "model.safetensors").exists() and (p / "tokenizer.json").exists() for p in out.glob(".model.partial-*")
        )

    rc = _interrupt_when(_start(argv, {HOLD_ENV: "60"}), staged, sig)
    assert rc == _exit_code(sig)
    assert not (out / "model").exists()
    left = _partials(out)
    assert (left == []) if sig == signal.SIGTERM else (left and all(n.startswith(".model.partial-") for n in left)), (
        left
    )
    r = piped(argv)
    assert r.returncode == 0, r.stderr
    from transformers import AutoConfig, AutoTokenizer

    assert AutoConfig.from_pretrained(out / "model").model_type == "t5"
    assert len(AutoTokenizer.from_pretrained(out / "model")) > 100
    assert _partials(out) == []
