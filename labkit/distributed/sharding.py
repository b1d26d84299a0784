"""Replicate (DDP) or shard (FSDP2) a model across the ranks, measure what each rank holds, and save it.

DDP keeps a full copy of the parameters, gradients and AdamW states on every rank: 16 bytes per
parameter in fp32 whatever the world size, so more cards never make a model fit. FSDP2
(`torch.distributed.fsdp.fully_shard`) splits each of them into 1/N per rank and all-gathers one
block's parameters just before that block runs (and frees them after): ZeRO-3. The same code runs
with gloo on CPU processes and NCCL on GPUs; the mesh is built on the device type the ranks use.

A sharded model is saved with `torch.distributed.checkpoint` (DCP), every rank writing its own
shards: the checkpoint loads at another world size (DCP reshards on load). `torch.save(model.state_dict())`
on rank 0 alone is the DDP habit that breaks here -- rank 0's state dict holds DTensors whose
other shards live on the other ranks -- and `full_state_dict` is how to get one whole copy (for export).
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

STRATEGIES = ("ddp", "fsdp")


def blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The repeated layers FSDP wraps one by one: the members of the outermost ModuleLists of blocks/layers
    (T5's `encoder.block` / `decoder.block` -- not each block's own `layer` list inside them --, GPT's `h`,
    BERT's `layer`). Wrapping a module inside an already wrapped one would shard its parameters twice."""
    import torch

    out, taken = [], []
    for name, mod in model.named_modules():
        if any(name.startswith(t + ".") for t in taken):
            continue
        if isinstance(mod, torch.nn.ModuleList) and name.rsplit(".", 1)[-1] in ("block", "layer", "layers", "h"):
            taken.append(name)
            out.extend(mod)
    return out


def shard(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """FSDP2 in place: `fully_shard` each block, then the root; returns the model (its parameters now DTensors).

    A collective: every rank of the initialised process group calls it with its own copy of the model."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    # one all-gather unit per block: only one block's full parameters exist at a time, not the whole model;
    # the root call takes the rest (embeddings, final norms, the tied head)
    for block in blocks(model):
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def is_sharded(model: torch.nn.Module) -> bool:
    """True when the parameters are DTensors (FSDP2): each rank holds only its shards."""
    return any(hasattr(p, "to_local") for p in model.parameters())


def _local_bytes(t) -> int:
    import torch

    if t is None or not torch.is_tensor(t):
        return 0
    local = t.to_local() if hasattr(t, "to_local") else t
    return local.numel() * local.element_size()


def state_bytes(model: torch.nn.Module, optimizer=None) -> dict[str, int]:
    """Bytes this rank holds right now: parameters, gradients and optimizer states (its shards only).

    Scalars in the optimizer state (AdamW's `step`) are counted too; they are a few bytes per tensor."""
    params = list(model.parameters())
    out = {
        "params": sum(_local_bytes(p) for p in params),
        "grads": sum(_local_bytes(p.grad) for p in params),
        "optimizer": 0,
    }
    if optimizer is not None:
        out["optimizer"] = sum(_local_bytes(v) for s in optimizer.state.values() for v in s.values())
    out["total"] = out["params"] + out["grads"] + out["optimizer"]
    return out


def _options(full: bool):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=full, cpu_offload=full)


@contextlib.contextmanager
def _dcp_call():
    """Yields whether a process group is up (DCP's `no_dist` is its negation). Outside one -- a notebook's kernel
    reading a checkpoint, one plain process -- a single process is what is meant, so DCP's warning that it
    "assumes the intent" is not shown (torch warns even when told `no_dist=True`)."""
    import torch.distributed as dist

    in_a_job = dist.is_available() and dist.is_initialized()
    with warnings.catch_warnings():
        if not in_a_job:
            warnings.filterwarnings(
                "ignore", "torch.distributed is disabled, unavailable or uninitialized", UserWarning
            )
        yield in_a_job


def save_sharded(path: str | Path, model: torch.nn.Module, optimizer=None) -> None:
    """Every rank writes its own shards of the model (and optimizer) to the DCP directory `path`.

    A collective: call it on every rank (or in one plain process, which writes the whole model)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    if optimizer is None:
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        state = {"model": get_model_state_dict(model, options=_options(False))}
    else:
        msd, osd = get_state_dict(model, optimizer, options=_options(False))
        state = {"model": msd, "optimizer": osd}
    with _dcp_call() as in_a_job:
        dcp.save(state, checkpoint_id=str(path), no_dist=not in_a_job)


def load_sharded(path: str | Path, model: torch.nn.Module, optimizer=None) -> None:
    """Load a DCP checkpoint into `model` (and `optimizer`), whatever the world size that wrote it."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    msd, osd = get_state_dict(model, optimizer if optimizer is not None else [], options=_options(False))
    state = {"model": msd, **({"optimizer": osd} if optimizer is not None else {})}
    with _dcp_call() as in_a_job:
        dcp.load(state, checkpoint_id=str(path), no_dist=not in_a_job)
    set_state_dict(
        model,
        optimizer if optimizer is not None else [],
        model_state_dict=state["model"],
        optim_state_dict=state.get("optimizer", {}),
        options=_options(False),
    )


def full_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """One whole copy of the weights on CPU (all-gathered from every rank's shards; a collective):
    what `save_pretrained` / export needs. Plain tensors; other ranks get an empty dict."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return get_model_state_dict(model, options=_options(True))
