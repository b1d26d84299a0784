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
- guards: booleans derived from a rank test through assignments and attributes
  (`should_save = ... and is_master(args)`, `args.should_save = should_save`), and the file's
  functions that return one
- dead code: module-level functions nothing in the file names (a save there never runs)

What a value *is* (the optimizer, the wrapped model) is followed in labkit.doctor.dataflow.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple

FuncDef = (ast.FunctionDef, ast.AsyncFunctionDef)

# Names/attributes that say "this is the process's rank" (local or global) or "I am rank 0".
RANKISH = re.compile(
    r"rank|master|main_process|is_main|global_zero|world_process_zero|process_index|"
    r"^gpu$|^gpu_id$|^local_gpu$",
    re.I,
)


# environment variables a launcher sets to this process's rank (torchrun, SLURM, Open MPI)
RANK_ENV = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")


Why = tuple[tuple[int | None, str], ...]  # evidence: (line or None, what it shows), in reading order


class Hit(NamedTuple):
    """One finding of a check. `variant` names the situation its fix is phrased for (a framework or a case the
    check names; None: the script's framework); `why` is the chain of evidence `--explain` prints; `unknown`
    says the concern is handed to code this file does not define: reported as `unknown`, never claimed."""

    line: int
    message: str
    variant: str | None = None
    why: Why = ()
    unknown: bool = False


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
    class_defs: dict[str, ast.ClassDef] = field(default_factory=dict)
    guards: dict[str, tuple[int, str]] = field(default_factory=dict)  # guard text -> (line, how it is derived)
    guard_attrs: dict[str, tuple[int, str]] = field(default_factory=dict)  # `X.should_save`: by attribute name
    guard_funcs: dict[str, int] = field(default_factory=dict)  # in-file functions returning a rank test -> line
    mentioned: set[str] = field(default_factory=set)  # every name/attribute/string read somewhere in the file
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
                self.class_defs[node.name] = node
            elif isinstance(node, ast.Call):
                self.calls.append(node)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.mentioned.add(node.id)
            elif isinstance(node, ast.Attribute):
                self.mentioned.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                self.mentioned.add(node.value)  # getattr(module, "train"), __all__, a registry's string
        self.calls.sort(key=lambda c: (c.lineno, c.col_offset))
        self._taint_rank()
        self._find_guards()

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

    def _find_guards(self) -> None:
        """Booleans derived from a rank test, followed through assignments and attributes, and the file's
        functions whose every return is a rank test (`def should_log(): return dist.get_rank() == 0`)."""
        pairs = []
        for a in ast.walk(self.tree):
            if isinstance(a, ast.Assign):
                for t in a.targets:
                    if isinstance(t, ast.Tuple) and isinstance(a.value, ast.Tuple) and len(t.elts) == len(a.value.elts):
                        pairs += [(te, ve, a) for te, ve in zip(t.elts, a.value.elts)]
                    else:
                        pairs.append((t, a.value, a))
            elif isinstance(a, ast.AnnAssign) and a.value is not None:
                pairs.append((a.target, a.value, a))
        pairs = [(t, v, a) for t, v, a in pairs if isinstance(t, (ast.Name, ast.Attribute)) and _boolish(v)]
        for _ in range(6):
            before = len(self.guards) + len(self.guard_funcs)
            for t, v, a in pairs:
                text = unparse(t)
                if text in self.guards:
                    continue
                reason = self.rank_test_reason(v) or (
                    "a rank test"
                    if not isinstance(v, (ast.Name, ast.Attribute, ast.Call)) and self.mentions_rank(v)
                    else None
                )
                if reason is None or (isinstance(v, ast.Call) and not self._rank_call(v)):
                    continue
                self.guards[text] = (a.lineno, f"`{text} = {short(v)}`: {reason}")
                if isinstance(t, ast.Attribute):
                    self.guard_attrs.setdefault(t.attr, self.guards[text])
            for name, defs in self.functions.items():
                returns = [r.value for d in defs for r in ast.walk(d) if isinstance(r, ast.Return) and r.value]
                if name not in self.guard_funcs and returns and all(self.is_rank_test(r) for r in returns):
                    self.guard_funcs[name] = defs[0].lineno
            if len(self.guards) + len(self.guard_funcs) == before:
                break

    def _rank_call(self, call: ast.Call) -> bool:
        """`is_master(args)`, `accelerator.is_main_process()`, an in-file function returning a rank test."""
        name = self.call_name(call).split(".")[-1]
        return bool(RANKISH.search(name)) or name in self.guard_funcs

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
        return self.used(*last) or any(n.split(".")[-1] in last for n in self.aliases.values())

    def used(self, *last: str) -> bool:
        """Does the code (not only an import) name something ending with one of `last`? An imported
        `DistributedSampler` that nothing builds or passes on shards nothing."""
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and self.resolve(node).split(".")[-1] in last:
                return True
        return False

    def mentions_rank(self, node: ast.AST) -> bool:
        """Does `node` use the rank: a `*rank*` name, `get_rank()`, `os.environ["RANK"]`, a tainted variable?"""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and sub.value in RANK_ENV:
                return True
            if isinstance(sub, ast.Name) and (RANKISH.search(sub.id) or sub.id in self.rank_vars):
                return True
            if isinstance(sub, ast.Attribute) and (RANKISH.search(sub.attr) or unparse(sub) in self.rank_vars):
                return True
        return False

    def is_rank_test(self, test: ast.AST) -> bool:
        """`if rank == 0`, `if master_process`, `if accelerator.is_main_process`, `if dist.get_rank() == 0`,
        `if args.should_save` where `should_save` was derived from one."""
        return self.rank_test_reason(test) is not None

    def rank_test_reason(self, test: ast.AST) -> str | None:
        """Why `test` is a rank test (what in it names the rank, or where its guard was derived), else None."""
        for sub in ast.walk(test):
            if isinstance(sub, ast.Constant) and sub.value in RANK_ENV:  # int(os.environ.get("RANK", 0)) == 0
                return f"`{short(test)}` reads the rank the launcher sets ({sub.value})"
            if isinstance(sub, ast.Name):
                if RANKISH.search(sub.id):
                    return f"`{sub.id}` names the rank"
                if sub.id in self.guards:
                    line, how = self.guards[sub.id]
                    return f"line {line}: {how}"
                if sub.id in self.guard_funcs and isinstance(self.parents.get(sub), ast.Call):
                    return f"`{sub.id}()` (line {self.guard_funcs[sub.id]}) returns a rank test"
            if isinstance(sub, ast.Attribute):
                if RANKISH.search(sub.attr):
                    return f"`{unparse(sub)}` names the rank"
                hit = self.guards.get(unparse(sub)) or self.guard_attrs.get(sub.attr)
                if hit:
                    return f"line {hit[0]}: {hit[1]}"
                if sub.attr in self.guard_funcs and isinstance(self.parents.get(sub), ast.Call):
                    return f"`{sub.attr}()` (line {self.guard_funcs[sub.attr]}) returns a rank test"
        return None

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

    def dead(self, node: ast.AST) -> bool:
        """Is `node` in a function of the file that can never run: a module-level (or nested) function that
        nothing in the file names, in a script that has an entry of its own? Methods are never dead (a
        framework calls `forward`, `training_step`...), nor are decorated functions."""
        if not self._has_entry():
            return False  # a module others import: any function may be called from outside
        for anc in self.ancestors(node):
            if isinstance(anc, FuncDef) and not any(self._registers(d) for d in anc.decorator_list):
                if isinstance(self.parents.get(anc), ast.ClassDef):
                    return False
                if anc.name not in self.mentioned:
                    return True
        return False

    def _registers(self, decorator: ast.AST) -> bool:
        """A decorator that may hand the function to a framework (`@app.command()`, `@hydra.main(...)`); torch's
        `@torch.no_grad()` and functools' wrappers only wrap it."""
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return self.resolve(target).split(".")[0] not in ("torch", "functools", "contextlib")

    def _has_entry(self) -> bool:
        """A `__main__` block or a module-level call: the file runs as a script."""
        if "has_entry" not in self.memo:
            self.memo["has_entry"] = any(
                (isinstance(s, ast.If) and "__main__" in unparse(s.test))
                or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call))
                for s in self.tree.body
            )
        return self.memo["has_entry"]

    def targets(self, call: ast.Call) -> list[ast.AST]:
        """In-file functions/methods a call may land in (`helper()`, `self._run_epoch()`, `Trainer(...)`'s
        `__init__`)."""
        if isinstance(call.func, ast.Name):
            if call.func.id in self.class_defs and call.func.id not in self.functions:
                cls = self.class_defs[call.func.id]
                return [d for d in cls.body if isinstance(d, FuncDef) and d.name == "__init__"]
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
        params = self.params(call, func)
        bound = {n for n in names if n.startswith("self.")}
        for param, arg in zip(params, call.args):
            if self.uses(arg, names):
                bound.add(param)
        for kw in call.keywords:
            if kw.arg and self.uses(kw.value, names):
                bound.add(kw.arg)
        return bound

    @staticmethod
    def params(call: ast.Call, func: ast.AST) -> list[str]:
        """The parameters `call`'s positional arguments land in (`self` skipped for a method or a constructor)."""
        params = [a.arg for a in func.args.posonlyargs + func.args.args]
        if (
            params
            and params[0] in ("self", "cls")
            and (isinstance(call.func, ast.Attribute) or func.name == "__init__")
        ):
            params = params[1:]
        return params

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


def _boolish(node: ast.AST) -> bool:
    """A value that can be a guard: a comparison, `and`/`or`/`not`, a call (`is_master(args)`), another name."""
    return isinstance(node, (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Call, ast.Name, ast.Attribute)) and not (
        isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not)
    )


def short(node: ast.AST, width: int = 70) -> str:
    """`node`'s source, cut to `width` characters: evidence quotes the code, not a page of it."""
    text = unparse(node)
    return text if len(text) <= width else text[: width - 3] + "..."


# ---- what kind of script is this? (shared by the checks in labkit.doctor.script) ----
def is_ddp(f: ScriptFacts) -> bool:
    """Runs as several processes that it wires up itself (DDP, a process group, mp.spawn)."""
    return f.references("DistributedDataParallel", "init_process_group") or bool(
        [c for c in f.calls_named("spawn") if "multiprocessing" in f.call_name(c) or "mp." in f.call_name(c)]
    )


LAUNCHER_ENV = ("WORLD_SIZE", "RANK", "LOCAL_RANK")  # what torchrun (and the legacy launcher) set for each rank


def multi_process(f: ScriptFacts) -> bool:
    """Meant to run as several processes: it wires them up itself (`is_ddp`), uses accelerate, or reads the rank
    or the world size a launcher sets (`ddp = int(os.environ.get("WORLD_SIZE", 1)) != 1`)."""
    return (
        is_ddp(f)
        or f.references("Accelerator")
        or any(isinstance(n, ast.Constant) and n.value in LAUNCHER_ENV for n in ast.walk(f.tree))
        or bool(_ordered_processes(f))
    )


def _ordered_processes(f: ScriptFacts) -> list[ast.Call]:
    """`with training_args.main_process_first(desc=...):` (transformers, accelerate): a block that exists only to
    let the main process go first and the others wait, so the script is written to run as several processes."""
    return [c for c in f.calls if f.call_name(c).split(".")[-1] in ("main_process_first", "local_main_process_first")]


def launch_line(f: ScriptFacts) -> int | None:
    """Where the script shows it runs as several processes (a process group, DDP, a spawn, accelerate, Fabric, the
    launcher's environment): the first line of the evidence for the checks that only matter then."""
    for c in f.calls:
        if f.call_name(c).split(".")[-1] in (
            "init_process_group",
            "DistributedDataParallel",
            "spawn",
            "Accelerator",
            "Fabric",
        ):
            return c.lineno
    for node in ast.walk(f.tree):
        if isinstance(node, ast.Constant) and node.value in LAUNCHER_ENV:
            return node.lineno
    ordered = _ordered_processes(f)
    return ordered[0].lineno if ordered else None


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


def guarded(f: ScriptFacts, node: ast.AST) -> bool:
    """Is every path to `node` behind a rank-0 test (here, by early return, or at every caller)?"""
    return guard_chain(f, node)[0]


def guard_chain(
    f: ScriptFacts, node: ast.AST, seen: set[int] | None = None
) -> tuple[bool, list[tuple[int | None, str]]]:
    """(is every path to `node` behind a rank test, the evidence: each test above it and why it is or is not one,
    and the callers of its function when the answer is theirs)."""
    seen = seen if seen is not None else set()
    why: list[tuple[int | None, str]] = []
    func = None
    for anc in f.ancestors(node):
        if isinstance(anc, (ast.If, ast.IfExp, ast.While)):
            reason = f.rank_test_reason(anc.test)
            if reason:
                return True, [*why, (anc.lineno, f"guarded by `{short(anc.test)}`: {reason}")]
            why.append((anc.lineno, f"`{short(anc.test)}` is not a rank test: nothing in it derives from the rank"))
        if isinstance(anc, FuncDef):
            func = anc
            break
    if func is None:
        return False, [*why, (node.lineno, "module-level code: every process runs it")]
    if id(func) in seen:
        return False, why
    seen.add(id(func))
    for stmt in ast.walk(func):  # `if rank != 0: return` before the save
        if isinstance(stmt, ast.If) and stmt.lineno < node.lineno and any(isinstance(s, ast.Return) for s in stmt.body):
            reason = f.rank_test_reason(stmt.test)
            if reason:
                return True, [*why, (stmt.lineno, f"`{short(stmt.test)}` returns early: {reason}")]
    callers = [c for c in f.callers(func) if not f.dead(c)]
    if not callers:
        return False, [*why, (func.lineno, f"`{func.name}()` is not called from a guarded place in this file")]
    for c in callers:
        ok, sub = guard_chain(f, c, seen)
        if not ok:
            return False, [*why, (c.lineno, f"`{func.name}()` is called here without a rank test"), *sub]
    return True, [*why, (func.lineno, f"every call of `{func.name}()` is behind a rank test")]
