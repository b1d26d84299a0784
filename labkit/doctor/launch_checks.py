"""The launch checks of `labkit doctor script`: where each rank's local rank comes from, and
whether the model is on that rank's GPU before DistributedDataParallel wraps it.

`--local_rank` is the deprecated launcher's contract (`python -m torch.distributed.launch`
passes it; torchrun does not, so every rank would keep the default).  Many real scripts
(MAE, DINO, timm, diffusers) still declare the argument but take the local rank from
LOCAL_RANK in the environment, or overwrite the argument with it: that is a leftover, not a
bug.  So the argument is followed from `args.local_rank` through assignments and the file's
own functions, and only a value that reaches a device or the process group is `legacy_launch`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from labkit.doctor.ast_facts import Hit, ScriptFacts, is_const, is_simple_value, kwarg, short, strings, unparse
from labkit.doctor.dataflow import project_helper

LOCAL_RANK_FLAGS = ("--local_rank", "--local-rank")
ENV_LOCAL_RANK = ("LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK")
# a value passed to these calls, or as one of these keywords, picks this rank's device or process
DEVICE_CALLS = (
    "set_device",
    "set_device_index",
    "device",
    "cuda",
    "to",
    "init_process_group",
    "DistributedDataParallel",
    "DataParallel",
)
DEVICE_KEYWORDS = ("device_ids", "output_device", "device", "device_map", "local_rank", "rank")


@dataclass
class LocalRankArg:
    """A declared `--local_rank` argument and what becomes of its value."""

    call: ast.Call  # the add_argument(...)
    flag: str
    default: str  # its default as written ("None" when absent)
    use: ast.AST | None = None  # where the command-line value reaches a device or the process group
    overwrite: ast.Assign | None = None  # `args.local_rank = <something else>`
    from_env: bool = False  # ...and that something is LOCAL_RANK from the environment
    required: bool = False  # `required=True`: the script cannot start unless the deprecated launcher passes it
    fills_env: ast.AST | None = None  # `os.environ["LOCAL_RANK"] = str(args.local_rank)`: handed to who reads it


def _argparse_dest(flags: list[str]) -> str:
    """The attribute argparse stores an option under: its first long flag (`add_argument("--rank", "--local_rank")`
    is `args.rank`), else its first short one, dashes made underscores."""
    flag = next((fl for fl in flags if fl.startswith("--")), flags[0])
    return flag.lstrip("-").replace("-", "_")


def _declared(f: ScriptFacts) -> tuple[ast.Call, str, str] | None:
    for c in f.calls_named("add_argument"):
        flags = [a.value for a in c.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        flag = next((fl for fl in flags if fl in LOCAL_RANK_FLAGS), None)
        if flag:
            dest = kwarg(c, "dest")
            named = isinstance(dest, ast.Constant) and isinstance(dest.value, str)
            return c, flag, dest.value if named else _argparse_dest(flags)
    for func in (n for n in ast.walk(f.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for c in func.decorator_list:  # click/typer: `@click.option("--local_rank", ...)` over `def main(...)`
            if isinstance(c, ast.Call) and f.call_name(c).split(".")[-1] == "option":
                flags = [a.value for a in c.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                flag = next((fl for fl in flags if fl in LOCAL_RANK_FLAGS), None)
                if flag:
                    return c, flag, flag.lstrip("-").replace("-", "_")
    return None


def _option_params(f: ScriptFacts, option: ast.Call, dest: str) -> list[tuple[int, str]]:
    """Where a decorator option's value lands: the decorated function's parameter `dest`, or, when it takes
    `**kwargs` and hands them on (`train(**kwargs)`), the parameter `dest` of the function it calls."""
    func = next((n for n in ast.walk(f.tree) if option in getattr(n, "decorator_list", ())), None)
    if func is None:
        return []
    if dest in [a.arg for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs]:
        return [(id(func), dest)]
    if func.args.kwarg is None:
        return []
    out = []
    for c in (n for n in ast.walk(func) if isinstance(n, ast.Call)):
        if any(k.arg is None and unparse(k.value) == func.args.kwarg.arg for k in c.keywords):
            for target in f.targets(c):
                if dest in [a.arg for a in target.args.posonlyargs + target.args.args + target.args.kwonlyargs]:
                    out.append((id(target), dest))
    return out


def _mentions_env(node: ast.AST, env_names: set[str]) -> bool:
    return any(s in ENV_LOCAL_RANK for s in strings(node)) or any(
        isinstance(n, ast.Name) and n.id in env_names for n in ast.walk(node)
    )


def _env_names(f: ScriptFacts) -> set[str]:
    """Variables holding LOCAL_RANK from the environment (`env_local_rank = int(os.environ.get("LOCAL_RANK", -1))`)."""
    names: set[str] = set()
    assigns = [a for a in ast.walk(f.tree) if isinstance(a, ast.Assign) and is_simple_value(a.value)]
    for _ in range(4):
        before = len(names)
        for a in assigns:
            if _mentions_env(a.value, names):
                names.update(t.id for t in a.targets if isinstance(t, ast.Name))
        if len(names) == before:
            break
    return names


class _Flow:
    """Names that hold the command-line local rank, scoped by the function they live in."""

    def __init__(self, f: ScriptFacts, dest: str):
        self.f, self.dest = f, dest
        self.attrs: set[str] = set()  # `args.local_rank`, `args.gpu = args.local_rank`
        self.names: set[tuple[int, str]] = set()  # (id of the enclosing function or 0, name)

    def _scope(self, node: ast.AST) -> int:
        func = self.f.enclosing_function(node)
        return id(func) if func is not None else 0

    def holds(self, node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.ctx, ast.Load)
                and ((sub.attr == self.dest and unparse(sub.value) != "self") or unparse(sub) in self.attrs)
            ):
                return True
            if (
                isinstance(sub, ast.Name)
                and isinstance(sub.ctx, ast.Load)
                and ((self._scope(sub), sub.id) in self.names or (0, sub.id) in self.names)
            ):
                return True
        return False

    def _add(self, target: ast.AST, scope: int) -> bool:
        before = len(self.attrs) + len(self.names)
        if isinstance(target, ast.Attribute):
            self.attrs.add(unparse(target))
        elif isinstance(target, ast.Name):
            self.names.add((scope, target.id))
        return len(self.attrs) + len(self.names) > before

    def spread(self) -> None:
        """Follow simple assignments (`local_rank = args.local_rank`) and calls into the file's functions."""
        for _ in range(6):
            grew = False
            for node in ast.walk(self.f.tree):
                if isinstance(node, ast.Assign) and is_simple_value(node.value) and self.holds(node.value):
                    for t in node.targets:
                        if not (isinstance(t, ast.Attribute) and t.attr == self.dest):
                            grew |= self._add(t, self._scope(node))
                elif isinstance(node, ast.Call):
                    for func in self.f.targets(node):
                        params = [a.arg for a in func.args.posonlyargs + func.args.args]
                        if params and params[0] in ("self", "cls") and isinstance(node.func, ast.Attribute):
                            params = params[1:]
                        passed = list(zip(params, node.args)) + [(k.arg, k.value) for k in node.keywords if k.arg]
                        for param, value in passed:
                            if self.holds(value):
                                grew |= self._add(ast.Name(id=param, ctx=ast.Store()), id(func))
            if not grew:
                break

    def device_uses(self) -> list[ast.AST]:
        """Calls, keywords and "cuda:%d" strings that put the value into a device or the process group."""
        uses = []
        for node in ast.walk(self.f.tree):
            if isinstance(node, ast.Call):
                last = self.f.call_name(node).split(".")[-1]
                if last in DEVICE_CALLS and any(self.holds(a) for a in node.args):
                    uses.append(node)
                elif any(k.arg in DEVICE_KEYWORDS and self.holds(k.value) for k in node.keywords):
                    uses.append(node)
            elif (
                isinstance(node, (ast.JoinedStr, ast.BinOp))
                and any("cuda" in s for s in strings(node))
                and self.holds(node)
            ):
                uses.append(node)
        return sorted(uses, key=lambda n: n.lineno)


def local_rank_arg(f: ScriptFacts) -> LocalRankArg | None:
    """The `--local_rank` argument, if declared: does its value reach a device or the process group?"""
    if "local_rank_arg" not in f.memo:
        f.memo["local_rank_arg"] = _follow_local_rank_arg(f)
    return f.memo["local_rank_arg"]


def _follow_local_rank_arg(f: ScriptFacts) -> LocalRankArg | None:
    found = _declared(f)
    if found is None:
        return None
    call, flag, dest = found
    default = kwarg(call, "default")
    arg = LocalRankArg(call, flag, unparse(default) if default is not None else "None")
    arg.required = is_const(kwarg(call, "required"), True)
    if default is not None and any(s in ENV_LOCAL_RANK for s in strings(default)):
        arg.from_env = True  # default=int(os.environ["LOCAL_RANK"]): right under torchrun too
        return arg
    env = _env_names(f)
    for node in ast.walk(f.tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == dest for t in node.targets):
            arg.overwrite = node
            arg.from_env = _mentions_env(node.value, env)
            break
    flow = _Flow(f, dest)
    flow.names.update(_option_params(f, call, dest))
    flow.spread()
    arg.fills_env = _fills_env(f, flow)
    for use in flow.device_uses():
        if arg.overwrite is not None and not (
            f.same_function(use, arg.overwrite) and use.lineno < arg.overwrite.lineno
        ):
            continue  # the value was replaced before it got here
        arg.use = use
        break
    return arg


def _fills_env(f: ScriptFacts, flow: _Flow) -> ast.AST | None:
    """`os.environ["LOCAL_RANK"] = str(args.local_rank)` (or `os.environ.setdefault("LOCAL_RANK", ...)`): the value
    becomes the environment's LOCAL_RANK, which the code that reads it (a library's runner) then uses."""
    for node in ast.walk(f.tree):
        if isinstance(node, ast.Assign) and flow.holds(node.value):
            for t in node.targets:
                if (
                    isinstance(t, ast.Subscript)
                    and unparse(t.value).split(".")[-1] == "environ"
                    and ENV_LOCAL_RANK[0] in strings(t.slice)
                ):
                    return node
        elif (
            isinstance(node, ast.Call)
            and f.call_name(node).endswith("environ.setdefault")
            and len(node.args) == 2
            and ENV_LOCAL_RANK[0] in strings(node.args[0])
            and flow.holds(node.args[1])
        ):
            return node
    return None


def _reads_env_local_rank(f: ScriptFacts) -> bool:
    return any(isinstance(n, ast.Constant) and n.value in ENV_LOCAL_RANK for n in ast.walk(f.tree))


def check_legacy_launch(f: ScriptFacts) -> list[tuple]:
    """The deprecated launcher's contract: a `--local_rank` value that decides the device or that the script
    cannot start without (`required=True`), an import of `torch.distributed.launch`, or a launch line documented
    with it (and nowhere with torchrun)."""
    hits = []
    arg = local_rank_arg(f)
    if arg is not None and arg.required:  # whatever becomes of the value, torchrun's launch stops at parse_args
        declared = (arg.call.lineno, f"`{short(arg.call)}`: `required=True`")
        return [
            Hit(
                arg.call.lineno,
                f"`{arg.flag}` is declared `required=True`: torchrun passes no `{arg.flag}`, so argparse exits "
                "before training starts; the script runs only under the deprecated `python -m "
                "torch.distributed.launch`",
                "required",
                (declared, (None, f"torchrun sets LOCAL_RANK in the environment and passes no `{arg.flag}` argument")),
            )
        ]
    if arg is not None and arg.use is not None:
        hits.append(
            Hit(
                arg.call.lineno,
                f"the local rank comes from the `{arg.flag}` command-line argument (line {arg.use.lineno} "
                f"puts it into the device or process group): torchrun passes no `{arg.flag}`, so every rank "
                f"would keep the default {arg.default}",
                why=(
                    (arg.call.lineno, f"`{short(arg.call)}` declares it, default {arg.default}"),
                    (arg.use.lineno, f"`{short(arg.use)}` uses the command-line value"),
                ),
            )
        )
    for node in ast.walk(f.tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [f"{node.module}.{a.name}" for a in node.names]
            )
            if any(m == "torch.distributed.launch" for m in mods):
                hits.append((node.lineno, "imports torch.distributed.launch"))
    own_help = range(arg.call.lineno, arg.call.end_lineno + 1) if arg is not None else range(0)
    docs = sorted(f.comments_and_strings())
    # a file that also documents torchrun offers the old launch as an alternative, not as the only way to start it
    modern = any("torchrun" in text for _, text in docs)
    for line, text in docs if not modern else ():
        if line in own_help:
            continue  # the argument's own help text describes the argument: see unused_local_rank_arg
        if "torch.distributed.launch" in text and not re.search(r"torchrun|instead|deprecat|legacy", text, re.I):
            hits.append((line, "launches or documents `python -m torch.distributed.launch`"))
    hits = sorted(hits[:1])
    if hits and (arg is None or arg.use is None) and _reads_env_local_rank(f):
        return [Hit(*hits[0])._replace(variant="reads_env")]  # the fix is only the launch command: LOCAL_RANK is read
    return hits


def _namespace_handed_on(f: ScriptFacts) -> ast.Call | None:
    """The parsed namespace handed whole to the project's own code (`config = get_config(args)`, Swin/TinyViT):
    whatever it does with `args.local_rank` happens where this file cannot see."""
    spaces = set()
    for node in ast.walk(f.tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if f.call_name(node.value).split(".")[-1] in ("parse_args", "parse_known_args"):
                t = node.targets[0]
                spaces.add(unparse(t.elts[0] if isinstance(t, (ast.Tuple, ast.List)) else t))
    for c in f.calls:
        if not f.dead(c) and project_helper(f, c) and any(unparse(a) in spaces for a in c.args):
            return c
    return None


def check_unused_local_rank_arg(f: ScriptFacts) -> list[tuple[int, str]]:
    """A `--local_rank` argument that decides nothing: kept so the deprecated launcher's `--local_rank=N`
    parses. Harmless today, misleading to the next reader (a note, not a warning)."""
    arg = local_rank_arg(f)
    if arg is None or arg.use is not None or arg.required or (arg.overwrite is None and arg.from_env):
        return []
    if arg.fills_env is not None and arg.overwrite is None:
        return []  # it fills LOCAL_RANK when the launcher did not: the value decides the rank's device there
    if arg.overwrite is None and _namespace_handed_on(f) is not None:
        return []  # `config = get_config(args)`: the project's code reads the whole namespace, its local rank too
    if arg.overwrite is not None:
        source = "LOCAL_RANK from the environment" if arg.from_env else f"`{unparse(arg.overwrite.value)}`"
        why = f"line {arg.overwrite.lineno} replaces it with {source}"
    else:
        why = "this file never uses its value for the device or the process group"
    return [
        (
            arg.call.lineno,
            f"`{arg.flag}` is declared but {why}: the argument is only there so the deprecated "
            f"launcher's `{arg.flag}=N` parses",
        )
    ]


# ---- the model on this rank's device ----------------------------------------------------
def _is_move(f: ScriptFacts, call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr in ("to", "cuda")


CUDA_FIXED = re.compile(r"^cuda(:\d+)?$")  # "cuda", "cuda:0": the same card whatever the rank


def _fixed_cuda(f: ScriptFacts, node: ast.AST | None, seen: int = 0) -> str | None:
    """The device expression `node` stands for, as written, when it names one CUDA card for every rank: `"cuda"`,
    `torch.device("cuda")`, `torch.device("cuda" if torch.cuda.is_available() else "cpu")`, or a variable every
    assignment of which is one of these. None when it carries a per-rank index (or cannot be told)."""
    if node is None or seen > 4:
        return None
    if isinstance(node, ast.Constant):
        return repr(node.value) if isinstance(node.value, str) and CUDA_FIXED.match(node.value) else None
    if isinstance(node, ast.IfExp):  # "cuda" if available else "cpu": on a GPU node the "cuda" side runs
        sides = [_fixed_cuda(f, b, seen + 1) for b in (node.body, node.orelse)]
        others = [b for b, side in zip((node.body, node.orelse), sides) if side is None]
        if any(sides) and all(_host_device(o) for o in others):
            return unparse(node)
        return None
    if isinstance(node, ast.Call) and f.call_name(node).split(".")[-1] == "device":
        if len(node.args) == 1 and not node.keywords and _fixed_cuda(f, node.args[0], seen + 1):
            return unparse(node)
        return None
    if isinstance(node, (ast.List, ast.Tuple)):  # devices = ["cuda" if available else "cpu"]
        return unparse(node) if node.elts and all(_fixed_cuda(f, e, seen + 1) for e in node.elts) else None
    if isinstance(node, ast.Subscript) and isinstance(node.value, (ast.Name, ast.Attribute)):  # devices[0]
        return _fixed_cuda(f, node.value, seen + 1)
    if isinstance(node, (ast.Name, ast.Attribute)):
        key = unparse(node)
        assigns = [
            a for a in ast.walk(f.tree) if isinstance(a, ast.Assign) and any(unparse(t) == key for t in a.targets)
        ]
        if assigns and all(_fixed_cuda(f, a.value, seen + 1) for a in assigns):
            return f"{key} = {unparse(assigns[0].value)}` (line {assigns[0].lineno})"
    return None


def _host_device(node: ast.AST) -> bool:
    """A host device, `"cpu"` / `"mps"` / `torch.device("cpu")`: not a CUDA card (the other side of `"cuda" if ... else "cpu"`)."""
    if isinstance(node, ast.Call) and len(node.args) == 1:
        node = node.args[0]
    return is_const(node, "cpu", "mps")


def _bare_cuda(f: ScriptFacts, call: ast.Call) -> str | None:
    """`.cuda()` / `.to("cuda")` / `.to(device)` with `device = torch.device("cuda" if ... else "cpu")`: card 0 for
    every rank unless a per-rank device was set. Returns how the script names that device (None: a per-rank one)."""
    if call.func.attr == "cuda":
        return "`.cuda()`" if not call.args and kwarg(call, "device") is None else None
    arg = call.args[0] if call.args else kwarg(call, "device")
    fixed = _fixed_cuda(f, arg)
    if not fixed:
        return None
    return f"`.to({unparse(arg)})`" + (f" with `{fixed}" if isinstance(arg, (ast.Name, ast.Attribute)) else "")


def _assigned(node: ast.Assign) -> set[str]:
    """The names an assignment binds, tuples unpacked: `model, tokenizer = init_model(...)` binds `model`."""
    out = set()
    for t in node.targets:
        out.update(unparse(e) for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]))
    return out


def _made_elsewhere(f: ScriptFacts, ddp: ast.Call) -> ast.Call | None:
    """`model = build_model(cfg)` where `build_model` is the project's own function in another file (detectron2's
    `build_model` places the model on `cfg.MODEL.DEVICE`): whether it moves the model is not in this file."""
    arg = ddp.args[0] if ddp.args else kwarg(ddp, "module")
    if not isinstance(arg, (ast.Name, ast.Attribute)):
        return None
    key = unparse(arg)
    for node in ast.walk(f.tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and key in _assigned(node)
            and project_helper(f, node.value)
            and not f.call_name(node.value).split(".")[-1][:1].isupper()  # a class of the project: a plain module
        ):
            return node.value
    return None


def _dict_entry_moves(f: ScriptFacts, arg: ast.AST, keys: set[str]) -> list[ast.Call]:
    """`model = {"generator": Generator().to(device), ...}` then `DDP(model["generator"])`: the entry's own move (an
    entry that is a variable joins `keys`, to be followed like the model itself)."""
    if not (isinstance(arg, ast.Subscript) and isinstance(arg.slice, ast.Constant)):
        return []
    holder, moves = unparse(arg.value), []
    for node in ast.walk(f.tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and holder in _assigned(node):
            for k, v in zip(node.value.keys, node.value.values):
                if isinstance(k, ast.Constant) and k.value == arg.slice.value:
                    if isinstance(v, ast.Call) and _is_move(f, v):
                        moves.append(v)
                    else:
                        keys.add(unparse(v))
    return moves


def _model_moves(f: ScriptFacts, ddp: ast.Call) -> list[ast.Call] | None:
    """The `.to()`/`.cuda()` calls that put the wrapped model on a device before `ddp`."""
    arg = ddp.args[0] if ddp.args else kwarg(ddp, "module")
    if arg is None:
        return None
    if isinstance(arg, ast.Call) and _is_move(f, arg):
        return [arg]
    keys = {unparse(arg), unparse(arg).split(".")[-1]}
    func = f.enclosing_function(ddp)
    if func is not None and isinstance(arg, ast.Name):
        params = [a.arg for a in func.args.posonlyargs + func.args.args]
        if arg.id in params:  # wrap(model): the caller's variable is the model
            i = params.index(arg.id) - (1 if params[0] in ("self", "cls") else 0)
            for site in f.callers(func):
                if 0 <= i < len(site.args):
                    keys.add(unparse(site.args[i]))
    copied = True
    while copied:  # `ema = copy.deepcopy(model)`: the copy is made on the device its source is on
        copied = False
        for node in ast.walk(f.tree):
            value = node.value if isinstance(node, ast.Assign) else None
            if not (isinstance(value, ast.Call) and f.call_name(value).split(".")[-1] == "deepcopy" and value.args):
                continue
            src = unparse(value.args[0])
            if _assigned(node) & keys and src not in keys:
                keys.add(src)
                copied = True
    moves = _dict_entry_moves(f, arg, keys)
    for node in ast.walk(f.tree):  # model = Net(device=...) / model = build_model() whose body moves it
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _assigned(node) & keys:
            made = node.value
            if kwarg(made, "device") is not None or kwarg(made, "device_map") is not None:
                moves.append(made)
            elif any(isinstance(n, ast.Call) and _is_move(f, n) for n, _ in f.reachable(f.targets(made))):
                moves.append(made)
    for c in f.calls:
        if not _is_move(f, c):
            continue
        recv = unparse(c.func.value)
        assigned = f.parents.get(c)
        target_keys = _assigned(assigned) if isinstance(assigned, ast.Assign) else set()
        if (
            recv in keys
            or recv.split(".")[-1] in keys
            or target_keys & keys
            or any(t.split(".")[-1] in keys for t in target_keys)
        ):
            if f.same_function(c, ddp) and c.lineno > ddp.lineno:
                continue  # moved after wrapping: too late
            if any(n is ddp for n in ast.walk(c.func.value)):
                continue  # `DistributedDataParallel(model, ...).to(device)`: the wrapper is moved, after wrapping
            moves.append(c)
    return moves


def _branch(f: ScriptFacts, node: ast.AST, stop: ast.If) -> str:
    """Which side of `stop` (an `if` above `node`) holds it: "body", "orelse" or "test"."""
    child = node
    for anc in f.ancestors(node):
        if anc is stop:
            break
        child = anc
    return "body" if child in stop.body else "orelse" if child in stop.orelse else "test"


def _exclusive(f: ScriptFacts, a: ast.AST, b: ast.AST) -> bool:
    """Do `a` and `b` sit in opposite branches of one `if` (imagenet's `if args.gpu is not None: ... else: ...`)?"""
    above_b = {id(n) for n in f.ancestors(b)}
    common = next((n for n in f.ancestors(a) if id(n) in above_b), None)
    return isinstance(common, ast.If) and {_branch(f, a, common), _branch(f, b, common)} == {"body", "orelse"}


def _device_set(f: ScriptFacts, ddp: ast.Call) -> tuple[bool, bool]:
    """(a per-rank device is set on the way to `ddp`, one is set only in another branch)."""
    if "CUDA_VISIBLE_DEVICES" in f.source:
        return True, False
    sets = f.calls_named("set_device", "set_device_index")
    applies = [s for s in sets if not (f.same_function(s, ddp) and _exclusive(f, s, ddp))]
    return bool(applies), bool(sets) and not applies


def _pile_up(move: str, ddp: ast.Call | None, elsewhere: bool = False) -> str:
    """The finding's message: how the script names the device, and the card every rank ends up on."""
    card = re.search(r"cuda:\d+", move)
    wrap = f"`{unparse(ddp.func)}(...)`" if ddp is not None else "DistributedDataParallel"
    setter = "`torch.cuda.set_device` runs only in the other branch" if elsewhere else "no `torch.cuda.set_device`"
    return (
        f"{move} names no per-rank device ({setter}) and {wrap} has no `device_ids`: on a GPU node every rank "
        f"lands on {card.group(0) if card else 'cuda:0'}"
    )


def _only_bare(f: ScriptFacts, moves: list[ast.AST], ddp: ast.Call) -> bool:
    """Every move on the way to `ddp` (not those in the other branch of an `if`) is a bare `.cuda()`/`.to("cuda")`."""
    on_path = [m for m in moves if not _exclusive(f, m, ddp)]
    return bool(on_path) and all(
        isinstance(m, ast.Call) and isinstance(m.func, ast.Attribute) and _bare_cuda(f, m) for m in on_path
    )


def _per_rank_ids(f: ScriptFacts, ddp: ast.Call) -> bool:
    """DDP's `device_ids` carry the rank (`[local_rank]`, `devices` from `range(rank * n, ...)`), so they are not the
    card a bare `.cuda()` picks."""
    ids = kwarg(ddp, "device_ids") or (ddp.args[1] if len(ddp.args) > 1 else None)
    if ids is None or _fixed_cuda(f, ids) or is_const(ids, None):
        return False
    if not [c for c in f.calls_named("init_process_group") if not f.dead(c)]:
        return False  # the group is joined in code this file does not show (DINO's `init_distributed_mode`),
        # which usually sets the card too
    if f.mentions_rank(ids):
        return True
    keys = {unparse(n) for n in ast.walk(ids) if isinstance(n, (ast.Name, ast.Attribute))}
    return any(isinstance(a, ast.Assign) and _assigned(a) & keys and f.mentions_rank(a.value) for a in ast.walk(f.tree))


def check_model_not_on_device(f: ScriptFacts) -> list[tuple[int, str]]:
    """DDP wraps the module where it is: an unmoved model trains on CPU (or fails), and
    `.cuda()` without a per-rank device piles every rank onto cuda:0."""
    if not re.search(r"nccl|cuda", f.source, re.I):
        return []
    hits = []
    ddps = f.calls_named("DistributedDataParallel")
    for ddp in ddps:
        moves = _model_moves(f, ddp)
        if moves is None:
            continue
        has_ids = kwarg(ddp, "device_ids") is not None or len(ddp.args) > 1
        device_set, elsewhere = _device_set(f, ddp)
        bare = [b for m in moves if isinstance(m.func, ast.Attribute) for b in [_bare_cuda(f, m)] if b]
        if not moves and (helper := _made_elsewhere(f, ddp)) is not None:
            hits.append(
                Hit(
                    ddp.lineno,
                    f"the model comes from `{unparse(helper.func)}`, which this file does not define: whether it "
                    "is placed on this rank's GPU before DistributedDataParallel wraps it is not known here",
                    why=(
                        (helper.lineno, f"`{short(helper)}` makes the model: the project's own code, not in this file"),
                        (ddp.lineno, f"`{short(ddp)}` wraps it; no `.to()`/`.cuda()` of it in this file"),
                    ),
                    unknown=True,
                )
            )
        elif not moves:
            hits.append(
                (
                    ddp.lineno,
                    "the model is wrapped in DistributedDataParallel without first being moved to this rank's GPU",
                )
            )
        elif not device_set and not has_ids and bare:
            hits.append(
                (
                    ddp.lineno,
                    _pile_up(bare[0], ddp, elsewhere),
                )
            )
        elif not device_set and has_ids and _only_bare(f, moves, ddp) and _per_rank_ids(f, ddp):
            ids = kwarg(ddp, "device_ids") or ddp.args[1]
            bare = [_bare_cuda(f, m) for m in moves if not _exclusive(f, m, ddp)]
            hits.append(
                Hit(
                    ddp.lineno,
                    f"{bare[0]} puts the model on the current card, cuda:0 for every rank (no "
                    f"`torch.cuda.set_device`), while `device_ids={short(ids)}` names this rank's card: the model "
                    "is not where DistributedDataParallel runs it",
                    why=(
                        *(
                            (m.lineno, f"`{short(m)}` moves the model to the current card")
                            for m in moves
                            if not _exclusive(f, m, ddp)
                        ),
                        (ddp.lineno, f"`{short(ddp)}` expects it on `{short(ids)}`, which depends on the rank"),
                        (None, "no `torch.cuda.set_device(...)` runs before, so the current card is cuda:0"),
                    ),
                )
            )
    if (
        not hits
        and ddps
        and all(kwarg(d, "device_ids") is None and len(d.args) < 2 and not _device_set(f, d)[0] for d in ddps)
    ):
        bare = [c for c in f.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "cuda" and _bare_cuda(f, c)]
        if bare:
            hits.append((bare[0].lineno, _pile_up("`.cuda()`", None)))
    return hits
