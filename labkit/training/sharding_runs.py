"""Notebook 09's runs: the same model, data and budget under DDP and FSDP at several world sizes.

Every run is `labkit.train` (`labkit.training.sampler_runs.SamplerRuns`: one data set, one budget) with
`--strategy` and the number of processes as the only differences. What comes back is what each rank
measured after its first update -- parameter, gradient and optimizer bytes (`state_bytes`) -- its losses
and its time per step; `per_rank_table` sets them beside the memory model's ZeRO prediction.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

from labkit.training.memory import sharded_static_bytes
from labkit.training.sampler_runs import SamplerRuns

STAGE = {"ddp": 0, "fsdp": 3}  # what each strategy shards, as a ZeRO stage


@dataclasses.dataclass
class ShardingRuns(SamplerRuns):
    def launch(self, name: str, nproc: int, strategy: str, *flags: str, fresh: bool = True) -> dict[int, dict]:
        """One `labkit.train --strategy STRATEGY` run on `nproc` processes; its rank reports.

        `fresh`: start from nothing -- a previous run's `<name>/ckpt` (the notebook run twice) would otherwise be
        resumed at its last step and train nothing."""
        if fresh:
            shutil.rmtree(Path(self.out_dir) / name, ignore_errors=True)
        return dataclasses.replace(self, nproc=nproc).run(name, "--strategy", strategy, *flags)

    def resume_elsewhere(
        self, source: str, name: str, nproc: int, strategy: str, *flags: str, device: str | None = None
    ) -> dict[int, dict]:
        """Continue run `source`'s checkpoint as a new run `name` on `nproc` processes (its own --out),
        on `device` when given (a DCP checkpoint written on GPUs loads into CPU processes too)."""
        dst = Path(self.out_dir) / name
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(Path(self.out_dir) / source / "ckpt", dst / "ckpt")
        where = self if device is None else dataclasses.replace(self, device=device)
        return where.launch(name, nproc, strategy, *flags, fresh=False)


def layout(device: str = "auto") -> tuple[int, str, list[int]]:
    """(processes, device, world sizes) of the notebook's comparison runs.

    CPU: 2 gloo processes, and worlds 1, 2 and 3 (gloo ranks may outnumber the cores). GPUs: one rank per card,
    worlds 1, 2 and all of them. One GPU: FSDP needs 2 ranks, so the comparison runs as gloo processes on CPU
    (the bytes per rank are the same; the GPU demonstration says why it skips)."""
    from labkit.distributed.launcher import check_devices

    nproc, kind = check_devices(None, device)
    if kind == "cuda" and nproc < 2:
        nproc, kind = check_devices(None, "cpu")
    worlds = sorted({1, 2, nproc} if kind == "cuda" else {1, nproc, nproc + 1})
    return nproc, kind, worlds


def elsewhere(nproc: int, kind: str) -> tuple[int, str]:
    """(world size, device) to resume a checkpoint of `nproc` ranks on a different number of ranks: one more gloo
    process on CPU; one card fewer on >= 3 GPUs; 3 CPU processes after 2 GPUs (FSDP needs >= 2 ranks)."""
    if kind == "cpu":
        return nproc + 1, "cpu"
    return (nproc - 1, "cuda") if nproc >= 3 else (3, "cpu")


def per_rank_row(name: str, ranks: dict[int, dict], mb: float = 2**20) -> dict:
    """One run's line: world size, the largest rank's measured bytes and the memory model's prediction."""
    r0 = ranks[0]
    strategy, world, n = r0["strategy"], len(ranks), r0["n_params"]
    worst = max(ranks.values(), key=lambda r: r["state_bytes"]["total"])["state_bytes"]
    predicted = sharded_static_bytes(n, world, STAGE[strategy])
    steps = r0["history"]["steps"]
    return {
        "run": name,
        "strategy": strategy,
        "ranks": world,
        "params MB": worst["params"] / mb,
        "grads MB": worst["grads"] / mb,
        "optimizer MB": worst["optimizer"] / mb,
        "per-rank MB": worst["total"] / mb,
        "model MB (ZeRO)": predicted["total"] / mb,
        "bytes / param": worst["total"] / n,
        "ms / step": 1000 * r0["train_seconds"] / max(len(steps), 1),
    }


def relative_gap(measured: float, predicted: float) -> float:
    return abs(measured - predicted) / predicted


def inspect_state_dict_file(path: str | Path, model) -> dict:
    """What a rank-0 `torch.save(model.state_dict())` of a sharded model holds, and whether `model` can load it."""
    import torch

    path = Path(path)
    # the DTensors' device mesh names process groups that lived in the job that wrote the file; unpickled here, outside
    # any job, torch warns that it cannot find them (a warning for torch.compile users, not for this inspection)
    mesh_log = logging.getLogger("torch.distributed.device_mesh")
    level = mesh_log.level
    mesh_log.setLevel(logging.ERROR)
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    finally:
        mesh_log.setLevel(level)
    dtensors = [k for k, v in sd.items() if hasattr(v, "to_local")]
    local = sum(v.to_local().numel() if hasattr(v, "to_local") else v.numel() for v in sd.values())
    whole = sum(p.numel() for p in model.state_dict().values())
    try:
        model.load_state_dict(sd)
        error = None
    except Exception as exc:  # noqa: BLE001 -- the failure is the finding
        error = f"{type(exc).__name__}: {str(exc).splitlines()[-1][:160]}"
    return {
        "file MB": path.stat().st_size / 2**20,
        "tensors": len(sd),
        "DTensors (sharded)": len(dtensors),
        "elements in the file": local,
        "elements of the model": whole,
        "share of the model": local / whole,
        "loads into a plain model": error is None,
        "error": error,
    }


def max_weight_difference(a, b) -> float:
    """Largest |a - b| over the two models' parameters (same names)."""
    pa = dict(a.named_parameters())
    return max(float((p.detach() - pa[n].detach()).abs().max()) for n, p in b.named_parameters())
