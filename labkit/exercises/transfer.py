"""Find-and-fix exercises: someone else's training script with this notebook's pitfall in it.

Notebooks 02, 04, 05, 06 and 07 each hand the learner a short script they have not seen
(`data_samples/scripts/exerciseNN_*.py`, written in another style than the course's), with exactly that
notebook's pitfall in it. The learner repairs it in a cell; the check RUNS the repaired code -- a few
steps, on 2 gloo processes through the course's launcher where it needs ranks, in a separate process
with a time limit always -- and grades what it measured with the notebook's own instruments, never by
reading the text:

| exercise | pitfall in the script | graded with |
|---|---|---|
| 02 | the loader keeps mojibake, script noise and misaligned CSV fields | notebook 01's noise flags and field lengths |
| 04 | `--local_rank` argparse, no process group, no device | the launch audit and the replica audit |
| 05 | a hand-made split shuffled with a per-rank seed | the data audit (overlap, coverage, reshuffling) |
| 06 | no clipping, no warmup, on crawl accidents | the grad-norm monitor and the optimizer's applied steps |
| 07 | the model is not wrapped: the loss is all-reduced instead | the launch, data and replica audits |

In a notebook::

    from labkit.exercises import transfer
    transfer.show("05")            # print the script (transfer.load("05") puts it into the current cell)
    ...                            # the cell with the repaired script (it defines main)
    transfer.check_fix("05", main) # main, the script's text, or its path

`check_fix` prints `✅ pass` or `❌ fail: <hint>` like every check (`labkit.exercises`); an unrepaired
script fails with a hint naming the pitfall, a placeholder with `UNANSWERED`.
"""

from __future__ import annotations

import ast
import inspect
import json
import linecache
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from labkit.exercises import UNANSWERED, fail, passed

HARNESS = "labkit.exercises.harness"
TIMEOUT_S = 150.0  # per check: a learner's script that hangs (a collective one rank never reaches) is stopped


@dataclass(frozen=True)
class Exercise:
    id: str
    notebook: str
    script: str  # file name in data_samples/scripts/
    nproc: int  # 1: one plain process; 2: torchrun with 2 gloo ranks
    kwargs: dict  # what the check passes to the script's main(...)
    pitfall: str
    grade: Callable[["Run"], bool]
    prepare: Callable[[Path], dict] | None = None  # makes the inputs (kwargs added) in the run's folder


@dataclass
class Run:
    """What one check run of a learner's script left behind."""

    exercise: Exercise
    source: str
    out: Path
    ranks: dict[int, dict] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    ok: bool = False
    timeout: str | None = None
    not_started: str | None = None  # the launcher refused (no free port, a bad machine): not the learner's doing
    context: dict = field(default_factory=dict)

    @property
    def errors(self) -> dict[int, dict]:
        return {r: rep["error"] for r, rep in sorted(self.ranks.items()) if rep.get("error")}

    def tail(self, n: int = 8) -> str:
        return "\n".join(line for line in self.log[-n:] if line.strip())


# ---- the scripts ------------------------------------------------------------------------------------------
def scripts_dir() -> Path:
    """`data_samples/scripts/` of the checkout or release this runs in."""
    from labkit import results

    data = getattr(results, "data_dir", None)
    return (data() if data else results.project_root() / "data_samples") / "scripts"


def script_path(exercise_id: str) -> Path:
    return scripts_dir() / exercise(exercise_id).script


def source(exercise_id: str) -> str:
    """The shipped (broken) script's text."""
    path = script_path(exercise_id)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: the exercise scripts ship in data_samples/scripts/")
    return path.read_text(encoding="utf-8")


def show(exercise_id: str) -> str:
    """Print the script with line numbers (and return its text)."""
    text = source(exercise_id)
    ex = exercise(exercise_id)
    print(f"# {script_path(exercise_id)}  ({ex.notebook}: find the pitfall, repair it, keep main(...))")
    for i, line in enumerate(text.splitlines(), start=1):
        print(f"{i:3d}  {line}")
    return text


def answer_name(exercise_id: str) -> str:
    """The variable the exercise cell sets to the repaired script's main (`fixed_05`) and the check cell passes on."""
    return f"fixed_{exercise(exercise_id).id}"


def cell_text(exercise_id: str) -> str:
    """The script as the learner's cell holds it: without its `if __name__ == "__main__":` block (in a kernel
    `__name__` is `"__main__"`, so the cell would train on the spot), ending with `fixed_NN = main`."""
    lines = source(exercise_id).rstrip("\n").splitlines()
    cut = next((i for i, line in enumerate(lines) if line.startswith("if __name__ == ")), len(lines))
    body = "\n".join(lines[:cut]).rstrip("\n")
    return f"{body}\n\n\n{answer_name(exercise_id)} = main  # the check runs this main\n"


def load(exercise_id: str) -> None:
    """Replace the current notebook cell with the script to repair (what `%load` does); print it outside IPython."""
    text = cell_text(exercise_id)
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        shell = None
    if shell is None:
        print(text)
        return
    head = f"# {exercise(exercise_id).script}: find this notebook's pitfall, repair it here, run the cell, then the check\n"
    shell.set_next_input(head + text, replace=True)


# ---- the learner's answer -----------------------------------------------------------------------------------
def _is_placeholder(text: str) -> bool:
    """Nothing but comments, blank lines and `...` (nbgrader's stub, an emptied cell)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in tree.body)


def answer_source(answer: Any) -> tuple[str, str]:
    """(source text, entry function name) of a learner's answer: a function (its whole cell or file), the text,
    or a path. A placeholder fails with UNANSWERED."""
    entry = "main"
    if answer is None or answer is Ellipsis:
        fail(UNANSWERED)
    if isinstance(answer, Path) or (isinstance(answer, str) and "\n" not in answer and answer.strip().endswith(".py")):
        path = Path(answer)
        if not path.exists():
            fail(f"{path} does not exist: pass the repaired script's path, its text, or its main function")
        text = path.read_text(encoding="utf-8")
    elif isinstance(answer, str):
        text = answer
    elif callable(answer) or inspect.ismodule(answer):
        if inspect.isfunction(answer) and answer.__qualname__ == answer.__name__:
            entry = answer.__name__  # a top-level function is the entry; a method or a module means main
        try:
            filename = inspect.getsourcefile(answer) or answer.__code__.co_filename
        except (TypeError, AttributeError):
            filename = None
        # a notebook cell's code is cached under its cell file name: the whole cell, not only the function
        text = "".join(linecache.getlines(filename)) if filename else ""
        if not text.strip():
            fail(f"cannot read the source of {answer!r}: pass the repaired script's text or its path instead")
    else:
        fail(f"expected the repaired script (its main function, its text or its path), got {type(answer).__name__}")
    if _is_placeholder(text):
        fail(UNANSWERED + " (transfer.load(...) puts the script into the cell)")
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        fail(f"your script does not parse: line {exc.lineno}: {exc.msg}")
    if not any(isinstance(n, ast.FunctionDef) and n.name == entry for n in tree.body):
        fail(f"the script has no top-level `def {entry}(...)`: keep it -- the check calls it")
    return text, entry


# ---- running ------------------------------------------------------------------------------------------------
def run_fix(exercise_id: str, answer: Any, *, timeout_s: float = TIMEOUT_S, keep: bool = False) -> Run:
    """Run the learner's script under the harness (2 gloo ranks or one process) and collect the ranks' reports."""
    from labkit.distributed.launcher import LaunchError, LaunchTimeout, launch
    from labkit.distributed.reports import read_reports

    ex = exercise(exercise_id)
    text, entry = answer_source(answer)
    out = Path(tempfile.mkdtemp(prefix=f"labkit-fix{ex.id}-"))
    run = Run(ex, text, out)
    try:
        script = out / f"learner_{ex.id}.py"
        script.write_text(text, encoding="utf-8")
        kwargs = dict(ex.kwargs)
        if ex.prepare:
            run.context = ex.prepare(out)
            kwargs.update(run.context.get("kwargs", {}))
        args = ["--script", str(script), "--entry", entry, "--kwargs", json.dumps(kwargs)]
        try:
            res = launch(
                args,
                ex.nproc,
                out_dir=out,
                module=HARNESS,
                launcher="torchrun" if ex.nproc > 1 else "python",
                device="cpu",
                timeout_s=timeout_s,
                env={"CUDA_VISIBLE_DEVICES": ""},
                check=False,
                echo=None,
            )
            run.ranks, run.log, run.ok = res.ranks, res.log, res.ok
        except LaunchTimeout as exc:
            run.ranks, run.log = exc.result.ranks, exc.result.log
            run.timeout = str(exc).split(";")[0]
        except LaunchError as exc:
            run.ranks, _ = read_reports(out)
            run.not_started = str(exc)
        if (out / "records.jsonl").exists():
            from labkit.jsonl import read_jsonl

            run.context["records"] = read_jsonl(out / "records.jsonl")
        return run
    finally:
        if not keep:
            shutil.rmtree(out, ignore_errors=True)


def _ran(run: Run) -> None:
    """Fail with the learner's error when the script did not run to the end on every process."""
    if run.not_started:
        fail(f"the check could not start its processes (not your script's fault): {run.not_started}")
    if run.errors:
        rank, err = next(iter(run.errors.items()))
        where = f" at line {err['line']} (`{err['code']}`)" if err.get("line") else ""
        who = f" on rank {rank}" if run.exercise.nproc > 1 else ""
        fail(f"your script raised {err['type']}{who}{where}: {err['message']}")
    if run.timeout:
        fail(
            f"your script did not finish: {run.timeout}. A rank waiting in a collective (all_reduce, barrier, DDP's "
            "backward) that another rank never reaches hangs forever"
        )
    if not run.ok:
        fail(f"your script's processes did not complete (the last lines: {run.tail()!r})")
    missing = [r for r in range(run.exercise.nproc) if r not in run.ranks]
    if missing:
        fail(f"rank(s) {missing} never reported: did the script exit early?")


def check_fix(exercise_id: str, answer: Any, *, timeout_s: float = TIMEOUT_S) -> bool:
    """Run the learner's repaired script and grade it with the notebook's instruments (✅ pass / ❌ fail: hint)."""
    ex = exercise(exercise_id)
    run = run_fix(exercise_id, answer, timeout_s=timeout_s)
    _ran(run)
    return ex.grade(run)


# ---- 05: who trains on what ---------------------------------------------------------------------------------
def _audit_input(run: Run) -> dict[int, dict]:
    return {
        r: {"samples": rep.get("samples", []), "dataset_size": rep.get("dataset_size", 0)}
        for r, rep in sorted(run.ranks.items())
    }


def _data_audit(run: Run) -> dict:
    from labkit.distributed import audit

    ranks = _audit_input(run)
    if not all(len(r["samples"]) >= 2 for r in ranks.values()):
        fail(
            "the check saw fewer than 2 epochs of a DataLoader on some rank: keep one DataLoader pass over the "
            "examples per epoch (the data audit reads the indices it hands out)"
        )
    return audit.data_audit(ranks)


def _replicas(run: Run) -> dict:
    from labkit.distributed import audit

    return audit.replica_audit({r: {"checksums": rep.get("checksums", {})} for r, rep in run.ranks.items()})


def _first_bad_epoch(a: dict, key: str) -> dict:
    return max(a["epochs"], key=lambda e: e[key])


def grade_05(run: Run) -> bool:
    a = _data_audit(run)
    world = len(run.ranks)
    n_changed, n_bounds = a["order_changes"]
    if a["overlap_pct"] >= 99.9 and a["work_factor"] >= world - 1e-9:
        fail(
            f"the data audit: overlap {a['overlap_pct']:.0f} %, work factor {a['work_factor']:.1f} -- every rank "
            "trained on every example, so the ranks repeat each other's work. Give each rank its own shard: "
            "DistributedSampler(dataset, num_replicas=world, rank=rank, seed=seed)"
        )
    if a["overlap_pct"] > 0 or a["missing"] > 0:
        e = _first_bad_epoch(a, "overlap_pct")
        fail(
            f"the data audit: in epoch {e['epoch']} the ranks' shards overlap ({e['overlap_pct']:.0f} % of the examples "
            f"seen were seen by more than one rank) and {e['missing']} of {a['dataset_size']} examples were never "
            "seen. Each rank shuffled with its own seed, so 'every N-th example of my shuffle' is not a partition: "
            "shuffle with the same seed on every rank (plus the epoch), or use DistributedSampler + set_epoch"
        )
    if n_changed == 0:
        fail(
            f"the data audit: disjoint and complete, but the order changed at 0 of {n_bounds} epoch boundaries -- "
            "every epoch replays the same order. Put the epoch into the shuffle's seed (DistributedSampler: "
            "sampler.set_epoch(epoch) at the start of every epoch)"
        )
    if n_changed < n_bounds:
        fail(
            f"the data audit: the order changed at only {n_changed} of {n_bounds} (rank x epoch) boundaries: "
            "reshuffle at the start of every epoch, before the epoch's batches are drawn"
        )
    rep = _replicas(run)
    if not rep["identical"].get("final", True):
        fail("the data split is right now, but the replicas differ after training: keep the model wrapped in DDP")
    return passed(
        f"the data audit: overlap 0 %, coverage {a['coverage_pct']:.0f} %, the order changed at {n_changed} of "
        f"{n_bounds} epoch boundaries; replicas identical after training"
    )


# ---- 02: the data ---------------------------------------------------------------------------------------------
DUMP_ARTICLES, DUMP_SEED = 200, 7  # the check's crawl: the same generator as the notebooks, a seed they do not use
MOJIBAKE_KINDS = ("U+FFFD", "mojibake", "control chars")  # damaged text
MARKUP_KINDS = ("JavaScript", "CSS", "HTML tags")  # page code left in the text
MAX_BAD_SHARE = 0.01  # of the records returned, per kind of damage (ftfy's heuristic may flag a rare clean text)
MIN_KEPT = 0.7  # of the records a correct cleaner keeps


def prepare_02(out: Path) -> dict:
    from labkit.corpus import generate
    from labkit.corpus.dump import write_dump

    info = write_dump(generate(DUMP_ARTICLES, seed=DUMP_SEED), out / "dump", seed=DUMP_SEED)
    return {
        "kwargs": {"crawl_dir": str(info.crawl_dir)},
        "n_records": info.n_records,
        "n_clean": info.expected.get("clean", 0),
    }


def _shown(record: dict, n: int = 50) -> str:
    title, body = str(record.get("title") or ""), str(record.get("body") or "")
    return f"title {title[:n]!r}{'...' if len(title) > n else ''}, body {body[:n]!r}{'...' if len(body) > n else ''}"


def cleaning_audit(records: list[dict]) -> dict:
    """Notebook 01's instruments on what a loader returned: noise flags and field-length outliers per record."""
    from labkit.corpus import inspection as ins

    flags = ins.noise_flags(records)
    lengths = ins.field_lengths(records)
    return {
        "records": len(records),
        "mojibake": [i for i in range(len(records)) if flags.loc[i, list(MOJIBAKE_KINDS)].any()],
        "markup": [i for i in range(len(records)) if flags.loc[i, list(MARKUP_KINDS)].any()],
        "outliers": {i: v for i, v in enumerate(lengths["outlier"]) if v != "ok"},
    }


def _damage_hint(records: list[dict], damaged: list[int], n: int) -> str:
    """What kind of damaged text the loader kept (U+FFFD, latin-1 mojibake, control characters), most common first."""
    from labkit.corpus import inspection as ins

    flags = ins.noise_flags([records[i] for i in damaged])
    kinds = {
        "U+FFFD": (
            "U+FFFD where bytes were thrown away: decoding every file as UTF-8 with errors='replace' destroys "
            "GBK/Big5/UTF-16 text -- decode by the real encoding (BOM, strict UTF-8, a detector) and reject what "
            "still carries U+FFFD"
        ),
        "mojibake": ("UTF-8 read as latin-1 (æ–°é—») that nobody repaired -- ftfy undoes it (labkit.cleaning.repair)"),
        "control chars": "control characters -- strip them",
    }
    counts = {k: int(flags[k].sum()) for k in kinds}
    order = sorted((k for k in kinds if counts[k]), key=lambda k: -counts[k])
    first = next(i for i, row in zip(damaged, flags[order[0]]) if row)
    parts = "; ".join(f"{counts[k]} with {kinds[k]}" for k in order)
    return (
        f"{len(damaged)} of {n} records carry damaged text, e.g. {_shown(records[first])}: {parts}. labkit.cleaning "
        "does all of it (clean_paths, or readers + validate.clean_record)"
    )


def grade_02(run: Run) -> bool:
    records = run.context.get("records")
    if records is None:
        fail("main(...) must return the records it trained on: a list of dicts with 'title' and 'body'")
    if not records:
        fail("your loader kept no record at all: a cleaner that throws everything away is not a cleaner")
    a = cleaning_audit(records)
    n, limit = a["records"], max(1, int(MAX_BAD_SHARE * a["records"]))
    if len(a["mojibake"]) > limit:
        fail(_damage_hint(records, a["mojibake"], n))
    if len(a["markup"]) > limit:
        r = records[a["markup"][0]]
        fail(
            f"{len(a['markup'])} of {n} records still carry script/style code or tags, e.g. {_shown(r)}. The "
            "regex <script.*?>.*?</script> has no re.DOTALL and no re.IGNORECASE: multi-line and <SCRIPT> blocks "
            "slip through. Extract the text with an HTML parser (or labkit.cleaning)"
        )
    if len(a["outliers"]) > limit:
        kinds = sorted(set(a["outliers"].values()))
        i = next(iter(a["outliers"]))
        fail(
            f"{len(a['outliers'])} of {n} records have fields out of shape ({', '.join(kinds)}; titles must be 10-60 "
            f"characters, bodies at least 50), e.g. {_shown(records[i])}. A CSV row with a column too many or too "
            "few shifts every field (the title becomes a category or the body, the body a URL), and a swapped row "
            "puts the body in the title: check each row's fields (reject misaligned rows, swap back swapped ones) "
            "and reject titles that are missing, too short or too long"
        )
    want = run.context.get("n_clean", 0)
    if n < MIN_KEPT * want:
        fail(
            f"clean now, but your loader kept only {n} records where a correct cleaner keeps {want}: it throws away "
            "good data (a whole container, or every record with a repairable defect)"
        )
    return passed(
        f"the cleaning audit on the {n} records you trained on: {len(a['mojibake'])} with mojibake/U+FFFD, "
        f"{len(a['markup'])} with script/markup, {len(a['outliers'])} with fields out of shape; a correct cleaner "
        f"keeps {want} of this crawl's {run.context.get('n_records')} records"
    )


# ---- 04: the launch ---------------------------------------------------------------------------------------
def _joined(run: Run) -> dict[int, dict]:
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


def _id_overlap(run: Run) -> dict:
    """The data audit over example ids (a list sliced per rank is a new list: indices would not compare)."""
    from labkit.distributed import audit

    ranks = {r: {"samples": rep.get("sample_ids") or []} for r, rep in sorted(run.ranks.items())}
    if not all(ranks[r]["samples"] and all(i is not None for e in ranks[r]["samples"] for i in e) for r in ranks):
        fail("the check saw no examples drawn from a DataLoader on some rank: keep the DataLoader over the examples")
    union = len({i for v in ranks.values() for e in v["samples"] for i in e})
    return audit.data_audit({r: {"samples": v["samples"], "dataset_size": union} for r, v in ranks.items()})


def _doctor(text: str, codes: tuple[str, ...]) -> list:
    """`labkit doctor script`'s findings of `codes` on the learner's script (its entry called, as a file would)."""
    from labkit.doctor.script import check_source

    if "__main__" not in text:
        text += '\n\nif __name__ == "__main__":\n    main()\n'
    return [f for f in check_source(text, "your script") if f.code in codes]


def grade_04(run: Run) -> bool:
    from labkit.distributed import audit

    la = audit.launch_audit(_joined(run))
    inited = [bool((rep.get("joined") or {}).get("initialized")) for rep in run.ranks.values()]
    if not any(inited):
        alone = (
            f"the launch audit: {la['processes']} processes started and each one is alone -- world size "
            f"{la['world_size']}, ranks seen {la['ranks_seen']}, no process group"
        )
        if _id_overlap(run)["overlap_pct"] == 0:
            fail(
                f"{alone}. Each process now takes its own half of the data, but nothing called init_process_group: "
                "that is two single-process runs. Call torch.distributed.init_process_group(...) (it reads RANK and "
                "WORLD_SIZE from torchrun's environment) and wrap the model in DistributedDataParallel"
            )
        fail(
            f"{alone}. torchrun passes no --local_rank (it stays 0 in every process) and nothing called "
            "init_process_group: read LOCAL_RANK (RANK, WORLD_SIZE) from the environment and call "
            "torch.distributed.init_process_group(...) before building the model"
        )
    if not la["distributed"]:
        fail(
            f"the launch audit: world size {la['world_size']}, ranks seen {la['ranks_seen']}: the processes did not "
            "join one process group of 2 -- let init_process_group read RANK/WORLD_SIZE from torchrun's environment"
        )
    data = _id_overlap(run)
    if data["overlap_pct"] > 0:
        fail(
            f"one process group now, but the ranks trained on the same examples (overlap {data['overlap_pct']:.0f} %): "
            "the shard still comes from --local_rank, which is 0 in every process under torchrun. Take the rank "
            "from the process group (dist.get_rank()) or the environment, or use a DistributedSampler"
        )
    rep = _replicas(run)
    if not rep["identical"].get("first_forward", True):
        fail(
            "the replica audit: the models differ already at the first forward pass -- wrap the model in "
            "DistributedDataParallel (it broadcasts rank 0's weights) before training"
        )
    if not rep["identical"].get("final", False):
        fail(
            "the replica audit: the two models differ after training -- each process trained its own copy. Wrap "
            "the model in DistributedDataParallel (after moving it to this rank's device) so every step averages "
            "the gradients of all ranks"
        )
    placed = _doctor(run.source, ("model_not_on_device", "legacy_launch"))
    if placed:
        f = placed[0]
        fail(
            f"it runs right on CPU, but labkit doctor script finds line {f.line}: {f.message} -- on a GPU node every "
            f"rank would pile onto one card. Fix: {f.fix}"
        )
    return passed(
        f"the launch audit: world size {la['world_size']}, ranks {la['ranks_seen']}, backend {la['backend']}; "
        "disjoint shards; the replica audit: identical at the first forward pass and after training"
    )


# ---- 07: the finale's loop -----------------------------------------------------------------------------------
def grade_07(run: Run) -> bool:
    from labkit.distributed import audit

    la = audit.launch_audit(_joined(run))
    if not la["distributed"]:
        fail(
            f"the launch audit: world size {la['world_size']}, ranks seen {la['ranks_seen']}: keep "
            "init_process_group -- the ranks must form one process group of 2"
        )
    data = _id_overlap(run)
    if data["overlap_pct"] > 0:
        fail(
            f"the data audit: the ranks' examples overlap ({data['overlap_pct']:.0f} %): keep the DistributedSampler "
            "(and set_epoch) -- each rank trains on its own shard"
        )
    rep = _replicas(run)
    if not rep["identical"].get("first_forward", True):
        fail(
            "the replica audit: the ranks' models differ already at the first forward pass: build them from the same "
            "seed, or let DistributedDataParallel broadcast rank 0's weights when it wraps the model"
        )
    if not rep["identical"].get("final", False):
        warned = any("autograd kernel was not registered" in line for line in run.log)
        fail(
            "the replica audit: the ranks' models start identical and differ after training -- every rank stepped "
            "with the gradients of its own shard only. Averaging the loss *value* averages nothing that backward "
            "sees: dist.all_reduce is not differentiable"
            + (" (torch even warned: 'c10d::allreduce_: an autograd kernel was not registered')" if warned else "")
            + ". Wrap the model in DistributedDataParallel (it all-reduces the gradients during backward), or "
            "all-reduce every parameter's .grad and divide by the world size before optimizer.step()"
        )
    return passed(
        f"the launch audit: one process group of {la['world_size']}; the data audit: disjoint shards; the replica "
        "audit: identical at the first forward pass and after training -- the ranks trained one model"
    )


# ---- 06: exploding gradients ---------------------------------------------------------------------------------
CLIP_LIMIT = 2.0  # the largest gradient norm a repaired step may apply (the notebook's recipe clips at 1.0)
MIN_STEPS = 10


def _monitor_line(verdict: dict | None) -> str:
    """The grad-norm monitor's verdict in one clause (which layer spiked first, on which batch)."""
    if not verdict:
        return ""
    nf, sp = verdict.get("first_nonfinite"), verdict.get("first_spike")
    if nf:
        return f"the grad-norm monitor: the first non-finite {nf['where']} at step {nf['step']}"
    if not sp:
        return "the grad-norm monitor saw no layer spike"
    hostile = [i for i in sp.get("ids", []) if str(i).startswith("hostile")]
    return (
        f"the grad-norm monitor: the first spike at step {sp['step']} in {sp['layer']}, {sp['factor']:.0f}x its "
        f"moving baseline" + (f", on a batch holding the crawl accident {hostile[0]}" if hostile else "")
    )


def grade_06(run: Run) -> bool:
    import math

    rep = run.ranks[0]
    steps, losses = rep.get("steps", []), rep.get("losses", [])
    if len(steps) < MIN_STEPS or not all("pre_clip_norm" in s for s in steps):
        fail(
            f"the check saw {len(steps)} optimizer steps after loss.backward() (at least {MIN_STEPS} needed): keep "
            "fit(...) running its steps -- backward, then optimizer.step()"
        )
    bad = [i for i, x in enumerate(losses) if not math.isfinite(x)]
    unclipped = [s for s in steps if s["applied_norm"] > CLIP_LIMIT * 1.001]
    large = [s for s in steps if s["pre_clip_norm"] > CLIP_LIMIT]
    monitor = _monitor_line(rep.get("monitor"))
    if unclipped:
        worst = max(unclipped, key=lambda s: s["applied_norm"])
        fail(
            f"the optimizer applied a gradient of norm {worst['applied_norm']:.3g} at step {worst['step']} "
            f"({len(unclipped)} of {len(steps)} steps above {CLIP_LIMIT:g}){'; ' + monitor if monitor else ''}. "
            "Nothing bounds what one bad batch (or the untrained model's first step) does to the weights: clip "
            "between backward() and step(), at a norm that acts -- the recipe's "
            "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"
        )
    lrs = [s["lr"] for s in steps]
    peak = max(lrs)
    if lrs[0] > 0.5 * peak:
        fail(
            f"every gradient is clipped now, but the first optimizer step already ran at lr={lrs[0]:g}, the full "
            f"learning rate (peak {peak:g}): Adam's first steps, with no history in its moment estimates, are the "
            "largest and least informed. Warm up: e.g. LinearLR(optimizer, start_factor=0.01, total_iters=W) or a "
            "LambdaLR ramp, stepped once per optimizer step"
        )
    if bad:
        fail(f"clipped and warmed up, but the loss went non-finite at step {bad[0]}: {monitor}")
    if not large:
        fail(
            f"no step produced a gradient above {CLIP_LIMIT:g} before clipping, so the check cannot see your clipping "
            "act: keep the data as it was (the crawl accidents included) -- the repair belongs in the loop"
        )
    return passed(
        f"{len(large)} of {len(steps)} steps had a gradient norm above {CLIP_LIMIT:g} before clipping (up to "
        f"{max(s['pre_clip_norm'] for s in steps):.3g}); the optimizer applied at most "
        f"{max(s['applied_norm'] for s in steps):.3g}; the learning rate rose from {lrs[0]:.2g} to {peak:.2g}; "
        "the loss stayed finite"
    )


# ---- the table ----------------------------------------------------------------------------------------------
EXERCISES: dict[str, Exercise] = {
    "02": Exercise(
        "02",
        "02_cleaning_pipeline",
        "exercise02_crawl_to_pairs.py",
        1,
        {"steps": 2},
        "a loader that keeps mojibake, script noise and misaligned CSV fields (and trains on them)",
        grade_02,
        prepare_02,
    ),
    "04": Exercise(
        "04",
        "04_launching_ddp",
        "exercise04_train_argparse.py",
        2,
        {"argv": ["--steps", "4"]},
        "a --local_rank argparse script that never joins a process group or picks its device",
        grade_04,
    ),
    "06": Exercise(
        "06",
        "06_exploding_gradients",
        "exercise06_title_loop.py",
        1,
        {"steps": 24, "batch_size": 8},
        "no gradient clipping and no warmup, on a crawl with a few accidents in it",
        grade_06,
    ),
    "07": Exercise(
        "07",
        "07_multitask_distributed_training",
        "exercise07_multitask_loop.py",
        2,
        {"epochs": 2, "n_articles": 8, "batch_size": 4},
        "the model is never wrapped: the loss is all-reduced instead of the gradients, so the replicas drift apart",
        grade_07,
    ),
    "05": Exercise(
        "05",
        "05_samplers_and_seeds",
        "exercise05_sharded_trainer.py",
        2,
        {"epochs": 3, "n_articles": 16, "batch_size": 4},
        "a hand-made split shuffled with a per-rank seed: shards overlap and leave gaps",
        grade_05,
    ),
}


def exercise(exercise_id: str) -> Exercise:
    key = str(exercise_id).strip().split(".")[0].zfill(2)
    if key not in EXERCISES:
        raise KeyError(f"no find-and-fix exercise {exercise_id!r}: choose one of {sorted(EXERCISES)}")
    return EXERCISES[key]
