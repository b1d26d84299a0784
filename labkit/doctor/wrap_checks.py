"""`model_not_wrapped`: a process group joined and an optimizer stepped, but nothing shares the gradients.

`torchrun` starts N copies of the script; `init_process_group` lets them talk.  Only a wrapper
(DistributedDataParallel, FSDP, `accelerator.prepare`, Fabric, a DeepSpeed engine) or a gradient
all-reduce written by hand makes them train one model: without either, every rank steps its own
copy on its own shard, and the "distributed" run is N unrelated runs.  The same happens when the
script wraps the model and then takes it back out (`model = model.module`) before training through
it.  Where the script hands the model to a helper of its project that this file does not define,
the helper may wrap it: that is said as `unknown`, not claimed.
"""

from __future__ import annotations

import ast
import re

from labkit.doctor.ast_facts import Hit, ScriptFacts, guarded, unparse
from labkit.doctor.dataflow import (
    ALLREDUCE,
    grad_allreduces,
    hand_loop,
    joins_group,
    loop_evidence,
    model_of,
    optimizers,
    project_helper,
    wraps,
)
from labkit.doctor.frameworks import framework

NO_ALLREDUCE = (
    "no gradient all-reduce anywhere in the file (dist.all_reduce of the gradients, or a helper named for it)"
)
LOOKED_FOR = (
    "no wrapper (DistributedDataParallel, FSDP/fully_shard, accelerator.prepare, Fabric, deepspeed.initialize) "
    f"and {NO_ALLREDUCE}"
)


# a project helper named for setting the run up may wrap the model it makes (`model = setup_model(cfg)`)
SETUP_HELPER = re.compile(r"dist|parallel|wrap|ddp|fsdp|setup|prepare|engine|accelerat", re.I)


def _handed_to_helper(f: ScriptFacts) -> ast.Call | None:
    """`model = setup_model(args, model)`: the model goes through a helper of the project (defined elsewhere) and
    comes back, or is made by one named for setting the run up; the helper may wrap it."""
    models = model_of(f)
    for c in f.calls:
        parent = f.parents.get(c)
        if not (isinstance(parent, ast.Assign) and project_helper(f, c)):
            continue
        if not {unparse(t) for t in parent.targets} & models:
            continue
        passed = any(unparse(a) in models for a in c.args + [k.value for k in c.keywords])
        if passed or SETUP_HELPER.search(f.call_name(c).split(".")[-1]):
            return c
    return None


def check_model_not_wrapped(f: ScriptFacts) -> list[Hit]:
    """Every rank trains its own model: a process group is joined and an optimizer stepped, but the model is
    never wrapped (or is unwrapped before training) and no gradient is all-reduced."""
    if framework(f) != "torch":
        return []  # accelerate, Fabric, Lightning and HF's Trainer wrap the model themselves
    join, step = joins_group(f), hand_loop(f)
    if join is None or step is None or grad_allreduces(f) or guarded(f, step):
        return []  # (a step behind a rank test: one rank trains, the others serve it)
    found = wraps(f)
    if any(w.undone is None for w in found):
        return []
    why = [(join.lineno, f"`{unparse(join.func)}(...)` joins the process group")]
    if found:
        w = found[0]
        why += [(w.call.lineno, f"{w.what} wraps the model"), (w.undone.lineno, w.how_undone)]
        why += [*loop_evidence(f, step), (None, NO_ALLREDUCE)]
        return [
            Hit(
                w.undone.lineno,
                f"the model wrapped at line {w.call.lineno} is not what trains ({w.how_undone}): its gradients "
                "are never all-reduced, so every rank trains its own model",
                why=tuple(why),
            )
        ]
    why += loop_evidence(f, step)
    for c in f.calls_named(*ALLREDUCE):  # what the file does all-reduce, and why it is not the gradients
        if not f.dead(c):
            why.append((c.lineno, f"`{unparse(c)}` all-reduces a value, not the gradients"))
    helper = _handed_to_helper(f)
    if helper is not None:
        why.append((helper.lineno, f"`{unparse(helper.func)}(...)` is the project's own helper, not in this file"))
        return [
            Hit(
                helper.lineno,
                f"the model is handed to `{unparse(helper.func)}`, which this file does not define: whether it "
                "wraps the model for the process group joined at line "
                f"{join.lineno} is not known here",
                why=tuple(why),
                unknown=True,
            )
        ]
    made = [n for n, _ in optimizers(f).sources.values()]
    line = made[0].lineno if made else step.lineno
    why.append((None, LOOKED_FOR))
    return [
        Hit(
            line,
            f"the script joins a process group (line {join.lineno}) and steps an optimizer (line {step.lineno}) "
            "but never wraps the model nor all-reduces its gradients: every rank trains its own model",
            why=tuple(why),
        )
    ]
