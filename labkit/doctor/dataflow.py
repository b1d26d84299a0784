"""What the values of a training script are, followed from where they were made (one file, read with `ast`).

A name says little: the optimizer may be `adam`, `self.g_opt` or a DeepSpeed `model_engine`; the model
the loop trains may be the one DistributedDataParallel wrapped, or its `.module` taken back out.  So
`Flow` follows a value from the expressions that make it through

- assignments, tuple unpacking included (`model, opt = accelerator.prepare(model, opt)` pairs them up),
- the parameters of the file's own functions, methods and constructors (`Trainer(model, opt)` lands in
  `Trainer.__init__`, `self.opt = opt` carries it on as an attribute),
- the return values of the file's functions (`opt = build_optimizer(cfg)`),

and keeps, for each name that holds it, the chain of lines that got it there (what `--explain` prints).
On top of it: the optimizer and its steps (the hand-written loop), the model the optimizers train, and
which calls are the project's own code in another file.  Whether the model is wrapped is asked in
labkit.doctor.wrap_checks.
"""

from __future__ import annotations

import ast
import re
import sys

from labkit.doctor.ast_facts import FuncDef, ScriptFacts, Why, kwarg, unparse

Key = tuple[int, str]  # (id of the function the name lives in, 0 for module level and attributes; the name)
# calls that hand their arguments back, one for one: `model, opt = accelerator.prepare(model, opt)`
PASS_THROUGH = ("prepare", "setup", "setup_optimizers", "initialize", "optimize")

# where optimizers come from: a constructor of one of these libraries (not a learning-rate schedule)
OPTIMIZER_LIBRARIES = (
    "torch.optim",
    "torch.distributed.optim",
    "transformers",
    "bitsandbytes",
    "apex.optimizers",
    "deepspeed.ops",
    "timm.optim",
    "torch_optimizer",
    "lion_pytorch",
    "schedulefree",
)
OPTIMIZER_CLASS = re.compile(
    r"^(Adam\w*|SGD\w*|Lion\w*|Lamb|LAMB|Adafactor|RMSprop|Adagrad|Adadelta|NAdam|RAdam|LBFGS|ASGD|Rprop|"
    r"SparseAdam|Fused\w+|DeepSpeedCPUAdam|PagedAdam\w*|Sophia\w*|Muon|LARS|create_optimizer\w*|\w+Optimizer)$"
)


class Flow:
    """The names and attributes that hold a value made by `sources` (expression -> what it is)."""

    def __init__(self, f: ScriptFacts, sources: dict[ast.AST, str], seeded: list[tuple[ast.AST, ast.AST, str]] = ()):
        self.f = f
        self.sources = {id(n): (n, what) for n, what in sources.items()}
        self.held: dict[Key, Why] = {}
        self.returns: dict[int, dict[int | None, Why]] = {}  # id(function) -> {tuple index or None: chain}
        for target, node, what in seeded:  # a target bound by the maker itself (deepspeed.initialize's engine)
            self._add(target, node, ((node.lineno, what),))
        self._spread()

    # ---- which name a node stands for ------------------------------------------------
    def _scopes(self, node: ast.AST) -> list[int]:
        return [id(a) for a in self.f.ancestors(node) if isinstance(a, FuncDef)] + [0]

    def _key(self, target: ast.AST, node: ast.AST) -> Key | None:
        if isinstance(target, ast.Attribute):
            return (0, unparse(target))
        if isinstance(target, ast.Name):
            return (self._scopes(node)[0], target.id)
        return None

    def chain(self, expr: ast.AST | None) -> Why | None:
        """How `expr` came to hold the value (the chain of lines), or None when it does not."""
        if expr is None:
            return None
        if id(expr) in self.sources:
            node, what = self.sources[id(expr)]
            return ((node.lineno, what),)
        if isinstance(expr, ast.Name):
            for scope in self._scopes(expr):
                if (scope, expr.id) in self.held:
                    return self.held[(scope, expr.id)]
        elif isinstance(expr, ast.Attribute):
            return self.held.get((0, unparse(expr)))
        elif isinstance(expr, ast.IfExp):
            return self.chain(expr.body) or self.chain(expr.orelse)
        elif isinstance(expr, (ast.List, ast.Tuple, ast.Set)):  # `optimizers = [opt_g, opt_d]`: one holds it
            return next((c for c in map(self.chain, expr.elts) if c), None)
        elif isinstance(expr, ast.Subscript):  # `optimizers[0]`
            return self.chain(expr.value)
        elif isinstance(expr, ast.Call):
            for func in self.f.targets(expr):
                if None in self.returns.get(id(func), {}):
                    return self.returns[id(func)][None]
            if _pass_through(expr) and len(expr.args) == 1:
                return self.chain(expr.args[0])
        return None

    # ---- spreading ---------------------------------------------------------------------
    def _add(self, target: ast.AST, node: ast.AST, chain: Why) -> bool:
        key = self._key(target, node)
        if key is None or key in self.held:
            return False
        if chain[-1][0] == node.lineno:  # made and named on one line: `adam = torch.optim.Adam(...)`
            self.held[key] = chain[:-1] + ((node.lineno, f"{chain[-1][1]}, held by `{unparse(target)}`"),)
        else:
            self.held[key] = chain[-3:] + ((node.lineno, f"`{unparse(target)}` holds it"),)
        return True

    def _pairs(self, node: ast.AST) -> list[tuple[ast.AST, Why | None]]:
        """(target, the chain its value carries) for one assignment or `for`, tuple unpacking paired up."""
        if isinstance(node, ast.For):  # `for opt in optimizers:` takes one of what the container holds
            return [(node.target, self.chain(node.iter))] if isinstance(node.target, ast.Name) else []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            return []
        out = []
        for t in targets:
            if isinstance(t, (ast.Tuple, ast.List)):
                if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(t.elts):
                    out += [(te, self.chain(ve)) for te, ve in zip(t.elts, value.elts)]
                elif isinstance(value, ast.Call) and _pass_through(value) and len(value.args) == len(t.elts):
                    out += [(te, self.chain(ve)) for te, ve in zip(t.elts, value.args)]
                elif isinstance(value, ast.Call):
                    for func in self.f.targets(value):
                        for i, te in enumerate(t.elts):
                            out.append((te, self.returns.get(id(func), {}).get(i)))
            else:
                out.append((t, self.chain(value)))
        return out

    def _spread(self) -> None:
        assigns = [n for n in ast.walk(self.f.tree) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.For))]
        returns = [n for n in ast.walk(self.f.tree) if isinstance(n, ast.Return) and n.value is not None]
        for _ in range(8):
            grew = False
            for node in assigns:
                for target, chain in self._pairs(node):
                    if chain:
                        grew |= self._add(target, node, chain)
            for call in self.f.calls:
                for func in self.f.targets(call):
                    passed = list(zip(self.f.params(call, func), call.args))
                    passed += [(k.arg, k.value) for k in call.keywords if k.arg]
                    for param, value in passed:
                        chain = self.chain(value)
                        if chain and (id(func), param) not in self.held:
                            line = (call.lineno, f"passed to `{func.name}()` as `{param}`")
                            self.held[(id(func), param)] = chain[-3:] + (line,)
                            grew = True
            for r in returns:
                func = self.f.enclosing_function(r)
                if func is None:
                    continue
                slots = self.returns.setdefault(id(func), {})
                values = list(enumerate(r.value.elts)) if isinstance(r.value, ast.Tuple) else [(None, r.value)]
                for i, v in values:
                    chain = self.chain(v)
                    if chain and i not in slots:
                        slots[i] = chain[-3:] + ((r.lineno, f"returned by `{func.name}()`"),)
                        grew = True
            if not grew:
                break


def _pass_through(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr in PASS_THROUGH


# ---- the optimizer and the loop that steps it ------------------------------------------------
def is_optimizer_constructor(f: ScriptFacts, call: ast.Call) -> bool:
    """`torch.optim.AdamW(...)`, `bnb.optim.AdamW8bit(...)`, `transformers.Adafactor(...)`, `create_optimizer_v2(...)`,
    or a class of this file built on `torch.optim.Optimizer`; never a learning-rate schedule."""
    name = f.call_name(call)
    last = name.split(".")[-1]
    if last in f.class_defs:
        return any(unparse(b).split(".")[-1] == "Optimizer" for b in f.class_defs[last].bases)
    if "lr_scheduler" in name or "swa_utils" in name or not name.startswith(OPTIMIZER_LIBRARIES):
        return False
    if name.startswith("torch.optim.") and name.count(".") == 2:
        return last[:1].isupper() and last != "Optimizer"
    return bool(OPTIMIZER_CLASS.match(last))


def optimizers(f: ScriptFacts) -> Flow:
    """Every name that holds an optimizer (or a DeepSpeed engine, which steps one), from where it was made."""
    if "optimizers" not in f.memo:
        sources = {c: f"`{unparse(c.func)}(...)` makes an optimizer" for c in f.calls if is_optimizer_constructor(f, c)}
        seeded = []
        for node in ast.walk(f.tree):  # engine, optimizer, _, _ = deepspeed.initialize(...)
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and f.call_name(node.value).endswith("deepspeed.initialize")
                and isinstance(node.targets[0], ast.Tuple)
            ):
                for i, what in enumerate(("a DeepSpeed engine (it steps its optimizer)", "DeepSpeed's optimizer")):
                    if i < len(node.targets[0].elts):
                        seeded.append((node.targets[0].elts[i], node, f"`deepspeed.initialize(...)` makes {what}"))
        f.memo["optimizers"] = Flow(f, sources, seeded)
    return f.memo["optimizers"]


def deepspeed_engine(f: ScriptFacts, step: ast.Call) -> bool:
    """Is `step` a DeepSpeed engine's step (its clipping and schedule come from the DeepSpeed config)?"""
    chain = optimizers(f).chain(step.func.value) if isinstance(step.func, ast.Attribute) else None
    return bool(chain) and "DeepSpeed engine" in chain[0][1]


def backward_calls(f: ScriptFacts) -> list[ast.Call]:
    return [c for c in f.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "backward" and not f.dead(c)]


def optimizer_steps(f: ScriptFacts) -> list[ast.Call]:
    """`adam.step()` where `adam` holds an optimizer, whatever its name; `optimizer.step()`, `opt.step()`,
    `scaler.step(optimizer)` by name where the optimizer was made elsewhere; not `scheduler.step()`."""
    flow = optimizers(f)
    out = []
    for c in f.calls:
        if not (isinstance(c.func, ast.Attribute) and c.func.attr == "step") or f.dead(c):
            continue
        recv = unparse(c.func.value).lower()
        if flow.chain(c.func.value) or any(flow.chain(a) for a in c.args):
            out.append(c)
        elif "sched" in recv:
            continue
        elif "opt" in recv or "scaler" in recv or any("optim" in unparse(a).lower() for a in c.args):
            out.append(c)
    return out


def scaler_steps(f: ScriptFacts) -> list[ast.Call]:
    """`loss_scaler(loss, optimizer, ...)`: timm's/MAE's NativeScaler runs backward and the step in one call."""
    flow = optimizers(f)
    out = []
    for c in f.calls:
        name = f.call_name(c).split(".")[-1]
        if "scaler" in name.lower() and len(c.args) >= 2 and not f.dead(c):
            if "opt" in unparse(c.args[1]).lower() or flow.chain(c.args[1]):
                out.append(c)
    return out


def hand_loop(f: ScriptFacts) -> ast.Call | None:
    """The optimizer step of a hand-written loop (`backward()` then `optimizer.step()`, or a loss
    scaler called with the loss and the optimizer), if any."""
    steps = optimizer_steps(f) if backward_calls(f) else []
    steps = sorted(steps + scaler_steps(f), key=lambda c: (c.lineno, c.col_offset))
    return steps[0] if steps else None


def loop_of(f: ScriptFacts, node: ast.AST) -> ast.AST | None:
    """The outermost loop around `node` in its function (or, if none there, around a call of its function)."""
    outer = None
    for anc in f.ancestors(node):
        if isinstance(anc, (ast.For, ast.While, ast.AsyncFor)):
            outer = anc
        if isinstance(anc, FuncDef):
            if outer is None:
                callers = [c for c in f.callers(anc) if not f.dead(c)]
                if len(callers) == 1 and callers[0] is not node:
                    return loop_of(f, callers[0])
            break
    return outer


def loop_evidence(f: ScriptFacts, step: ast.Call) -> Why:
    """Where the optimizer was made and how it reached this step; the backward pass and the step."""
    flow = optimizers(f)
    recv = step.func.value if isinstance(step.func, ast.Attribute) else None
    chain = flow.chain(recv) or next((flow.chain(a) for a in step.args if flow.chain(a)), None)
    if chain is None and recv is not None and not isinstance(recv, ast.Call):
        what = "the loss scaler" if step in scaler_steps(f) else f"`{unparse(recv)}`"
        chain = (
            (None, f"{what} is taken for an optimizer by its name: no optimizer constructor in this file reaches it"),
        )
    why = list(chain or ())
    backward = [b for b in backward_calls(f) if b.lineno <= step.lineno and f.same_function(b, step)]
    if backward:
        why.append((backward[-1].lineno, f"`{unparse(backward[-1].func)}()`: the backward pass"))
    loop = loop_of(f, step)
    where = f", in the loop at line {loop.lineno}" if loop is not None else ""
    call = unparse(step) if len(unparse(step)) <= 60 else f"{unparse(step.func)}(...)"
    why.append((step.lineno, f"`{call}` steps the optimizer{where}: a hand-written training loop"))
    return tuple(why)


# ---- the project's own code, and the model the optimizers train ------------------------------
# libraries whose functions are known not to be a project's own helpers
LIBRARIES = (
    "torch",
    "numpy",
    "transformers",
    "datasets",
    "accelerate",
    "deepspeed",
    "lightning",
    "pytorch_lightning",
    "timm",
    "torchvision",
    "torchaudio",
    "diffusers",
    "peft",
)


def project_helper(f: ScriptFacts, c: ast.Call) -> bool:
    """A function the project defines elsewhere: imported from a module that is not a known library (or an
    attribute of such a module), not defined in this file; or a method of an object such a function or class
    made (`mp = MixedPrecisionTrainer(model=model)`, then `mp.optimize(opt)`), followed by data flow."""
    if _imported_project_call(f, c):
        return True
    return isinstance(c.func, ast.Attribute) and bool(project_objects(f).chain(c.func.value))


def project_objects(f: ScriptFacts) -> Flow:
    """Every name that holds what a project's own function or class (defined in another file) returned."""
    if "project_objects" not in f.memo:
        sources = {
            c: f"`{unparse(c.func)}(...)` is the project's own code" for c in f.calls if _imported_project_call(f, c)
        }
        f.memo["project_objects"] = Flow(f, sources)
    return f.memo["project_objects"]


def _imported_project_call(f: ScriptFacts, c: ast.Call) -> bool:
    if isinstance(c.func, ast.Name) and (c.func.id in f.functions or c.func.id in f.class_defs):
        return False
    root = f.call_name(c).split(".")[0]
    base = c.func
    while isinstance(base, ast.Attribute):
        base = base.value
    if not (isinstance(base, ast.Name) and base.id in f.imported):
        return False
    return root not in LIBRARIES and root not in sys.stdlib_module_names


def model_of(f: ScriptFacts) -> set[str]:
    """What the optimizers train: the receivers of `X.parameters()` in their constructors' first argument."""
    flow = optimizers(f)
    out = set()
    for node_id, (node, _) in flow.sources.items():
        params = node.args[0] if node.args else kwarg(node, "params")
        for sub in ast.walk(params) if params is not None else ():
            if (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Attribute)
                and sub.func.attr
                in (
                    "parameters",
                    "named_parameters",
                )
            ):
                out.add(unparse(sub.func.value))
    return out
