"""`labkit export --model DIR --out DIR [--int8]`: a trained checkpoint -> the ONNX folder the servers load.

Wraps `labkit.serving.export.export_onnx` (optimum's exporter, offline) and, with
`--int8`, `labkit.serving.quantize.quantize_int8`, then measures what the export cost
with `labkit.serving.parity`:

* fp32 parity: greedy tokens of ONNX Runtime vs PyTorch on the same inputs, and the
  largest first-step logit difference -- the exported graph must be the trained model;
* with `--int8`: ROUGE-L / keyword-F1 of int8 vs fp32 against the references.

The inputs are `--data` records (the same formats `labkit train --data` takes) or, by
default, generated news articles.  Exit codes: 0 exported and parity holds, 1 parity
failed (the folder is still written, the figures say how far off it is), 2 bad arguments
(a folder without a model, say).  `<out>/export_report.json` keeps the figures.

The folder is built under a temporary name (`.<out>.partial-<pid>`) and renamed when
complete (`labkit.atomic.publish`): an interrupted export leaves no folder that looks
like an export (an earlier one at `--out` stays until the new one replaces it whole).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import time
from pathlib import Path

from labkit.atomic import partial_path, publish
from labkit.cli.errors import RunFailed, UsageError, nonneg_float, nonneg_int, positive_int, writable_dir
from labkit.progress import Progress, progress_mode
from labkit.serving.cli import SOURCE_LEN_HELP


def _fraction(value: str) -> float:
    f = nonneg_float(value)
    if f > 1:
        raise argparse.ArgumentTypeError(f"{value} must be between 0 and 1")
    return f


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "export",
        help="export a trained model to ONNX (optionally int8) and check parity",
        description=__doc__.splitlines()[0],
    )
    p.add_argument(
        "--model",
        required=True,
        metavar="DIR",
        help="save_pretrained folder: labkit train --save-model's <out>/model or any seq2seq checkpoint",
    )
    p.add_argument(
        "--out",
        required=True,
        type=writable_dir,
        metavar="DIR",
        help="ONNX folder to write (what labkit serve ... --onnx DIR loads): new, empty or an earlier "
        "export, replaced whole; built under a temporary name and renamed when complete, so an "
        "interrupted export leaves no folder that looks like one",
    )
    p.add_argument("--int8", action="store_true", help="dynamic int8 weights (smaller, faster on CPU); fp32 otherwise")
    p.add_argument(
        "--data",
        metavar="PATH",
        help="records for the parity check (formats of labkit train --data; default: generated articles)",
    )
    p.add_argument("--n", type=positive_int, default=12, help="inputs compared (default 12)")
    p.add_argument("--max-new-tokens", type=positive_int, default=24, help="tokens generated per input (default 24)")
    p.add_argument("--max-source-len", type=nonneg_int, default=0, help=SOURCE_LEN_HELP)
    p.add_argument(
        "--min-identical",
        type=_fraction,
        default=0.98,
        help="share of inputs whose fp32 ONNX tokens must equal PyTorch's (default 0.98)",
    )
    p.add_argument(
        "--max-logit-diff",
        type=nonneg_float,
        default=1e-3,
        help="largest first-step |logit| difference fp32 ONNX vs PyTorch (default 1e-3)",
    )
    p.add_argument(
        "--max-int8-drop",
        type=nonneg_float,
        default=0.05,
        help="largest ROUGE-L drop int8 vs fp32 accepted with --int8 (default 0.05)",
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no stage progress (a tqdm bar on stderr on a terminal, else a line per stage); "
        "the figures are still printed",
    )
    p.set_defaults(func=run)


def _examples(data: str | None, n: int) -> list:
    """Up to `n` examples, tasks interleaved (title, summary, keywords, ...)."""
    from labkit.text.tasks import make_examples

    if data:
        from labkit.jsonl import read_jsonl
        from labkit.training.own_data import open_source, split

        src = open_source(data)
        if src.kind == "prepared":
            recs = read_jsonl(src.path / "eval.jsonl") if (src.path / "eval.jsonl").is_file() else []
            recs = recs or read_jsonl(src.path / "train.jsonl")
        else:
            train, held = split(src.records)
            recs = held + train
    else:
        from labkit.corpus import generate

        recs = generate(max(n, 3), seed=12345)
    ex = make_examples(recs[: max(n, 3)])
    by_task: dict[str, list] = {}
    for e in ex:
        by_task.setdefault(e.task, []).append(e)
    out = []
    while len(out) < n and any(by_task.values()):
        for lst in by_task.values():
            if lst and len(out) < n:
                out.append(lst.pop(0))
    return out


@contextlib.contextmanager
def _scratch(path: Path):
    """A working folder removed afterwards (the fp32 graphs an int8 export starts from)."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    from labkit.training.own_data import checkpoint_problem

    why = checkpoint_problem(args.model)
    if why:
        raise UsageError(
            f"--model {args.model}: {why}; pass a save_pretrained folder with model and tokenizer "
            "(e.g. the <out>/model of `labkit train --save-model`)"
        )
    out = Path(args.out)
    if Path(args.model).resolve().is_relative_to(out.resolve()):
        raise UsageError(f"--out {args.out} is or holds the --model folder; choose another folder for the ONNX files")
    if (
        out.is_dir()
        and any(out.iterdir())
        and not any((out / f).exists() for f in ("export_report.json", "encoder_model.onnx"))
    ):
        raise UsageError(
            f"--out {args.out} holds other files and would be replaced whole; choose a new or empty "
            "folder (or an earlier export's)"
        )
    examples = _examples(args.data, args.n)
    if not examples:
        raise UsageError(f"--data {args.data}: no example with a target to compare on; pass title/body records")

    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from labkit.serving.export import export_onnx, onnx_size_mb
    from labkit.serving.ort_generate import OrtGenerator
    from labkit.serving.parity import check_parity, quality_delta
    from labkit.serving.quantize import quantize_int8

    torch.set_num_threads(max(1, torch.get_num_threads()))
    t0 = time.perf_counter()
    report: dict = {"model": str(args.model), "out": str(out), "int8": args.int8, "n": len(examples)}
    failures: list[str] = []
    stages = ["fp32 ONNX export", "fp32 parity vs PyTorch"] + (
        ["int8 quantization", "int8 quality vs fp32"] if args.int8 else []
    )
    with (
        publish(out, directory=True) as (staged,),
        Progress(len(stages), "export", "stage", progress_mode(args.quiet)) as bar,
        _scratch(partial_path(out).with_name(partial_path(out).name + "-fp32")) as tmp,
    ):
        fp32 = tmp if args.int8 else staged
        bar.stage(stages[0])
        export_onnx(args.model, fp32, validate=False)
        report["export_s"] = round(time.perf_counter() - t0, 1)
        report["fp32_mb"] = round(onnx_size_mb(fp32), 2)
        bar.update(1)
        bar.stage(stages[1])
        model = AutoModelForSeq2SeqLM.from_pretrained(args.model).eval()
        tok = AutoTokenizer.from_pretrained(args.model)
        g32 = OrtGenerator(fp32, threads=1, max_source_len=args.max_source_len, tokenizer=tok)
        par = check_parity(model, tok, g32, [e.source for e in examples], max_new_tokens=args.max_new_tokens)
        report["fp32_parity"] = par.to_dict()
        bar.update(1)
        bar.echo(
            f"fp32 parity: {par.identical}/{par.n} inputs give PyTorch's greedy tokens "
            f"({par.fraction_identical:.0%}), max first-step |logit diff| {par.max_abs_logit_diff:.2e}"
        )
        if par.fraction_identical < args.min_identical:
            failures.append(
                f"fp32 ONNX matches PyTorch on {par.fraction_identical:.0%} of inputs "
                f"(< --min-identical {args.min_identical:.0%}); first mismatch: {par.mismatches[:1]}"
            )
        if par.max_abs_logit_diff > args.max_logit_diff:
            failures.append(
                f"first-step logits differ by {par.max_abs_logit_diff:.2e} (> --max-logit-diff {args.max_logit_diff})"
            )
        if args.int8:
            bar.stage(stages[2])
            quantize_int8(fp32, staged)
            report["int8_mb"] = round(onnx_size_mb(staged), 2)
            bar.update(1)
            bar.stage(stages[3])
            g8 = OrtGenerator(staged, threads=1, max_source_len=args.max_source_len, tokenizer=tok)
            q = quality_delta(g32, g8, examples, max_new_tokens=args.max_new_tokens)
            report["int8_quality"] = q
            bar.update(1)
            bar.echo(
                f"int8: {report['fp32_mb']} MB -> {report['int8_mb']} MB; ROUGE-L {q['fp32']['rouge_l']:.3f} -> "
                f"{q['int8']['rouge_l']:.3f} ({q['rouge_l_delta']:+.3f}), keyword F1 {q['fp32']['keyword_f1']:.3f} -> "
                f"{q['int8']['keyword_f1']:.3f}; same text as fp32 on {q['same_output']:.0%}"
            )
            if q["rouge_l_delta"] == q["rouge_l_delta"] and q["rouge_l_delta"] < -args.max_int8_drop:
                failures.append(
                    f"int8 loses {-q['rouge_l_delta']:.3f} ROUGE-L (> --max-int8-drop {args.max_int8_drop})"
                )
        report["seconds"] = round(time.perf_counter() - t0, 1)
        report["passed"] = not failures
        report["failures"] = failures
        # written last, inside the folder that is renamed into place whole (parity failed or not)
        (staged / "export_report.json").write_text(
            json.dumps(report, ensure_ascii=False, indent=1, default=str), encoding="utf-8"
        )
    if failures:
        raise RunFailed(f"parity failed: {'; '.join(failures)} (figures in {out / 'export_report.json'})")
    print(
        f"exported {'int8' if args.int8 else 'fp32'} ONNX to {out} in {report['seconds']} s; "
        f"serve it: labkit serve api --onnx {out} --start-triton",
        flush=True,
    )
    return 0
