"""The fix `labkit doctor script` proposes for each code, phrased for the script's framework.

A fix is only useful in the script's own idiom: a plain PyTorch loop warms up with
`torch.optim.lr_scheduler.LinearLR` + `SequentialLR` (no transformers needed), Fabric clips
with `fabric.clip_gradients`, accelerate with `accelerator.clip_grad_norm_`, and a Hugging
Face `Trainer` is configured through `TrainingArguments`.  Each code has a "torch" text; a
framework ("hf", "accelerate", "fabric", "lightning", see labkit.doctor.frameworks) or a
situation a check names (e.g. "reads_env") may replace it.
"""

from __future__ import annotations

TORCH_WARMUP = (
    "warm the LR up with torch's own schedulers: `warmup = LinearLR(optimizer, start_factor=0.01, "
    "total_iters=warmup_steps)`, then `SequentialLR(optimizer, [warmup, main_schedule], "
    "milestones=[warmup_steps])` (torch.optim.lr_scheduler), stepped once per optimizer step"
)

FIXES: dict[str, dict[str, str]] = {
    "legacy_launch": {
        "torch": "launch with `torchrun --nproc_per_node=N train.py` instead of `python -m torch.distributed.launch`, "
        'and read `local_rank = int(os.environ["LOCAL_RANK"])` instead of a `--local_rank` argument',
        "hf": "launch with `torchrun --nproc_per_node=N train.py` and drop `--local_rank` and `local_rank=...`: "
        "TrainingArguments reads LOCAL_RANK from the environment itself",
        "reads_env": "launch with `torchrun --nproc_per_node=N train.py` instead of `python -m torch.distributed.launch` "
        "(torchrun sets LOCAL_RANK, which this script already reads)",
        "required": "drop `required=True` (or the `--local_rank` argument itself), read "
        '`local_rank = int(os.environ["LOCAL_RANK"])`, and launch with `torchrun --nproc_per_node=N train.py`',
    },
    "unused_local_rank_arg": {
        "torch": "delete the `--local_rank` argument once nobody launches with `python -m torch.distributed.launch` "
        '(torchrun passes none; the local rank is `int(os.environ["LOCAL_RANK"])`)',
    },
    "model_not_on_device": {
        "torch": "call `torch.cuda.set_device(local_rank)` and `model.to(local_rank)` before "
        "`DistributedDataParallel(model, device_ids=[local_rank])`, in every branch that wraps the model",
    },
    "model_not_wrapped": {
        "torch": "wrap the model once it is on this rank's device and train through the wrapper: "
        "`model = DistributedDataParallel(model, device_ids=[local_rank])` before building the optimizer (keep "
        "`model.module` only to save it), then launch with `torchrun --nproc_per_node=N train.py`",
    },
    "no_distributed_sampler": {
        "torch": "`sampler = DistributedSampler(dataset)` and `DataLoader(dataset, sampler=sampler, shuffle=False)`, "
        "then `sampler.set_epoch(epoch)` each epoch",
    },
    "missing_set_epoch": {
        "torch": "call `sampler.set_epoch(epoch)` at the top of the epoch loop",
    },
    "no_grad_clip": {
        "torch": "call `torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)` between `loss.backward()` and "
        "`optimizer.step()` (with a GradScaler, `scaler.unscale_(optimizer)` first)",
        "accelerate": "after `accelerator.backward(loss)`: `if accelerator.sync_gradients: "
        "accelerator.clip_grad_norm_(model.parameters(), 1.0)`",
        "fabric": "after `fabric.backward(loss)`: `fabric.clip_gradients(model, optimizer, max_norm=1.0)`",
        "loss_scaler": "pass `clip_grad=1.0` (and `parameters=model.parameters()`) to the loss scaler call: it unscales "
        "the gradients and clips them before the step",
        "lightning": "`Trainer(gradient_clip_val=1.0)`",
        "hf": "`TrainingArguments(max_grad_norm=1.0)`",
    },
    "no_seed": {
        "torch": "seed once at start, with the same value on every rank: `torch.manual_seed(seed)` "
        "(and `random.seed(seed)`, `numpy.random.seed(seed)` if you use them)",
        "accelerate": "`from accelerate.utils import set_seed; set_seed(seed)` once at start (the same on every process)",
        "fabric": "`fabric.seed_everything(seed)` once at start (the same on every process)",
        "lightning": "`lightning.seed_everything(seed)` before building the model and the Trainer",
        "hf": "`TrainingArguments(seed=...)` (it seeds the Trainer), or `transformers.set_seed(seed)` before "
        "building the model",
    },
    "unsynced_seed": {
        "torch": "seed with the same value on every rank (`torch.manual_seed(seed)`) before splitting, or give the split "
        "its own `generator=torch.Generator().manual_seed(seed)`, and shard with `DistributedSampler(dataset)`; "
        "add the rank only to seeds of per-rank draws",
    },
    "no_truncation": {
        "torch": "`tokenizer(..., truncation=True, max_length=512)`",
    },
    "unsafe_torch_load": {
        "torch": "`torch.load(path, weights_only=True)` (save a `state_dict`, not a pickled object)",
    },
    "checkpoint_all_ranks": {
        "torch": "save from one process: `if rank == 0: torch.save(model.module.state_dict(), path)` "
        "(then `dist.barrier()` before others read it)",
        "accelerate": "`if accelerator.is_main_process:` around the save (or `save_pretrained(..., "
        "is_main_process=accelerator.is_main_process, save_function=accelerator.save)`)",
        "fabric": "`fabric.save(path, state)`: it writes once, from the right process",
    },
    "fsdp_local_state_dict": {
        "torch": "save shards on every rank with torch.distributed.checkpoint: `dcp.save({'model': "
        "get_model_state_dict(model)}, checkpoint_id=path)` (it loads at another world size); for one whole file, "
        "gather on every rank `sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, "
        "cpu_offload=True))`, then `if rank == 0: torch.save(sd, path)`",
    },
    "no_warmup": {
        "torch": TORCH_WARMUP,
        "accelerate": 'a warmup schedule passed through `accelerator.prepare`: `get_scheduler("linear", optimizer, '
        "num_warmup_steps=..., num_training_steps=...)` from transformers, or torch's `LinearLR` + "
        "`SequentialLR`",
        "lightning": TORCH_WARMUP + ', returned from `configure_optimizers` with `"interval": "step"`',
        "hf": "`TrainingArguments(warmup_ratio=0.1)` (or `warmup_steps=...`)",
    },
}

# A note is true and worth reading but changes nothing at run time; every other finding is a warning.
SEVERITY = {"unused_local_rank_arg": "note"}


def fix_for(code: str, variant: str) -> str:
    """The fix for `code` in `variant` (a framework or a situation a check named); "torch" otherwise."""
    return FIXES[code].get(variant, FIXES[code]["torch"])


def severity(code: str) -> str:
    return SEVERITY.get(code, "warning")
