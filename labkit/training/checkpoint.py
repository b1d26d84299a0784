"""Checkpoints without pickle: safetensors weights + a weights_only-loadable state file.

Layout of one checkpoint directory ``<ckpt_dir>/step-000120/``::

    model.safetensors   weights (shared/tied tensors handled by safetensors.torch.save_model)
    state.pt            optimizer, scheduler, RNG states, data position (torch.save; loaded weights_only=True)
    meta.json           step, the train config and model config fingerprints

A sharded (FSDP) model's checkpoint holds DCP files instead of model.safetensors: every rank writes
its own shards of the model and optimizer (``.metadata``, ``__<rank>_0.distcp``), rank 0 the rest of
state.pt; it loads at another world size (`labkit.distributed.sharding`).

Writes are atomic: everything goes to a hidden sibling directory that is renamed to a name no checkpoint
holds yet, then ``latest`` (a one-line file) is replaced in one rename, and only then are older checkpoints
removed.  So ``latest`` always names a complete checkpoint: a crash at any point of a save leaves the previous
checkpoint and pointer intact.  A step saved again (a run resumed before it) goes to ``step-000120.1`` beside
the one ``latest`` still names, never over it.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from labkit.atomic import atomic_write_text, publish


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


def _order(path: Path) -> tuple[int, int]:
    """(step, copy) of `step-000120` (0) or `step-000120.1` (a later save of the same step); (-1, -1) if neither."""
    step, _, copy = path.name.removeprefix("step-").partition(".")
    return (int(step), int(copy or 0)) if step.isdigit() and (copy.isdigit() or not copy) else (-1, -1)


def _fresh(ckpt_dir: Path, step: int) -> Path:
    """Where checkpoint `step` goes: `step-NNNNNN`, or the next `step-NNNNNN.K` when that step is saved already."""
    final, copy = ckpt_dir / f"step-{step:06d}", 0
    while final.exists():
        copy += 1
        final = ckpt_dir / f"step-{step:06d}.{copy}"
    return final


def _switch(ckpt_dir: Path, final: Path, keep: int) -> None:
    """Point `latest` at the complete checkpoint `final` (one rename), then remove the older ones: other copies of
    its step, and all but the newest `keep` (counting `final`, which always stays; `keep` <= 0: all stay)."""
    atomic_write_text(ckpt_dir / "latest", final.name + "\n")
    if keep <= 0:
        return
    step = _order(final)[0]
    others = sorted((p for p in ckpt_dir.glob("step-*") if p.is_dir() and p != final), key=_order)
    stale = [p for p in others if _order(p)[0] == step]
    older = [p for p in others if _order(p)[0] not in (step, -1)]
    for p in stale + older[: max(0, len(older) - (keep - 1))]:
        shutil.rmtree(p, ignore_errors=True)


def save_checkpoint(
    ckpt_dir: str | Path, step: int, model, optimizer, scheduler, data_pos: dict, meta: dict, keep: int = 2
) -> Path:
    """Atomically write checkpoint `step` under `ckpt_dir` and point `latest` at it; keeps the newest `keep`."""
    from safetensors.torch import save_model

    ckpt_dir = Path(ckpt_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    final = _fresh(ckpt_dir, step)
    with publish(final, directory=True) as (tmp,):
        save_model(model, str(tmp / "model.safetensors"))
        torch.save(
            {
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "rng": rng_state(),
                "data": dict(data_pos),
                "step": step,
            },
            tmp / "state.pt",
        )
        (tmp / "meta.json").write_text(json.dumps({"step": step, **meta}, ensure_ascii=False, indent=1, default=str))
    _switch(ckpt_dir, final, keep)
    return final


def save_sharded_checkpoint(
    ckpt_dir: str | Path,
    step: int,
    model,
    optimizer,
    scheduler,
    data_pos: dict,
    meta: dict,
    is_main: bool,
    barrier,
    keep: int = 2,
) -> Path:
    """`save_checkpoint` for a sharded model: a collective, called on every rank.

    All ranks write their shards into one hidden staging directory; after a barrier rank 0 adds
    state.pt (scheduler, RNG, data position; the optimizer is in the shards) and meta.json, renames it
    to a name no checkpoint holds yet and points `latest` at it."""
    from labkit.distributed.sharding import save_sharded

    ckpt_dir = Path(ckpt_dir)
    # every rank sees the same folder here (the previous save ended with a barrier), so all name it alike
    final = _fresh(ckpt_dir, step)
    staging = ckpt_dir / f".{final.name}.partial"  # one name every rank agrees on (not a per-process temp)
    if is_main:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
    barrier()
    save_sharded(staging, model, optimizer)
    barrier()
    if is_main:
        torch.save(
            {"scheduler": scheduler.state_dict(), "rng": rng_state(), "data": dict(data_pos), "step": step},
            staging / "state.pt",
        )
        (staging / "meta.json").write_text(
            json.dumps({"step": step, **meta}, ensure_ascii=False, indent=1, default=str)
        )
        staging.rename(final)
        _switch(ckpt_dir, final, keep)
    barrier()
    return final


def is_sharded_checkpoint(path: str | Path) -> bool:
    """A DCP checkpoint (written by a sharded model on every rank)?"""
    return (Path(path) / ".metadata").exists()


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint directory from itself or from a ckpt_dir holding `latest`."""
    path = Path(path)
    if (path / "latest").exists():
        return path / (path / "latest").read_text().strip()
    if (path / "model.safetensors").exists() or (path / "state.pt").exists() or is_sharded_checkpoint(path):
        return path
    raise CheckpointError(
        f"no checkpoint at {path}: expected a step-NNNNNN directory or a ckpt_dir with a 'latest' file"
    )


def load_checkpoint(path: str | Path, model, optimizer, scheduler, meta: dict) -> dict:
    """Restore weights/optimizer/scheduler/RNG from `path`; returns the saved data position and step.

    `meta` must match what was saved for the keys that define the run (model
    config and the shape-defining train settings) -- resuming another run's
    checkpoint is refused with the differing keys named.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_model

    ck = resolve_checkpoint(path)
    sharded = is_sharded_checkpoint(ck)
    for name in (".metadata" if sharded else "model.safetensors", "state.pt", "meta.json"):
        if not (ck / name).exists():
            raise CheckpointError(
                f"checkpoint {ck} is incomplete ({name} missing): delete it and resume from an earlier one"
            )
    try:
        saved = json.loads((ck / "meta.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(
            f"checkpoint {ck}/meta.json is corrupted ({exc}): delete {ck} and resume from an earlier one"
        ) from exc
    diff = sorted(
        k
        for k in meta
        if k in saved
        and json.dumps(saved[k], sort_keys=True, default=str) != json.dumps(meta[k], sort_keys=True, default=str)
    )
    if diff:
        raise CheckpointError(
            f"checkpoint {ck} was written by a different configuration (differs in {diff}): "
            f"resume with the same model preset and settings, or start a fresh ckpt_dir"
        )
    if sharded:
        from labkit.distributed.sharding import load_sharded

        try:  # every rank reads the shards it needs now, whatever the world size that wrote them
            load_sharded(ck, model, optimizer)
        except Exception as exc:  # noqa: BLE001 -- DCP raises its own types for missing/garbled shards
            raise CheckpointError(
                f"checkpoint {ck} (sharded) cannot be loaded into this model ({type(exc).__name__}: {exc}): "
                f"delete {ck} and resume from an earlier one"
            ) from exc
    else:
        try:
            missing, unexpected = load_model(model, str(ck / "model.safetensors"), strict=False)
        except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
            raise CheckpointError(
                f"checkpoint {ck}/model.safetensors cannot be read ({exc}): the file is corrupted or "
                f"from another model; delete {ck} and resume from an earlier one"
            ) from exc
        if missing or unexpected:
            raise CheckpointError(
                f"checkpoint {ck} does not match this model (missing {missing[:3]}, unexpected {unexpected[:3]})"
            )
    try:
        state = torch.load(ck / "state.pt", map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for truncated/garbled zip files
        raise CheckpointError(
            f"checkpoint {ck}/state.pt cannot be read ({type(exc).__name__}: {exc}): "
            f"delete {ck} and resume from an earlier one"
        ) from exc
    if not sharded:  # a sharded checkpoint's optimizer came with the shards
        optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    return {"step": int(state["step"]), **state["data"]}
