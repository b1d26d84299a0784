"""The pipeline end to end: bad-input list, conservation, CLI contract, workers == 1 worker."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from labkit.cleaning import clean_paths
from labkit.cleaning.readers import InputError
from labkit.cli import main

ZH = "北京市今日召开新闻发布会，宣布“智慧城市”项目正式启动：首批试点覆盖三个区。记者了解到，该项目总投资约十二亿元，将在未来三年内完成建设。"
ZH2 = "上海某科技公司发布新一代人工智能芯片，性能较上一代提升百分之四十，预计明年量产。业内人士认为，这将推动国产芯片产业发展，带动上下游企业。"
T1, T2, T3 = (
    "北京智慧城市项目正式启动首批覆盖三区",
    "上海公司发布新一代人工智能芯片",
    "南方多地迎来强降雨天气防汛形势严峻",
)
ZH4 = "教育部日前印发通知，要求各地中小学切实减轻学生课业负担，保障学生每天校内体育活动时间不少于一小时，并加强心理健康教育。"
T4 = "教育部印发通知要求减轻中小学生课业负担"
T5 = "国家统计局发布最新数据居民消费价格温和上涨"
ZH5 = "国家统计局今天发布数据显示，上月全国居民消费价格同比上涨百分之零点八，其中食品价格有所回落，服务价格稳中有升，市场供应总体充足。"
ZH3 = "气象部门预计，未来三天南方多地将出现强降雨天气，局地有大暴雨。防汛部门已启动应急响应，提醒群众注意防范山洪和地质灾害。"


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _outcomes(out: Path) -> dict[str, dict]:
    rows = _read(out / "clean.jsonl") + _read(out / "rejects.jsonl")
    by_id = {r["id"]: r for r in rows}
    assert len(by_id) == len(rows), "an id appears twice"
    return by_id


@pytest.fixture()
def bad_inputs(tmp_path: Path) -> Path:
    d = tmp_path / "crawl"
    (d / "html").mkdir(parents=True)
    (d / "txt").mkdir()
    (d / "html" / "ok.html").write_bytes(
        f'<html><head><meta charset="utf-8"><title>{T4}</title></head><body><p>{ZH4}</p></body></html>'.encode("gbk")
    )
    (d / "html" / "binary.html").write_bytes(bytes(range(256)) * 20)
    (d / "html" / "empty.htm").write_bytes(b"")
    (d / "txt" / "nul.txt").write_bytes(f"{T5}\n{ZH5[:20]}\x00\x00{ZH5[20:]}".encode())
    (d / "txt" / "bad_bytes.txt").write_bytes(T2.encode("gbk") + b"\n" + ZH2.encode("gbk") + b"\xff\xfe\xff" * 5)
    os.symlink(d / "missing-target.txt", d / "txt" / "unreadable.txt")  # unreadable even as root
    (d / "notes.md").write_text("not an input type")
    lines = [
        json.dumps({"id": "j1", "title": T2, "body": ZH2}, ensure_ascii=False),
        "",
        json.dumps({"title": T2 + "！", "body": ZH2}, ensure_ascii=False),
        json.dumps({"title": T1, "body": "长" * 10_000_000}, ensure_ascii=False),
        '{"title": "' + T3 + '", "body": "' + ZH3[:30],
    ]  # truncated last line
    (d / "a.jsonl").write_text("\n".join(lines), encoding="utf-8")
    (d / "rows.csv").write_text(
        "id,title,body\n"
        f"c1,{T3},{ZH3}\n"
        f"c2,{T1},{ZH[:40]},{ZH[40:]}\n"  # too many fields: an unquoted comma, or a shift
        f"c3,短\n"  # too few fields
        f'c4,"{ZH3}",{T3}\n',  # swapped
        encoding="utf-8",
    )
    return d


def test_every_bad_input_gets_a_clear_reason(bad_inputs: Path, tmp_path: Path):
    report = clean_paths([bad_inputs], tmp_path / "out")
    got = _outcomes(tmp_path / "out")
    expected = {
        "a.jsonl:3": "duplicate",
        "a.jsonl:4": None,
        "a.jsonl:5": "malformed_record",
        "j1": None,
        "html/binary.html": "not_text",
        "html/empty.htm": "empty",
        "html/ok.html": None,
        "c1": None,
        "c2": "misaligned_fields",
        "c3": "misaligned_fields",
        "c4": "duplicate",
        "txt/bad_bytes.txt": "encoding_undecodable",
        "txt/nul.txt": None,
        "txt/unreadable.txt": "unreadable",
    }
    assert {k: v.get("reason") for k, v in got.items()} == expected
    assert len(got["a.jsonl:4"]["body"]) == 10_000_000  # a 10 MB line is data, not a crash
    assert "fields_swapped" in got["c4"]["fixes"]
    assert "control_chars_removed" in got["txt/nul.txt"]["fixes"] and "\x00" not in got["txt/nul.txt"]["body"]
    assert {"decoded:gb18030", "charset_mismatch"} <= set(got["html/ok.html"]["fixes"])
    assert got["txt/bad_bytes.txt"]["raw_b64"] and "re-export the source as UTF-8" in got["txt/bad_bytes.txt"]["detail"]
    assert "quote fields" in got["c2"]["detail"]
    assert (
        "missing-target" in got["txt/unreadable.txt"]["detail"] or "No such file" in got["txt/unreadable.txt"]["detail"]
    )
    assert report["records"] == len(got) == report["clean"] + report["rejected"]
    assert report["n_skipped_files"] == 1 and report["skipped_files"][0].endswith("notes.md")
    assert report["reasons"]["duplicate"] == 2


def test_file_given_directly_uses_its_name_as_id(tmp_path: Path):
    f = tmp_path / "one.txt"
    f.write_text(f"{T1}\n{ZH}", encoding="utf-8")
    clean_paths([f], tmp_path / "out")
    assert _read(tmp_path / "out" / "clean.jsonl")[0]["id"] == "one.txt"


def test_missing_input_raises_input_error(tmp_path: Path):
    with pytest.raises(InputError, match="no such file"):
        clean_paths([tmp_path / "nope"], tmp_path / "out")


def test_cli_exit_codes(tmp_path: Path, capsys):
    bad_inputs = tmp_path / "in"
    bad_inputs.mkdir()
    (bad_inputs / "x.jsonl").write_text('{"title": "truncated', encoding="utf-8")
    assert main(["clean", str(bad_inputs), "--out", str(tmp_path / "o1"), "--quiet"]) == 0  # rejects are normal
    with pytest.raises(SystemExit) as exit_:  # bad arguments are refused while parsing: exit 2, one line
        main(["clean", str(tmp_path / "nope"), "--out", str(tmp_path / "o2")])
    assert exit_.value.code == 2 and "no such file" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SystemExit) as exit_:
        main(["clean", str(bad_inputs), "--out", str(blocker)])
    assert exit_.value.code == 2 and "is a file" in capsys.readouterr().err
    assert main(["clean", str(bad_inputs), "--out", str(tmp_path / "o3"), "--min-title", "9", "--max-title", "5"]) == 2
    assert "--min-title 9 > --max-title 5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["clean", str(bad_inputs)])  # --out is required


def test_labkit_clean_imports_only_the_cleaning_code(tmp_path: Path):
    """`labkit clean` builds its own parser, not every command's: the whole one imported each topic's module
    (pydantic, the servers, the trainer, importlib.metadata for --version), ~0.5 s of CPU before the first file
    was read -- more than cleaning 1,000 records takes (issue 28, whole-process time). Clean UTF-8 text needs
    neither a detector (chardet) nor ftfy: they load when a file or a text needs them."""
    import ast
    import subprocess
    import sys

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text(T1 + "\n" + ZH, encoding="utf-8")
    code = (
        "import sys\nfrom labkit.cli import main\n"
        "rc = main(['clean', sys.argv[1], '--out', sys.argv[2], '--quiet'])\n"
        "print(rc, sorted(m for m in sys.modules if m.startswith('labkit.') or m.split('.')[0] in "
        "('torch', 'transformers', 'pandas', 'pydantic', 'matplotlib', 'opencc', 'chardet', 'ftfy') or m == 'importlib.metadata'))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "in"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    rc, _, loaded = proc.stdout.strip().partition(" ")
    assert rc == "0", proc.stderr
    allowed = {
        "labkit.cli",
        "labkit.cli.commands",
        "labkit.cli.errors",
        "labkit.threads",
        "labkit.atomic",
        "labkit.procs",
        "labkit.progress",
    }
    allowed |= {"labkit.cleaning"}  # and its modules, but for the bench and the datatrove engine
    assert [m for m in ast.literal_eval(loaded) if m not in allowed and not m.startswith("labkit.cleaning.")] == []
    assert "labkit.cleaning.bench" not in loaded and "labkit.cleaning.datatrove_engine" not in loaded


def test_labkit_clean_as_the_program_freezes_the_gc_before_exiting(tmp_path: Path):
    """As the program (`labkit clean ...`: main() reads sys.argv) it freezes the gc when done, so the interpreter's
    teardown skips its last collections over every loaded object (70-240 ms on this shared machine); called as a
    function (`main([...])`) it leaves the caller's gc alone. The files are complete either way."""
    import subprocess
    import sys

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text(T1 + "\n" + ZH, encoding="utf-8")
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('frozen' if gc.get_freeze_count() else 'not frozen'))\n"
        "from labkit.cli import main\n"
        "how, inputs, out = sys.argv[1:]\n"
        "args = ['clean', inputs, '--out', out, '--quiet']\n"
        "if how == 'program':\n"
        "    sys.argv = ['labkit', *args]\n"
        "    sys.exit(main())\n"
        "sys.exit(main(args))\n"
    )
    for how, expected in (("program", "frozen"), ("function", "not frozen")):
        out = tmp_path / how
        proc = subprocess.run(
            [sys.executable, "-c", code, how, str(tmp_path / "in"), str(out)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0 and proc.stdout.strip() == expected, (how, proc.stdout, proc.stderr)
        assert [r["id"] for r in _read(out / "clean.jsonl")] == ["a.txt"]
        assert json.loads((out / "report.json").read_text(encoding="utf-8"))["clean"] == 1


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_two_workers_write_identical_output(bad_inputs: Path, tmp_path: Path, monkeypatch):
    from labkit.cleaning import pipeline

    for i in range(40):  # enough files for several chunks, with cross-file duplicates
        (bad_inputs / "txt" / f"n{i:03d}.txt").write_text(f"{T1}{i % 7}\n{ZH}{i % 7}{ZH2}", encoding="utf-8")
    monkeypatch.setattr(pipeline, "SPOOL_BYTES", 1000)  # also exercise the spool path
    clean_paths([bad_inputs], tmp_path / "w1", workers=1)
    clean_paths([bad_inputs], tmp_path / "w2", workers=2)
    for name in ("clean.jsonl", "rejects.jsonl"):
        assert (tmp_path / "w1" / name).read_bytes() == (tmp_path / "w2" / name).read_bytes()
    assert not list((tmp_path / "w2").glob(".spool-*")), "spool files left behind"


@pytest.mark.parametrize(
    "title,body,detail",
    [
        ("标题\ud800x", "正文", "near (J~0.91) duplicate of b"),  # a lone surrogate in the record
        ("标题", '正文"\\', "exact duplicate of z\udc80"),  # ... only in the original's id
        ("title", "body", "exact duplicate of q"),
    ],
)
def test_each_row_has_one_serialiser_writing_json_dumps_bytes(tmp_path: Path, title, body, detail):
    """`labkit.cleaning.rows` (both engines write through it): each row is what a text-mode write of
    json.dumps gives -- UTF-8, or the whole row escaped when a value holds a lone surrogate."""
    from labkit.cleaning.rows import KeptRow, reject_line
    from labkit.cleaning.validate import Outcome

    def dumped(obj: dict) -> bytes:
        with open(tmp_path / "row.jsonl", "w", encoding="utf-8") as f:
            try:
                f.write(json.dumps(obj, ensure_ascii=False) + "\n")
            except UnicodeEncodeError:
                f.write(json.dumps(obj, ensure_ascii=True) + "\n")
        return (tmp_path / "row.jsonl").read_bytes()

    rec = Outcome("id-1", "src", title, body, ["fix"])
    row = KeptRow.of(rec)
    assert row.clean_line() == dumped({"id": "id-1", "title": title, "body": body, "source": "src", "fixes": ["fix"]})
    assert row.duplicate_line(detail) == dumped(
        {
            "id": "id-1",
            "source": "src",
            "reason": "duplicate",
            "detail": detail,
            "fixes": ["fix"],
            "original": {"title": title, "body": body},
        }
    )
    bad = Outcome("id-2", "src", None, None, ["fix"], "title_missing", detail, {"title": title, "body": body}, "QUJD")
    assert reject_line(bad) == dumped(
        {
            "id": "id-2",
            "source": "src",
            "reason": "title_missing",
            "detail": detail,
            "fixes": ["fix"],
            "original": {"title": title, "body": body},
            "raw_b64": "QUJD",
        }
    )


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_workers_never_fork_a_threaded_parent(bad_inputs: Path, tmp_path: Path):
    """A Jupyter kernel holds threads; a child forked while one of them holds a lock inherits it held
    forever (CI: 02's `clean_paths(workers=2)` hung 900 s). Modelled exactly: a parent thread holds a
    lock that any forked child takes right after the fork -- forked workers hang, workers started from
    a fresh interpreter (forkserver / spawn) do not."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import os, threading, time
        from labkit.cleaning.pipeline import clean_paths
        lock, held = threading.Lock(), threading.Event()
        def hold():
            with lock:
                held.set()
                time.sleep(600)
        threading.Thread(target=hold, daemon=True).start()
        held.wait()
        os.register_at_fork(after_in_child=lock.acquire)  # a child of *this* process needs the lock
        clean_paths([{str(bad_inputs)!r}], {str(tmp_path / "out")!r}, workers=2)
        print("finished")
        """
    )
    from labkit.procs import stop_group

    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        stop_group(proc, grace=1)  # the hung workers too
        pytest.fail("clean_paths(workers=2) hung: its workers were forked from a parent whose thread held a lock")
    assert proc.returncode == 0 and "finished" in out, err[-2000:]
    assert (tmp_path / "out" / "clean.jsonl").exists()


@pytest.mark.timeout(120)
def test_a_script_without_main_guard_gets_a_clear_error_not_a_hang(bad_inputs: Path, tmp_path: Path):
    """Fresh workers re-import the caller's script; unguarded, each worker dies while starting. The pool
    must say so (multiprocessing.Pool replaced dead workers and waited forever)."""
    import subprocess
    import sys

    script = tmp_path / "my_cleaning.py"
    script.write_text(
        f"from labkit.cleaning import clean_paths\nclean_paths([{str(bad_inputs)!r}], {str(tmp_path / 'out')!r}, workers=2)\n",
        encoding="utf-8",
    )
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=90)
    assert r.returncode != 0 and "if __name__ == '__main__':" in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "out" / "clean.jsonl").exists()  # nothing published
