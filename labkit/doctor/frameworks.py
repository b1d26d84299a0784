"""Which library runs a training script, decided by what its names resolve to through its imports.

A library owns a concern (Hugging Face's `Trainer` seeds, clips and warms up; accelerate's
`prepare` shards the data) only when the name really comes from that library:
`from trainer import Trainer` in pytorch/examples' minGPT-ddp is the project's own class, and
nothing it does is known to this checker.  The framework also picks how a fix is phrased
(`fabric.clip_gradients` for Fabric, `accelerator.clip_grad_norm_` for accelerate, ...).
"""

from __future__ import annotations

import ast
import re
import sys

from labkit.doctor.ast_facts import ScriptFacts, kwarg
from labkit.doctor.dataflow import LIBRARIES

HF_ROOTS = ("transformers", "trl")
HF_TRAINERS = ("Trainer", "Seq2SeqTrainer", "SFTTrainer", "DPOTrainer", "RewardTrainer")
HF_ARGUMENTS = ("TrainingArguments", "Seq2SeqTrainingArguments", "SFTConfig", "DPOConfig")
LIGHTNING_ROOTS = ("lightning", "pytorch_lightning", "lightning_fabric")
# libraries whose trainer objects run the loop themselves: what they do with seeds is their own setting
TRAINER_LIBRARIES = (
    *HF_ROOTS,
    *LIGHTNING_ROOTS,
    "accelerate",
    "composer",
    "detectron2",
    "mmengine",
    "ignite",
    "deepspeed",
    "sentence_transformers",
    "setfit",
    "ultralytics",
    "keras",
)


def origin(f: ScriptFacts, node: ast.AST) -> str:
    """Where a name comes from: `transformers.Trainer`, `trainer.Trainer` (the project's own module),
    `Trainer` (defined in this file); a bare name under one `from lib import *` is `lib.name`."""
    name = f.resolve(node)
    if "." not in name and name not in f.classes and name not in f.functions and len(f.star_imports) == 1:
        return f"{next(iter(f.star_imports))}.{name}"
    return name


def origins(f: ScriptFacts, *last: str) -> set[str]:
    """The origins of every name (imported or used) ending in one of `last`."""
    found = {name for name in f.aliases.values() if name.split(".")[-1] in last}
    for node in ast.walk(f.tree):
        if isinstance(node, (ast.Name, ast.Attribute)) and f.resolve(node).split(".")[-1] in last:
            found.add(origin(f, node))
    return found


def from_library(f: ScriptFacts, roots: tuple[str, ...], *last: str) -> bool:
    """Does a name ending in one of `last` come from one of the libraries `roots`?"""
    return any(name.split(".")[0] in roots for name in origins(f, *last))


def uses_hf_trainer(f: ScriptFacts) -> bool:
    return from_library(f, HF_ROOTS, *HF_TRAINERS)


def uses_hf_arguments(f: ScriptFacts) -> bool:
    """`TrainingArguments` (seed=42 by default) from transformers / trl."""
    return from_library(f, HF_ROOTS, *HF_ARGUMENTS)


def _imports_from(f: ScriptFacts, roots: tuple[str, ...]) -> bool:
    return any(m.split(".")[0] in roots for m in f.aliases.values()) or bool(
        re.search(r"^\s*(import|from)\s+(%s)\b" % "|".join(roots), f.source, re.M)
    )


def uses_accelerate(f: ScriptFacts) -> bool:
    return from_library(f, ("accelerate",), "Accelerator") or bool(
        f.calls_named("prepare") and _imports_from(f, ("accelerate",))
    )


def uses_lightning(f: ScriptFacts) -> bool:
    """Lightning's Trainer or Fabric: they own the sampler and device placement."""
    return _imports_from(f, LIGHTNING_ROOTS)


def uses_fabric(f: ScriptFacts) -> bool:
    return from_library(f, LIGHTNING_ROOTS, "Fabric")


def framework(f: ScriptFacts) -> str:
    """How the loop is run: "hf" (Trainer), "accelerate", "fabric", "lightning" or plain "torch"."""
    if "framework" not in f.memo:
        f.memo["framework"] = _framework(f)
    return f.memo["framework"]


def _framework(f: ScriptFacts) -> str:
    if uses_hf_trainer(f):
        return "hf"
    if uses_accelerate(f):
        return "accelerate"
    if uses_fabric(f):
        return "fabric"
    if uses_lightning(f):
        return "lightning"
    return "torch"


# train(), fit(), run_loop(), train_loop(), run(), and the private `_train_epoch()` a script calls epoch by epoch
RUNS = re.compile(r"^_*(train|fit|run)|loop$", re.I)


def _given_model(call: ast.Call) -> bool:
    """`X(model=model, ...)` or `X(model, ...)`: the object is handed the model it trains."""
    return kwarg(call, "model") is not None or any(isinstance(a, ast.Name) and a.id == "model" for a in call.args[:1])


def _project_class(f: ScriptFacts, name: str) -> bool:
    """Defined in this file, or imported from a module that is no known library (the project's own code)."""
    root = name.split(".")[0]
    return "." not in name or (root not in LIBRARIES and root not in sys.stdlib_module_names and root != "torch")


def own_trainer_run(f: ScriptFacts) -> tuple[ast.Call, str] | None:
    """`trainer = Trainer(...); trainer.train()` where `Trainer` is the project's own class (defined in
    the file or imported from a module that is not a training library): (the train/fit call, its origin)."""

    def own_class(call: ast.AST) -> str | None:
        name = origin(f, call.func) if isinstance(call, ast.Call) else ""
        if not name or name.split(".")[0] in TRAINER_LIBRARIES or not name.split(".")[-1][:1].isupper():
            return None
        # named a trainer, or whatever it is named, handed the model to train (`TrainLoop(model=model, data=...)`)
        return name if name.endswith("Trainer") or _given_model(call) and _project_class(f, name) else None

    made = {
        ast.unparse(t): own_class(n.value)
        for n in ast.walk(f.tree)
        if isinstance(n, ast.Assign)
        for t in n.targets
        if own_class(n.value)
    }
    for c in f.calls:
        if isinstance(c.func, ast.Attribute) and RUNS.search(c.func.attr):
            recv = c.func.value
            cls = made.get(ast.unparse(recv)) or own_class(recv)
            if cls:
                return c, cls
    return None
