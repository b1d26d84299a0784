"""The per-rank training program's command line: its options (`add_arguments`) and what argparse cannot check alone
(`check_args`: refused before any rank starts). `labkit.training.rank_program` parses with them.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from labkit.cli.errors import UsageError, nonneg_int, positive_float, positive_int, writable_dir
from labkit.distributed import SAMPLERS
from labkit.distributed.sharding import STRATEGIES
from labkit.model import PRESETS  # plain names, no torch: the parser stays cheap
from labkit.training.schedules import SCHEDULES

OUT_ENV = "LABKIT_OUT"  # --out's default when set


def add_arguments(p: argparse.ArgumentParser) -> None:
    a = p.add_argument
    a(
        "--data",
        metavar="PATH",
        help="training records: a `labkit clean` output folder, a JSONL file or folder of JSONL files with title/body "
        "(optional summary/keywords; 5%% held out for eval by content hash), or a folder from prepare_data()",
    )
    a(
        "--init-from",
        metavar="DIR",
        help="start from a Hugging Face seq2seq checkpoint folder (save_pretrained model + tokenizer, e.g. a downloaded "
        "Chinese T5 or an earlier --save-model); its tokenizer is used and --preset is ignored. Not --resume",
    )
    a(
        "--out",
        type=writable_dir,
        default=os.environ.get(OUT_ENV) or "runs/train",
        help="output directory (default $LABKIT_OUT or runs/train)",
    )
    a("--steps", type=nonneg_int, default=20, help="optimizer steps; 0 = join the job, report the launch, exit")
    a(
        "--stop-after",
        type=nonneg_int,
        default=0,
        help="stop after this many optimizer steps, the schedule still spanning --steps (a prefix of the run; 0 = all)",
    )
    a("--batch-size", type=positive_int, default=8, help="examples per optimizer micro-step, per process (default 8)")
    a("--grad-accum", type=positive_int, default=1, help="micro-steps accumulated per optimizer step (default 1)")
    a("--lr", type=positive_float, default=1e-3, help="peak learning rate (default 1e-3)")
    a("--schedule", choices=SCHEDULES, default="cosine", help="learning-rate schedule after warmup (default cosine)")
    a("--warmup-steps", type=nonneg_int, default=0, help="linear warmup steps (default 0)")
    a("--clip", type=_clip, default=1.0, help="max grad norm, or 'none' for no clipping (default 1.0)")
    a(
        "--preset",
        choices=tuple(PRESETS),
        default="tiny",
        action=_StoreGiven,
        help="model shape from labkit.model.PRESETS (default tiny)",
    )
    a("--max-source-len", type=positive_int, default=128, help="input tokens kept (default 128)")
    a("--max-target-len", type=positive_int, default=48, help="target tokens kept (default 48)")
    a(
        "--strategy",
        choices=STRATEGIES,
        default="ddp",
        action=_StoreGiven,
        help="ddp: every rank holds the whole model, gradients and optimizer states (16 bytes/parameter); fsdp: "
        "each rank holds 1/N of them (FSDP2 fully_shard per block, sharded checkpoints with torch.distributed."
        "checkpoint that resume at another world size); needs >= 2 processes. Under `accelerate launch --use_fsdp` "
        "(or an accelerate config with FSDP) the default is fsdp (default ddp)",
    )
    a(
        "--sampler",
        choices=SAMPLERS,
        default="distributed",
        help="who trains on what: none (every rank all data), distributed (shards), split (default distributed)",
    )
    a(
        "--set-epoch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="call sampler.set_epoch each epoch (--no-set-epoch replays one order)",
    )
    a("--seed", type=int, default=0, help="random seed (default 0)")
    a(
        "--seed-mode",
        choices=("synced", "per-rank"),
        default="synced",
        help="synced: one seed for all ranks; per-rank: seed + rank (default synced)",
    )
    a(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: this rank's GPU if any, else CPU (default auto)",
    )
    a(
        "--device-placement",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="--no-device-placement: skip moving the model to the rank's own device",
    )
    a(
        "--threads",
        type=nonneg_int,
        default=0,
        help="torch threads per process (0: the thread policy, labkit.threads: 1 for the tiny/t5-small presets, "
        "else cores / processes on this node; LABKIT_THREADS overrides)",
    )
    a(
        "--grad-monitor",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="per-layer gradient-norm monitor (named so torchrun does not read it as its --monitor-interval)",
    )
    a("--tensorboard", action="store_true", help="TensorBoard events in <out>/tb (rank 0)")
    a(
        "--log-every",
        type=nonneg_int,
        default=0,
        help="rank 0's progress: a tqdm bar (steps, loss, lr, samples/s, ETA) on stderr when stdout is a terminal, "
        "otherwise one line on stdout every N steps (0 = about ten lines per run; default 0)",
    )
    a("--quiet", action="store_true", help="no progress bar or progress lines")
    a("--eval-every", type=nonneg_int, default=0, help="evaluate every N steps (0 = never; default 0)")
    a("--ckpt-every", type=nonneg_int, default=0, help="checkpoint to <out>/ckpt every N steps (rank 0)")
    a("--resume", choices=("auto", "never"), default="auto", help="auto: continue from <out>/ckpt/latest if present")
    a(
        "--save-model",
        action="store_true",
        help="rank 0 saves model + tokenizer to <out>/model (written under a temporary name and renamed when "
        "complete: an interrupted save leaves no <out>/model, or the previous one)",
    )
    a(
        "--gather-full-state",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="--save-model of an fsdp run gathers one whole copy from every rank's shards first (default); "
        "--no-gather-full-state is the DDP habit notebook 09 measures: rank 0 torch.saves its own "
        "model.state_dict() to <out>/rank0_state_dict.pt -- its shards only",
    )
    a(
        "--cuda-memory-gb",
        type=positive_float,
        default=None,
        metavar="GB",
        help="cap each rank's CUDA allocator at GB GiB (torch.cuda.set_per_process_memory_fraction): a smaller card "
        "on a bigger one, how notebook 09 shows a model that does not fit; an out-of-memory rank records it in its "
        "report. GPUs only",
    )
    a("--dist-timeout", type=positive_float, default=300.0, help="seconds a collective may wait for a peer")
    a(
        "--accelerate-view",
        choices=("off", "default", "cpu"),
        default="off",
        help="record what accelerate's Accelerator() (or Accelerator(cpu=True)) believes about the job",
    )
    a(
        "--fault",
        choices=("crash", "hang", "abort-at-exit"),
        help="inject a fault (first attempt only) for the failure drills; abort-at-exit = SIGABRT after completion",
    )
    a("--fault-rank", type=nonneg_int, default=1, help="rank that --fault hits (default 1)")
    a("--fault-step", type=positive_int, default=3, help="optimizer step at which --fault hits (default 3)")
    # what torch.distributed.launch used to pass; accepted so old commands run, but it is a warning sign
    a("--local_rank", "--local-rank", dest="local_rank", type=int, default=None, help=argparse.SUPPRESS)


def _clip(value: str) -> float | None:
    """--clip: a positive max grad norm, or 'none'."""
    return None if value.lower() == "none" else positive_float(value)


class _StoreGiven(argparse._StoreAction):
    """A store action that also records that the option was given (`--preset` next to `--init-from`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        setattr(namespace, f"{self.dest}_given", True)


def check_args(args: argparse.Namespace, world: int | None = None) -> None:
    """What argparse cannot check alone, before any process group starts (raises UsageError).

    `world`: the number of processes the launcher will start, where it is known."""
    if args.steps and not args.data:
        raise UsageError(
            "--data PATH is required for training; pass `labkit clean` output, a JSONL file of "
            "title/body records or a prepare_data() folder (or --steps 0 to only join the job)"
        )
    if args.strategy == "fsdp" and world is not None and world < 2:
        raise UsageError(
            "--strategy fsdp shards the model over processes and this job has 1: start >= 2 "
            "(torchrun --nproc_per_node 2 ...), or use --strategy ddp"
        )
    if getattr(args, "cuda_memory_gb", None):
        import torch  # only for this option: the preflight stays cheap otherwise

        if args.device == "cpu" or not torch.cuda.is_available():
            raise UsageError(
                "--cuda-memory-gb caps a GPU's memory and this run has no GPU (--device cpu, or none visible): drop it"
            )
    if args.strategy == "fsdp" and not args.device_placement:
        raise UsageError("--strategy fsdp needs each rank on its own device: drop --no-device-placement")
    ckpt = Path(args.out) / "ckpt" if getattr(args, "out", None) else None
    if args.resume == "auto" and ckpt is not None and (ckpt / "latest").exists():
        _check_resume_strategy(ckpt, args.strategy)


def _check_resume_strategy(ckpt: Path, strategy: str) -> None:
    """A checkpoint of the other strategy cannot be continued: refuse it before any rank starts."""
    import json

    meta = ckpt / (ckpt / "latest").read_text(encoding="utf-8").strip() / "meta.json"
    try:
        saved = json.loads(meta.read_text(encoding="utf-8")).get("strategy", "ddp")
    except (OSError, ValueError):
        return  # unreadable: the trainer names the problem when it loads
    if saved != strategy:
        raise UsageError(
            f"{ckpt} holds a --strategy {saved} checkpoint and this run asks for --strategy {strategy}: "
            f"rerun with --strategy {saved}, or --resume never (or another --out) to start fresh"
        )
