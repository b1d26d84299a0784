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

Each notebook's grader lives beside that notebook's checks (`labkit.exercises.nbNN.grade_fix`); this module runs
the script and holds the table.

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

from labkit.exercises import UNANSWERED, fail

# each notebook's grader lives beside that notebook's checks (labkit.exercises.nbNN.grade_fix); the table names
# them, and `transfer.grade_05` ... stay importable
from labkit.exercises.nb02 import grade_fix as grade_02
from labkit.exercises.nb02 import prepare_fix as prepare_02
from labkit.exercises.nb04 import grade_fix as grade_04
from labkit.exercises.nb05 import grade_fix as grade_05
from labkit.exercises.nb06 import grade_fix as grade_06
from labkit.exercises.nb07 import grade_fix as grade_07
from labkit.i18n import _

HARNESS = "labkit.exercises.harness"
TIMEOUT_S = 150.0  # per check: a learner's script that hangs (a collective one rank never reaches) is stopped
# ... and sooner, once every rank runs the learner's code and the job has sat idle this long (its processes using
# under 5 % of a core: the launcher's StallWatch); a learner's training loop never rests that long
STALL_S = 20.0


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
    from labkit.paths import data_dir

    return data_dir() / "scripts"


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
                stall_s=STALL_S,
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
