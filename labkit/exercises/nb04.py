"""Notebook 04 (launching DDP): the launch command, each rank's device, a question;
`grade_fix`, the find-and-fix grader."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from labkit.exercises import Choice, Quiz, answered, call, fail, passed
from labkit.i18n import N_, _

if TYPE_CHECKING:
    from labkit.exercises.transfer import Run


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


# ---- find and fix: `grade_fix` grades what `labkit.exercises.transfer` measured running the repaired script
def replicas(run: Run) -> dict:
    """The replica audit over the ranks' parameter checksums: did the replicas stay one model?"""
    from labkit.distributed import audit

    return audit.replica_audit({r: {"checksums": rep.get("checksums", {})} for r, rep in run.ranks.items()})


def joined(run: Run) -> dict[int, dict]:
    """Each process's view of the job as the script joined it (not what the launcher set): the launch audit's input."""
    out = {}
    for r, rep in sorted(run.ranks.items()):
        j = rep.get("joined") or {}
        out[r] = {
            "env": {"world_size": j.get("world_size", 1), "rank": j.get("rank", 0), "launcher": "torchrun"},
            "backend": j.get("backend"),
            "pid": rep.get("pid"),
            "host": rep.get("host"),
        }
    return out


def id_overlap(run: Run) -> dict:
    """The data audit over example ids (a list sliced per rank is a new list: indices would not compare)."""
    from labkit.distributed import audit

    ranks = {r: {"samples": rep.get("sample_ids") or []} for r, rep in sorted(run.ranks.items())}
    if not all(ranks[r]["samples"] and all(i is not None for e in ranks[r]["samples"] for i in e) for r in ranks):
        fail(_("the check saw no examples drawn from a DataLoader on some rank: keep the DataLoader over the examples"))
    union = len({i for v in ranks.values() for e in v["samples"] for i in e})
    return audit.data_audit({r: {"samples": v["samples"], "dataset_size": union} for r, v in ranks.items()})


def _doctor(text: str, codes: tuple[str, ...]) -> list:
    """`labkit doctor script`'s findings of `codes` on the learner's script (its entry called, as a file would)."""
    from labkit.doctor.script import check_source

    if "__main__" not in text:
        text += '\n\nif __name__ == "__main__":\n    main()\n'
    return [f for f in check_source(text, "your script") if f.code in codes]


def placed(run: Run, codes: tuple[str, ...] = ("model_not_on_device",)) -> None:
    """Fail when the script would put every rank on one card: the check runs on CPU, where every rank uses the
    host and no audit can see it, so the device placement is read from the script (`labkit doctor script`)."""
    found = _doctor(run.source, codes)
    if found:
        f = found[0]
        fail(
            _(
                "it runs right on CPU, but labkit doctor script finds line {line}: {message} -- on a GPU node every "
                "rank would pile onto one card. Fix: {fix}"
            ).format(line=f.line, message=f.message, fix=f.fix)
        )


def audit_sequence(run: Run, la: dict, *, launch: str, overlap: str, first_forward: str, final) -> None:
    """The audits a 2-rank run fails in order -- one process group, disjoint shards, replicas identical at the
    first forward pass and after training -- failing with the notebook's own hint for the first that does not hold.
    Each hint is an `N_` text (formatted with the launch audit's world_size/ranks_seen, or the overlap %);
    `final` may be a function of the run returning the translated hint (07 adds what torch warned)."""
    if not la["distributed"]:
        fail(_(launch).format(world_size=la["world_size"], ranks_seen=la["ranks_seen"]))
    data = id_overlap(run)
    if data["overlap_pct"] > 0:
        fail(_(overlap).format(overlap=data["overlap_pct"]))
    rep = replicas(run)
    if not rep["identical"].get("first_forward", True):
        fail(_(first_forward))
    if not rep["identical"].get("final", False):
        fail(final(run) if callable(final) else _(final))


def grade_fix(run: Run) -> bool:
    from labkit.distributed import audit

    la = audit.launch_audit(joined(run))
    inited = [bool((rep.get("joined") or {}).get("initialized")) for rep in run.ranks.values()]
    if not any(inited):
        alone = _(
            "the launch audit: {processes} processes started and each one is alone -- world size {world_size}, ranks "
            "seen {ranks_seen}, no process group"
        ).format(processes=la["processes"], world_size=la["world_size"], ranks_seen=la["ranks_seen"])
        if id_overlap(run)["overlap_pct"] == 0:
            fail(
                _(
                    "{alone}. Each process now takes its own half of the data, but nothing called init_process_group: "
                    "that is two single-process runs. Call torch.distributed.init_process_group(...) (it reads RANK "
                    "and WORLD_SIZE from torchrun's environment) and wrap the model in DistributedDataParallel"
                ).format(alone=alone)
            )
        fail(
            _(
                "{alone}. torchrun passes no --local_rank (it stays 0 in every process) and nothing called "
                "init_process_group: read LOCAL_RANK (RANK, WORLD_SIZE) from the environment and call "
                "torch.distributed.init_process_group(...) before building the model"
            ).format(alone=alone)
        )
    audit_sequence(
        run,
        la,
        launch=N_(
            "the launch audit: world size {world_size}, ranks seen {ranks_seen}: the processes did not join one "
            "process group of 2 -- let init_process_group read RANK/WORLD_SIZE from torchrun's environment"
        ),
        overlap=N_(
            "one process group now, but the ranks trained on the same examples (overlap {overlap:.0f} %): the "
            "shard still comes from --local_rank, which is 0 in every process under torchrun. Take the rank from "
            "the process group (dist.get_rank()) or the environment, or use a DistributedSampler"
        ),
        first_forward=N_(
            "the replica audit: the models differ already at the first forward pass -- wrap the model in "
            "DistributedDataParallel (it broadcasts rank 0's weights) before training"
        ),
        final=N_(
            "the replica audit: the two models differ after training -- each process trained its own copy. Wrap "
            "the model in DistributedDataParallel (after moving it to this rank's device) so every step averages "
            "the gradients of all ranks"
        ),
    )
    placed(run, ("model_not_on_device", "legacy_launch"))
    return passed(
        _(
            "the launch audit: world size {world_size}, ranks {ranks_seen}, backend {backend}; disjoint shards; the "
            "replica audit: identical at the first forward pass and after training"
        ).format(world_size=la["world_size"], ranks_seen=la["ranks_seen"], backend=la["backend"])
    )
