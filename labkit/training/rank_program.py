"""The per-rank training program: `python -m labkit.train` / `labkit train`, one entry point, any launcher.

Runs unchanged as one process, under `torchrun` (one node or many) and under
`accelerate launch`: rank, world and device come from the environment
(`labkit.distributed.env`).  Training is `labkit.training.trainer.Trainer`.
The classic pitfalls are settings of this one code path::

    --sampler none|distributed|split   who trains on what
    --set-epoch / --no-set-epoch       reshuffle each epoch or replay one order
    --seed-mode synced|per-rank        one seed for all ranks, or seed+rank
    --no-device-placement              every rank on the default device (cuda:0)
    --local_rank N                     the legacy argument (warns if it disagrees)

The program lives here, beside the Trainer it drives (its options and their checks: `labkit.training.rank_args`);
`labkit/train.py` keeps the documented command `python -m labkit.train` working.

Each rank writes (`labkit.distributed.reports`) `<out>/ranks/rank<R>.json` (facts for `labkit.distributed.audit`,
`"completed": true` last) and a heartbeat `rank<R>.progress`.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

from labkit.cli.errors import UsageError
from labkit.distributed.reports import RankReport
from labkit.atomic import publish
from labkit.jsonl import read_jsonl
from labkit.progress import progress_mode
from labkit.training.rank_args import add_arguments, check_args

_REGENERATE = "regenerate it with labkit.train.prepare_data"


class ConfigMismatchError(RuntimeError):
    """Ranks were started with different settings or data."""


def preflight(argv: list[str], world: int | None = None) -> None:
    """What a launcher calls before any rank starts (`labkit.distributed.launcher.preflight`): parse `argv` as every
    rank would and raise `UsageError` with argparse's (or `check_args`') one-line reason."""
    parser = build_parser()

    def error(message: str):
        raise UsageError(f"arguments {list(argv)}: {message}; see `python -m labkit.train --help`")

    parser.error = error  # argparse reports every parse error through this hook
    check_args(parser.parse_args(argv), world)


def _check_same_config(settings: dict) -> None:
    """All ranks must train the same thing; name the ranks and keys that differ."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, settings)
    diffs = {r: sorted(k for k in s if s.get(k) != everyone[0].get(k)) for r, s in enumerate(everyone)}
    diffs = {r: d for r, d in diffs.items() if d}
    if diffs:
        detail = "; ".join(
            f"rank {r} differs from rank 0 in {d} ({[everyone[r][k] for k in d]} vs {[everyone[0][k] for k in d]})"
            for r, d in diffs.items()
        )
        raise ConfigMismatchError(
            f"ranks were started with different configurations: {detail}. "
            f"Start every node with the same arguments and the same --data."
        )


def _hooks(model, report: RankReport, args, env, local_loss: list[float]):
    """Heartbeat, local-loss capture and fault injection around each training forward."""
    state = {"forwards": 0}

    def pre(module, inputs):
        if not module.training:
            return
        step = state["forwards"] // args.grad_accum + 1  # the optimizer step (1-based) being computed
        report.progress("train", step, "forward")
        if (
            args.fault in ("crash", "hang")
            and _first_attempt(env)
            and env.rank == args.fault_rank
            and step == args.fault_step
        ):
            if args.fault == "crash":
                raise RuntimeError(f"injected fault: rank {env.rank} crashes at step {step}")
            report.progress("train", step, "hung (injected)")
            time.sleep(10**6)

    def post(module, inputs, output):
        if not module.training:
            return
        step = state["forwards"] // args.grad_accum + 1
        state["forwards"] += 1
        if getattr(output, "loss", None) is not None:
            local_loss.append(float(output.loss.detach()))
        report.progress("train", step, "backward")

    return model.register_forward_pre_hook(pre), model.register_forward_hook(post)


def _accelerate_view(mode: str) -> dict | None:
    """What a script relying on accelerate would see (on CPU: DistributedType.NO unless cpu=True)."""
    if mode == "off":
        return None
    from accelerate import Accelerator

    acc = Accelerator(cpu=mode == "cpu")
    return {
        "mode": mode,
        "distributed_type": str(acc.distributed_type).split(".")[-1],
        "num_processes": acc.num_processes,
        "process_index": acc.process_index,
    }


def run(args: argparse.Namespace) -> int:
    """Train (or, with --steps 0, just join and report) as this process's rank."""
    import torch

    from labkit.config import seed_everything, set_threads
    from labkit.distributed import env as denv
    from labkit.distributed.audit import param_checksum

    check_args(args)
    from labkit.training import own_data

    # bad --data / --init-from exit 2 here, before any report, process group or model exists
    source = own_data.open_source(args.data) if args.data else None
    init_tok = own_data.open_checkpoint(args.init_from) if args.init_from else None
    if init_tok is not None and getattr(args, "preset_given", False):
        print(f"note: --preset {args.preset} is ignored: the model comes from --init-from {args.init_from}", flush=True)
    env = denv.read_env()
    follows = _follow_accelerate_fsdp(args)
    check_args(args, env.world_size)  # now the world size is known (a bare torchrun start skipped the preflight)
    out = Path(args.out)
    report = RankReport(out, env.rank)
    report.progress("start")
    legacy = denv.check_legacy_local_rank(args.local_rank, env)
    cuda = torch.cuda.is_available() and args.device in ("auto", "cuda")
    # [fix:device_placement]
    dev = (
        denv.rank_device(env, args.device)
        if args.device_placement
        else torch.device("cuda" if cuda else "cpu", 0 if cuda else None)
    )
    # [/fix:device_placement]
    cap = _cap_cuda_memory(args.cuda_memory_gb, dev, torch)
    seed = args.seed + (env.rank if args.seed_mode == "per-rank" else 0)
    seed_everything(seed)
    set_threads(args.threads, "checkpoint" if args.init_from else args.preset, max(env.local_world_size, 1))
    accel = _accelerate_view(args.accelerate_view)
    backend = denv.init(env, dev, args.dist_timeout)
    report.save(
        env=env.to_dict(),
        backend=backend,
        accelerate_view=accel,
        device=str(dev),
        legacy_warning=legacy,
        cuda_memory_cap_bytes=cap,
        seed=seed,
        settings={k: v for k, v in vars(args).items() if k != "func"},
    )
    print(f"[rank {env.rank}/{env.world_size}] launcher={env.launcher} backend={backend} device={dev}", flush=True)
    if follows and env.is_main:
        print(follows, flush=True)
    try:
        fingerprint = source.fingerprint if source else None
        shared = {k: v for k, v in vars(args).items() if k not in ("local_rank", "out", "func", "data")}
        _check_same_config(shared | {"data_sha": fingerprint})
        if args.steps == 0:
            report.save(completed=True)
        else:  # check_args made sure --data is given when there are steps
            with _prepared_data(source, out, env, train_tokenizer=init_tok is None) as data:
                _train(args, env, dev, data, report, param_checksum, torch, init_tok)
    except Exception as exc:
        if _out_of_memory(exc, torch):  # the finding of a capped run, not only a crash: keep what was measured
            report.save(out_of_memory=_memory_facts(exc, dev, torch))
        raise
    finally:
        denv.cleanup()
    if args.fault == "abort-at-exit" and env.rank == args.fault_rank and _first_attempt(env):
        os.abort()  # what gloo sometimes does at interpreter exit on CPU, after all work is recorded
    return 0


@contextlib.contextmanager
def _prepared_data(source, out: Path, env, train_tokenizer: bool):
    """The folder this rank trains from: a prepare_data() folder as given, or records split here.

    Every rank derives the same split and tokenizer from the same records (the split is by
    content hash; the tokenizer is trained on the same texts in the same order), so no rank
    waits for another and no shared filesystem is assumed (multi-node jobs often have
    per-node disks): rank 0 writes `<out>/data`, kept so you can see what was held out; the
    other ranks write a private temporary copy.  The tokenizers' hashes are then compared
    across ranks, like the settings, so a divergence fails loudly instead of training garbage.
    """
    from labkit.training.own_data import materialize

    if source.kind == "prepared":
        yield source.path
        return
    with contextlib.ExitStack() as stack:
        where = (
            out / "data"
            if env.rank == 0
            else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"labkit-data-rank{env.rank}-")))
        )
        data = materialize(source, where, train_tokenizer=train_tokenizer, verbose=env.rank == 0)
        if train_tokenizer:
            tok_sha = hashlib.sha256((data / "tokenizer" / "tokenizer.json").read_bytes()).hexdigest()[:12]
            _check_same_config({"tokenizer_sha": tok_sha})
        yield data


def _follow_accelerate_fsdp(args: argparse.Namespace, environ=os.environ) -> str | None:
    """`accelerate launch --use_fsdp` asks for sharding (ACCELERATE_USE_FSDP=true in every rank's environment):
    labkit.train honours it with its own FSDP2 sharding, since it wraps the model itself and never calls
    `Accelerator.prepare`; the launcher's other fsdp_* settings are not read. An explicit --strategy ddp conflicts.
    Returns the note rank 0 prints, or None."""
    if environ.get("ACCELERATE_USE_FSDP", "").lower() != "true" or args.strategy == "fsdp":
        return None
    if getattr(args, "strategy_given", False):
        raise UsageError(
            "accelerate launch --use_fsdp asks for sharding and this run asks for --strategy ddp: "
            "drop one of them (or launch without accelerate's FSDP setting)"
        )
    args.strategy = "fsdp"
    return (
        "note: accelerate launch --use_fsdp: training with --strategy fsdp (labkit's FSDP2, fully_shard per block; "
        f"accelerate's fsdp_* settings, FSDP_VERSION={environ.get('FSDP_VERSION', '?')} included, are not read)"
    )


def _cap_cuda_memory(gb: float | None, dev, torch) -> int | None:
    """--cuda-memory-gb: the caching allocator refuses more than `gb` GiB on this rank's GPU; the cap in bytes."""
    if not gb:
        return None
    if dev.type != "cuda":
        raise UsageError(f"--cuda-memory-gb caps a GPU's memory and this rank runs on {dev}: drop it, or run on GPUs")
    total = torch.cuda.get_device_properties(dev).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, gb * 2**30 / total), dev)
    return int(min(gb * 2**30, total))


def _out_of_memory(exc: BaseException, torch) -> bool:
    # NCCL and some kernels report an allocation failure as a plain RuntimeError naming it
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()


def _memory_facts(exc: BaseException, dev, torch) -> dict:
    """What a rank that ran out of memory reports: the error's first line and, on a GPU, its peaks."""
    facts = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}
    if dev.type == "cuda":
        facts["peak_bytes"] = torch.cuda.max_memory_allocated(dev)
        facts["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(dev)
    return facts


def _first_attempt(env) -> bool:
    return env.restart_count == 0 and os.environ.get("LABKIT_LAUNCH_ATTEMPT", "1") == "1"


def _train(args, env, dev, data: Path, report: RankReport, param_checksum, torch, init_tok=None) -> None:
    from labkit.distributed import sharding
    from labkit.distributed.samplers import RecordingSampler, make_sampler
    from labkit.model import build_model
    from labkit.text.tasks import Seq2SeqCollator, make_examples
    from labkit.text.tokenizer import load_tokenizer, save_with_source_len
    from labkit.training.trainer import TrainConfig, Trainer

    report.progress("data")
    tok = init_tok if init_tok is not None else load_tokenizer(data / "tokenizer")
    train_ex = make_examples(read_jsonl(data / "train.jsonl", hint=_REGENERATE))
    eval_ex = make_examples(read_jsonl(data / "eval.jsonl", hint=_REGENERATE)) if (data / "eval.jsonl").exists() else []
    collator = Seq2SeqCollator(tok, args.max_source_len, args.max_target_len)
    report.progress("model")
    if args.init_from:  # weights and shape from the checkpoint (not --resume: that continues <out>/ckpt)
        from labkit.training.own_data import load_model

        model = load_model(args.init_from, tok)
    else:
        model = build_model(args.preset, len(tok))
    checksums = {"init": param_checksum(model)}
    # [fix:ddp_wrap]
    model.to(dev)
    report.save(param_devices=sorted({str(p.device) for p in model.parameters()}), dataset_size=len(train_ex))
    wrapped = model
    if env.distributed and args.strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        # DDP broadcasts rank 0's weights here: replicas start identical whatever each rank's seed
        wrapped = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None)
        checksums["wrapped"] = param_checksum(model)
    elif env.distributed:  # --strategy fsdp: each rank keeps 1/N of every block, parameters as DTensors
        wrapped = sharding.shard(model, dev)
    # [/fix:ddp_wrap]
    seed = report.data["seed"]
    # [fix:sampler]
    sampler = RecordingSampler(make_sampler(args.sampler, len(train_ex), env.rank, env.world_size, seed))
    # [/fix:sampler]
    local_loss: list[float] = []
    _hooks(model, report, args, env, local_loss)
    ckpt = Path(args.out) / "ckpt"
    cfg = TrainConfig(
        steps=args.steps,
        stop_after=args.stop_after,
        batch_size=args.batch_size,
        grad_accum=args.grad_accum,
        lr=args.lr,
        schedule=args.schedule,
        warmup_steps=args.warmup_steps,
        clip=args.clip,
        set_epoch=args.set_epoch,
        seed=seed,
        monitor=args.grad_monitor,
        eval_every=args.eval_every,
        progress=progress_mode(args.quiet) if env.is_main else False,
        progress_every=args.log_every,
        log_dir=str(Path(args.out) / "tb") if args.tensorboard else None,
        ckpt_dir=str(ckpt) if args.ckpt_every else None,
        ckpt_every=args.ckpt_every,
    )
    resume = str(ckpt) if args.resume == "auto" and (ckpt / "latest").exists() else None
    report.save(resumed_from=resume)
    report.progress("train")
    hist = Trainer(wrapped, train_ex, collator, cfg, eval_examples=eval_ex, sampler=sampler, device=dev).fit(
        resume_from=resume
    )
    sharded = sharding.is_sharded(model)
    if not sharded:  # a sharded model's local shards differ by rank: its checksum would say nothing
        checksums["final"] = param_checksum(model)
    # [fix:gather_full_state]
    # a sharded model is gathered whole first (a collective: every rank takes part, rank 0 receives it)
    gather = args.gather_full_state or not sharded
    full = sharding.full_state_dict(model) if args.save_model and sharded and gather else None
    if args.save_model and env.is_main and not gather:  # the DDP habit: rank 0's state_dict, as it is
        torch.save(model.state_dict(), Path(args.out) / "rank0_state_dict.pt")
    # [/fix:gather_full_state]
    if args.save_model and env.is_main and gather:
        # written whole under .model.partial-<pid>, then renamed: an interrupted save leaves no <out>/model
        with publish(Path(args.out) / "model", directory=True) as (staged,):
            model.save_pretrained(str(staged), state_dict=full)
            save_with_source_len(tok, staged, args.max_source_len)  # serving truncates the same
    if env.distributed:
        torch.distributed.barrier()  # the saved model is complete before anyone reports completion
    report.save(
        samples=sampler.epochs,
        set_epoch_calls=sampler.set_epoch_calls,
        checksums=checksums,
        local_loss=_per_step(local_loss, args.grad_accum),
        history={
            "steps": hist.steps,
            "loss": hist.loss,
            "lr": hist.lr,
            "grad_norm": hist.grad_norm,
            "evals": hist.evals,
            "spikes": len(hist.spikes),
            "nonfinite": len(hist.nonfinite),
        },
        samples_per_s=hist.samples_per_s,
        strategy=args.strategy,
        state_bytes=hist.state_bytes,
        cuda_peak_bytes=torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None,
        # what a memory cap limits: the caching allocator's reserved blocks, fragmentation included
        cuda_peak_reserved_bytes=torch.cuda.max_memory_reserved(dev) if dev.type == "cuda" else None,
        n_params=sum(p.numel() for p in model.parameters()),
        seen=hist.seen,
        train_seconds=hist.seconds,
        completed=True,
    )
    report.progress("done", len(hist.steps))
    print(
        f"[rank {env.rank}] done: {len(hist.steps)} steps, final loss {hist.loss[-1] if hist.loss else float('nan'):.4f}, "
        f"{hist.samples_per_s:.1f} samples/s",
        flush=True,
    )


def _per_step(losses: list[float], accum: int) -> list[float]:
    return [sum(losses[i : i + accum]) / len(losses[i : i + accum]) for i in range(0, len(losses), accum)]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m labkit.train", description=__doc__.splitlines()[0])
    add_arguments(p)
    return p


def register(subparsers) -> None:
    """`labkit train ...`: the same entry point as `python -m labkit.train`."""
    p = subparsers.add_parser("train", help="train the generator (single process, torchrun or accelerate launch)")
    add_arguments(p)
    p.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    from labkit.threads import prepare_this_process

    prepare_this_process()  # a rank started by a bare `torchrun -m labkit.train` gets the wait policy too
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return run(args)
    except UsageError as exc:  # the CLI contract: one line, exit 2 (labkit.cli.errors)
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
