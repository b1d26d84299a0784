"""Facts about one training script, read with `ast` (the script is never run).

`labkit doctor script` asks questions such as "is this `set_epoch` inside the
epoch loop?" or "is every path to this `torch.save` behind a rank-0 test?".
Real scripts spread that logic over helpers (`_run_epoch`, `save_checkpoint`),
so the answers have to follow calls between the functions and methods defined
in the file.  This module collects what the checks need once:

- import aliases, so `DDP(...)` is known to be `DistributedDataParallel(...)`
- every call with its resolved dotted name
- the functions/methods defined in the file and who calls them (call graph)
- "rank-derived" variables (taint from `RANK`, `get_rank()`, `*rank*` names)
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Iterator

FuncDef = (ast.FunctionDef, ast.AsyncFunctionDef)

# Names/attributes that say "this is the process's rank" (local or global) or "I am rank 0".
RANKISH = re.compile(
    r"rank|master|main_process|is_main|global_zero|world_process_zero|process_index|"
    r"^gpu$|^gpu_id$|^local_gpu$",
    re.I,
)


def unparse(node: ast.AST | None) -> str:
    return ast.unparse(node) if node is not None else ""


def names_in(node: ast.AST) -> Iterator[str]:
    """Every Name id and Attribute attr (and their dotted text) under `node`."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            yield sub.id
        elif isinstance(sub, ast.Attribute):
            yield sub.attr
            yield unparse(sub)


def kwarg(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def has_splat(call: ast.Call) -> bool:
    """`f(**kwargs)`: anything could be in there, so checks stay quiet."""
    return any(kw.arg is None for kw in call.keywords)


def is_const(node: ast.AST | None, *values) -> bool:
    return isinstance(node, ast.Constant) and any(node.value is v or node.value == v for v in values)


SIMPLE_CALLS = {"int", "str", "get", "getenv", "get_rank", "get_local_rank", "get_global_rank", "get_node_local_rank"}


def is_simple_value(node: ast.AST) -> bool:
    """A value that can *be* a rank: names, numbers, arithmetic, int(os.environ["RANK"]), a if c else b."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name not in SIMPLE_CALLS:
                return False
        elif isinstance(
            sub, (ast.Lambda, ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp, ast.Dict, ast.List)
        ):
            return False
    return True


@dataclass
class ScriptFacts:
    """Everything the checks ask about one parsed script."""

    path: str
    source: str
    tree: ast.Module
    aliases: dict[str, str] = field(default_factory=dict)
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    functions: dict[str, list[ast.AST]] = field(default_factory=dict)
    calls: list[ast.Call] = field(default_factory=list)
    rank_vars: set[str] = field(default_factory=set)
    imported: set[str] = field(default_factory=set)  # names bound by imports: `torch.save` is not our `save`
    classes: set[str] = field(default_factory=set)
    star_imports: set[str] = field(default_factory=set)  # `from timm.utils import *`: modules whose names are unknown
    memo: dict[str, object] = field(default_factory=dict)  # answers two checks share (e.g. the --local_rank flow)

    @classmethod
    def from_source(cls, source: str, path: str = "<script>") -> "ScriptFacts":
        facts = cls(path=path, source=source, tree=ast.parse(source, filename=path))
        facts._collect()
        return facts

    # ---- collection -------------------------------------------------------------
    def _collect(self) -> None:
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.imported.add(a.asname or a.name.split(".")[0])
                    if a.asname:
                        self.aliases[a.asname] = a.name
            elif isinstance(node, ast.ImportFrom) and node.module:
                if any(a.name == "*" for a in node.names):
                    self.star_imports.add(node.module)
                for a in node.names:
                    self.imported.add(a.asname or a.name)
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, FuncDef):
                self.functions.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.ClassDef):
                self.classes.add(node.name)
            elif isinstance(node, ast.Call):
                self.calls.append(node)
        self.calls.sort(key=lambda c: (c.lineno, c.col_offset))
        self._taint_rank()

    def _taint_rank(self) -> None:
        """Variables whose value comes from the rank (`seed_offset = ddp_rank`, `rank = int(os.environ["RANK"])`).

        Only simple values propagate (names, arithmetic, `int(...)`, `os.environ[...]`): a whole
        object built from many things is not "the rank"."""
        pairs = []
        for a in ast.walk(self.tree):
            if isinstance(a, ast.Assign) and len(a.targets) == 1:
                t, v = a.targets[0], a.value
                if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) and len(t.elts) == len(v.elts):
                    pairs += zip(t.elts, v.elts)
                else:
                    pairs.append((t, v))
            elif isinstance(a, ast.AnnAssign) and a.value is not None:
                pairs.append((a.target, a.value))
        pairs = [(t, v) for t, v in pairs if isinstance(t, (ast.Name, ast.Attribute)) and is_simple_value(v)]
        for _ in range(4):
            before = len(self.rank_vars)
            for t, v in pairs:
                if self.mentions_rank(v):
                    self.rank_vars.add(unparse(t))
            if len(self.rank_vars) == before:
                break

    # ---- names --------------------------------------------------------------------
    def resolve(self, node: ast.AST) -> str:
        """Dotted name with import aliases expanded: `DDP` -> `torch.nn.parallel.DistributedDataParallel`."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else node.attr
        if isinstance(node, ast.Call):
            return self.resolve(node.func) + "()"
        return ""

    def call_name(self, call: ast.Call) -> str:
        return self.resolve(call.func)

    def calls_named(self, *last: str) -> list[ast.Call]:
        """Calls whose resolved name ends with one of `last` (`DataLoader`, `set_epoch`...)."""
        return [c for c in self.calls if self.call_name(c).split(".")[-1] in last]

    def references(self, *last: str) -> bool:
        """Does any name/attribute (aliases expanded) end with one of `last`?"""
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and self.resolve(node).split(".")[-1] in last:
                return True
        return any(n.split(".")[-1] in last for n in self.aliases.values())

    def mentions_rank(self, node: ast.AST) -> bool:
        """Does `node` use the rank: a `*rank*` name, `get_rank()`, `os.environ["RANK"]`, a tainted variable?"""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and sub.value in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID"):
                return True
            if isinstance(sub, ast.Name) and (RANKISH.search(sub.id) or sub.id in self.rank_vars):
                return True
            if isinstance(sub, ast.Attribute) and (RANKISH.search(sub.attr) or unparse(sub) in self.rank_vars):
                return True
        return False

    def is_rank_test(self, test: ast.AST) -> bool:
        """`if rank == 0`, `if master_process`, `if accelerator.is_main_process`, `if dist.get_rank() == 0`."""
        for sub in ast.walk(test):
            if isinstance(sub, ast.Name) and RANKISH.search(sub.id):
                return True
            if isinstance(sub, ast.Attribute) and RANKISH.search(sub.attr):
                return True
        return False

    # ---- structure ---------------------------------------------------------------
    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        while node in self.parents:
            node = self.parents[node]
            yield node

    def enclosing_function(self, node: ast.AST) -> ast.AST | None:
        return next((a for a in self.ancestors(node) if isinstance(a, FuncDef)), None)

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        return next((a for a in self.ancestors(node) if isinstance(a, ast.ClassDef)), None)

    def same_function(self, a: ast.AST, b: ast.AST) -> bool:
        return self.enclosing_function(a) is self.enclosing_function(b)

    def targets(self, call: ast.Call) -> list[ast.AST]:
        """In-file functions/methods a call may land in (`helper()`, `self._run_epoch()`)."""
        if isinstance(call.func, ast.Name):
            return self.functions.get(call.func.id, [])
        if isinstance(call.func, ast.Attribute):
            root = call.func.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in self.imported:
                return []  # torch.save(...) is not this file's save()
            return self.functions.get(call.func.attr, [])
        return []

    def callers(self, func: ast.AST) -> list[ast.Call]:
        return [c for c in self.calls if func in self.targets(c)]

    def reachable(self, roots: list[ast.AST], track: set[str] | None = None) -> Iterator[tuple[ast.AST, set[str]]]:
        """Walk `roots` and the bodies of in-file functions they call, transitively.

        Yields (node, names) where `names` are the names the tracked value (e.g. the
        epoch loop variable) goes by at that point: `_run_epoch(epoch)` binds it to
        the helper's parameter, `self.epoch = epoch` adds `self.epoch`.
        """
        track = set(track or ())
        seen: set[tuple[int, frozenset]] = set()
        stack: list[tuple[ast.AST, set[str]]] = [(r, track) for r in roots]
        while stack:
            root, names = stack.pop()
            names = set(names)
            for node in ast.walk(root):
                if isinstance(node, ast.Assign) and names and self.uses(node.value, names):
                    names.update(unparse(t) for t in node.targets)
                yield node, names
                if not isinstance(node, ast.Call):
                    continue
                for func in self.targets(node):
                    bound = self._bind(node, func, names)
                    key = (id(func), frozenset(bound))
                    if key not in seen:
                        seen.add(key)
                        stack.append((func, bound))

    def _bind(self, call: ast.Call, func: ast.AST, names: set[str]) -> set[str]:
        params = [a.arg for a in func.args.posonlyargs + func.args.args]
        if params and params[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
            params = params[1:]
        bound = {n for n in names if n.startswith("self.")}
        for param, arg in zip(params, call.args):
            if self.uses(arg, names):
                bound.add(param)
        for kw in call.keywords:
            if kw.arg and self.uses(kw.value, names):
                bound.add(kw.arg)
        return bound

    @staticmethod
    def uses(node: ast.AST, names: set[str]) -> bool:
        return any(
            (isinstance(s, ast.Name) and s.id in names) or (isinstance(s, ast.Attribute) and unparse(s) in names)
            for s in ast.walk(node)
        )

    def comments_and_strings(self) -> Iterator[tuple[int, str]]:
        """(line, text) for every comment and string constant: where scripts document how they're launched."""
        try:
            for tok in tokenize.generate_tokens(io.StringIO(self.source).readline):
                if tok.type == tokenize.COMMENT:
                    yield tok.start[0], tok.string
        except (tokenize.TokenError, IndentationError, SyntaxError):
            pass
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield node.lineno, node.value


# ---- what kind of script is this? (shared by the checks in labkit.doctor.script) ----
def is_ddp(f: ScriptFacts) -> bool:
    """Runs as several processes that it wires up itself (DDP, a process group, mp.spawn)."""
    return f.references("DistributedDataParallel", "init_process_group") or bool(
        [c for c in f.calls_named("spawn") if "multiprocessing" in f.call_name(c) or "mp." in f.call_name(c)]
    )


def backward_calls(f: ScriptFacts) -> list[ast.Call]:
    return [c for c in f.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "backward"]


def optimizer_steps(f: ScriptFacts) -> list[ast.Call]:
    """`optimizer.step()`, `opt.step()`, `scaler.step(optimizer)`; not `scheduler.step()`."""
    out = []
    for c in f.calls:
        if isinstance(c.func, ast.Attribute) and c.func.attr == "step":
            recv = unparse(c.func.value).lower()
            if "sched" in recv:
                continue
            if "opt" in recv or "scaler" in recv or any("optim" in unparse(a).lower() for a in c.args):
                out.append(c)
    return out


def scaler_steps(f: ScriptFacts) -> list[ast.Call]:
    """`loss_scaler(loss, optimizer, ...)`: timm's/MAE's NativeScaler runs backward and the step in one call."""
    out = []
    for c in f.calls:
        name = f.call_name(c).split(".")[-1]
        if "scaler" in name.lower() and len(c.args) >= 2 and "opt" in unparse(c.args[1]).lower():
            out.append(c)
    return out


def hand_loop(f: ScriptFacts) -> ast.Call | None:
    """The optimizer step of a hand-written loop (`backward()` then `optimizer.step()`, or a loss
    scaler called with the loss and the optimizer), if any."""
    steps = optimizer_steps(f) if backward_calls(f) else []
    steps = sorted(steps + scaler_steps(f), key=lambda c: (c.lineno, c.col_offset))
    return steps[0] if steps else None


def loader_dataset_is_iterable(f: ScriptFacts, loader: ast.Call) -> bool:
    iterable_classes = {
        n.name
        for n in ast.walk(f.tree)
        if isinstance(n, ast.ClassDef) and any("IterableDataset" in unparse(b) for b in n.bases)
    }
    ds = loader.args[0] if loader.args else kwarg(loader, "dataset")
    if ds is None:
        return False
    text = unparse(ds)
    if any(cls in text for cls in iterable_classes) or "streaming" in text or "Iterable" in text:
        return True
    # dataset = MyIterable(...) earlier
    for node in ast.walk(f.tree):
        if isinstance(node, ast.Assign) and any(unparse(t) == text for t in node.targets):
            v = unparse(node.value)
            if any(cls in v for cls in iterable_classes) or "streaming=True" in v:
                return True
    return False


def strings(node: ast.AST) -> list[str]:
    return [s.value for s in ast.walk(node) if isinstance(s, ast.Constant) and isinstance(s.value, str)]


def rank_strided(f: ScriptFacts) -> bool:
    """`data[rank::world_size]`, `range(rank, n, world_size)`, `ds.shard(num_shards=.., index=rank)`."""
    for node in ast.walk(f.tree):
        if (
            isinstance(node, ast.Slice)
            and node.step is not None
            and (f.mentions_rank(node.lower) if node.lower else False)
        ):
            return True
        if (
            isinstance(node, ast.Call)
            and unparse(node.func) == "range"
            and len(node.args) == 3
            and f.mentions_rank(node.args[0])
        ):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "shard":
            return True
    return False


def epoch_loops(f: ScriptFacts) -> list[ast.For]:
    """Outermost `for epoch in ...` loops whose body (following calls) iterates batches."""
    loops = []
    for node in ast.walk(f.tree):
        if not isinstance(node, ast.For) or "epoch" not in (unparse(node.target) + unparse(node.iter)).lower():
            continue
        if any(isinstance(a, ast.For) and a in loops for a in f.ancestors(node)):
            continue
        inner = any(isinstance(n, (ast.For, ast.While)) and n is not node for n, _ in f.reachable([node]))
        if inner:
            loops.append(node)
    return loops


def chunks_text(f: ScriptFacts) -> bool:
    """run_clm's `group_texts`: concatenated ids cut into block_size chunks need no truncation."""
    steps = {
        unparse(n.args[2])
        for n in ast.walk(f.tree)
        if isinstance(n, ast.Call) and unparse(n.func) == "range" and len(n.args) == 3
    }
    return any(
        isinstance(n, ast.Slice) and n.upper is not None and any(unparse(n.upper).endswith(f"+ {s}") for s in steps)
        for n in ast.walk(f.tree)
    )


def guarded(f: ScriptFacts, node: ast.AST, seen: set[int] | None = None) -> bool:
    """Is every path to `node` behind a rank-0 test (here, by early return, or at every caller)?"""
    seen = seen if seen is not None else set()
    func = None
    for anc in f.ancestors(node):
        if isinstance(anc, (ast.If, ast.IfExp, ast.While)) and f.is_rank_test(anc.test):
            return True
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
            func = anc
            break
    if func is None or id(func) in seen:
        return False
    seen.add(id(func))
    for stmt in ast.walk(func):  # `if rank != 0: return` before the save
        if (
            isinstance(stmt, ast.If)
            and f.is_rank_test(stmt.test)
            and stmt.lineno < node.lineno
            and any(isinstance(s, ast.Return) for s in stmt.body)
        ):
            return True
    callers = f.callers(func)
    return bool(callers) and all(guarded(f, c, seen) for c in callers)
