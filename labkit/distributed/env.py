"""Who am I in the job? Rank, world and device read from the launcher's environment.

`torchrun`, `accelerate launch` and SLURM-style wrappers all describe a process
with the same variables (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `MASTER_ADDR`,
`MASTER_PORT`).  Reading them -- instead of a `--local_rank` argument -- is what
makes one entry point run unchanged as a single process, under torchrun on one
node or many, and under accelerate.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Mapping


class LaunchWarning(UserWarning):
    """The process was started in a way that does not do what it looks like."""


@dataclass(frozen=True)
class DistEnv:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    master_addr: str | None = None
    master_port: str | None = None
    launcher: str = "python"  # "torchrun" | "accelerate" | "python"
    restart_count: int = 0  # torchrun --max-restarts: which attempt this is

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def to_dict(self) -> dict:
        return asdict(self)


def _int(environ: Mapping[str, str], key: str, default: int) -> int:
    raw = environ.get(key)
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {key}={raw!r} is not an integer; fix the launcher's setting") from None


# what `accelerate launch` writes into every process it starts, through either of its launchers (accelerate.utils.launch:
# prepare_simple_launcher_cmd_env, prepare_multi_gpu_env) -- settings of the launch, not ones a user exports
ACCELERATE_LAUNCH_VARS = ("ACCELERATE_MIXED_PRECISION", "ACCELERATE_DYNAMO_BACKEND")


def read_env(environ: Mapping[str, str] | None = None) -> DistEnv:
    """The process's place in the job, from the environment a launcher set.

    >>> read_env({}).world_size
    1
    >>> read_env({"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}).rank
    1
    """
    env = os.environ if environ is None else environ
    world = _int(env, "WORLD_SIZE", 1)
    rank = _int(env, "RANK", 0)
    local = _int(env, "LOCAL_RANK", rank)
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"impossible launch: RANK={rank} with WORLD_SIZE={world} (need 0 <= RANK < WORLD_SIZE >= 1)")
    if any(k in env for k in ACCELERATE_LAUNCH_VARS):
        launcher = "accelerate"  # before torchrun: `accelerate launch --multi_gpu` runs torch's elastic agent too
    elif "TORCHELASTIC_RUN_ID" in env:
        launcher = "torchrun"
    elif any(k.startswith("ACCELERATE_") for k in env):
        launcher = "accelerate"
    else:
        launcher = "python"
    return DistEnv(
        rank=rank,
        local_rank=local,
        world_size=world,
        local_world_size=_int(env, "LOCAL_WORLD_SIZE", world),
        master_addr=env.get("MASTER_ADDR"),
        master_port=env.get("MASTER_PORT"),
        launcher=launcher,
        restart_count=_int(env, "TORCHELASTIC_RESTART_COUNT", 0),
    )


def check_legacy_local_rank(
    arg_value: int | None, env: DistEnv, environ: Mapping[str, str] | None = None
) -> str | None:
    """Warn when a legacy `--local_rank` argument disagrees with the environment.

    `python train.py --local_rank=0` looks distributed but is one process: no
    launcher set `LOCAL_RANK`/`WORLD_SIZE`, so the world has size 1.  Returns the
    warning text (also issued as a `LaunchWarning`), or None when all agree.
    """
    if arg_value is None:
        return None
    environ = os.environ if environ is None else environ
    if "LOCAL_RANK" not in environ:
        msg = (
            f"--local_rank={arg_value} was passed but no launcher set LOCAL_RANK/WORLD_SIZE: this is ONE "
            f"process (world size {env.world_size}), not distributed training. Launch with "
            f"`torchrun --nproc_per_node=N -m labkit.train ...` and drop --local_rank."
        )
    elif arg_value != env.local_rank:
        msg = (
            f"--local_rank={arg_value} disagrees with LOCAL_RANK={env.local_rank} from the launcher; "
            f"using the environment's value. Drop the --local_rank argument."
        )
    else:
        return None
    warnings.warn(msg, LaunchWarning, stacklevel=2)
    return msg


def choose_backend(device) -> str:
    """NCCL for CUDA devices, gloo for CPU (NCCL cannot move CPU tensors)."""
    import torch

    return "nccl" if torch.device(device).type == "cuda" else "gloo"


def rank_device(env: DistEnv, device: str = "auto"):
    """This rank's own device: `cuda:<local_rank>` on GPUs, else CPU.

    Every rank defaulting to `cuda` (= cuda:0) is the classic pile-up; the local
    rank picks the card.
    """
    import torch

    want = device or "auto"
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(want)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"device {device!r} asked for, but this torch build sees no CUDA device")
        n = torch.cuda.device_count()
        if env.local_rank >= n:
            raise RuntimeError(
                f"local rank {env.local_rank} has no GPU: this node has {n}; start at most "
                f"--nproc_per_node={n} processes per node"
            )
        dev = torch.device("cuda", env.local_rank if dev.index is None else dev.index)
        torch.cuda.set_device(dev)
    return dev


def init(env: DistEnv, device, timeout_s: float = 300.0) -> str | None:
    """Join the process group when the world has more than one process.

    Returns the backend, or None for a single process.  The timeout bounds every
    collective, so a dead peer turns into an error instead of an endless wait.
    """
    if not env.distributed:
        return None
    import torch.distributed as dist

    if dist.is_initialized():  # e.g. accelerate's state already joined
        # a group created with backend=None maps cpu->gloo, cuda->nccl and reports "undefined"
        b = dist.get_backend()
        return b if b != "undefined" else choose_backend(device)
    backend = choose_backend(device)
    kw: dict = {"device_id": device} if backend == "nccl" and getattr(device, "index", None) is not None else {}
    timeout = timedelta(seconds=timeout_s)
    if env.restart_count > 0 and env.master_addr and env.master_port:
        # After a torchrun restart the store still holds the dead attempt's peer
        # addresses; a rank that reads one before its peer re-registers gets
        # "Connection refused" (seen here with gloo).  A per-attempt key prefix
        # keeps each attempt's rendezvous apart.
        agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
        store = dist.TCPStore(
            env.master_addr,
            int(env.master_port),
            env.world_size,
            is_master=not agent_store and env.rank == 0,
            timeout=timeout,
        )
        kw["store"] = dist.PrefixStore(f"labkit/attempt_{env.restart_count}", store)
        kw.update(rank=env.rank, world_size=env.world_size)
    dist.init_process_group(backend, timeout=timeout, **kw)
    return backend


def cleanup() -> None:
    """Leave the process group (idempotent)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def whole_lines() -> None:
    """Make this rank write each line of its stdout and stderr in one piece (one `write` to the fd).

    The launcher runs ranks with PYTHONUNBUFFERED=1 so their output is live; unbuffered, `print` hands its text, its
    separators and its newline to the fd one by one, so two ranks printing at once (after joining their group) glue
    into one line: on the pipe `accelerate launch` gives its ranks, or in torchrun's tee, whose tail relays a partial
    line as it finds it.  Line buffering keeps the output as live and each line whole (a pipe write of a line up to
    PIPE_BUF is atomic)."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)  # a notebook's or a test's replacement may have none
        if reconfigure is not None:
            reconfigure(line_buffering=True, write_through=False)
