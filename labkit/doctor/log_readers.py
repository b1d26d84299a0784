"""Readers for `labkit doctor log`: a run's logged scalars as plain (step, value) series.

Three sources, tried in this order for a folder:

* Hugging Face `trainer_state.json` -- the file, a checkpoint folder holding
  one, or an output dir with `checkpoint-*` folders (the highest step wins).
  Its `log_history` rows with a `loss` are training rows (`learning_rate`,
  `grad_norm` beside it); eval rows (`eval_loss`) and the final summary
  (`train_loss`) are skipped.  Python's json reads the `NaN`/`Infinity` tokens
  the Trainer writes.
* labkit's run report `ranks/rank0.json` (`labkit train --out OUT`): its
  `history` holds every step's `loss`, `lr` and `grad_norm`.
* TensorBoard event files anywhere below the folder, one run per directory
  holding them: HF's `TensorBoardCallback` tags (`train/loss`,
  `train/learning_rate`, `train/grad_norm`) and labkit's trainer's
  (`train/loss`, `train/lr`, `grad_norm/total`, `grad_norm_layer/<layer>`,
  `nonfinite/events`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

Points = list[tuple[int, float]]

# tag aliases, first present wins: HF's TensorBoardCallback, labkit's Trainer, plain names
LOSS_TAGS = ("train/loss", "loss")
LR_TAGS = ("train/learning_rate", "train/lr", "learning_rate", "lr")
GRAD_TAGS = ("train/grad_norm", "grad_norm/total", "grad_norm")
LAYER_PREFIX = "grad_norm_layer/"  # labkit: one series per layer (labkit.training.monitor)
NONFINITE_TAG = "nonfinite/events"  # labkit: running count of non-finite steps (catches unlogged steps)

LOOKED_FOR = (
    "trainer_state.json (log_history rows with a loss), checkpoint-*/trainer_state.json, "
    "ranks/rank0.json with a history (labkit train), or TensorBoard event files with a loss or "
    "grad-norm scalar (train/loss, train/grad_norm, grad_norm/total)"
)


class LogReadError(Exception):
    """The path cannot be read or holds no training scalars; the message says which and what was looked for."""


@dataclass
class Run:
    path: str  # what was read: a file, or a TensorBoard event directory
    loss: Points = field(default_factory=list)
    lr: Points = field(default_factory=list)
    grad_norm: Points = field(default_factory=list)
    layer_grad_norms: dict[str, Points] = field(default_factory=dict)  # labkit's per-layer series, if logged
    nonfinite_steps: list[int] = field(default_factory=list)
    # labkit rank reports: what one rank held after its first update (strategy, world, params/grads/optimizer bytes)
    memory: dict | None = None

    @property
    def has_scalars(self) -> bool:
        return bool(self.loss or self.grad_norm)


def _num(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _load_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))  # NaN / Infinity / -Infinity are accepted
    except OSError as exc:
        raise LogReadError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LogReadError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise LogReadError(f"{path}: expected a JSON object (a trainer_state.json or a labkit rank report)")
    return data


def from_trainer_state(path: Path, data: dict) -> Run:
    run = Run(str(path))
    for row in data.get("log_history") or []:
        if not isinstance(row, dict) or _num(row.get("step")) is None or "loss" not in row:
            continue  # eval rows and the final train_loss summary have no "loss"
        step = int(row["step"])
        for key, series in (("loss", run.loss), ("learning_rate", run.lr), ("grad_norm", run.grad_norm)):
            if _num(row.get(key)) is not None:
                series.append((step, _num(row[key])))
    return run


def from_rank_report(path: Path, data: dict) -> Run:
    h = data.get("history") or {}
    steps = h.get("steps") or list(range(1, len(h.get("loss") or []) + 1))
    run = Run(str(path))
    for key, series in (("loss", run.loss), ("lr", run.lr), ("grad_norm", run.grad_norm)):
        series.extend((int(s), _num(v)) for s, v in zip(steps, h.get(key) or []) if _num(v) is not None)
    b = data.get("state_bytes") or {}
    if all(_num(b.get(k)) is not None for k in ("params", "grads", "optimizer", "total")) and b["total"] > 0:
        world = (data.get("env") or {}).get("world_size") or 1
        run.memory = {"strategy": data.get("strategy", "ddp"), "world": int(world), **{k: b[k] for k in b}}
    return run


def from_tensorboard(path: Path) -> Run:
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    try:
        acc = EventAccumulator(str(path), size_guidance={SCALARS: 0}).Reload()  # 0 = keep every value
    except Exception as exc:  # corrupted records surface as various errors
        raise LogReadError(f"{path}: TensorBoard events cannot be read ({type(exc).__name__}: {exc})") from exc
    tags = set(acc.Tags().get("scalars", []))
    run = Run(str(path))

    def series(names) -> Points:
        tag = next((t for t in names if t in tags), None)
        return [(int(e.step), float(e.value)) for e in acc.Scalars(tag)] if tag else []

    run.loss, run.lr, run.grad_norm = series(LOSS_TAGS), series(LR_TAGS), series(GRAD_TAGS)
    for tag in sorted(t for t in tags if t.startswith(LAYER_PREFIX)):
        run.layer_grad_norms[tag[len(LAYER_PREFIX) :]] = [(int(e.step), float(e.value)) for e in acc.Scalars(tag)]
    if NONFINITE_TAG in tags:
        run.nonfinite_steps = [int(e.step) for e in acc.Scalars(NONFINITE_TAG)]
    return run


def _checkpoint_step(p: Path) -> int:
    m = re.fullmatch(r"checkpoint-(\d+)", p.name)
    return int(m.group(1)) if m else -1


def _read_json_file(path: Path) -> Run:
    data = _load_json(path)
    if "log_history" in data:
        return from_trainer_state(path, data)
    if isinstance(data.get("history"), dict):
        return from_rank_report(path, data)
    raise LogReadError(f"{path}: neither a trainer_state.json (no log_history) nor a labkit rank report (no history)")


def read_runs(path: str | Path) -> list[Run]:
    """The runs under `path`, each with at least one training scalar; LogReadError otherwise."""
    p = Path(path)
    if not p.exists():
        raise LogReadError(f"{p}: no such file or directory")
    if p.is_file():
        if p.name.startswith("events.out.tfevents"):
            runs = [from_tensorboard(p)]
        elif p.suffix == ".json":
            runs = [_read_json_file(p)]
        else:
            raise LogReadError(
                f"{p}: not a trainer_state.json, rank report or TensorBoard event file; pass the file or its folder"
            )
    else:
        runs = _read_folder(p)
    runs = [r for r in runs if r.has_scalars]
    if not runs:
        raise LogReadError(f"{p}: no training scalars found; looked for {LOOKED_FOR}")
    return runs


def _read_folder(p: Path) -> list[Run]:
    if (p / "trainer_state.json").is_file():
        return [_read_json_file(p / "trainer_state.json")]
    ckpts = sorted((c for c in p.glob("checkpoint-*") if (c / "trainer_state.json").is_file()), key=_checkpoint_step)
    if ckpts:
        return [_read_json_file(ckpts[-1] / "trainer_state.json")]
    report = p / "ranks" / "rank0.json"
    if report.is_file():
        run = _read_json_file(report)
        if run.has_scalars:  # a crashed or still running `labkit train` has no history yet: try its tb/
            return [run]
    try:
        event_dirs = sorted({f.parent for f in p.rglob("events.out.tfevents.*") if f.is_file()})
    except OSError as exc:
        raise LogReadError(f"{p}: cannot be listed ({exc.strerror or exc})") from exc
    return [from_tensorboard(d) for d in event_dirs]


def finite(points: Points) -> Points:
    return [(s, v) for s, v in points if math.isfinite(v)]
