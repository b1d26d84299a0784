"""The training-loop checks of `labkit doctor script`: gradient clipping, seeding, warmup.

Each is recognised the way real scripts write it, not by one call's name: clipping through the
file's own helpers, timm's `dispatch_clip_grad`, a loss scaler called with `clip_grad=`, Fabric's
`fabric.clip_gradients`, accelerate's `accelerator.clip_grad_norm_`; seeding through a project's
`fix_random_seeds(...)`; warmup through a schedule, a `warmup_*` setting or a hand-written ramp.
A library's trainer owns these concerns only when the name really comes from that library
(labkit.doctor.frameworks).
"""

from __future__ import annotations

import ast
import re

from labkit.doctor.ast_facts import FuncDef, ScriptFacts, hand_loop, is_const, is_ddp, kwarg, scaler_steps, unparse
from labkit.doctor.frameworks import (
    own_trainer_run,
    uses_accelerate,
    uses_fabric,
    uses_hf_arguments,
    uses_hf_trainer,
    uses_lightning,
)


# a call whose name says it clips gradients: torch's clip_grad_norm_, timm's dispatch_clip_grad,
# Fabric's clip_gradients, accelerate's clip_grad_norm_, DINO's utils.clip_gradients, FSDP's method...
CLIPS_BY_NAME = re.compile(r"clip\w*grad|grad\w*clip|clip_?norm", re.I)
# ...or a call told to clip: timm/MAE's `loss_scaler(loss, optimizer, clip_grad=...)`, Lightning's Trainer,
# TrainingArguments.  Not `max_norm=`: nn.Embedding's renormalises weights, it clips no gradient.
CLIP_KEYWORDS = ("clip_grad", "clip_value", "clip_grad_norm", "max_grad_norm", "grad_clip", "gradient_clip_val")


def clips_gradients(f: ScriptFacts) -> bool:
    """Clipping in the file: a call whose name says so, a clipping keyword (not None/0), or clipping by hand
    (`p.grad.clamp_(-c, c)`); inside a helper of the file, only if the file calls (or passes on) that helper."""
    used = {n.id for n in ast.walk(f.tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(f.tree) if isinstance(n, ast.Attribute)
    }
    for c in f.calls:
        func = f.enclosing_function(c)
        if func is not None and func.name not in used:
            continue  # a helper nobody calls clips nothing
        if CLIPS_BY_NAME.search(f.call_name(c).split(".")[-1]):
            return True
        if any(k.arg in CLIP_KEYWORDS and not is_const(k.value, None, 0, False) for k in c.keywords):
            return True
        if (
            isinstance(c.func, ast.Attribute)
            and c.func.attr in ("clamp_", "clip_")
            and ".grad" in unparse(c.func.value)
        ):
            return True
    return False


def check_no_grad_clip(f: ScriptFacts) -> list[tuple[int, str]]:
    """One bad batch can blow the weights up (the course's exploding-gradients notebook)."""
    step = hand_loop(f)
    if step is None or clips_gradients(f):
        return []
    if step in scaler_steps(f):  # the loss scaler runs backward and the step: it is where clipping goes
        return [
            (
                step.lineno,
                "the loss scaler steps the optimizer without gradient clipping (no `clip_grad=`)",
                "loss_scaler",
            )
        ]
    return [(step.lineno, "a hand-written loop steps the optimizer without gradient clipping")]


def _seed_calls(f: ScriptFacts) -> list[ast.Call]:
    """Calls that seed torch; a project's own `init_seeds(...)`/`setup_seed(...)` is given the benefit of the doubt."""
    out = []
    for c in f.calls:
        name = f.call_name(c)
        last = name.split(".")[-1]
        if "seed" not in last.lower() or name in ("random.seed", "numpy.random.seed", "np.random.seed"):
            continue
        if last.startswith("manual_seed") and (not name.startswith("torch") or "()" in name):
            continue  # torch.Generator().manual_seed(...) seeds a private generator
        if last in ("initial_seed", "seed") or last.startswith("get_"):
            continue
        out.append(c)
    return out


def check_no_seed(f: ScriptFacts) -> list[tuple[int, str]]:
    """Unseeded runs can't be reproduced or compared. Hugging Face's Trainer seeds for you (its
    TrainingArguments default to seed=42); Lightning's does not; a project's own `Trainer` class
    (minGPT-ddp's `from trainer import Trainer`) is not a library that seeds."""
    if _seed_calls(f) or uses_hf_arguments(f) or uses_hf_trainer(f):
        return []
    training = hand_loop(f)
    if training is None and uses_lightning(f):
        training = next(iter(f.calls_named("train", "fit")), None)
    if training is not None:
        return [(training.lineno, "this training script never seeds torch")]
    own = own_trainer_run(f)
    if own is None:
        return []
    call, cls = own
    where = f"comes from `{cls.rsplit('.', 1)[0]}`" if "." in cls else "is defined in this file"
    return [
        (
            call.lineno,
            f"this training script never seeds torch: its `{cls.split('.')[-1]}` {where}, "
            "the project's own code, not a library that seeds",
        )
    ]


SHUFFLES = ("random_split", "randperm", "shuffle", "sample", "permutation", "train_test_split")


def _unseeded_splits(f: ScriptFacts) -> list[tuple[int, str]]:
    """`random_split` with no seed set before it and no generator of its own, in a script every rank runs."""
    if not (is_ddp(f) or uses_accelerate(f) or uses_fabric(f)) or uses_hf_trainer(f):
        return []
    seeds = _seed_calls(f)
    for split in f.calls_named("random_split"):
        if kwarg(split, "generator") is not None or len(split.args) > 2:
            continue
        if any(not f.same_function(s, split) or s.lineno < split.lineno for s in seeds):
            continue
        return [
            (
                split.lineno,
                "`random_split` runs on every rank with no seed set and no generator of its own: "
                "each rank draws a different split, so one rank's training data is another's "
                "held-out data",
            )
        ]
    return []


def check_unsynced_seed(f: ScriptFacts) -> list[tuple[int, str]]:
    """A rank-derived seed -- or no seed at all -- makes each rank split/shuffle the shared dataset
    differently: the ranks' "train" sets overlap the others' validation sets."""
    seeds = [c for c in _seed_calls(f) if any(f.mentions_rank(a) for a in c.args + [k.value for k in c.keywords])]
    if not seeds:
        return _unseeded_splits(f)
    seed = seeds[0]
    ops = []
    for c in f.calls_named(*SHUFFLES):
        name = f.call_name(c)
        last = name.split(".")[-1]
        if last in ("shuffle", "sample") and not name.startswith(("random.", "numpy.", "np.")):
            continue
        ops.append(c)
    if not f.references("DistributedSampler") and not uses_accelerate(f) and not uses_hf_trainer(f):
        ops += [c for c in f.calls_named("DataLoader") if is_const(kwarg(c, "shuffle"), True)]
    ops = [o for o in ops if not (f.same_function(o, seed) and o.lineno < seed.lineno)]
    if not ops:
        return []
    return [
        (
            seed.lineno,
            f"the torch seed is derived from the rank and line {ops[0].lineno} then splits/shuffles the shared dataset with it: every rank gets a different split",
        )
    ]


ADAM_FAMILY = (
    "Adam",
    "AdamW",
    "Adamax",
    "NAdam",
    "RAdam",
    "SparseAdam",
    "Adafactor",
    "AdamW8bit",
    "Adam8bit",
    "PagedAdamW",
    "FusedAdam",
    "DeepSpeedCPUAdam",
    "Lamb",
    "LAMB",
)
TRANSFORMERISH = re.compile(r"Transformer|T5|GPT|Bert|BERT|Bart|Llama|AutoModel|Mistral|Qwen")  # case matters: resnet50


def _zero_warmup(call: ast.AST | None) -> bool:
    """`get_linear_schedule_with_warmup(optimizer, num_warmup_steps=0, ...)`: a warmup schedule told not to warm up."""
    if not isinstance(call, ast.Call):
        return False
    if any(k.arg and "warmup" in k.arg.lower() and is_const(k.value, 0) for k in call.keywords):
        return True
    return "warmup" in unparse(call.func).lower() and len(call.args) > 1 and is_const(call.args[1], 0)


def _docstrings(f: ScriptFacts) -> set[int]:
    """ids of the docstring constants: prose about warmup is not a warmup."""
    owners = [n for n in ast.walk(f.tree) if isinstance(n, (ast.Module, ast.ClassDef, *FuncDef))]
    return {
        id(o.body[0].value)
        for o in owners
        if o.body
        and isinstance(o.body[0], ast.Expr)
        and isinstance(o.body[0].value, ast.Constant)
        and isinstance(o.body[0].value.value, str)
    }


def _has_warmup(f: ScriptFacts) -> bool:
    docs = _docstrings(f)
    for node in ast.walk(f.tree):
        if id(node) in docs:
            continue
        if isinstance(node, ast.keyword) and node.arg and "warmup" in node.arg.lower() and is_const(node.value, 0):
            continue
        parent = f.parents.get(node)
        if isinstance(parent, ast.Call) and parent.func is node and _zero_warmup(parent):
            continue
        text = ""
        if isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        elif isinstance(node, ast.keyword):
            text = node.arg or ""
        elif isinstance(node, ast.arg):
            text = node.arg
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        if "warmup" in text.lower() or "warm_up" in text.lower():
            if isinstance(node, ast.keyword) and is_const(node.value, 0):
                continue
            return True
    return f.references("OneCycleLR", "LinearLR")


def check_no_warmup(f: ScriptFacts) -> list[tuple[int, str]]:
    """Adam's first steps use poorly estimated moments: full LR from step 0 derails transformers."""
    step = hand_loop(f)
    if step is None or _has_warmup(f):
        return []
    adam = [c for c in f.calls if f.call_name(c).split(".")[-1] in ADAM_FAMILY]
    transformer = any(TRANSFORMERISH.search(f.call_name(c)) for c in f.calls) or any(
        c.func.attr == "from_pretrained" for c in f.calls if isinstance(c.func, ast.Attribute)
    )
    if not adam and not transformer:
        return []
    line = adam[0].lineno if adam else step.lineno
    return [(line, "Adam/transformer training starts at full learning rate (constant LR or a schedule with no warmup)")]
