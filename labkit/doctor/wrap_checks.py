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
from dataclasses import dataclass

from labkit.doctor.ast_facts import Hit, ScriptFacts, guarded, unparse
from labkit.doctor.dataflow import hand_loop, loop_evidence, model_of, optimizers, project_helper
from labkit.doctor.frameworks import framework

NO_ALLREDUCE = (
    "no gradient all-reduce anywhere in the file (dist.all_reduce of the gradients, or a helper named for it)"
)
LOOKED_FOR = (
    "no wrapper (DistributedDataParallel, FSDP/fully_shard, accelerator.prepare, Fabric, deepspeed.initialize) "
    f"and {NO_ALLREDUCE}"
)


# ---- the model's wrapper, and gradients all-reduced by hand ------------------------------------
# wrappers, and the parallelisms where a rank holds its own part of the model (pipeline stages, tensor-parallel
# layers, DTensor shards): none of them leaves a whole model training alone on each rank
WRAPPERS = (
    "DistributedDataParallel",
    "FullyShardedDataParallel",
    "ShardedDataParallel",
    "fully_shard",
    "replicate",
    "parallelize_module",
    "distribute_tensor",
    "distribute_module",
    "PipelineStage",
    "pipeline",
    "ColumnParallelLinear",
    "RowParallelLinear",
    "boost",  # colossalai's booster.boost(model, optimizer)
)
CLASS_WRAPPERS = ("DistributedDataParallel", "FullyShardedDataParallel")  # return a new module: can be dropped
WRAPPER_HELPER = re.compile(r"ddp|fsdp|wrap|parallel", re.I)  # a project's helper named for it wraps
ALLREDUCE = ("all_reduce", "all_reduce_coalesced", "allreduce", "reduce_scatter", "reduce_scatter_tensor")
GRAD_SYNC_HELPER = re.compile(
    r"(all_?reduce|average|avg|sync|reduce)_?\w*grad|grad\w*_(all_?reduce|sync|average)", re.I
)


@dataclass
class Wrap:
    call: ast.Call
    what: str  # how it wraps, in words
    undone: ast.AST | None = None  # where the wrapper is dropped again (`model = model.module`, never used)
    how_undone: str = ""


def _wrap_kind(f: ScriptFacts, c: ast.Call) -> str | None:
    name = f.call_name(c)
    last = name.split(".")[-1]
    if last in WRAPPERS:
        return f"`{unparse(c.func)}(...)`"
    if last == "prepare" and ("accelerate" in " ".join(f.aliases.values()) or "accelerator" in unparse(c.func).lower()):
        return f"`{unparse(c.func)}(...)` (accelerate wraps what it prepares)"
    if last in ("setup", "setup_module") and "fabric" in unparse(c.func).lower():
        return f"`{unparse(c.func)}(...)` (Fabric wraps what it sets up)"
    if name.endswith("deepspeed.initialize"):
        return "`deepspeed.initialize(...)` (the engine all-reduces)"
    if last in ("DistributedOptimizer", "register_comm_hook"):
        return f"`{unparse(c.func)}(...)` (all-reduces the gradients)"
    if last == "init_device_mesh":
        return f"`{unparse(c.func)}(...)` (DTensor parallelism over a device mesh)"
    if WRAPPER_HELPER.search(last) and project_helper(f, c):
        model = model_of(f)
        if any(unparse(a) in model for a in c.args) or (not model and c.args):
            return f"`{unparse(c.func)}(...)`, a helper named for it (this file does not define it)"
    return None


def _holder(f: ScriptFacts, c: ast.Call) -> ast.AST | None:
    parent = f.parents.get(c)
    if (
        isinstance(parent, ast.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0], (ast.Name, ast.Attribute))
    ):
        return parent.targets[0]
    return None


def _used_as_wrapper(f: ScriptFacts, holder: str, after: ast.AST) -> bool:
    """Is the wrapper in `holder` ever run (called, passed on, returned, aliased) rather than only looked into
    (`.module`, `.parameters()`, `.state_dict()`)? In the wrapping function only after the wrap."""
    for node in ast.walk(f.tree):
        if (
            not isinstance(node, (ast.Name, ast.Attribute))
            or unparse(node) != holder
            or not isinstance(node.ctx, ast.Load)
        ):
            continue
        if f.same_function(node, after) and node.lineno <= after.lineno:
            continue
        parent = f.parents.get(node)
        if isinstance(parent, ast.Attribute) and parent.attr != "forward" and parent.attr != "no_sync":
            continue  # model.module, model.parameters(), model.state_dict(): the wrapper is not run
        return True
    return False


def _undone(f: ScriptFacts, wrap: ast.Call, holder: ast.AST | None) -> tuple[ast.AST | None, str]:
    if holder is None:
        parent = f.parents.get(wrap)
        if isinstance(parent, ast.Expr):
            return wrap, "its result is thrown away"
        return None, ""
    text = unparse(holder)
    func = f.enclosing_function(wrap)
    for node in ast.walk(func or f.tree):
        if not (
            isinstance(node, ast.Assign) and node.lineno > wrap.lineno and any(unparse(t) == text for t in node.targets)
        ):
            continue
        value = node.value.body if isinstance(node.value, ast.IfExp) else node.value
        if isinstance(value, ast.Attribute) and value.attr == "module" and unparse(value.value) == text:
            return node, f"`{unparse(node)}` takes the bare model back out"
    if not _used_as_wrapper(f, text, wrap):
        return wrap, f"`{text}` is never run: the loop trains the bare model"
    return None, ""


def wraps(f: ScriptFacts) -> list[Wrap]:
    """Every call that wraps the model (or syncs its gradients for it), with where it is undone if it is."""
    out = []
    for c in f.calls:
        what = _wrap_kind(f, c)
        if what is None or f.dead(c):
            continue
        w = Wrap(c, what)
        if f.call_name(c).split(".")[-1] in CLASS_WRAPPERS:
            w.undone, w.how_undone = _undone(f, c, _holder(f, c))
        out.append(w)
    return out


def grad_allreduces(f: ScriptFacts) -> list[ast.Call]:
    """Gradients all-reduced by hand: `dist.all_reduce(p.grad)` (or in a loop over the parameters), or a helper
    named for it (`average_gradients(model)`, `apply_gradient_allreduce(model)`), or an all-reduce helper handed the
    gradients (`all_reduce_and_rescale_tensors(grads, 1)`). A loss averaged for the log is not."""
    out = []
    for c in f.calls:
        last = f.call_name(c).split(".")[-1]
        if f.dead(c):
            continue
        if GRAD_SYNC_HELPER.search(last):
            out.append(c)
        elif last in ALLREDUCE or re.search(r"all_?reduce", last, re.I):  # `all_reduce_and_rescale_tensors(grads)`
            context = [unparse(a) for a in c.args] + [
                unparse(a.iter) for a in f.ancestors(c) if isinstance(a, (ast.For, ast.comprehension))
            ]
            func = f.enclosing_function(c)
            if any(re.search(r"grad|param|bucket", t, re.I) for t in context) or (
                func is not None and re.search(r"grad", func.name, re.I)
            ):
                out.append(c)
    return out


JOIN = ("init_process_group", "init_distributed")  # (a device mesh is DTensor parallelism: see WRAPPERS)


# a project's helper named for joining (`set_dist(args)`, `init_distributed_mode(args)`, mmcv-style `init_dist`):
# the README's rule 4, a helper named for the concern does it
JOIN_HELPER = re.compile(r"^(init|setup|set_up|set|start)_?(dist|distributed|ddp)(_\w+)?$", re.I)


def joins_group(f: ScriptFacts) -> ast.Call | None:
    """The call that joins the process group (`dist.init_process_group`, `init_device_mesh`, or a project helper
    named for it), if any runs."""
    return next(
        (
            c
            for c in f.calls
            if not f.dead(c)
            and (
                f.call_name(c).split(".")[-1] in JOIN
                or (JOIN_HELPER.search(f.call_name(c).split(".")[-1]) and project_helper(f, c))
            )
        ),
        None,
    )


# a project helper named for setting the run up (or from a module named so) may wrap the model it makes
# (`model = setup_model(cfg)`, `from finetune.wrapped_model import load_model`); a plain builder
# (`from labkit.model import build_model`) returns a bare model
SETUP_HELPER = re.compile(r"dist|parallel|wrap|ddp|fsdp|setup|prepare|engine|accelerat", re.I)


def _import_module(f: ScriptFacts, name: str) -> str:
    """The module `name` was imported from (`from a.b import name` -> "a.b"), or "" when it was not."""
    for node in ast.walk(f.tree):
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            return node.module or ""
    return ""


def _handed_to_helper(f: ScriptFacts) -> ast.Call | None:
    """`model = setup_model(args, model)` or `model = load_model(cfg)` from `wrapped_model`: the model goes through
    a helper of the project (defined elsewhere) and comes back, or is made by one named (or from a module named) for
    setting the run up; the helper may wrap it."""
    models = model_of(f)
    for c in f.calls:
        parent = f.parents.get(c)
        if not (isinstance(parent, ast.Assign) and project_helper(f, c)):
            continue
        if not {unparse(t) for t in parent.targets} & models:
            continue
        passed = any(unparse(a) in models for a in c.args + [k.value for k in c.keywords])
        root = c.func
        while isinstance(root, ast.Attribute):
            root = root.value
        module = _import_module(f, root.id) if isinstance(root, ast.Name) else ""
        if passed or SETUP_HELPER.search(f.call_name(c).split(".")[-1]) or SETUP_HELPER.search(module):
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
    if f.call_name(join).split(".")[-1] not in JOIN and not optimizers(f).sources:
        # joined by the project's helper, and the optimizer is not made in this file either (SlowFast's
        # `construct_optimizer(model, cfg)` on a `build_model(cfg)` that wraps it): the project's setup, not this file's
        return []
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
                f"the model is made by or handed to `{unparse(helper.func)}`, which this file does not define: "
                "whether it "
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
