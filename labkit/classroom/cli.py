"""`labkit workshop ...`: running a room -- the hub, its capacity plan, collecting the learners' work.

`labkit workshop hub` (labkit.classroom.hub) serves the release; `plan` says what fits this machine
(labkit.classroom.capacity); `collect` copies every learner's notebooks into the folder `labkit course grade`
reads (labkit.classroom.collect). `labkit bench room` (labkit.classroom.capacity) checks the plan against simulated learners."""

from __future__ import annotations

import importlib
from pathlib import Path

from labkit.cli.errors import UsageError, existing_dir, positive_float, positive_int, writable_dir

# `labkit workshop NAME` actions in modules of their own: name -> module with register(workshop_subparsers)
ACTIONS = {"hub": "labkit.classroom.hub"}


def _memory_mb(text: str) -> float:
    from labkit.classroom.hub import parse_size

    return parse_size(text) / (1024 * 1024)


def register(sub) -> None:
    p = sub.add_parser("workshop", help="run a room: the hub, what fits this machine, collect the learners' notebooks")
    wsub = p.add_subparsers(dest="workshop_cmd", metavar="ACTION")
    pl = wsub.add_parser("plan", help="what fits this machine for N learners and how long each notebook takes")
    pl.add_argument("--learners", type=positive_int, required=True, help="learners running a notebook at once")
    pl.add_argument(
        "--cores", type=positive_float, default=None, help="cores of the room's machine (default: this one's)"
    )
    pl.add_argument(
        "--memory",
        type=str,
        default=None,
        metavar="SIZE",
        help="memory of the room's machine, e.g. 64G (default: this one's)",
    )
    pl.add_argument(
        "--runs",
        type=existing_dir,
        default=None,
        help="a course run's folder (labkit course run --out DIR) to read the figures from (default: docs/times.json)",
    )
    pl.add_argument(
        "--times", type=Path, default=None, help="the times table to read (default: the course's docs/times.json)"
    )
    pl.set_defaults(func=_cmd_plan)
    co = wsub.add_parser(
        "collect", help="copy every learner's notebooks into SUBMISSIONS/<learner>/ for `labkit course grade`"
    )
    src = co.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--room", type=existing_dir, default=None, help="the hub's state folder (`labkit workshop hub --state`)"
    )
    src.add_argument("--homes", type=existing_dir, default=None, help="a folder holding one folder per learner")
    co.add_argument("--out", required=True, type=writable_dir, help="the submissions folder to write")
    co.set_defaults(func=_cmd_collect)
    for modname in ACTIONS.values():
        mod = importlib.import_module(modname)
        if hasattr(mod, "register"):
            mod.register(wsub)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def _cmd_plan(args) -> int:
    from labkit.classroom.capacity import load_figures, machine_memory_mb, plan, render
    from labkit.threads import cores

    figures = load_figures(args.runs, args.times)
    memory = _memory_mb(args.memory) if args.memory else machine_memory_mb()
    cores_ = args.cores or cores()
    print(render(plan(figures, args.learners, cores_, memory), cores_, memory))
    return 0


def _cmd_collect(args) -> int:
    from labkit.classroom.collect import collect, homes_in

    if args.room:
        from labkit.classroom.hub import learner_notebooks

        homes = {name: folder for name, folder in learner_notebooks(args.room).items()}
        if not homes:
            raise UsageError(f"--room {args.room}: the room has no learners")
    else:
        homes = homes_in(args.homes)
    manifest = collect(homes, args.out)
    n = sum(len(v["notebooks"]) for v in manifest["learners"].values())
    skipped = sum(len(v["skipped"]) for v in manifest["learners"].values())
    print(
        f"collected {n} notebook(s) of {len(manifest['learners'])} learner(s) into {args.out}"
        + (f" ({skipped} left out: see collected.json)" if skipped else "")
        + f"; grade them with `labkit course grade {args.out} --out GRADES`"
    )
    return 0
