"""Notebook 04 (launching DDP): the launch command, each rank's device, a question."""
from __future__ import annotations

import shlex

from labkit.exercises import answered, call, fail, passed, quiz


def _nproc(tokens: list[str], names: tuple[str, ...]) -> int | None:
    for i, t in enumerate(tokens):
        for n in names:
            if t.startswith(n + "="):
                return int(t.split("=", 1)[1])
            if t == n and i + 1 < len(tokens):
                return int(tokens[i + 1])
    return None


def ex1(command) -> bool:
    """A shell command that starts train.py as 4 processes on one 4-GPU node."""
    answered(command)
    tokens = shlex.split(str(command))
    if any(t.startswith("--local_rank") or t.startswith("--local-rank") for t in tokens):
        fail("never type --local_rank yourself: the launcher sets LOCAL_RANK for each process it starts")
    if not tokens or tokens[0] in ("python", "python3") and "torch.distributed.run" not in tokens:
        fail("`python train.py` starts ONE process whatever you pass it; start it with torchrun or accelerate launch")
    if tokens[0] == "torchrun" or "torch.distributed.run" in tokens:
        n = _nproc(tokens, ("--nproc_per_node", "--nproc-per-node"))
        if n != 4:
            fail("tell torchrun how many processes: --nproc_per_node=4 (one per GPU)")
    elif tokens[:2] == ["accelerate", "launch"]:
        if "--cpu" in tokens:
            fail("`accelerate launch --cpu` takes the single-process path (measured above): use --multi_gpu")
        if _nproc(tokens, ("--num_processes", "--num-processes")) != 4 or "--multi_gpu" not in tokens:
            fail("accelerate needs --multi_gpu --num_processes 4")
    else:
        fail(f"{tokens[0]!r} is not a launcher: use torchrun (or accelerate launch --multi_gpu)")
    if "train.py" not in tokens:
        fail("the command should run train.py")
    return passed(f"{command!r} starts 4 ranks; each reads RANK / LOCAL_RANK / WORLD_SIZE from its environment")


ENVS = [{"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "8"}, {"RANK": "3", "LOCAL_RANK": "3", "WORLD_SIZE": "8"},
        {"RANK": "6", "LOCAL_RANK": "2", "WORLD_SIZE": "8"}, {"RANK": "7", "LOCAL_RANK": "3", "WORLD_SIZE": "8"}]


def ex2(device_for) -> bool:
    """Which GPU each rank must use (2 nodes x 4 GPUs): `device_for(environ) -> "cuda:N"`."""
    for env in ENVS:
        got = call(device_for, dict(env))
        want = f"cuda:{env['LOCAL_RANK']}"
        if str(got) != want:
            if str(got) in ("cuda", "cuda:0"):
                fail(f"rank {env['RANK']} got {got}: that is the cuda:0 pile-up from the notebook -- use LOCAL_RANK")
            if str(got) == f"cuda:{env['RANK']}":
                fail(f"rank {env['RANK']} got {got}, but its node has only 4 GPUs (0-3): RANK counts across all nodes, "
                     "LOCAL_RANK within one")
            fail(f"for {env} expected {want}, got {got!r}")
    return passed("every rank picks cuda:LOCAL_RANK; then model.to(device) and DDP(model, device_ids=[local_rank])")


def ex3(answer) -> bool:
    """A run at world size 1 on a 4-GPU machine: how do you find out early?"""
    return quiz(answer, "D", {
        "A": "The loss of a world-size-1 run falls just like a 4-process one: it trains fine, on one GPU.",
        "B": "Three idle GPUs are visible in nvidia-smi only if someone looks; and on CPU there is nothing to look at.",
        "C": "A single process never errors for lack of peers: there are none to wait for. That is why this bug is "
             "expensive.",
        "D": "Right: have every rank report what it saw (world size, rank, backend) and assert it, as the launch audit "
             "does -- a run that reports world size 1 stops before it costs a day.",
    })
