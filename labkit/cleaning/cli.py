"""`labkit clean INPUT [INPUT ...] --out DIR`: the cleaning pipeline as a command (and container entry point).

Exit codes: 0 when the run completed (rejects are normal), 2 when it could not
run (bad arguments, an INPUT path that does not exist, an output directory
that cannot be written).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os

from labkit.cli.errors import UsageError, existing_path, nonneg_int, positive_float, positive_int, writable_dir
from labkit.threads import THREAD_VARS

ENGINES = ("local", "datatrove")  # datatrove rather than Ray Data: docs/decisions.md


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "clean",
        help="clean crawled jsonl/csv/tsv/html/txt into clean.jsonl + rejects.jsonl",
        description="Decode, repair, extract, validate and deduplicate crawled news records. "
        "Every input record lands in exactly one of DIR/clean.jsonl and DIR/rejects.jsonl; "
        "DIR/report.json counts reasons and fixes. The three files are written under temporary names "
        "(DIR/.NAME.partial-PID) and renamed when the run ends, report.json last: an interrupted run leaves no "
        "file that looks complete (a previous run's files stay as they were; its leftovers go on the next run).",
    )
    p.add_argument(
        "inputs", nargs="+", type=existing_path, metavar="INPUT", help="files or directories (walked recursively)"
    )
    p.add_argument(
        "--out", type=writable_dir, required=True, metavar="DIR", help="output directory (created if missing)"
    )
    p.add_argument("--workers", type=positive_int, default=1, help="processes (same output as 1; default 1)")
    p.add_argument("--min-title", type=nonneg_int, default=10, help="shortest title kept, chars (default 10)")
    p.add_argument("--max-title", type=nonneg_int, default=60, help="longest title kept, chars (default 60)")
    p.add_argument("--min-body", type=nonneg_int, default=50, help="shortest body kept, chars (default 50)")
    p.add_argument("--max-body", type=nonneg_int, default=None, help="longest body kept, chars (default: no limit)")
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="local",
        help="local: this machine, --workers processes (default); datatrove: the same decisions as "
        "datatrove stages (the `scale` extra), outputs sharded as DIR/clean/NNNNN.jsonl and "
        "DIR/rejects/NNNNN.jsonl -- see docs/cleaning_at_scale.md",
    )
    p.add_argument(
        "--tasks",
        type=positive_int,
        default=None,
        help="--engine datatrove: shards of the input files (default: --workers)",
    )
    p.add_argument(
        "--slurm-partition",
        default=None,
        metavar="PARTITION",
        help="--engine datatrove: submit the stages as Slurm jobs to PARTITION and return; "
        "DIR/report.json appears when the last job has run (DIR must be on a shared filesystem)",
    )
    p.add_argument(
        "--log-every",
        type=positive_float,
        default=10.0,
        metavar="SECONDS",
        help="progress (files, records): a tqdm bar on stderr when stdout is a terminal, otherwise a line "
        "on stdout every SECONDS (default 10)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress and no summary on stdout")
    p.set_defaults(func=run, freeze_at_exit=True)  # its outputs are closed (and renamed) before run returns


def run(args: argparse.Namespace) -> int:
    # before numpy loads: cleaning never calls BLAS, and OpenBLAS's idle pool thread spins for a while after
    # start-up, taking a core the run (or a neighbour) needs on a shared machine; worker processes inherit it
    for var in THREAD_VARS:
        os.environ.setdefault(var, "1")
    from labkit.cleaning.pipeline import clean_paths
    from labkit.cleaning.readers import InputError
    from labkit.progress import progress_mode

    if getattr(args, "program", False):
        # as the program, what the imports made (~35k objects: numpy, lxml, ftfy) lives until exit: out of the
        # collections the run triggers (each full one walked them all) and, with main's freeze, the final ones
        gc.freeze()

    if args.min_title > args.max_title:
        raise UsageError(f"--min-title {args.min_title} > --max-title {args.max_title}; make --min-title the smaller")
    if args.max_body is not None and args.min_body > args.max_body:
        raise UsageError(f"--min-body {args.min_body} > --max-body {args.max_body}; make --min-body the smaller")
    engine = getattr(args, "engine", "local")
    if engine == "local" and (getattr(args, "tasks", None) or getattr(args, "slurm_partition", None)):
        raise UsageError("--tasks and --slurm-partition need --engine datatrove; add it or drop them")
    limits = dict(min_title=args.min_title, max_title=args.max_title, min_body=args.min_body, max_body=args.max_body)
    try:
        if engine == "datatrove":
            report = _datatrove(args, limits)
            if report is None:
                return 0
        else:
            report = clean_paths(
                args.inputs,
                args.out,
                workers=max(1, args.workers),
                **limits,
                progress=progress_mode(args.quiet),
                progress_every_s=args.log_every,
            )
    except InputError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(
            f"cannot write to {args.out!r}: {exc.strerror or exc}; choose a writable --out directory"
        ) from None
    if not args.quiet:
        summary = {
            k: report[k]
            for k in ("files", "records", "clean", "rejected", "reasons", "seconds", "records_per_s", "mb_per_s")
        }
        print(json.dumps(summary, ensure_ascii=False, indent=1))
        if engine == "datatrove":
            print(f"wrote {args.out}/clean/*.jsonl, rejects/*.jsonl, report.json")
        else:
            print(f"wrote {args.out}/clean.jsonl, rejects.jsonl, report.json")
    return 0


def _datatrove(args: argparse.Namespace, limits: dict) -> dict | None:
    # an optional extra (the slim cleaning image leaves it out): ask for it without importing it
    if importlib.util.find_spec("datatrove") is None:
        raise UsageError("--engine datatrove needs datatrove: run `make setup` (or pip install -e '.[scale]')")
    from labkit.cleaning.datatrove_engine import clean_distributed

    slurm = {"partition": args.slurm_partition} if args.slurm_partition else None
    report = clean_distributed(
        args.inputs,
        args.out,
        tasks=args.tasks or max(1, args.workers),
        workers=max(1, args.workers),
        executor="slurm" if slurm else "local",
        slurm=slurm,
        **limits,
    )
    if slurm:
        if not args.quiet:
            print(
                f"submitted {report['tasks']} shards to Slurm partition {args.slurm_partition}; "
                f"{args.out}/report.json appears when the last stage has run (logs: {args.out}/.work/logs/)"
            )
        return None
    return report
