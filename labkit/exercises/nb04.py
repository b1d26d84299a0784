"""Notebook 04 (launching DDP): the launch command, each rank's device, a question."""

from __future__ import annotations

import shlex

from labkit.exercises import Choice, Quiz, answered, call, fail, passed


def _nproc(tokens: list[str], names: tuple[str, ...]) -> int | str | None:
    for i, t in enumerate(tokens):
        for n in names:
            value = (
                t.split("=", 1)[1]
                if t.startswith(n + "=")
                else tokens[i + 1]
                if t == n and i + 1 < len(tokens)
                else None
            )
            if value is not None:
                return int(value) if value.isdigit() else value
    return None


def ex1(command) -> bool:
    """A shell command that starts train.py as 4 processes on one 4-GPU node."""
    answered(command)
    try:
        tokens = shlex.split(str(command))
    except ValueError as exc:
        fail(f"the shell could not parse {command!r}: {exc}")
    if any(t.startswith("--local_rank") or t.startswith("--local-rank") for t in tokens):
        fail("never type --local_rank yourself: the launcher sets LOCAL_RANK for each process it starts")
    if "torch.distributed.launch" in tokens:
        fail("torch.distributed.launch is deprecated (it passes --local_rank): use torchrun")
    if not tokens or tokens[0] in ("python", "python3") and "torch.distributed.run" not in tokens:
        fail("`python train.py` starts ONE process whatever you pass it; start it with torchrun or accelerate launch")
    if tokens[0] == "torchrun" or "torch.distributed.run" in tokens:
        n = _nproc(tokens, ("--nproc_per_node", "--nproc-per-node"))
        if n not in (4, "gpu"):
            said = f"--nproc_per_node={n} starts {n} processes" if n is not None else "torchrun starts one process"
            fail(f"{said}: tell torchrun to start one per GPU, --nproc_per_node=4")
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


ENVS = [
    {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "8"},
    {"RANK": "3", "LOCAL_RANK": "3", "WORLD_SIZE": "8"},
    {"RANK": "6", "LOCAL_RANK": "2", "WORLD_SIZE": "8"},
    {"RANK": "7", "LOCAL_RANK": "3", "WORLD_SIZE": "8"},
]


def ex2(device_for) -> bool:
    """Which GPU each rank must use (2 nodes x 4 GPUs): `device_for(environ) -> "cuda:N"`."""
    for env in ENVS:
        got = call(device_for, dict(env))
        answered(got)
        want = f"cuda:{env['LOCAL_RANK']}"
        if str(got) != want:
            if str(got) in ("cuda", "cuda:0"):
                fail(f"rank {env['RANK']} got {got}: that is the cuda:0 pile-up from the notebook -- use LOCAL_RANK")
            if str(got) == f"cuda:{env['RANK']}":
                fail(
                    f"rank {env['RANK']} got {got}, but its node has only 4 GPUs (0-3): RANK counts across all nodes, "
                    "LOCAL_RANK within one"
                )
            fail(f"for {env} expected {want}, got {got!r}")
    return passed("every rank picks cuda:LOCAL_RANK; then model.to(device) and DDP(model, device_ids=[local_rank])")


EX3 = Quiz(
    "BC",
    {
        "A": Choice(
            "the training loss stops falling after a few steps",
            "The loss of a world-size-1 run falls just like a 4-process one: it trains fine, on one GPU.",
        ),
        "B": Choice(
            "an assert on WORLD_SIZE right after init",
            "Right: `assert dist.get_world_size() == expected` fails in the first second of a run that came up alone.",
            missed="one statement you left out is about a check your own script can make the moment it starts.",
        ),
        "C": Choice(
            "every rank logs its world size, rank and backend",
            "Right: have every rank report what it saw and compare -- the launch audit does this, and a run that "
            "reports world size 1 stops before it costs a day.",
            missed="one statement you left out is about what each rank can report about the world it joined.",
        ),
        "D": Choice(
            "a timeout error from the first all-reduce",
            "A single process never waits for peers -- there are none -- so no collective times out. That is why this "
            "bug is expensive.",
        ),
    },
)


def ex3(answer) -> bool:
    """A run at world size 1 on a 4-GPU machine: which of these tell you within a minute? (select all)"""
    return EX3(answer)
