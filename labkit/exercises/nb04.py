"""Notebook 04 (launching DDP): the launch command, each rank's device, a question."""

from __future__ import annotations

import shlex
from pathlib import Path

from labkit.exercises import Choice, Quiz, answered, call, fail, passed
from labkit.i18n import N_, _


GPUS = 4  # the node ex1 asks about: one machine, 4 GPUs, no accelerate config file


def _parse(parser, argv: list[str], launcher: str):
    """`argv` parsed by the launcher's own argument parser (what the launcher would read), or a hint."""
    import contextlib
    import io

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(argv)
    except SystemExit:
        said = err.getvalue().strip().splitlines()
        fail(
            _("{launcher} would refuse this command: {error}").format(
                launcher=launcher, error=said[-1] if said else "usage error"
            )
        )


def _torchrun(argv: list[str]) -> tuple[int, str]:
    """(processes torchrun starts on this node, its script) -- torch's own parser and its nproc_per_node rule."""
    from torch.distributed.run import get_args_parser

    args = _parse(get_args_parser(), argv, "torchrun")
    nodes = str(args.nnodes).split(":")[-1]
    if nodes != "1":
        fail(
            _("--nnodes={nodes}: torchrun would wait for {nodes} nodes to join, and this is one node").format(
                nodes=args.nnodes
            )
        )
    n = str(args.nproc_per_node)
    if n == "cpu":
        fail(N_("--nproc_per_node=cpu starts one process per CPU core, not per GPU: use --nproc_per_node=4 (or gpu)"))
    if n in ("gpu", "auto"):  # torch.distributed.run.determine_local_world_size: one per visible GPU
        return GPUS, args.training_script
    if not n.isdigit():
        fail(_("torchrun would refuse --nproc_per_node={n}: give a number, gpu or auto").format(n=n))
    return int(n), args.training_script


def _accelerate(argv: list[str]) -> tuple[int, str, bool]:
    """(processes accelerate starts on this node, its script, whether a default decided it) -- accelerate's own
    parser and its defaults without a config file (accelerate/commands/launch.py `_validate_launch_command`:
    --num_processes = the GPUs it sees, and --multi_gpu switched on when that is more than one)."""
    from accelerate.commands.launch import launch_command_parser

    args = _parse(launch_command_parser(), argv, "accelerate launch")
    if args.cpu:
        fail(N_("`accelerate launch --cpu` takes the single-process path (measured above): use --multi_gpu"))
    if (args.num_machines or 1) > 1:
        fail(
            _("--num_machines={n}: accelerate would wait for {n} machines to join, and this is one node").format(
                n=args.num_machines
            )
        )
    n = args.num_processes if args.num_processes is not None else GPUS
    return n, args.training_script, args.num_processes is None or not args.multi_gpu


def ex1(command) -> bool:
    """A shell command that starts train.py as 4 processes on one 4-GPU node (no accelerate config file). Judged by
    what the launcher itself would do there: its own argument parser, and its defaults."""
    answered(command)
    try:
        tokens = shlex.split(str(command))
    except ValueError as exc:
        fail(_("the shell could not parse {command}: {error}").format(command=repr(command), error=exc))
    if any(t.startswith("--local_rank") or t.startswith("--local-rank") for t in tokens):
        fail(N_("never type --local_rank yourself: the launcher sets LOCAL_RANK for each process it starts"))
    if "torch.distributed.launch" in tokens:
        fail(N_("torch.distributed.launch is deprecated (it passes --local_rank): use torchrun"))
    module_run = tokens[:3] in (["python", "-m", "torch.distributed.run"], ["python3", "-m", "torch.distributed.run"])
    if not tokens or tokens[0] in ("python", "python3") and not module_run:
        fail(
            N_("`python train.py` starts ONE process whatever you pass it; start it with torchrun or accelerate launch")
        )
    defaulted = False
    if tokens[0] == "torchrun" or module_run:
        n, script = _torchrun(tokens[3:] if module_run else tokens[1:])
        if n != GPUS:
            said = (
                _("--nproc_per_node={n} starts {n} processes").format(n=n)
                if n != 1 or any(t.startswith(("--nproc_per_node", "--nproc-per-node")) for t in tokens)
                else _("torchrun starts one process")
            )
            fail(_("{said}: tell torchrun to start one per GPU, --nproc_per_node=4").format(said=said))
    elif tokens[:2] == ["accelerate", "launch"]:
        n, script, defaulted = _accelerate(tokens[2:])
        if n != GPUS:
            fail(_("accelerate launch --num_processes {n} starts {n} processes: ask for one per GPU, 4").format(n=n))
    else:
        fail(
            _("{launcher} is not a launcher: use torchrun (or accelerate launch --multi_gpu)").format(
                launcher=repr(tokens[0])
            )
        )
    if Path(script).name != "train.py":
        fail(N_("the command should run train.py"))
    note = (
        _(
            " (accelerate's defaults on this node, with no config file: as many processes as GPUs it sees unless "
            "--num_processes says otherwise, and --multi_gpu switched on when that is more than one)"
        )
        if defaulted
        else ""
    )
    return passed(
        _("{command} starts 4 ranks; each reads RANK / LOCAL_RANK / WORLD_SIZE from its environment").format(
            command=repr(command)
        )
        + note
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
