"""From the course to your own project: clean -> train -> export -> serve with the CLI only.

The chain test runs the README's "Use it on your own project" commands as subprocesses of
the installed `labkit` on data_samples/; the fast tests cover `--data` inputs (a JSONL file,
a `labkit clean` folder), the deterministic eval split, the task-skipping note, every bad
input (exit 2, one line, no traceback), and `--init-from` (a SentencePiece T5 checkpoint
made here, and an earlier `--save-model`).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data_samples"
LABKIT = Path(sys.executable).parent / "labkit"


def _articles(n: int | None = None) -> list[dict]:
    rows = [json.loads(line) for line in (SAMPLES / "articles.jsonl").read_text(encoding="utf-8").splitlines()]
    return rows[:n] if n else rows


def _write_jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    from labkit.cli import main

    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse errors
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line_usage_error(rc, err: str, *needles: str) -> None:
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]


# ---- --data inputs --------------------------------------------------------------------------


def test_jsonl_file_is_split_and_tokenizer_trained(tmp_path, capsys):
    from labkit.training.own_data import materialize, open_source

    src = open_source(_write_jsonl(tmp_path / "mine.jsonl", _articles(80)))
    assert src.kind == "records" and len(src.records) == 80
    data = materialize(src, tmp_path / "data")
    train = (data / "train.jsonl").read_text(encoding="utf-8").splitlines()
    held = (data / "eval.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(train) + len(held) == 80 and 1 <= len(held) <= 12
    assert (data / "tokenizer" / "tokenizer.json").is_file()
    assert "80 usable of 80 records" in capsys.readouterr().out


def test_clean_folder_reads_clean_jsonl_only_and_notes_skipped_tasks(tmp_path, capsys):
    from labkit.cleaning.pipeline import clean_paths
    from labkit.training.own_data import materialize, open_source

    report = clean_paths([SAMPLES / "crawl"], tmp_path / "cleaned")
    src = open_source(tmp_path / "cleaned")
    assert [p.name for p in src.files] == ["clean.jsonl"]  # never rejects.jsonl
    assert len(src.records) == report["clean"] > 0
    materialize(src, tmp_path / "data")
    out = capsys.readouterr().out
    assert "the summary task is skipped" in out and "the keywords task is skipped" in out
    assert "title task is skipped" not in out


def test_split_is_deterministic_and_order_independent():
    from labkit.training.own_data import split

    recs = _articles()
    ids = lambda rows: sorted(r["id"] for r in rows)  # noqa: E731
    _, held1 = split([dict(r) for r in recs])
    _, held2 = split([dict(r) for r in recs])
    shuffled = [dict(r) for r in recs]
    random.Random(1).shuffle(shuffled)
    _, held3 = split(shuffled)
    assert ids(held1) == ids(held2) == ids(held3)
    assert 5 <= len(held1) <= 40  # about 5% of 400
    train, held = split([dict(r) for r in recs[:3]])  # small input: still one eval record
    assert len(held) == 1 and len(train) == 2


def test_jsonl_folder_without_ids_gets_content_ids(tmp_path):
    from labkit.training.own_data import open_source, split

    rows = [{"title": a["title"], "body": a["body"]} for a in _articles(20)]
    _write_jsonl(tmp_path / "d" / "a.jsonl", rows[:10])
    _write_jsonl(tmp_path / "d" / "sub" / "b.jsonl", rows[10:])
    src = open_source(tmp_path / "d")
    assert len(src.records) == 20
    train, held = split(src.records)
    assert all(r["id"].startswith("rec-") for r in train + held)


# ---- bad inputs: exit 2, one line, no traceback -----------------------------------------------


def test_data_without_usable_records_counts_reasons(tmp_path, capsys):
    rows = [{"body": "正文" * 20}] * 7 + [{"title": "一个标题"}] * 5
    bad = _write_jsonl(tmp_path / "bad.jsonl", rows)
    rc, _, err = _cli(["train", "--data", str(bad), "--out", str(tmp_path / "run"), "--steps", "1"], capsys)
    _one_line_usage_error(rc, err, "0 usable of 12 records: 7 without title, 5 without body")
    assert not (tmp_path / "run").exists()  # nothing started


def test_data_that_does_not_exist(tmp_path, capsys):
    rc, _, err = _cli(["train", "--data", str(tmp_path / "nope"), "--out", str(tmp_path / "run")], capsys)
    _one_line_usage_error(rc, err, "no such file or directory")


def _fake_checkpoint(d: Path, config: dict | None, weights=True, tokenizer=True) -> Path:
    d.mkdir(parents=True)
    if config is not None:
        (d / "config.json").write_text(json.dumps(config))
    if weights:
        (d / "model.safetensors").write_bytes(b"x")
    if tokenizer:
        (d / "tokenizer.json").write_text("{}")
    return d


@pytest.mark.parametrize(
    "case, needle",
    [
        ("empty", "no config.json"),
        ("bert", "config is model_type bert, not a seq2seq model"),
        ("no-weights", "no model weights"),
        ("no-tokenizer", "no tokenizer files"),
    ],
)
def test_init_from_a_folder_that_is_not_a_seq2seq_checkpoint(tmp_path, capsys, case, needle):
    ck = tmp_path / "ck"
    {
        "empty": lambda: _fake_checkpoint(ck, None, False, False),
        "bert": lambda: _fake_checkpoint(ck, {"model_type": "bert"}),
        "no-weights": lambda: _fake_checkpoint(ck, {"model_type": "t5", "is_encoder_decoder": True}, weights=False),
        "no-tokenizer": lambda: _fake_checkpoint(ck, {"model_type": "t5", "is_encoder_decoder": True}, tokenizer=False),
    }[case]()
    data = _write_jsonl(tmp_path / "d.jsonl", _articles(5))
    rc, _, err = _cli(["train", "--data", str(data), "--init-from", str(ck), "--out", str(tmp_path / "run")], capsys)
    _one_line_usage_error(rc, err, f"--init-from {ck}: {needle}")


def test_export_a_folder_without_a_model(tmp_path, capsys):
    rc, _, err = _cli(["export", "--model", str(tmp_path), "--out", str(tmp_path / "onnx")], capsys)
    _one_line_usage_error(rc, err, "no config.json")


def test_bad_data_from_the_real_command_has_no_traceback(tmp_path):
    bad = _write_jsonl(tmp_path / "bad.jsonl", [[1, 2], "text"])
    r = subprocess.run(
        [str(LABKIT), "train", "--data", str(bad), "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert "0 usable of 2 records: 2 not a JSON object" in r.stderr


# ---- --init-from -------------------------------------------------------------------------------


def _sentencepiece_checkpoint(d: Path) -> Path:
    """A SentencePiece T5 checkpoint like the public Chinese ones: spiece.model + a (tiny, random) T5."""
    import sentencepiece as spm
    import torch
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

    corpus = d.parent / "sp_corpus.txt"
    corpus.write_text(
        "\n".join(t for a in _articles(200) for t in (a["title"], a["body"], a["summary"])), encoding="utf-8"
    )
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(d.parent / "sp"),
        vocab_size=1500,
        model_type="unigram",
        character_coverage=0.9995,
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        minloglevel=2,
    )
    tok = T5Tokenizer(vocab_file=str(d.parent / "sp.model"), extra_ids=0, legacy=False)
    torch.manual_seed(0)
    cfg = T5Config(
        vocab_size=len(tok),
        d_model=64,
        d_kv=16,
        d_ff=128,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=4,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    T5ForConditionalGeneration(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    assert (d / "spiece.model").is_file() and not (d / "tokenizer.json").exists()
    return d


def _run_json(out: Path) -> dict:
    return json.loads((out / "ranks" / "rank0.json").read_text(encoding="utf-8"))


def test_init_from_a_sentencepiece_t5_checkpoint(tmp_path, capsys):
    ck = _sentencepiece_checkpoint(tmp_path / "chinese-t5")
    data = _write_jsonl(tmp_path / "mine.jsonl", _articles(40))
    out = tmp_path / "run"
    rc, stdout, err = _cli(
        [
            "train",
            "--data",
            str(data),
            "--init-from",
            str(ck),
            "--preset",
            "t5-small",
            "--out",
            str(out),
            "--steps",
            "2",
            "--batch-size",
            "4",
            "--threads",
            "1",
            "--save-model",
        ],
        capsys,
    )
    assert rc == 0, err
    assert "--preset t5-small is ignored" in stdout
    rep = _run_json(out)
    assert rep["completed"] and len(rep["history"]["loss"]) == 2
    assert not (out / "data" / "tokenizer").exists()  # the checkpoint's tokenizer, not a trained one
    from transformers import AutoConfig, AutoTokenizer

    assert AutoConfig.from_pretrained(out / "model").d_model == 64  # the checkpoint's shape, not t5-small's
    tok = AutoTokenizer.from_pretrained(out / "model")
    assert len(tok) == 1500 and (out / "model" / "spiece.model").is_file()


def test_init_from_an_earlier_save_model_is_not_resume(tmp_path, capsys):
    data = _write_jsonl(tmp_path / "mine.jsonl", _articles(40))
    first, second = tmp_path / "first", tmp_path / "second"
    common = ["--data", str(data), "--steps", "2", "--batch-size", "4", "--threads", "1"]
    rc, _, err = _cli(["train", *common, "--out", str(first), "--save-model", "--ckpt-every", "2"], capsys)
    assert rc == 0, err
    rc, _, err = _cli(["train", *common, "--out", str(second), "--init-from", str(first / "model")], capsys)
    assert rc == 0, err
    r1, r2 = _run_json(first), _run_json(second)
    assert r2["resumed_from"] is None  # a fresh run from the weights: no optimizer state, step 1 again
    assert r2["checksums"]["init"] == r1["checksums"]["final"]
    assert r2["history"]["steps"] == [1, 2]


@pytest.mark.slow  # two real ONNX exports
def test_export_reports_parity_and_exits_1_when_it_fails(tmp_path):
    ck = _sentencepiece_checkpoint(tmp_path / "ck")
    # a real process: in-process, transformers' log handler may hold an earlier test's captured stderr
    r = subprocess.run(
        [
            str(LABKIT),
            "export",
            "--model",
            str(ck),
            "--out",
            str(tmp_path / "onnx"),
            "--n",
            "3",
            "--max-new-tokens",
            "4",
            "--max-logit-diff",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, r.stderr
    assert "fp32 parity: 3/3" in r.stdout
    assert r.stderr.strip().splitlines()[-1].startswith("labkit export: parity failed: first-step logits differ")
    assert "Traceback" not in r.stderr
    rep = json.loads((tmp_path / "onnx" / "export_report.json").read_text())
    assert rep["passed"] is False and rep["fp32_parity"]["identical"] == 3
    assert (tmp_path / "onnx" / "spiece.model").is_file()  # the SentencePiece vocabulary travels with the graphs


# ---- the whole chain ---------------------------------------------------------------------------


def _timed(timings: dict, name: str, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    timings[name] = round(time.perf_counter() - t0, 1)
    assert r.returncode == 0, f"{name}: rc {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr
    return r


@pytest.mark.slow  # real processes end to end, a server included: make test runs it, make test-fast does not
@pytest.mark.timeout(600)  # 32-75 s on 2 cores (clean 2, train 9-22, export 7-23, serve ready 14-26)
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_chain_from_a_crawl_folder_to_an_answered_request(tmp_path, strategy):
    import httpx

    from labkit.procs import free_port, stop_group
    from labkit.serving.availability import triton_missing

    # where PyTriton has no wheel the same chain serves through the API's in-process ONNX Runtime batcher
    serve_args = ["--backend", "ort"] if triton_missing() else ["--start-triton"]
    lk, t = str(LABKIT), {}
    cleaned, run, onnx = tmp_path / "cleaned", tmp_path / "runs" / "mine", tmp_path / "runs" / "mine" / "onnx"
    _timed(t, "clean", [lk, "clean", str(SAMPLES / "crawl"), "--out", str(cleaned), "--quiet"], 120)
    # fsdp shards over 2 processes (torchrun) and --save-model gathers one whole copy: export takes it unchanged
    trainer = (
        [lk, "train"]
        if strategy == "ddp"
        else [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m", "labkit.train"]
    )
    _timed(
        t,
        "train",
        [
            *trainer,
            "--strategy",
            strategy,
            "--data",
            str(cleaned),
            "--out",
            str(run),
            "--steps",
            "3",
            "--batch-size",
            "4",
            "--max-source-len",
            "64",
            "--save-model",
        ],
        300,
    )
    r = _timed(
        t,
        "export",
        [
            lk,
            "export",
            "--model",
            str(run / "model"),
            "--out",
            str(onnx),
            "--int8",
            "--n",
            "6",
            "--max-new-tokens",
            "8",
        ],
        300,
    )
    assert "fp32 parity: 6/6" in r.stdout
    from labkit.text.tokenizer import trained_source_len

    # the server below is given no --max-source-len: it truncates at the 64 tokens training used
    assert trained_source_len(run / "model") == trained_source_len(onnx) == 64
    port = free_port()
    t0 = time.perf_counter()
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen(
        [lk, "serve", "api", "--onnx", str(onnx), *serve_args, "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 150
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text(errors="replace")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text(errors="replace")
            time.sleep(0.5)
        t["serve_ready"] = round(time.perf_counter() - t0, 1)
        t1 = time.perf_counter()
        resp = httpx.post(
            f"http://127.0.0.1:{port}/v1/generate",
            timeout=30,
            json={"task": "title", "text": "佛山市公安局9月3日发布消息，警方侦破一起特大电信诈骗案，抓获嫌疑人155名。"},
        )
        t["request"] = round(time.perf_counter() - t1, 2)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["task"] == "title" and isinstance(body["output"], str)
    finally:
        stop_group(proc)
        log.close()
    print("chain timings (s):", json.dumps(t))
