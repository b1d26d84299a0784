"""`labkit doctor script PATH...`: the course's pitfalls, found by reading your training script.

The script is parsed with `ast`, never imported or run, so it is safe on any
file and needs no GPU.  Each check is one pitfall of the course (the data and
safety checks are here, the launch checks in labkit.doctor.launch_checks, the
training-loop checks in labkit.doctor.loop_checks); they follow calls between
the functions defined in the file (a `set_epoch` in `_run_epoch()` called from
the epoch loop counts as inside the loop) and stay quiet when a library owns the
concern (HF `Trainer`, accelerate, Lightning) -- a library the imports really
resolve to (labkit.doctor.frameworks).  A false alarm on a correct script is a
bug: when in doubt, a check says nothing.  Each fix is phrased for the script's
framework (labkit.doctor.script_fixes).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from dataclasses import asdict, dataclass, field

from labkit.doctor.ast_facts import (
    Hit,
    ScriptFacts,
    chunks_text,
    epoch_loops,
    guard_chain,
    guarded,
    has_splat,
    is_const,
    is_ddp,
    kwarg,
    launch_line,
    loader_dataset_is_iterable,
    multi_process,
    names_in,
    rank_strided,
    short,
    unparse,
)
from labkit.doctor.frameworks import framework
from labkit.doctor.launch_checks import check_legacy_launch, check_model_not_on_device, check_unused_local_rank_arg
from labkit.doctor.loop_checks import check_no_grad_clip, check_no_seed, check_no_warmup, check_unsynced_seed
from labkit.doctor.script_fixes import FIXES, fix_for, severity  # noqa: F401  (FIXES: one fix per code, tests)
from labkit.doctor.wrap_checks import check_model_not_wrapped


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    code: str
    message: str
    fix: str
    # "note": true, but changes nothing at run time; "unknown": the file hands the concern to code it does not
    # define, so the doctor says what it cannot see instead of guessing (exit status 0 on notes and unknowns alone)
    severity: str = "warning"
    why: tuple[tuple[int | None, str], ...] = field(default=(), compare=False)  # the evidence, for --explain

    def as_text(self, explain: bool = False) -> str:
        mark = f"{self.severity}: " if self.severity in ("note", "unknown") else ""
        text = f"{self.path}:{self.line}: {self.code}: {mark}{self.message} — fix: {self.fix}"
        if explain:
            text += "".join(f"\n    {f'line {n}' if n else 'file'}: {what}" for n, what in self.why)
        return text

    def as_json(self, explain: bool = False) -> dict:
        out = asdict(self)
        out["why"] = [{"line": n, "evidence": what} for n, what in self.why]
        if not explain:
            del out["why"]
        return out


# ---- one function per code (the launch checks live in labkit.doctor.launch_checks, the loop's in loop_checks) ----
def _rank_aware_sampler(f: ScriptFacts) -> ast.Call | None:
    """A sampler told which rank it serves: `DistributedBucketSampler(..., num_replicas=n, rank=rank)`,
    `MySampler(ds, rank, world_size)`: it shards like a DistributedSampler, whatever its name."""
    for c in f.calls:
        if not f.call_name(c).split(".")[-1].endswith("Sampler"):
            continue
        if (
            kwarg(c, "num_replicas") is not None
            or kwarg(c, "rank") is not None
            or any(f.mentions_rank(a) for a in c.args)
        ):
            return c
    return None


EVAL = re.compile(r"val|test|eval|dev", re.I)


def _literal_keys(node: ast.AST | None) -> set[str] | None:
    """The keys of `{"batch_size": 8, ...}` / `dict(batch_size=8, ...)` written out, or None when any is hidden."""
    if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) for k in node.keys):  # a `**x` key is None
        return {k.value for k in node.keys}
    if isinstance(node, ast.Call) and unparse(node.func) == "dict" and not node.args and not has_splat(node):
        return {k.arg for k in node.keywords}
    return None


def _splat_lacks(f: ScriptFacts, call: ast.Call, keys: tuple[str, ...]) -> bool:
    """`DataLoader(ds, **loader_params)` where every `**` is a dict written out in this file (each of its
    assignments, item assignments `params["sampler"] = s` included) and none holds one of `keys`."""
    for kw in call.keywords:
        if kw.arg is not None:
            continue
        known = _literal_keys(kw.value)
        if known is None and isinstance(kw.value, ast.Name):
            assigns = [
                a
                for a in ast.walk(f.tree)
                if isinstance(a, ast.Assign) and any(unparse(t) == kw.value.id for t in a.targets)
            ]
            found = [_literal_keys(a.value) for a in assigns]
            if not found or any(k is None for k in found):
                return False
            known = set().union(*found)
            for node in ast.walk(f.tree):  # params["sampler"] = ..., params.update(sampler=...)
                if (
                    isinstance(node, ast.Subscript)
                    and isinstance(node.ctx, ast.Store)
                    and unparse(node.value) == kw.value.id
                ):
                    known.add(node.slice.value if isinstance(node.slice, ast.Constant) else "?")
                if isinstance(node, ast.Call) and unparse(node.func) == f"{kw.value.id}.update":
                    return False
        if known is None or "?" in known or known & set(keys):
            return False
    return True


def _rank_picked(f: ScriptFacts, loader: ast.Call) -> ast.AST | None:
    """The loader's dataset is this rank's own part: `parts[rank]`, `partitioner.use(dist.get_rank())`, or a name
    assigned such a value in the same function (a hand-made partition, one slice per rank). The rank must be what
    picks (a subscript or a positional argument), not a keyword a constructor merely keeps (`local_rank=` for a
    cache barrier)."""

    func = f.enclosing_function(loader)

    def assigned(name: str, before: int) -> list[ast.Assign]:
        return [
            n
            for n in ast.walk(func or f.tree)
            if isinstance(n, ast.Assign)
            and f.enclosing_function(n) is func
            and n.lineno < before
            and name in _assigned_names(n)
        ]

    def picks(value: ast.AST, before: int, depth: int = 0) -> ast.AST | None:
        """`value` or the assignment (of a name it uses, followed back a few steps: `mine = idx.chunk(n)[rank]`,
        then `Subset(data, mine)`) where the rank picks a part."""
        for sub in ast.walk(value):
            if isinstance(sub, ast.Subscript) and not isinstance(sub.slice, ast.Slice) and f.mentions_rank(sub.slice):
                return value
            # a call given the rank picks only where it makes the data (further back it may be `torch.device(rank)`)
            if depth <= 1 and isinstance(sub, ast.Call) and any(f.mentions_rank(a) for a in sub.args):
                return value
        if depth >= 3:
            return None
        for name in {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}:
            for node in assigned(name, before):
                if node.value is not value and picks(node.value, node.lineno, depth + 1) is not None:
                    return node
        return None

    ds = loader.args[0] if loader.args else kwarg(loader, "dataset")
    if ds is None:
        return None
    return picks(ds, loader.lineno)


def check_no_distributed_sampler(f: ScriptFacts) -> list[Hit]:
    """Without per-rank sharding every rank trains on the whole dataset: N times the work, no speed-up."""
    if not is_ddp(f) or framework(f) != "torch":
        return []
    if f.references("DistributedSampler", "split_dataset_by_node") or rank_strided(f) or _rank_aware_sampler(f):
        return []
    if _ddp_loader(f):
        return []
    loaders = [c for c in f.calls_named("DataLoader") if not f.dead(c)]
    loaders = [c for c in loaders if kwarg(c, "sampler") is None and kwarg(c, "batch_sampler") is None]
    loaders = [c for c in loaders if not has_splat(c) or _splat_lacks(f, c, ("sampler", "batch_sampler"))]
    loaders = [c for c in loaders if not loader_dataset_is_iterable(f, c) and _rank_picked(f, c) is None]
    if not loaders:
        return []

    def names(c):  # what the loader is called and what it loads, not its settings (`hps.train.batch_size`)
        parent = f.parents.get(c)
        held = " ".join(unparse(t) for t in parent.targets) if isinstance(parent, ast.Assign) else ""
        data = unparse(c.args[0]) if c.args else unparse(kwarg(c, "dataset"))
        return held, data

    def is_train(c):
        held, data = names(c)
        return not EVAL.search(held) and "train" in (held + " " + data).lower()

    train = [c for c in loaders if is_train(c)] or (
        [loaders[0]] if not EVAL.search(" ".join(names(loaders[0]))) else []
    )
    if not train:
        return []
    why = (
        (launch_line(f), "the script runs as several processes"),
        (train[0].lineno, f"`{short(train[0])}` is the training loader: no `sampler=` / `batch_sampler=`"),
        (
            None,
            "no DistributedSampler, no sampler given `rank=`/`num_replicas=`, no `data[rank::world_size]` "
            "slicing, no `.shard(...)` anywhere in the file, and the loader's data is not picked by the rank "
            "(`parts[rank]`, `partition.use(rank)`)",
        ),
    )
    return [
        Hit(
            train[0].lineno,
            "the training DataLoader has no DistributedSampler: every rank sees the whole dataset",
            why=why,
        )
    ]


def _ddp_loader(f: ScriptFacts) -> ast.Call | None:
    """`GraphDataLoader(ds, shuffle=True, use_ddp=True)` (DGL): a loader asked to shard itself for DDP builds a
    DistributedSampler inside, and its `set_epoch` hands the epoch on to it."""
    for c in f.calls:
        flag = kwarg(c, "use_ddp")
        if flag is not None and not is_const(flag, False) and not f.dead(c):
            return c
    return None


def check_missing_set_epoch(f: ScriptFacts) -> list[Hit]:
    """DistributedSampler shuffles with seed + epoch: without set_epoch every epoch repeats one order."""
    # an import alone builds no sampler: the code must name it, or call `set_epoch` on the one it uses; a loader
    # asked to shard itself (`use_ddp=True`) holds one
    set_epochs = [c for c in f.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "set_epoch"]
    ddp_loader = _ddp_loader(f)
    if not f.used("DistributedSampler") and not (f.references("DistributedSampler") and set_epochs) and not ddp_loader:
        return []
    hits = []
    for loop in [*epoch_loops(f), *_pass_loops(f)]:
        var = {unparse(loop.target)} if isinstance(loop, ast.For) else set()
        ok = False
        for node, names in f.reachable(list(loop.body), var):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "set_epoch":
                if any(f.uses(a, names) or "epoch" in " ".join(names_in(a)).lower() for a in node.args):
                    ok = True
                    break
        if not ok:
            sampler = next(iter(f.calls_named("DistributedSampler")), None)
            why = (
                *(((sampler.lineno, "a DistributedSampler shuffles with seed + epoch"),) if sampler else ()),
                *(
                    ((ddp_loader.lineno, f"`{short(ddp_loader)}` shards with a DistributedSampler of its own"),)
                    if ddp_loader and not sampler
                    else ()
                ),
                (
                    loop.lineno,
                    f"`for {unparse(loop.target)} in {short(loop.iter)}` iterates several epochs"
                    if isinstance(loop, ast.For)
                    else f"`while {short(loop.test)}:` runs `for {unparse(_passes(loop)[0].target)} in "
                    f"{short(_passes(loop)[0].iter)}` pass after pass: each pass is an epoch",
                ),
                (
                    None,
                    "no `set_epoch(...)` with the epoch is reached from the loop's body (calls into this file's "
                    "functions and methods followed)",
                ),
            )
            hits.append(
                Hit(
                    loop.lineno,
                    "the DistributedSampler is iterated over several epochs without `sampler.set_epoch(epoch)` in the epoch loop: every epoch repeats the same order",
                    why=why,
                )
            )
    for cyc, loader in _cycled_sharded_loaders(f):
        why = (
            (loader.lineno, f"`{short(loader)}` draws its order from a DistributedSampler (seed + epoch)"),
            (cyc.lineno, f"`{short(cyc)}` keeps the first pass's batches and replays them, pass after pass"),
            (None, "the sampler is never asked for a second epoch, so `set_epoch` could not reshuffle it either"),
        )
        hits.append(
            Hit(
                cyc.lineno,
                "the DistributedSampler's loader is wrapped in `itertools.cycle`: every pass replays the first epoch's order "
                "(cycle caches it) -- iterate the loader anew each epoch with `sampler.set_epoch(epoch)` instead",
                why=why,
            )
        )
    return hits


def _from_distributed_sampler(f: ScriptFacts, value: ast.AST | None, where: ast.AST) -> bool:
    """`sampler=DistributedSampler(...)`, or a name that this function assigns one (in any branch)."""
    if isinstance(value, ast.Call):
        return f.call_name(value).split(".")[-1] == "DistributedSampler"
    if not isinstance(value, ast.Name):
        return False
    return any(
        isinstance(n, ast.Assign)
        and value.id in _assigned_names(n)
        and f.same_function(n, where)
        and _from_distributed_sampler(f, n.value, where)
        for n in ast.walk(f.tree)
    )


def _cycled_sharded_loaders(f: ScriptFacts) -> list[tuple[ast.Call, ast.Call]]:
    """`itertools.cycle(loader)` of a DataLoader with a DistributedSampler, drawn with `next()`: cycle keeps the first
    pass's batches and replays them, so the sampler is never asked for another epoch's order (no `set_epoch` can help).
    Returns (the cycle call, the loader it cycles)."""
    out = []
    for c in f.calls_named("cycle"):
        if "cycle" in f.functions or len(c.args) != 1 or f.dead(c):
            continue  # the file's own `def cycle(loader): while True: for b in loader: yield b` is a pass loop
        arg = c.args[0]
        made = [arg] if isinstance(arg, ast.Call) else []
        if isinstance(arg, ast.Name):
            made = [
                n.value
                for n in ast.walk(f.tree)
                if isinstance(n, ast.Assign)
                and arg.id in _assigned_names(n)
                and isinstance(n.value, ast.Call)
                and f.same_function(n, c)
                and n.lineno <= c.lineno
            ]
        for loader in made:
            if f.call_name(loader).split(".")[-1] == "DataLoader" and _from_distributed_sampler(
                f, kwarg(loader, "sampler"), loader
            ):
                out.append((c, loader))
                break
    return out


def _passes(loop: ast.While) -> list[ast.For]:
    """The `for batch in loader` loops directly in a `while` loop's body (not a `range(...)` count)."""
    return [
        n
        for n in loop.body
        if isinstance(n, ast.For) and not (isinstance(n.iter, ast.Call) and unparse(n.iter.func) == "range")
    ]


def _pass_loops(f: ScriptFacts) -> list[ast.While]:
    """Endless data: `while True: for batch in loader: yield batch` (or `while step < total: for batch in loader`)
    runs the loader pass after pass, each pass an epoch of the sampler, outside any `for epoch` loop."""
    outer = epoch_loops(f)
    return [
        n
        for n in ast.walk(f.tree)
        if isinstance(n, ast.While) and _passes(n) and not any(a in outer for a in f.ancestors(n)) and not f.dead(n)
    ]


TOKENIZE_METHODS = ("encode", "encode_plus", "batch_encode_plus", "__call__")
BUILD_FUNC = re.compile(
    r"preprocess|tokeniz|encode|convert_examples|build|prepare_(data|features|dataset)|load_(data|dataset)|_features|examples",
    re.I,
)


def _is_tokenizer_call(f: ScriptFacts, c: ast.Call) -> bool:
    func = c.func
    if isinstance(func, ast.Name):
        if func.id in f.functions or func.id in f.class_defs:
            return False  # the file's own `def load_tokenizer(...)` or class: its tokenizer calls are checked inside
        return "tokenizer" in func.id.lower() or func.id == "tok"
    if isinstance(func, ast.Attribute):
        if "tokenizer" in func.attr.lower():
            return True
        if func.attr in TOKENIZE_METHODS:
            recv = unparse(func.value).split(".")[-1].lower()
            return "tokenizer" in recv or recv == "tok"
    return False


def _builds_examples(f: ScriptFacts, c: ast.Call) -> bool:
    """The tokenizer call makes training examples: in a `.map()` function, a Dataset method,
    or a function named like preprocessing."""
    for anc in f.ancestors(c):
        if isinstance(anc, ast.Lambda) and isinstance(f.parents.get(anc), ast.Call):
            p = f.parents[anc]
            if isinstance(p.func, ast.Attribute) and p.func.attr == "map":
                return True
    func = f.enclosing_function(c)
    if func is None:
        return False
    mapped = {unparse(m.args[0]) for m in f.calls_named("map") if m.args} | {
        unparse(kwarg(m, "function")) for m in f.calls_named("map") if kwarg(m, "function") is not None
    }
    if func.name in mapped or BUILD_FUNC.search(func.name):
        return True
    cls = f.enclosing_class(c)
    return cls is not None and any("Dataset" in unparse(b) for b in cls.bases)


def _truncates(f: ScriptFacts, c: ast.Call) -> bool:
    """`truncation=True`, a strategy (`truncation="only_first"`, `TruncationStrategy.LONGEST_FIRST`), the older
    `truncation_strategy=` keyword, or a value the script decides (`truncation=args.truncate`)."""
    for key in ("truncation", "truncation_strategy"):
        value = kwarg(c, key)
        if value is None or is_const(value, False, None, "do_not_truncate"):
            continue
        if isinstance(value, ast.Attribute) and value.attr.lower() == "do_not_truncate":
            continue
        return True
    return False


def _cut_by_hand(f: ScriptFacts, c: ast.Call) -> bool:
    """The ids the call returns are cut to a length afterwards (`if len(a_ids) > max_len: a_ids = a_ids[:max_len]`,
    `ids = tokenizer.encode(t)[:512]`), or whatever they are concatenated into is (`input_ids += marker_ids +
    content_ids`, then `input_ids = input_ids[:max_len]`): truncation by hand. The ids are followed through
    assignments, `+=`, `.append`/`.extend` within their function, and through `self.` attributes across the
    methods of their class (marker ids encoded once in `__init__`, spliced into every example)."""

    def cuts(node: ast.AST) -> bool:  # x[:n], x[-n:], x[a:b]: a slice that bounds the length
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice)):
            return False
        low = node.slice.lower  # x[1:] drops a token, it bounds nothing; x[-n:] keeps the last n
        return node.slice.upper is not None or (isinstance(low, ast.UnaryOp) and isinstance(low.op, ast.USub))

    parent = f.parents.get(c)
    while isinstance(parent, ast.Subscript) and not isinstance(parent.slice, ast.Slice):  # tokenizer(t)["input_ids"]
        parent = f.parents.get(parent)
    if cuts(parent):
        return True
    stmt = next((a for a in f.ancestors(c) if isinstance(a, ast.stmt)), None)
    if not isinstance(stmt, (ast.Assign, ast.AugAssign)):
        return False
    func = f.enclosing_function(c)
    cls = f.enclosing_class(c)

    def key(node: ast.AST) -> tuple[int, str] | None:  # a local lives in its function, `self.x` in its class
        if isinstance(node, ast.Attribute) and unparse(node).startswith("self.") and cls is not None:
            return (0, unparse(node))
        if isinstance(node, ast.Name):
            return (id(f.enclosing_function(node)), node.id)
        return None

    def targets(node: ast.AST) -> list[ast.AST]:
        ts = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [e for t in ts for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]

    def read(value: ast.AST) -> set[tuple[int, str]]:  # what a value carries on (not what `len()` only counts)
        skip = {
            id(n)
            for c in ast.walk(value)
            if isinstance(c, ast.Call) and unparse(c.func) == "len"
            for a in c.args
            for n in ast.walk(a)
        }
        return {k for n in ast.walk(value) if id(n) not in skip and (k := key(n))}

    scope = cls if cls is not None else (func or f.tree)
    flows = []  # (what the value reads, its receivers): `x = v`, `x += v`, `x.append(v)` / `x.extend(v)`
    for node in ast.walk(scope):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            flows.append((read(node.value), {k for k in map(key, targets(node)) if k}))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("append", "extend")
            and node.args
        ):
            flows.append((read(node.args[0]), {k for k in [key(node.func.value)] if k}))
    cut = {key(node.value) for node in ast.walk(scope) if cuts(node)}
    # every way the ids travel must meet a cut: a list they end up in uncut is an example past the window
    todo, seen = [k for k in map(key, targets(stmt)) if k], set()
    if not todo:
        return False
    while todo:
        k = todo.pop()
        if k in seen or k in cut:
            continue
        seen.add(k)
        onward = {r for reads, receivers in flows if k in reads for r in receivers} - {k}
        if not onward:
            return False
        todo += onward
    return True


def _only_measured(f: ScriptFacts, c: ast.Call) -> bool:
    """`len(tokenizer(turn).input_ids)`: the ids are counted (to mask a prompt, to log a length) and thrown away;
    no example is built from them, so there is nothing to truncate."""
    node: ast.AST = c
    parent = f.parents.get(node)
    while isinstance(parent, (ast.Attribute, ast.Subscript)) and parent.value is node:  # .input_ids, ["input_ids"]
        node, parent = parent, f.parents.get(parent)
    return isinstance(parent, ast.Call) and unparse(parent.func) == "len" and node in parent.args


def _assigned_names(node: ast.Assign) -> set[str]:
    return {unparse(e) for t in node.targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])}


def _length_filter(f: ScriptFacts) -> ast.Call | None:
    """`dataset.filter(is_in_length_range, ...)` / `.filter(lambda ex: len(ex["labels"]) < max_len)`: examples past a
    length bound are dropped before training, which bounds every length as truncation would. The predicate (a lambda,
    or a function of this file) must compare a `len(...)` with something."""

    def bounds_a_length(node: ast.AST) -> bool:
        return any(
            isinstance(cmp, ast.Compare)
            and any(isinstance(c, ast.Call) and unparse(c.func) == "len" for c in ast.walk(cmp))
            for cmp in ast.walk(node)
        )

    for c in f.calls:
        if not (isinstance(c.func, ast.Attribute) and c.func.attr == "filter" and c.args) or f.dead(c):
            continue
        pred = c.args[0]
        if isinstance(pred, ast.Lambda) and bounds_a_length(pred.body):
            return c
        if isinstance(pred, ast.Name) and any(bounds_a_length(d) for d in f.functions.get(pred.id, [])):
            return c
    return None


def check_no_truncation(f: ScriptFacts) -> list[Hit]:
    """Untruncated inputs overflow the model's max length (T5: 512) or the GPU's memory on one long text."""
    hits = []
    chunked = chunks_text(f) or _length_filter(f) is not None
    enabled = f.calls_named("enable_truncation")  # a `tokenizers` tokenizer told to truncate every call
    for c in f.calls:
        if (
            not _is_tokenizer_call(f, c)
            or has_splat(c)
            or _truncates(f, c)
            or enabled
            or f.dead(c)
            or _cut_by_hand(f, c)
        ):
            continue
        if _only_measured(f, c):
            continue
        padding = kwarg(c, "padding")
        padded = padding is not None and not is_const(padding, False, None, "do_not_pad")
        if padded or (_builds_examples(f, c) and not chunked):
            why = (
                (c.lineno, f"`{short(c)}`: no `truncation=` (nor a `truncation_strategy=`) in the call"),
                (
                    c.lineno,
                    "it pads to one length"
                    if padded
                    else "it builds training examples (a map function, a "
                    "Dataset, or a function named for preprocessing), and the file does not cut the text into blocks",
                ),
            )
            hits.append(
                Hit(
                    c.lineno,
                    "the tokenizer is called without `truncation=True`: long texts go past the model's max length",
                    why=why,
                )
            )
    return hits


def check_unsafe_torch_load(f: ScriptFacts) -> list[Hit]:
    """`torch.load` unpickles: a checkpoint from elsewhere can run arbitrary code."""
    return [
        Hit(
            c.lineno,
            "`torch.load` without `weights_only=True` unpickles arbitrary objects (code execution on a hostile file)",
            why=((c.lineno, f"`{short(c)}`: weights_only is " + (unparse(kwarg(c, "weights_only")) or "not given")),),
        )
        for c in f.calls
        if f.call_name(c) == "torch.load" and not is_const(kwarg(c, "weights_only"), True) and not has_splat(c)
    ]


WEIGHTS_FILE = re.compile(r"\.(bin|pt|pth|ckpt|safetensors)\b|pytorch_model|checkpoint", re.I)


def _copies_weights(f: ScriptFacts, c: ast.Call) -> bool:
    """`shutil.copyfile(os.path.join(out, "pytorch_model.bin"), dest)`: copying a weights file writes a checkpoint
    as surely as saving one does (every rank writing `dest` at once, or copying a file rank 0 is still writing)."""
    return f.call_name(c) in ("shutil.copy", "shutil.copyfile", "shutil.copy2", "shutil.move") and any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and WEIGHTS_FILE.search(n.value)
        for a in c.args[:1]
        for n in ast.walk(a)
    )


def check_checkpoint_all_ranks(f: ScriptFacts) -> list[Hit]:
    """Every rank writing the same file at once corrupts it (and wastes N-1 writes)."""
    if not multi_process(f):
        return []
    hits = []
    for c in f.calls:
        name = f.call_name(c)
        is_save = (
            name == "torch.save"
            or (
                isinstance(c.func, ast.Attribute)
                and c.func.attr == "save_pretrained"
                and not re.search(r"tokeni|config|processor|extractor", unparse(c.func.value), re.I)
            )
            or _copies_weights(f, c)
        )
        if not is_save or kwarg(c, "is_main_process") is not None or has_splat(c) or f.dead(c):
            continue
        ok, chain = guard_chain(f, c)
        if not ok:
            why = ((launch_line(f), "the script runs as several processes"), *chain)
            hits.append(
                Hit(
                    c.lineno,
                    "the checkpoint is saved on every rank (no rank-0 guard): they all write the same file",
                    why=why,
                )
            )
    return hits


FSDP_NAMES = ("fully_shard", "FullyShardedDataParallel")
# what gathers a whole copy or writes shards properly: a script using any of them saves an FSDP model knowingly
FSDP_SAVE_APIS = (
    "get_model_state_dict",
    "get_state_dict",
    "FullStateDictConfig",
    "state_dict_type",
    "full_tensor",
)


def _uses_dcp(f: ScriptFacts) -> bool:
    """torch.distributed.checkpoint imported or called (not torch.utils.checkpoint, activation checkpointing)."""
    return any("distributed.checkpoint" in n for n in f.aliases.values()) or any(
        "distributed.checkpoint" in f.call_name(c) for c in f.calls
    )


def check_fsdp_local_state_dict(f: ScriptFacts) -> list[tuple[int, str]]:
    """An FSDP model's `state_dict()` saved the DDP way: it holds this rank's shards, not the model."""
    if not f.references(*FSDP_NAMES) or f.references(*FSDP_SAVE_APIS) or _uses_dcp(f):
        return []
    hits = []
    for c in f.calls:
        name = f.call_name(c)
        takes_state_dict = any(
            isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "state_dict"
            for arg in c.args
            for sub in ast.walk(arg)
        )
        saves_model = (
            isinstance(c.func, ast.Attribute)
            and c.func.attr == "save_pretrained"
            and not re.search(r"tokeni|config|processor|extractor", unparse(c.func.value), re.I)
            and kwarg(c, "state_dict") is None
        )
        if not ((name == "torch.save" and takes_state_dict) or saves_model) or has_splat(c):
            continue
        where = "on rank 0 only" if guarded(f, c) else "on every rank"
        hits.append(
            (
                c.lineno,
                f"the FSDP-sharded model's state_dict() is saved {where}: each rank's holds only its own shards "
                "(DTensors), so the file is not the model",
            )
        )
    return hits


CHECKS = {
    "legacy_launch": check_legacy_launch,
    "unused_local_rank_arg": check_unused_local_rank_arg,
    "model_not_on_device": check_model_not_on_device,
    "model_not_wrapped": check_model_not_wrapped,
    "no_distributed_sampler": check_no_distributed_sampler,
    "missing_set_epoch": check_missing_set_epoch,
    "no_grad_clip": check_no_grad_clip,
    "no_seed": check_no_seed,
    "unsynced_seed": check_unsynced_seed,
    "no_truncation": check_no_truncation,
    "unsafe_torch_load": check_unsafe_torch_load,
    "checkpoint_all_ranks": check_checkpoint_all_ranks,
    "fsdp_local_state_dict": check_fsdp_local_state_dict,
    "no_warmup": check_no_warmup,
}


def check_source(source: str, path: str = "<script>") -> list[Finding]:
    """All findings for one script's text (raises SyntaxError if it does not parse)."""
    facts = ScriptFacts.from_source(source, path)
    frame = framework(facts)
    out = []
    for code, check in CHECKS.items():
        rule = " ".join((check.__doc__ or "").strip().split("\n\n")[0].split())  # its docstring's first paragraph
        for raw in check(facts):  # a check may name the situation its fix is for, and its evidence
            hit = Hit(*raw)
            why = (*hit.why, (None, f"the rule: {rule}")) if rule else hit.why
            out.append(
                Finding(
                    path,
                    hit.line,
                    code,
                    hit.message,
                    fix_for(code, hit.variant or frame),
                    "unknown" if hit.unknown else severity(code),
                    why,
                )
            )
    return sorted(out, key=lambda x: (x.line, x.code))


def check_file(path: str) -> list[Finding]:
    """Findings for one file; OSError / SyntaxError / ValueError propagate."""
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    return check_source(source, path)


def _cmd_script(args) -> int:
    findings: list[Finding] = []
    failed = False
    for path in args.paths:
        try:
            findings += check_file(path)
        except SyntaxError as exc:
            failed = True
            print(f"labkit doctor script: cannot parse {path}: line {exc.lineno}: {exc.msg}", file=sys.stderr)
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            failed = True
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            print(f"labkit doctor script: cannot read {path}: {reason}", file=sys.stderr)
    if args.format == "json":
        print(json.dumps([x.as_json(args.explain) for x in findings], ensure_ascii=False, indent=2))
    else:
        for x in findings:
            print(x.as_text(args.explain))
        if not findings and not failed:
            print(f"no findings in {len(args.paths)} file(s)")
    warnings = [x for x in findings if x.severity == "warning"]
    return 2 if failed else (1 if warnings else 0)


def register(dsub) -> None:
    p = dsub.add_parser(
        "script",
        help="read a training script (never run it) and report the course's DDP/training pitfalls",
        description=__doc__.splitlines()[0]
        + " Codes: "
        + ", ".join(CHECKS)
        + " ("
        + ", ".join(c for c in CHECKS if severity(c) == "note")
        + " is a note: true, but it changes nothing at run time; a finding marked `unknown` says the script hands "
        "that concern to code this file does not define).",
    )
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="Python training script(s) to check; each is parsed, never imported or executed",
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text (default): one `path:line: code: message — fix: ...` line per finding "
        "(`code: note: message` for a note); "
        "json: a list of {path, line, code, message, fix, severity} objects "
        "(severity: warning, note or unknown). "
        "Exit status: 0 nothing found or only notes and unknowns, 1 warnings, 2 a file could not be read or parsed",
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="under each finding, its chain of evidence with line numbers (where the optimizer was made, the loop, "
        "why a guard was or was not taken for a rank test...) and the rule it applies; in json, a `why` list of "
        "{line, evidence}",
    )
    p.set_defaults(func=_cmd_script)
