"""labkit.atomic.publish: outputs appear whole or not at all (fast; real files, a real SIGTERM)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from labkit.atomic import partial_path, publish


def _hidden(d) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


def test_outputs_appear_only_when_the_block_ends(tmp_path):
    a, report = tmp_path / "clean.jsonl", tmp_path / "report.json"
    with publish(a, report) as (ta, treport):
        ta.write_text("row\n")
        treport.write_text("{}")
        assert not a.exists() and not report.exists()
        assert ta.name == f".clean.jsonl.partial-{os.getpid()}"
    assert a.read_text() == "row\n" and report.read_text() == "{}"
    assert _hidden(tmp_path) == []


def test_a_failing_block_leaves_the_previous_outputs_and_no_partial(tmp_path):
    a = tmp_path / "clean.jsonl"
    a.write_text("old\n")
    with pytest.raises(RuntimeError):
        with publish(a) as (ta,):
            ta.write_text("half")
            raise RuntimeError("interrupted")
    assert a.read_text() == "old\n" and _hidden(tmp_path) == []


def test_a_folder_is_replaced_whole(tmp_path):
    out = tmp_path / "onnx"
    out.mkdir()
    (out / "stale.onnx").write_text("old")
    with publish(out, directory=True) as (staged,):
        assert staged.is_dir() and not any(staged.iterdir())
        (staged / "encoder_model.onnx").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["encoder_model.onnx"]
    assert _hidden(tmp_path) == []


def test_the_report_goes_first_and_comes_last(tmp_path, monkeypatch):
    """A crash between the renames must not leave an old report beside new data: the report is removed first."""
    import labkit.atomic as atomic

    finals = [tmp_path / n for n in ("clean.jsonl", "rejects.jsonl", "report.json")]
    for f in finals:
        f.write_text("old")
    real, calls = os.replace, []

    def crash_on_second(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt("power cut")
        real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        with publish(*finals) as temps:
            for t in temps:
                t.write_text("new")
    assert [p.name for p in calls] == ["clean.jsonl", "rejects.jsonl"]
    assert (tmp_path / "clean.jsonl").read_text() == "new"
    assert not (tmp_path / "report.json").exists()  # the set does not look complete


def test_leftovers_of_dead_processes_are_removed_and_live_ones_kept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    out = tmp_path / "model"
    stale_dir = partial_path(out, dead_pid)
    stale_dir.mkdir()
    (stale_dir / "config.json").write_text("{}")
    aside = stale_dir.with_name(stale_dir.name + "-old")
    aside.mkdir()
    live = partial_path(out, os.getppid())  # a running process's work is not ours to remove
    live.mkdir()
    with publish(out, directory=True) as (staged,):
        (staged / "config.json").write_text("{}")
    assert _hidden(tmp_path) == [live.name]


def test_sigterm_while_staged_removes_the_partial_and_exits_143(tmp_path):
    script = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from labkit.atomic import publish
        with publish(Path({str(tmp_path / "clean.jsonl")!r})) as (t,):
            t.write_text("half")
            print("staged", flush=True)
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "staged"
    assert _hidden(tmp_path)  # the partial file is there now
    proc.terminate()
    assert proc.wait(timeout=30) == 143
    assert list(tmp_path.iterdir()) == []


def test_sigterm_turned_into_another_exception_by_a_library_still_exits_143(tmp_path):
    """Under load, SIGTERM landed inside torch's ONNX exporter, which turned the SystemExit into another error
    (exit 1 instead of 143): publish still removes the partial output and exits as SIGTERM does."""
    import os
    import signal

    from labkit.atomic import publish

    out = tmp_path / "onnx"
    with pytest.raises(SystemExit) as exc:
        with publish(out, directory=True) as (staged,):
            (staged / "encoder_model.onnx").write_bytes(b"x")
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(10_000):  # the handler runs at the next bytecode boundary, inside this block
                    pass
            except SystemExit as inner:  # what a library's callback wrapper does with it
                raise RuntimeError("exporter failed") from inner
    assert exc.value.code == 143
    assert not out.exists() and not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


def test_two_writers_of_one_file_never_collide(tmp_path):
    """Each write stages under a name of its own: with one fixed `<name>.tmp`, a writer renamed the other's half
    written file into place, or found its own gone (FileNotFoundError)."""
    import threading

    from labkit.atomic import atomic_write_text

    path = tmp_path / "latest"
    texts = ["a" * 200_000, "b" * 300_000]
    errors, seen = [], set()

    def write(text):
        try:
            for _ in range(150):
                atomic_write_text(path, text)
        except Exception as exc:  # noqa: BLE001 -- the failure the test looks for
            errors.append(exc)

    writers = [threading.Thread(target=write, args=(t,)) for t in texts]
    for w in writers:
        w.start()
    while any(w.is_alive() for w in writers):
        if path.exists():
            seen.add(path.read_text())
    for w in writers:
        w.join()
    assert errors == []
    assert seen | {path.read_text()} <= set(texts)  # a reader only ever saw one writer's whole text
    assert _hidden(tmp_path) == []


def test_sigterm_goes_to_the_programs_own_handler_which_is_back_after_the_block(tmp_path):
    """A program with its own SIGTERM handler (a server's graceful stop) keeps it: inside `publish` the handler is
    called and decides (here: go on, so the outputs are published); after the block it is the handler again.  The
    old `publish` raised SystemExit in its place."""
    import signal

    calls = []

    def graceful(signum, frame):
        calls.append(signum)

    def stop_now(signum, frame):
        raise KeyboardInterrupt("stop")

    before = signal.signal(signal.SIGTERM, graceful)
    try:
        out = tmp_path / "report.json"
        with publish(out) as (staged,):
            staged.write_text("{}")
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(10_000):  # the handler runs at the next bytecode boundary, inside this block
                pass
        assert calls == [signal.SIGTERM] and out.read_text() == "{}"
        assert signal.getsignal(signal.SIGTERM) is graceful
        signal.signal(signal.SIGTERM, stop_now)  # a handler that ends the program: the partial output goes
        with pytest.raises(KeyboardInterrupt):
            with publish(tmp_path / "clean.jsonl") as (staged,):
                staged.write_text("half")
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(10_000):
                    pass
        assert signal.getsignal(signal.SIGTERM) is stop_now and _hidden(tmp_path) == []
        assert not (tmp_path / "clean.jsonl").exists()
    finally:
        signal.signal(signal.SIGTERM, before)
    with publish(tmp_path / "x") as (staged,):
        staged.write_text("x")
    assert signal.getsignal(signal.SIGTERM) == before
