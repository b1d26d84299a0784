"""Notebook 04 (launching DDP): the launch command, each rank's device, a question."""

from __future__ import annotations

import shlex

from labkit.exercises import Choice, Quiz, answered, call, fail, passed
from labkit.i18n import N_, _


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
        fail(_("the shell could not parse {command}: {error}").format(command=repr(command), error=exc))
    if any(t.startswith("--local_rank") or t.startswith("--local-rank") for t in tokens):
        fail(N_("never type --local_rank yourself: the launcher sets LOCAL_RANK for each process it starts"))
    if "torch.distributed.launch" in tokens:
        fail(N_("torch.distributed.launch is deprecated (it passes --local_rank): use torchrun"))
    if not tokens or tokens[0] in ("python", "python3") and "torch.distributed.run" not in tokens:
        fail(
            N_("`python train.py` starts ONE process whatever you pass it; start it with torchrun or accelerate launch")
        )
    if tokens[0] == "torchrun" or "torch.distributed.run" in tokens:
        n = _nproc(tokens, ("--nproc_per_node", "--nproc-per-node"))
        if n not in (4, "gpu"):
            said = (
                _("--nproc_per_node={n} starts {n} processes").format(n=n)
                if n is not None
                else _("torchrun starts one process")
            )
            fail(_("{said}: tell torchrun to start one per GPU, --nproc_per_node=4").format(said=said))
    elif tokens[:2] == ["accelerate", "launch"]:
        if "--cpu" in tokens:
            fail(N_("`accelerate launch --cpu` takes the single-process path (measured above): use --multi_gpu"))
        if _nproc(tokens, ("--num_processes", "--num-processes")) != 4 or "--multi_gpu" not in tokens:
            fail(N_("accelerate needs --multi_gpu --num_processes 4"))
    else:
        fail(
            _("{launcher} is not a launcher: use torchrun (or accelerate launch --multi_gpu)").format(
                launcher=repr(tokens[0])
            )
        )
    if "train.py" not in tokens:
        fail(N_("the command should run train.py"))
    return passed(
        _("{command} starts 4 ranks; each reads RANK / LOCAL_RANK / WORLD_SIZE from its environment").format(
            command=repr(command)
        )
    )


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
                fail(
                    _("rank {rank} got {got}: that is the cuda:0 pile-up from the notebook -- use LOCAL_RANK").format(
                        rank=env["RANK"], got=got
                    )
                )
            if str(got) == f"cuda:{env['RANK']}":
                fail(
                    _(
                        "rank {rank} got {got}, but its node has only 4 GPUs (0-3): RANK counts across all nodes, "
                        "LOCAL_RANK within one"
                    ).format(rank=env["RANK"], got=got)
                )
            fail(_("for {env} expected {want}, got {got}").format(env=env, want=want, got=repr(got)))
    return passed(N_("every rank picks cuda:LOCAL_RANK; then model.to(device) and DDP(model, device_ids=[local_rank])"))


EX3 = Quiz(
    "BC",
    {
        "A": Choice(
            N_("the training loss stops falling after a few steps"),
            N_("The loss of a world-size-1 run falls just like a 4-process one: it trains fine, on one GPU."),
        ),
        "B": Choice(
            N_("an assert on WORLD_SIZE right after init"),
            N_(
                "Right: `assert dist.get_world_size() == expected` fails in the first second of a run that came up alone."
            ),
            missed=N_("one statement you left out is about a check your own script can make the moment it starts."),
        ),
        "C": Choice(
            N_("every rank logs its world size, rank and backend"),
            N_(
                "Right: have every rank report what it saw and compare -- the launch audit does this, and a run that "
                "reports world size 1 stops before it costs a day."
            ),
            missed=N_("one statement you left out is about what each rank can report about the world it joined."),
        ),
        "D": Choice(
            N_("a timeout error from the first all-reduce"),
            N_(
                "A single process never waits for peers -- there are none -- so no collective times out. That is why "
                "this bug is expensive."
            ),
        ),
    },
)


def ex3(answer) -> bool:
    """A run at world size 1 on a 4-GPU machine: which of these tell you within a minute? (select all)"""
    return EX3(answer)
