"""One CLI contract for every `labkit` command (labkit.cli.errors).

* the command set is exactly what the docs promise, and every command has a working --help;
* every option documents itself (help text), and options with a known set of values use `choices`
  computed from the single source (model presets, schedules, profiles);
* bad arguments or input -> exit 2 with one line on stderr naming what is wrong and how to fix it,
  never a traceback, and before anything starts (no kernel, no server, no rank).

Everything runs in-process through `labkit.cli.main` (fast); one subprocess test covers the
installed entry point (`labkit --version`, `labkit --help`, no torch at start-up).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from labkit.cli import commands as cli
from labkit.cli.commands import build_parser, main

FIXTURES = Path(__file__).parent / "fixtures" / "course"

EXPECTED = {
    (): {"bench", "clean", "corpus", "course", "doctor", "export", "serve", "train", "workshop"},
    ("bench",): {"clean", "course", "room", "serve", "train"},
    ("corpus",): {"make"},
    ("course",): {"grade", "i18n", "list", "run", "seeds", "site", "times", "workshop"},
    ("course", "i18n"): {"build", "check", "extract"},
    ("doctor",): {"env", "log", "script"},
    ("serve",): {"api", "baseline", "triton"},
    ("workshop",): {"collect", "hub", "plan"},
}


def _tree(parser: argparse.ArgumentParser, path: tuple = ()):
    """(path, parser) for the root and every command and subcommand."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _tree(child, (*path, name))


def _subcommands(parser) -> set[str]:
    return {n for a in parser._actions if isinstance(a, argparse._SubParsersAction) for n in a.choices}


ALL_PATHS = [path for path, _ in _tree(build_parser())]


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """`labkit ARGV` in-process: (exit code, stdout, stderr); argparse's own exits are caught."""
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


# ---- the command set and --help ---------------------------------------------


def test_the_full_command_set_is_present():
    tree = dict(_tree(build_parser()))
    with_subcommands = {path: _subcommands(p) for path, p in tree.items() if _subcommands(p)}
    assert with_subcommands == EXPECTED
    leaves = sorted(" ".join(p) for p, parser in tree.items() if p and not _subcommands(parser))
    assert leaves == [
        "bench clean",
        "bench course",
        "bench room",
        "bench serve",
        "bench train",
        "clean",
        "corpus make",
        "course grade",
        "course i18n build",
        "course i18n check",
        "course i18n extract",
        "course list",
        "course run",
        "course seeds",
        "course site",
        "course times",
        "course workshop",
        "doctor env",
        "doctor log",
        "doctor script",
        "export",
        "serve api",
        "serve baseline",
        "serve triton",
        "train",
        "workshop collect",
        "workshop hub",
        "workshop plan",
    ]


@pytest.mark.parametrize("path", ALL_PATHS, ids=lambda p: " ".join(p) or "labkit")
def test_every_command_has_working_help(path, capsys):
    rc, out, err = run_cli([*path, "--help"], capsys)
    assert rc == 0, err
    assert out.startswith("usage: labkit") and not err


def test_every_option_has_help_text():
    missing = []
    for path, parser in _tree(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if action.help is None or (action.help != argparse.SUPPRESS and not action.help.strip()):
                missing.append(f"labkit {' '.join(path)} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, "options without help: " + ", ".join(missing)


def test_choices_come_from_the_single_sources():
    from labkit.config import PROFILES
    from labkit.model import PRESETS
    from labkit.training.schedules import SCHEDULES

    tree = dict(_tree(build_parser()))

    def choices(path, option):
        return next(a.choices for a in tree[path]._actions if option in a.option_strings)

    assert list(choices(("train",), "--preset")) == list(PRESETS)
    assert list(choices(("train",), "--schedule")) == list(SCHEDULES)
    assert sorted(choices(("course", "run"), "--profile")) == sorted(PROFILES)


def test_threads_help_says_what_the_code_does():
    """Bug: `--threads` said "0 = all cores" for the ONNX Runtime servers, which use all cores but one."""
    from labkit.serving.ort_generate import serving_threads
    from labkit.threads import cores

    tree = dict(_tree(build_parser()))

    def threads_help(path):
        return next(a.help for a in tree[path]._actions if "--threads" in a.option_strings)

    assert serving_threads(0) == max(1, cores() - 1)  # the cores this process may use (its affinity)
    for path in (("serve", "api"), ("serve", "triton")):
        assert "all cores but one" in threads_help(path), path
    assert "all cores" in threads_help(("serve", "baseline")) and "but one" not in threads_help(("serve", "baseline"))


# ---- bad arguments and input --------------------------------------------------

BAD = [
    # (argv, message fragment)
    (["bench", "serve", "--url", "http://10.0.0.1:8080"], "not on this machine"),
    (["bench", "serve", "--url", "http://example.com"], "only loopback servers"),
    (["bench", "serve", "--url", "127.0.0.1:8080"], "not an http URL"),
    (["bench", "serve", "--levels", "1,x"], "'x' in '1,x' is not a whole number"),
    (["bench", "serve", "--requests", "0"], "--requests: 0 must be at least 1"),
    (["bench", "serve", "--rate", "fast"], "'fast' is not a number"),
    (["bench", "serve", "--json", "{file}/out.json"], "cannot be written"),
    (["bench", "clean", "--workers", "x"], "is not a whole number"),
    (["bench", "clean", "--workers", "0"], "must be at least 1"),
    (["bench", "clean", "--dump", "{missing}"], "no such directory"),
    (
        ["bench", "clean", "--dump", "{dir}", "--n", "5"],
        "has no crawl/ and labels.jsonl; make one with `labkit corpus make`",
    ),
    (["course", "seeds", "--seeds", "x"], "write seeds as numbers or ranges"),
    (["course", "seeds", "--seeds", "1", "-p", "SEED", "2"], "the sweep sets SEED itself"),
    (["course", "seeds", "--only", "99"], "no notebook matches --only 99"),
    (["bench", "course", "--only", "99"], "no notebook matches --only 99"),
    (["bench", "course", "--only", "01", "--busy", "0"], "--busy: 0 must be at least 1"),
    (["bench", "course", "--only", "01", "--env", "LABKIT_THREADS"], "write NAME=VALUE"),
    (["bench", "train", "--steps", "0"], "--steps: 0 must be at least 1"),
    (["bench", "train", "--threads", "two"], "'two' is not a whole number"),
    (["bench", "train", "--json", "{dir}"], "is a directory; name a file"),
    (["course", "run", "--notebooks", "{missing}"], "no such directory"),
    (["course", "run", "--notebooks", "{fixtures}", "--only", "99"], "no notebook matches --only 99"),
    (["course", "run", "--notebooks", "{fixtures}", "-p", "PROFILE", "huge"], "-p PROFILE huge is not a profile"),
    (["course", "run", "--notebooks", "{fixtures}", "--out", "{file}"], "is a file"),
    (["course", "run", "--profile", "huge"], "invalid choice: 'huge'"),
    (["course", "list", "--notebooks", "{file}"], "is a file, not a directory"),
    (["course", "site", "--out", "{dir}/s", "--runs", "{missing}"], "no such directory"),
    (["course", "site", "--out", "{file}"], "is a file"),
    (["course", "site", "--out", "{dir}/s", "--repo-url", "github.com/a/b"], "is not a web address"),
    (["course", "site", "--out", "{dir}/s", "--runs", "{dir}", "--only", "00"], "00_start_here has no run in"),
    (["course", "site", "--out", "{dir}/s", "--only", "99"], "no notebook matches --only 99"),
    (["course", "times", "--runs", "{missing}"], "no such directory"),
    (["course", "times", "--runs", "{dir}"], "no <notebook>/results.json in it"),
    (["course", "times", "--shared", "{missing}"], "no such file or directory"),
    (["course", "grade", "{missing}", "--out", "{dir}/o"], "no such directory"),
    (["course", "grade", "{dir}", "--out", "{dir}/o"], "holds no learner folders"),
    (["course", "grade", "{dir}", "--out", "{dir}/o", "--release", "{dir}"], "not a labkit release marker"),
    (["course", "grade", "{dir}", "--out", "{dir}/o", "--timeout", "0"], "--timeout: 0 must be greater than 0"),
    (["corpus", "make", "--n", "many", "--out", "{dir}"], "'many' is not a whole number"),
    (["corpus", "make", "--n", "0", "--out", "{dir}"], "--n: 0 must be at least 1"),
    (["corpus", "make", "--n", "5", "--out", "{dir}", "--rates", "bogus"], "write NAME=VALUE"),
    (["corpus", "make", "--n", "5", "--out", "{dir}", "--rates", "mojibake=2"], "must be within [0, 1]"),
    (["corpus", "make", "--n", "5", "--out", "{file}/dump"], "is a file"),
    (["clean", "{missing}", "--out", "{dir}"], "no such file or directory"),
    (["clean", "{dir}", "--out", "{file}"], "is a file"),
    (["clean", "{dir}", "--out", "{dir}/o", "--workers", "-1"], "must be at least 1"),
    (["clean", "{dir}", "--out", "{dir}/o", "--min-title", "9", "--max-title", "5"], "make --min-title the smaller"),
    (["train", "--schedule", "cosine_warm"], "invalid choice: 'cosine_warm'"),
    (["train", "--preset", "t5-huge"], "invalid choice: 't5-huge'"),
    (["train", "--steps", "-1"], "--steps: -1 must be 0 or more"),
    (["train", "--lr", "0"], "--lr: 0 must be greater than 0"),
    (["train", "--lr", "fast"], "'fast' is not a number"),
    (["train", "--clip", "big"], "'big' is not a number"),
    (["train", "--out", "{file}/run"], "is a file"),
    (["train", "--steps", "3", "--out", "{dir}"], "--data PATH is required for training"),
    (["serve", "baseline", "--model", "{missing}"], "no such directory"),
    (["serve", "baseline", "--model", "{dir}"], "has no config.json; pass a save_pretrained folder"),
    (["serve", "baseline", "--port", "70000", "--model", "{dir}"], "not a TCP port"),
    (["serve", "triton", "--onnx", "{dir}"], "has no encoder_model.onnx"),
    (["serve", "api", "--backend", "ort"], "--backend ort needs --onnx DIR"),
    (["serve", "api", "--start-triton"], "--start-triton needs --onnx DIR"),
    (["serve", "api", "--timeout", "0"], "--timeout: 0 must be greater than 0"),
    (["serve", "api", "--threads", "-2"], "--threads: -2 must be 0 or more"),
    (["serve", "api", "--max-restarts", "-1"], "--max-restarts: -1 must be 0 or more"),
    (["serve", "api", "--restart-window", "0"], "--restart-window: 0 must be greater than 0"),
    (["train", "--log-every", "often"], "'often' is not a whole number"),
    (["clean", "{dir}", "--out", "{dir}/o", "--log-every", "0"], "--log-every: 0 must be greater than 0"),
    (["export", "--model", "{dir}", "--out", "{dir}/o", "--quiet", "--n", "0"], "--n: 0 must be at least 1"),
    (["export", "--model", "{dir}", "--out", "{file}"], "is a file"),
]


@pytest.fixture
def places(tmp_path) -> dict[str, str]:
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    return {
        "file": str(tmp_path / "afile"),
        "dir": str(tmp_path / "adir"),
        "missing": str(tmp_path / "missing"),
        "fixtures": str(FIXTURES),
    }


@pytest.mark.parametrize("argv, needle", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_and_exit_2(argv, needle, places, capsys):
    argv = [a.format(**places) for a in argv]
    rc, out, err = run_cli(argv, capsys)
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in err + out
    assert err.count("\n") == 1, err  # exactly one line
    cmd = " ".join(a for a in argv[:2] if not a.startswith("-") and a in {p for path in ALL_PATHS for p in path})
    assert err.startswith(f"labkit {cmd}: "), err
    assert needle in err, err
    # nothing was started or written where the bad value pointed
    assert not Path(places["dir"], "o").exists()


def test_bad_input_through_the_installed_command_is_one_line(places):
    """The same contract seen from outside: exit status, stderr, no traceback (a few, as subprocesses)."""
    for argv, needle in [
        (["bench", "serve", "--url", "http://192.168.1.1:80"], "not on this machine"),
        (["train", "--schedule", "nope", "--steps", "0"], "invalid choice: 'nope'"),
        (["serve", "baseline", "--model", places["missing"]], "no such directory"),
    ]:
        proc = subprocess.run([sys.executable, "-m", "labkit.cli", *argv], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1 and needle in proc.stderr


def test_python_m_labkit_train_keeps_the_contract(capsys):
    from labkit.train import main as train_main

    with pytest.raises(SystemExit) as exit_:
        train_main(["--schedule", "nope"])
    assert exit_.value.code == 2
    assert train_main(["--steps", "2"]) == 2
    assert "--data PATH is required" in capsys.readouterr().err


def test_launch_refuses_bad_train_arguments_before_any_rank_starts(tmp_path):
    from labkit.distributed.launcher import LaunchError, launch

    with pytest.raises(LaunchError, match="invalid choice: 'nope'"):
        launch(["--schedule", "nope", "--steps", "0"], 2, out_dir=tmp_path, launcher="python", echo=None)
    with pytest.raises(LaunchError, match="--data PATH is required"):
        launch(["--steps", "3"], 2, out_dir=tmp_path, launcher="python", echo=None)
    assert not (tmp_path / "ranks").exists()


def test_a_run_that_fails_exits_1_with_its_reason(monkeypatch, capsys):
    from labkit.cli.errors import RunFailed

    def boom(args):
        raise RunFailed("the server died at request 3; see its log")

    parser = build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    tree = dict(_tree(parser))
    tree[("bench", "serve")].set_defaults(func=boom)
    assert main(["bench", "serve"]) == 1
    assert capsys.readouterr().err == "labkit bench serve: the server died at request 3; see its log\n"


# ---- start-up: labkit modules must import; optional extras may be missing ----


def test_a_labkit_module_that_fails_to_import_is_an_error_not_a_missing_command(monkeypatch):
    monkeypatch.setitem(cli.COMMANDS, "broken", "labkit.no_such_module_xyz")
    with pytest.raises(ImportError, match="labkit broken: cannot import labkit.no_such_module_xyz"):
        build_parser()


def test_a_missing_optional_extra_gives_an_unavailable_command(monkeypatch, tmp_path, capsys):
    (tmp_path / "lk_fake_topic.py").write_text(
        textwrap.dedent("""
        import no_such_extra_pkg_xyz  # an optional third-party dependency that is not installed
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.COMMANDS, "fake", "lk_fake_topic")
    rc, out, err = run_cli(["fake", "--port", "1", "--help"], capsys)
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith("labkit fake: needs no_such_extra_pkg_xyz") and "make setup" in err
    rc, out, err = run_cli(["--help"], capsys)
    assert "unavailable: needs no_such_extra_pkg_xyz" in out


# ---- the installed entry point ----------------------------------------------


def test_installed_entry_point_version_and_fast_help():
    from importlib.metadata import version

    exe = shutil.which("labkit", path=os.path.dirname(sys.executable)) or shutil.which("labkit")
    cmd = [exe] if exe else [sys.executable, "-m", "labkit.cli"]
    proc = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == f"labkit {version('labkit')}", proc
    proc = subprocess.run([*cmd, "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "COMMAND" in proc.stdout and "--version" in proc.stdout
    # building the whole parser (choices included) must not import torch: `labkit --help` stays fast
    probe = "import sys; from labkit.cli import build_parser; build_parser(); print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_triton_commands_without_the_triton_extra_say_so_in_one_line(monkeypatch, capsys, tmp_path):
    import labkit.serving.availability as availability

    monkeypatch.setattr(availability, "triton_missing", lambda: "Triton is not installed (pytriton missing)")
    onnx = tmp_path / "onnx"
    onnx.mkdir()
    (onnx / "encoder_model.onnx").write_bytes(b"")
    for argv in (["serve", "triton", "--onnx", str(onnx)], ["serve", "api", "--onnx", str(onnx), "--start-triton"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "Triton is not installed" in err[0] and "--backend ort" in err[0], err
