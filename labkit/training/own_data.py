"""`labkit train --data PATH` on your own records, `--init-from DIR` from your own checkpoint.

`--data` accepts, besides a folder made by `prepare_data()` (train.jsonl, eval.jsonl,
tokenizer/):

* the output folder of `labkit clean` (its `clean.jsonl` is read; `rejects.jsonl` never is),
* a JSONL file, or a folder of JSONL files (read recursively, sorted by path),

with records holding `title` and `body` (optional `summary` and `keywords`; a task no
record has a target for is skipped, with a note).  Records are split deterministically:
a record goes to the eval set when the hash of its title and body falls in the first
`EVAL_PERMILLE`/1000 of the hash range (at least one eval record when there are two or
more), so the same input always gives the same split -- on every rank, in every rerun,
whatever the file order or record ids.  The character tokenizer is trained on the train
split, unless the model comes from `--init-from` (then the checkpoint's tokenizer is used).

`--init-from DIR` starts from a Hugging Face seq2seq checkpoint saved with
`save_pretrained` (a public Chinese T5 you downloaded, SentencePiece tokenizers included,
or an earlier `labkit train --save-model`).  It is not `--resume`, which continues the
optimizer state of `<out>/ckpt`.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from labkit.cli.errors import UsageError

EVAL_PERMILLE = 50  # 5% of the records are held out for evaluation
KEEP_FIELDS = ("id", "title", "body", "summary", "keywords")
TASK_FIELDS = {"title": "title", "summary": "summary", "keywords": "keywords"}
WEIGHT_FILES = (
    "model.safetensors",
    "pytorch_model.bin",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
)
TOKENIZER_FILES = (
    "tokenizer.json",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
    "vocab.txt",
    "vocab.json",
)


@dataclass
class DataSource:
    """What `--data` points at: a prepared folder, or records still to be split."""

    path: Path
    kind: str  # "prepared" | "records"
    records: list[dict] = field(default_factory=list)
    total: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256()
        if self.kind == "prepared":
            h.update((self.path / "train.jsonl").read_bytes())
        else:
            for r in self.records:
                h.update(json.dumps(r, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
        return h.hexdigest()[:12]


def _counts(total: int, usable: int, dropped: dict[str, int]) -> str:
    why = ", ".join(f"{n} {reason}" for reason, n in sorted(dropped.items(), key=lambda kv: -kv[1]))
    return f"{usable} usable of {total} records" + (f": {why}" if why else "")


def _text(v) -> str:
    return v.strip() if isinstance(v, str) else ""


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if (path / "clean.jsonl").is_file():  # a `labkit clean` output folder: the kept records only
        return [path / "clean.jsonl"]
    return sorted(p for p in path.rglob("*.jsonl") if p.is_file() and p.name != "rejects.jsonl")


def open_source(data: str | Path) -> DataSource:
    """Read `--data`; raises `UsageError` (exit 2) when it is missing or holds no usable record."""
    path = Path(data)
    if not path.exists():
        raise UsageError(
            f"--data {data}: no such file or directory; pass a JSONL file, a `labkit clean` "
            "output folder or a folder from prepare_data()"
        )
    if path.is_dir() and (path / "train.jsonl").is_file():
        return DataSource(path, "prepared")
    files = _files(path)
    if not files:
        raise UsageError(
            f"--data {data}: 0 usable of 0 records: no .jsonl file there; pass JSONL records "
            "with title and body (e.g. the folder written by `labkit clean INPUT --out DIR`)"
        )
    records, dropped, total = [], Counter(), 0
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    continue
                total += 1
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    dropped["not JSON"] += 1
                    continue
                if not isinstance(rec, dict):
                    dropped["not a JSON object"] += 1
                elif not _text(rec.get("title")):
                    dropped["without title"] += 1
                elif not _text(rec.get("body")):
                    dropped["without body"] += 1
                else:
                    records.append({k: rec[k] for k in KEEP_FIELDS if rec.get(k) not in (None, "", [])})
    if not records:
        raise UsageError(
            f"--data {data}: {_counts(total, 0, dropped)}; give JSONL records with non-empty "
            '"title" and "body" (e.g. clean.jsonl from `labkit clean`)'
        )
    return DataSource(path, "records", records, total, dict(dropped), files)


def _hash(rec: dict) -> int:
    key = (rec["title"].strip() + "\x00" + rec["body"].strip()).encode("utf-8")
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big")


def split(records: list[dict], permille: int = EVAL_PERMILLE) -> tuple[list[dict], list[dict]]:
    """Deterministic train/eval split by content hash (input order kept; >= 1 eval record when n >= 2)."""
    hashes = [_hash(r) for r in records]
    cut = (2**64) * permille // 1000
    is_eval = [h < cut for h in hashes]
    if len(records) >= 2 and not any(is_eval):
        is_eval[min(range(len(records)), key=lambda i: hashes[i])] = True
    if len(records) >= 2 and all(is_eval):
        is_eval[max(range(len(records)), key=lambda i: hashes[i])] = False
    train = [r for r, e in zip(records, is_eval) if not e]
    held = [r for r, e in zip(records, is_eval) if e]
    for rows in (train, held):  # ids for diagnostics; records without one get a content id
        for r in rows:
            r.setdefault("id", f"rec-{_hash(r):016x}"[:12])
    return train, held


def task_notes(records: list[dict]) -> list[str]:
    """One note per task that no record has a target for (the task is skipped)."""
    from labkit.text.tasks import TASKS

    return [
        f"note: no record has a {TASK_FIELDS[t]!r} field: the {t} task is skipped"
        for t in TASKS
        if not any(r.get(TASK_FIELDS[t]) for r in records)
    ]


def prepare_data(train_records, eval_records, out_dir, tokenizer=None) -> Path:
    """Write what every rank loads (the data folder `--data` takes): records as JSONL and the tokenizer, trained here once."""
    from labkit.jsonl import write_jsonl
    from labkit.text.tasks import tokenizer_texts

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, recs in (("train", train_records), ("eval", eval_records or [])):
        rows = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in recs]
        write_jsonl(out / f"{name}.jsonl", rows)
    if tokenizer is None:
        from labkit.text.tokenizer import train_tokenizer

        tokenizer = train_tokenizer(tokenizer_texts(train_records))
    tokenizer.save_pretrained(str(out / "tokenizer"))
    return out


def materialize(source: DataSource, out_dir: Path, train_tokenizer: bool = True, verbose: bool = True) -> Path:
    """The folder the trainer loads: `source` itself when prepared, else the split (+ tokenizer) written to `out_dir`."""
    if source.kind == "prepared":
        return source.path
    train, held = split(source.records)
    out_dir = Path(out_dir)
    if train_tokenizer:
        prepare_data(train, held, out_dir)
    else:  # the tokenizer comes from --init-from: write the records only
        from labkit.jsonl import write_jsonl

        out_dir.mkdir(parents=True, exist_ok=True)
        write_jsonl(out_dir / "train.jsonl", train)
        write_jsonl(out_dir / "eval.jsonl", held)
    if verbose:
        print(
            f"data: {_counts(source.total, len(source.records), source.dropped)} in {source.path}; "
            f"{len(train)} train, {len(held)} eval -> {out_dir}",
            flush=True,
        )
        for note in task_notes(source.records):
            print(note, flush=True)
    return out_dir


# ---- --init-from ---------------------------------------------------------------------------


def checkpoint_problem(path: str | Path) -> str | None:
    """Why `path` is not a seq2seq checkpoint folder (model + tokenizer), or None when it is."""
    p = Path(path)
    if not p.is_dir():
        return "no such directory" if not p.exists() else "is a file, not a checkpoint folder"
    if not (p / "config.json").is_file():
        return "no config.json"
    try:
        cfg = json.loads((p / "config.json").read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        return f"config.json is not readable JSON ({exc})"
    model_type = cfg.get("model_type")
    if not cfg.get("is_encoder_decoder") and model_type not in _seq2seq_types():
        return f"config is model_type {model_type or '(none)'}, not a seq2seq model"
    if not any((p / f).is_file() for f in WEIGHT_FILES):
        return "no model weights (model.safetensors or pytorch_model.bin)"
    if not any((p / f).is_file() for f in TOKENIZER_FILES):
        return "no tokenizer files (tokenizer.json or spiece.model)"
    return None


def _seq2seq_types() -> set[str]:
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES as names
    except ImportError:  # pragma: no cover - an older/newer transformers layout
        return {"t5", "mt5", "umt5", "bart", "mbart", "pegasus", "marian", "longt5"}
    return set(names)


def open_checkpoint(path: str | Path):
    """Check `--init-from` and load its tokenizer (cheap, before any process group); raises `UsageError`."""
    why = checkpoint_problem(path)
    if why:
        raise UsageError(
            f"--init-from {path}: {why}; pass a folder saved with save_pretrained (model and "
            "tokenizer), e.g. a downloaded Chinese T5 or the <out>/model of `labkit train --save-model`"
        )
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    if tok.pad_token_id is None or tok.eos_token_id is None:
        raise UsageError(
            f"--init-from {path}: the tokenizer has no pad or eos token; labkit trains T5-style "
            "models whose tokenizer defines both (pad, </s>)"
        )
    ids = tok("标题：测试")["input_ids"]
    if not ids or ids[-1] != tok.eos_token_id:
        raise UsageError(
            f"--init-from {path}: the tokenizer does not end an input with its eos token "
            f"{tok.eos_token!r}; labkit expects a T5-style tokenizer (T5Tokenizer or a labkit one)"
        )
    return tok


def load_model(path: str | Path, tokenizer):
    """The checkpoint's model, its pad/decoder-start ids filled in from the tokenizer where missing."""
    from transformers import AutoModelForSeq2SeqLM

    from labkit.model import check_vocab

    model = AutoModelForSeq2SeqLM.from_pretrained(str(path))
    check_vocab(model, tokenizer)
    for cfg in (model.config, getattr(model, "generation_config", None)):
        if cfg is None:
            continue
        if getattr(cfg, "pad_token_id", None) is None:
            cfg.pad_token_id = tokenizer.pad_token_id
        if getattr(cfg, "eos_token_id", None) is None:
            cfg.eos_token_id = tokenizer.eos_token_id
        if getattr(cfg, "decoder_start_token_id", None) is None:
            cfg.decoder_start_token_id = cfg.pad_token_id  # T5's convention: decoding starts at pad
    return model
