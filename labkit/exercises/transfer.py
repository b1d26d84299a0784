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
from labkit.i18n import _
from labkit.training.monitor import SPIKE_FACTOR

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
        raise FileNotFoundError(
            _("{path} is missing: the exercise scripts ship in data_samples/scripts/").format(path=path)
        )
    return path.read_text(encoding="utf-8")


def show(exercise_id: str) -> str:
    """Print the script with line numbers (and return its text)."""
    text = source(exercise_id)
    ex = exercise(exercise_id)
    print(
        _("# {path}  ({notebook}: find the pitfall, repair it, keep main(...))").format(
            path=script_path(exercise_id), notebook=ex.notebook
        )
    )
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
    return f"{body}\n\n\n{answer_name(exercise_id)} = main  # {_('the check runs this main')}\n"


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
    head = (
        _("# {script}: find this notebook's pitfall, repair it here, run the cell, then the check").format(
            script=exercise(exercise_id).script
        )
        + "\n"
    )
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
            fail(
                _("{path} does not exist: pass the repaired script's path, its text, or its main function").format(
                    path=path
                )
            )
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
            fail(
                _("cannot read the source of {answer}: pass the repaired script's text or its path instead").format(
                    answer=repr(answer)
                )
            )
    else:
        fail(
            _("expected the repaired script (its main function, its text or its path), got {type}").format(
                type=type(answer).__name__
            )
        )
    if _is_placeholder(text):
        fail(_(UNANSWERED) + _(" (transfer.load(...) puts the script into the cell)"))
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        fail(_("your script does not parse: line {line}: {error}").format(line=exc.lineno, error=exc.msg))
    if not any(isinstance(n, ast.FunctionDef) and n.name == entry for n in tree.body):
        fail(_("the script has no top-level `def {entry}(...)`: keep it -- the check calls it").format(entry=entry))
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
            run.ranks = read_reports(out)[0]
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
        fail(
            _("the check could not start its processes (not your script's fault): {reason}").format(
                reason=run.not_started
            )
        )
    if run.errors:
        rank, err = next(iter(run.errors.items()))
        where = _(" at line {line} (`{code}`)").format(line=err["line"], code=err["code"]) if err.get("line") else ""
        who = _(" on rank {rank}").format(rank=rank) if run.exercise.nproc > 1 else ""
        fail(
            _("your script raised {error}{who}{where}: {message}").format(
                error=err["type"], who=who, where=where, message=err["message"]
            )
        )
    if run.timeout:
        fail(
            _(
                "your script did not finish: {timeout}. A rank waiting in a collective (all_reduce, barrier, DDP's "
                "backward) that another rank never reaches hangs forever"
            ).format(timeout=run.timeout)
        )
    if not run.ok:
        fail(_("your script's processes did not complete (the last lines: {tail})").format(tail=repr(run.tail())))
    missing = [r for r in range(run.exercise.nproc) if r not in run.ranks]
    if missing:
        fail(_("rank(s) {missing} never reported: did the script exit early?").format(missing=missing))


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
            _(
                "the check saw fewer than 2 epochs of a DataLoader on some rank: keep one DataLoader pass over the "
                "examples per epoch (the data audit reads the indices it hands out)"
            )
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
            _(
                "the data audit: overlap {overlap:.0f} %, work factor {work_factor:.1f} -- every rank trained on every "
                "example, so the ranks repeat each other's work. Give each rank its own shard: "
                "DistributedSampler(dataset, num_replicas=world, rank=rank, seed=seed)"
            ).format(overlap=a["overlap_pct"], work_factor=a["work_factor"])
        )
    if a["overlap_pct"] > 0 or a["missing"] > 0:
        e = _first_bad_epoch(a, "overlap_pct")
        fail(
            _(
                "the data audit: in epoch {epoch} the ranks' shards overlap ({overlap:.0f} % of the examples seen were "
                "seen by more than one rank) and {missing} of {size} examples were never seen. Each rank shuffled "
                "with its own seed, so 'every N-th example of my shuffle' is not a partition: shuffle with the same "
                "seed on every rank (plus the epoch), or use DistributedSampler + set_epoch"
            ).format(epoch=e["epoch"], overlap=e["overlap_pct"], missing=e["missing"], size=a["dataset_size"])
        )
    if n_changed == 0:
        fail(
            _(
                "the data audit: disjoint and complete, but the order changed at 0 of {boundaries} epoch boundaries -- "
                "every epoch replays the same order. Put the epoch into the shuffle's seed (DistributedSampler: "
                "sampler.set_epoch(epoch) at the start of every epoch)"
            ).format(boundaries=n_bounds)
        )
    if n_changed < n_bounds:
        fail(
            _(
                "the data audit: the order changed at only {changed} of {boundaries} (rank x epoch) boundaries: "
                "reshuffle at the start of every epoch, before the epoch's batches are drawn"
            ).format(changed=n_changed, boundaries=n_bounds)
        )
    rep = _replicas(run)
    if not rep["identical"].get("final", True):
        fail(_("the data split is right now, but the replicas differ after training: keep the model wrapped in DDP"))
    return passed(
        _(
            "the data audit: overlap 0 %, coverage {coverage:.0f} %, the order changed at {changed} of {boundaries} "
            "epoch boundaries; replicas identical after training"
        ).format(coverage=a["coverage_pct"], changed=n_changed, boundaries=n_bounds)
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
    return _("title {title}, body {body}").format(
        title=repr(title[:n]) + ("..." if len(title) > n else ""),
        body=repr(body[:n]) + ("..." if len(body) > n else ""),
    )


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
        "U+FFFD": _(
            "U+FFFD where bytes were thrown away: decoding every file as UTF-8 with errors='replace' destroys "
            "GBK/Big5/UTF-16 text -- decode by the real encoding (BOM, strict UTF-8, a detector) and reject what "
            "still carries U+FFFD"
        ),
        "mojibake": _("UTF-8 read as latin-1 (æ–°é—») that nobody repaired -- ftfy undoes it (labkit.cleaning.repair)"),
        "control chars": _("control characters -- strip them"),
    }
    counts = {k: int(flags[k].sum()) for k in kinds}
    order = sorted((k for k in kinds if counts[k]), key=lambda k: -counts[k])
    first = next(i for i, row in zip(damaged, flags[order[0]]) if row)
    parts = _("; ").join(_("{count} with {kind}").format(count=counts[k], kind=kinds[k]) for k in order)
    return _(
        "{damaged} of {n} records carry damaged text, e.g. {example}: {parts}. labkit.cleaning does all of it "
        "(clean_paths, or readers + validate.clean_record)"
    ).format(damaged=len(damaged), n=n, example=_shown(records[first]), parts=parts)


def grade_02(run: Run) -> bool:
    records = run.context.get("records")
    if records is None:
        fail(_("main(...) must return the records it trained on: a list of dicts with 'title' and 'body'"))
    if not records:
        fail(_("your loader kept no record at all: a cleaner that throws everything away is not a cleaner"))
    a = cleaning_audit(records)
    n, limit = a["records"], max(1, int(MAX_BAD_SHARE * a["records"]))
    if len(a["mojibake"]) > limit:
        fail(_damage_hint(records, a["mojibake"], n))
    if len(a["markup"]) > limit:
        r = records[a["markup"][0]]
        fail(
            _(
                "{count} of {n} records still carry script/style code or tags, e.g. {example}. The regex "
                "<script.*?>.*?</script> has no re.DOTALL and no re.IGNORECASE: multi-line and <SCRIPT> blocks slip "
                "through. Extract the text with an HTML parser (or labkit.cleaning)"
            ).format(count=len(a["markup"]), n=n, example=_shown(r))
        )
    if len(a["outliers"]) > limit:
        kinds = sorted(set(a["outliers"].values()))
        i = next(iter(a["outliers"]))
        fail(
            _(
                "{count} of {n} records have fields out of shape ({kinds}; titles must be 10-60 characters, bodies at "
                "least 50), e.g. {example}. A CSV row with a column too many or too few shifts every field (the title "
                "becomes a category or the body, the body a URL), and a swapped row puts the body in the title: check "
                "each row's fields (reject misaligned rows, swap back swapped ones) and reject titles that are "
                "missing, too short or too long"
            ).format(count=len(a["outliers"]), n=n, kinds=", ".join(kinds), example=_shown(records[i]))
        )
    want = run.context.get("n_clean", 0)
    if n < MIN_KEPT * want:
        fail(
            _(
                "clean now, but your loader kept only {n} records where a correct cleaner keeps {want}: it throws away "
                "good data (a whole container, or every record with a repairable defect)"
            ).format(n=n, want=want)
        )
    return passed(
        _(
            "the cleaning audit on the {n} records you trained on: {mojibake} with mojibake/U+FFFD, {markup} with "
            "script/markup, {outliers} with fields out of shape; a correct cleaner keeps {want} of this crawl's "
            "{records} records"
        ).format(
            n=n,
            mojibake=len(a["mojibake"]),
            markup=len(a["markup"]),
            outliers=len(a["outliers"]),
            want=want,
            records=run.context.get("n_records"),
        )
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
        fail(_("the check saw no examples drawn from a DataLoader on some rank: keep the DataLoader over the examples"))
    union = len({i for v in ranks.values() for e in v["samples"] for i in e})
    return audit.data_audit({r: {"samples": v["samples"], "dataset_size": union} for r, v in ranks.items()})


def _doctor(text: str, codes: tuple[str, ...]) -> list:
    """`labkit doctor script`'s findings of `codes` on the learner's script (its entry called, as a file would)."""
    from labkit.doctor.script import check_source

    if "__main__" not in text:
        text += '\n\nif __name__ == "__main__":\n    main()\n'
    return [f for f in check_source(text, "your script") if f.code in codes]


def _placed(run: Run, codes: tuple[str, ...] = ("model_not_on_device",)) -> None:
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


def grade_04(run: Run) -> bool:
    from labkit.distributed import audit

    la = audit.launch_audit(_joined(run))
    inited = [bool((rep.get("joined") or {}).get("initialized")) for rep in run.ranks.values()]
    if not any(inited):
        alone = _(
            "the launch audit: {processes} processes started and each one is alone -- world size {world_size}, ranks "
            "seen {ranks_seen}, no process group"
        ).format(processes=la["processes"], world_size=la["world_size"], ranks_seen=la["ranks_seen"])
        if _id_overlap(run)["overlap_pct"] == 0:
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
    if not la["distributed"]:
        fail(
            _(
                "the launch audit: world size {world_size}, ranks seen {ranks_seen}: the processes did not join one "
                "process group of 2 -- let init_process_group read RANK/WORLD_SIZE from torchrun's environment"
            ).format(world_size=la["world_size"], ranks_seen=la["ranks_seen"])
        )
    data = _id_overlap(run)
    if data["overlap_pct"] > 0:
        fail(
            _(
                "one process group now, but the ranks trained on the same examples (overlap {overlap:.0f} %): the "
                "shard still comes from --local_rank, which is 0 in every process under torchrun. Take the rank from "
                "the process group (dist.get_rank()) or the environment, or use a DistributedSampler"
            ).format(overlap=data["overlap_pct"])
        )
    rep = _replicas(run)
    if not rep["identical"].get("first_forward", True):
        fail(
            _(
                "the replica audit: the models differ already at the first forward pass -- wrap the model in "
                "DistributedDataParallel (it broadcasts rank 0's weights) before training"
            )
        )
    if not rep["identical"].get("final", False):
        fail(
            _(
                "the replica audit: the two models differ after training -- each process trained its own copy. Wrap "
                "the model in DistributedDataParallel (after moving it to this rank's device) so every step averages "
                "the gradients of all ranks"
            )
        )
    _placed(run, ("model_not_on_device", "legacy_launch"))
    return passed(
        _(
            "the launch audit: world size {world_size}, ranks {ranks_seen}, backend {backend}; disjoint shards; the "
            "replica audit: identical at the first forward pass and after training"
        ).format(world_size=la["world_size"], ranks_seen=la["ranks_seen"], backend=la["backend"])
    )


# ---- 07: the finale's loop -----------------------------------------------------------------------------------
def grade_07(run: Run) -> bool:
    from labkit.distributed import audit

    la = audit.launch_audit(_joined(run))
    if not la["distributed"]:
        fail(
            _(
                "the launch audit: world size {world_size}, ranks seen {ranks_seen}: keep init_process_group -- the "
                "ranks must form one process group of 2"
            ).format(world_size=la["world_size"], ranks_seen=la["ranks_seen"])
        )
    data = _id_overlap(run)
    if data["overlap_pct"] > 0:
        fail(
            _(
                "the data audit: the ranks' examples overlap ({overlap:.0f} %): keep the DistributedSampler (and "
                "set_epoch) -- each rank trains on its own shard"
            ).format(overlap=data["overlap_pct"])
        )
    rep = _replicas(run)
    if not rep["identical"].get("first_forward", True):
        fail(
            _(
                "the replica audit: the ranks' models differ already at the first forward pass: build them from the "
                "same seed, or let DistributedDataParallel broadcast rank 0's weights when it wraps the model"
            )
        )
    if not rep["identical"].get("final", False):
        warned = any("autograd kernel was not registered" in line for line in run.log)
        fail(
            _(
                "the replica audit: the ranks' models start identical and differ after training -- every rank "
                "stepped with the gradients of its own shard only. Averaging the loss *value* averages nothing that "
                "backward sees: dist.all_reduce is not differentiable"
            )
            + (_(" (torch even warned: 'c10d::allreduce_: an autograd kernel was not registered')") if warned else "")
            + _(
                ". Wrap the model in DistributedDataParallel (it all-reduces the gradients during backward), or "
                "all-reduce every parameter's .grad and divide by the world size before optimizer.step()"
            )
        )
    _placed(run)
    return passed(
        _(
            "the launch audit: one process group of {world_size}; the data audit: disjoint shards; the replica audit: "
            "identical at the first forward pass and after training -- the ranks trained one model"
        ).format(world_size=la["world_size"])
    )


# ---- 06: exploding gradients ---------------------------------------------------------------------------------
# Two repairs are right, the two notebook 06 measures: a learning rate low enough that the grad-norm monitor sees no
# layer spike (section 3's `+ lr 3e-3` row ends lowest), or what the loop lacks -- clipping and a warmup (the
# recipe's insurance). Either way the run must still learn.
CLIP_LIMIT = 2.0  # the largest gradient norm a clipped step may apply (the notebook's recipe clips at 1.0)
MIN_STEPS = 10
LEARNS = 0.85  # the mean loss of the last 4 steps must end below this share of the first step's (shipped: ~0.73)


def _monitor_line(verdict: dict | None) -> str:
    """The grad-norm monitor's verdict in one clause (which layer spiked first, on which batch)."""
    if not verdict:
        return ""
    nf, sp = verdict.get("first_nonfinite"), verdict.get("first_spike")
    if nf:
        return _("the grad-norm monitor: the first non-finite {where} at step {step}").format(
            where=nf["where"], step=nf["step"]
        )
    if not sp:
        return _("the grad-norm monitor saw no layer spike")
    hostile = [i for i in sp.get("ids", []) if str(i).startswith("hostile")]
    return _(
        "the grad-norm monitor: the first spike at step {step} in {layer}, {factor:.0f}x its moving baseline"
    ).format(step=sp["step"], layer=sp["layer"], factor=sp["factor"]) + (
        _(", on a batch holding the crawl accident {id}").format(id=hostile[0]) if hostile else ""
    )


def grade_06(run: Run) -> bool:
    import math
    import statistics

    rep = run.ranks[0]
    steps, losses = rep.get("steps", []), rep.get("losses", [])
    if len(steps) < MIN_STEPS or not all("pre_clip_norm" in s for s in steps):
        fail(
            _(
                "the check saw {steps} optimizer steps after loss.backward() (at least {min_steps} needed): keep "
                "fit(...) running its steps -- backward, then optimizer.step()"
            ).format(steps=len(steps), min_steps=MIN_STEPS)
        )
    verdict = rep.get("monitor") or {}
    monitor = _monitor_line(verdict)
    bad = [i for i, x in enumerate(losses) if not math.isfinite(x)]
    if bad:
        fail(
            _(
                "the loss went non-finite at step {step}: {monitor}. Lower the learning rate, or clip and warm up"
            ).format(step=bad[0] + 1, monitor=monitor)
        )
    first, end = losses[0], statistics.fmean(losses[-4:])
    lrs = [s["lr"] for s in steps]
    peak = max(lrs)
    if end > LEARNS * first:
        fail(
            _(
                "the loss fell only from {first:.2f} to {end:.2f} (the mean of the last 4 steps): at a peak learning "
                "rate of {peak:g} the run no longer learns in {steps} steps -- lower the learning rate until the spikes "
                "stop, not until the training does (the notebook's `+ lr 3e-3` row learns)"
            ).format(first=first, end=end, peak=peak, steps=len(steps))
        )
    n_spikes = verdict.get("n_spikes", 0)
    unclipped = [s for s in steps if s["applied_norm"] > CLIP_LIMIT * 1.001]
    large = [s for s in steps if s["pre_clip_norm"] > CLIP_LIMIT]
    warm = lrs[0] <= 0.5 * peak
    learned = _("the loss fell from {first:.2f} to {end:.2f}").format(first=first, end=end)
    clipped = not unclipped and warm and large  # the insurance recipe: every step bounded, warmed up, seen to act
    if n_spikes == 0 and not clipped:
        return passed(
            _(
                "the grad-norm monitor saw no layer spike in {steps} steps (the largest jump: {factor:.1f}x a layer's "
                "moving baseline, a spike is over {limit:g}x) at a peak learning rate of {peak:g}; {learned}"
            ).format(
                steps=len(steps),
                factor=verdict.get("max_factor", 0.0),
                limit=SPIKE_FACTOR,
                peak=peak,
                learned=learned,
            )
        )
    spikes = _("{monitor} (layer spikes in {steps} steps: {n})").format(monitor=monitor, n=n_spikes, steps=len(steps))
    if unclipped:
        worst = max(unclipped, key=lambda s: s["applied_norm"])
        fail(
            _(
                "{spikes}; the optimizer applied a gradient of norm {norm:.3g} at step {step}. Nothing bounds these "
                "steps: with AdamW every weight moves by about lr per step whatever the gradient (exercise 3). Lower "
                "the learning rate (peak {peak:g} now) until the monitor sees no spike -- the notebook's `+ lr 3e-3` "
                "row -- or give the loop what it lacks{warmup}: torch.nn.utils.clip_grad_norm_(model.parameters(), "
                "1.0) between backward() and step()"
            ).format(
                spikes=spikes,
                norm=worst["applied_norm"],
                step=worst["step"],
                peak=peak,
                warmup="" if warm else _(", a warmup and clipping"),
            )
        )
    if not warm:
        fail(
            _(
                "{spikes}. Every gradient is clipped now, but the first optimizer step already ran at lr={lr:g}, the "
                "full learning rate (peak {peak:g}): Adam's first steps, with no history in its moment estimates, are "
                "the largest and least informed. Warm up (e.g. LinearLR(optimizer, start_factor=0.01, total_iters=W), "
                "stepped once per optimizer step), or lower the learning rate until the monitor sees no spike"
            ).format(spikes=spikes, lr=lrs[0], peak=peak)
        )
    if not large:
        fail(
            _(
                "no step produced a gradient above {limit:g} before clipping, so the check cannot see your clipping "
                "act: keep the data as it was (the crawl accidents included) -- the repair belongs in the loop"
            ).format(limit=CLIP_LIMIT)
        )
    seen = (
        _("The monitor saw no layer spike")
        if n_spikes == 0
        else _(
            "The monitor still saw {n} layer spike(s) (clipping bounds what they do to the weights; a lower "
            "learning rate, the fix exercise 3 makes first, removes them)"
        ).format(n=n_spikes)
    )
    return passed(
        _(
            "{large} of {steps} steps had a gradient norm above {limit:g} before clipping (up to {max_pre:.3g}); the "
            "optimizer applied at most {max_applied:.3g}; the learning rate rose from {lr_first:.2g} to {peak:.2g}; "
            "{learned}. {seen}"
        ).format(
            large=len(large),
            steps=len(steps),
            limit=CLIP_LIMIT,
            max_pre=max(s["pre_clip_norm"] for s in steps),
            max_applied=max(s["applied_norm"] for s in steps),
            lr_first=lrs[0],
            peak=peak,
            learned=learned,
            seen=seen,
        )
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
        "a learning rate AdamW takes too far, with no clipping and no warmup, on a crawl with a few accidents in it",
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
        raise KeyError(
            _("no find-and-fix exercise {exercise}: choose one of {choices}").format(
                exercise=repr(exercise_id), choices=sorted(EXERCISES)
            )
        )
    return EXERCISES[key]
