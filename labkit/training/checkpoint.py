"""Checkpoints without pickle: safetensors weights + a weights_only-loadable state file.

Layout of one checkpoint directory ``<ckpt_dir>/step-000120/``::

    model.safetensors   weights (shared/tied tensors handled by safetensors.torch.save_model)
    state.pt            optimizer, scheduler, RNG states, data position (torch.save; loaded weights_only=True)
    meta.json           step, the train config and model config fingerprints

Writes are atomic: everything goes to a temporary sibling directory that is
renamed into place, then ``latest`` (a one-line file) is replaced; a crash
mid-save leaves the previous checkpoint and pointer intact.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from labkit.jsonl import atomic_write_text


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used; the message says why and what to do."""


def rng_state() -> dict[str, Any]:
    np_state = np.random.get_state()
    state = {
        "python": [list(x) if isinstance(x, tuple) else x for x in random.getstate()],
        "numpy": [np_state[0], torch.from_numpy(np_state[1].copy()), *np_state[2:]],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    n = state["numpy"]
    np.random.set_state((n[0], n[1].numpy(), *n[2:]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(ckpt_dir: str | Path, step: int, model, optimizer, scheduler, data_pos: dict,
                    meta: dict, keep: int = 2) -> Path:
    """Atomically write checkpoint `step` under `ckpt_dir`; keeps the newest `keep`."""
    from safetensors.torch import save_model

    ckpt_dir = Path(ckpt_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    final = ckpt_dir / f"step-{step:06d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-step-{step:06d}-", dir=ckpt_dir))
    try:
        save_model(model, str(tmp / "model.safetensors"))
        torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                    "rng": rng_state(), "data": dict(data_pos), "step": step}, tmp / "state.pt")
        (tmp / "meta.json").write_text(json.dumps({"step": step, **meta}, ensure_ascii=False, indent=1, default=str))
        for f in tmp.iterdir():  # data on disk before the rename makes it visible
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    atomic_write_text(ckpt_dir / "latest", final.name + "\n")
    old = sorted(p for p in ckpt_dir.glob("step-*") if p.is_dir())
    for p in old[:-keep] if keep > 0 else []:
        shutil.rmtree(p, ignore_errors=True)
    return final


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint directory from itself or from a ckpt_dir holding `latest`."""
    path = Path(path)
    if (path / "latest").exists():
        return path / (path / "latest").read_text().strip()
    if (path / "model.safetensors").exists() or (path / "state.pt").exists():
        return path
    raise CheckpointError(f"no checkpoint at {path}: expected a step-NNNNNN directory or a ckpt_dir with a 'latest' file")


def load_checkpoint(path: str | Path, model, optimizer, scheduler, meta: dict) -> dict:
    """Restore weights/optimizer/scheduler/RNG from `path`; returns the saved data position and step.

    `meta` must match what was saved for the keys that define the run (model
    config and the shape-defining train settings) -- resuming another run's
    checkpoint is refused with the differing keys named.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_model

    ck = resolve_checkpoint(path)
    for name in ("model.safetensors", "state.pt", "meta.json"):
        if not (ck / name).exists():
            raise CheckpointError(f"checkpoint {ck} is incomplete ({name} missing): delete it and resume from an earlier one")
    try:
        saved = json.loads((ck / "meta.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"checkpoint {ck}/meta.json is corrupted ({exc}): delete {ck} and resume from an earlier one") from exc
    diff = sorted(k for k in meta if k in saved and json.dumps(saved[k], sort_keys=True, default=str)
                  != json.dumps(meta[k], sort_keys=True, default=str))
    if diff:
        raise CheckpointError(
            f"checkpoint {ck} was written by a different configuration (differs in {diff}): "
            f"resume with the same model preset and settings, or start a fresh ckpt_dir"
        )
    try:
        missing, unexpected = load_model(model, str(ck / "model.safetensors"), strict=False)
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"checkpoint {ck}/model.safetensors cannot be read ({exc}): the file is corrupted or "
                              f"from another model; delete {ck} and resume from an earlier one") from exc
    if missing or unexpected:
        raise CheckpointError(f"checkpoint {ck} does not match this model (missing {missing[:3]}, unexpected {unexpected[:3]})")
    try:
        state = torch.load(ck / "state.pt", map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for truncated/garbled zip files
        raise CheckpointError(f"checkpoint {ck}/state.pt cannot be read ({type(exc).__name__}: {exc}): "
                              f"delete {ck} and resume from an earlier one") from exc
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    return {"step": int(state["step"]), **state["data"]}
