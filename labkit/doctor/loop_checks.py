"""The training-loop checks of `labkit doctor script`: gradient clipping, seeding, warmup.

Each is recognised the way real scripts write it, not by one call's name: clipping through the
file's own helpers, timm's `dispatch_clip_grad`, a loss scaler called with `clip_grad=`, Fabric's
`fabric.clip_gradients`, accelerate's `accelerator.clip_grad_norm_`; seeding through a project's
`fix_random_seeds(...)`; warmup through a schedule, a `warmup_*` setting or a hand-written ramp.
A library's trainer owns these concerns only when the name really comes from that library
(labkit.doctor.frameworks).  The loop is found by data flow (labkit.doctor.dataflow): whatever an
optimizer constructor returned is the optimizer, whatever it is called.  Where the file hands the loop
to code it does not define (a DeepSpeed engine configured by JSON, the project's `train_one_epoch`),
clipping and warmup are reported as `unknown`, not guessed.
"""

from __future__ import annotations

import ast
import re

from labkit.doctor.ast_facts import (
    FuncDef,
    Hit,
    ScriptFacts,
    Why,
    has_splat,
    is_const,
    kwarg,
    launch_line,
    names_in,
    multi_process,
    short,
    unparse,
)
from labkit.doctor.dataflow import (
    Flow,
    backward_calls,
    deepspeed_engine,
    is_optimizer_constructor,
    hand_loop,
    loop_evidence,
    optimizer_steps,
    optimizers,
    project_helper,
    scaler_steps,
)
from labkit.doctor.frameworks import (
    HF_TRAINERS,
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


def clip_calls(f: ScriptFacts) -> list[tuple[ast.Call, bool]]:
    """Clipping in the file: a call whose name says so, a clipping keyword (not None/0), or clipping by hand
    (`p.grad.clamp_(-c, c)`); inside a helper of the file, only if the file calls (or passes on) that helper.
    Each with whether it is a setting (`max_grad_norm=1.0` handed to a library, which clips wherever it steps)."""
    used = {n.id for n in ast.walk(f.tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(f.tree) if isinstance(n, ast.Attribute)
    }
    out = []
    for c in f.calls:
        func = f.enclosing_function(c)
        if func is not None and func.name not in used:
            continue  # a helper nobody calls clips nothing
        if CLIPS_BY_NAME.search(f.call_name(c).split(".")[-1]):
            out.append((c, False))
        elif any(k.arg in CLIP_KEYWORDS and not is_const(k.value, None, 0, False) for k in c.keywords):
            out.append((c, True))
        elif (
            isinstance(c.func, ast.Attribute)
            and c.func.attr in ("clamp_", "clip_")
            and ".grad" in unparse(c.func.value)
        ):
            out.append((c, False))
    return out


def clips_gradients(f: ScriptFacts) -> bool:
    return bool(clip_calls(f))


def _branch(f: ScriptFacts, node: ast.AST, cond: ast.If) -> str | None:
    """Which arm of `cond` holds `node`: "body", "orelse", or None when it is not inside `cond`'s arms."""
    child = node
    for a in f.ancestors(node):
        if a is cond:
            return "body" if child in cond.body else "orelse" if child in cond.orelse else None
        child = a
    return None


def _step_in_another_branch(f: ScriptFacts) -> tuple[ast.Call, ast.If, ast.Call] | None:
    """`if algo == "a2c": ...backward(); clip_grad_norm_(...); opt.step()  elif algo == "ppo": ...backward();
    opt.step()`: the file clips, but only in an arm of an `if` that the arm holding this backward-and-step never
    reaches. Every clip call must sit in such a sibling arm of the same function (a clip in a helper, or a setting
    handed to a library, is taken to cover every step). Returns (the unclipped step, the `if`, a clip)."""
    clips = clip_calls(f)
    if not clips or any(setting for _, setting in clips):
        return None
    for step in optimizer_steps(f):
        arm_has_backward = False
        separated = []
        for clip, _ in clips:
            if not f.same_function(clip, step):
                return None
            cond = next(
                (
                    a
                    for a in f.ancestors(step)
                    if isinstance(a, ast.If) and {_branch(f, step, a), _branch(f, clip, a)} == {"body", "orelse"}
                ),
                None,
            )
            if cond is None:
                break
            separated.append((cond, clip))
        else:
            cond = separated[0][0]
            arm = cond.body if _branch(f, step, cond) == "body" else cond.orelse
            arm_has_backward = any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
                for stmt in arm
                for n in ast.walk(stmt)
            )
        if separated and len(separated) == len(clips) and arm_has_backward:
            return step, separated[0][0], separated[0][1]
    return None


def helper_loop(f: ScriptFacts) -> ast.Call | None:
    """`train_one_epoch(model, optimizer, loader, ...)` in a loop, where the function is the project's own code in
    another file: the optimizer is made here and stepped there (torchvision's references, DINO, MAE)."""
    flow = optimizers(f)
    for c in f.calls:
        if (
            f.dead(c)
            or not project_helper(f, c)
            or not any(isinstance(a, (ast.For, ast.While)) for a in f.ancestors(c))
        ):
            continue
        if any(flow.chain(a) or _optimizer_from_helper(f, a) for a in c.args + [k.value for k in c.keywords]):
            return c
    return None


def _optimizer_from_helper(f: ScriptFacts, value: ast.AST) -> ast.Call | None:
    """`optimizer = get_optimizer(cfg, model)`: a variable assigned what the project's own helper named for making an
    optimizer returned (HRNet, SlowFast's `construct_optimizer`), then handed on: the assignment's call."""
    if not isinstance(value, ast.Name):
        return None
    for n in ast.walk(f.tree):
        if (
            isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Call)
            and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)
            and re.search(r"optim", f.call_name(n.value).split(".")[-1], re.I)
            and project_helper(f, n.value)
            and not f.dead(n)
        ):
            return n.value
    return None


def compile_fit(f: ScriptFacts) -> ast.Call | None:
    """Keras-style training (bert4torch, torchkeras): an optimizer handed to `model.compile(optimizer=...)` and the
    same model trained by `model.fit(...)`. The library steps that optimizer with the schedule it was given (the
    `compile` call is returned); `torch.compile(model)` takes no optimizer and is not this."""
    flow = optimizers(f)
    for c in f.calls_named("compile"):
        if not isinstance(c.func, ast.Attribute) or f.dead(c):
            continue
        given = [kwarg(c, "optimizer"), *c.args]
        if not any(a is not None and flow.chain(a) for a in given):
            continue
        model = unparse(c.func.value)
        for fit in f.calls_named("fit"):
            if isinstance(fit.func, ast.Attribute) and unparse(fit.func.value) == model and not f.dead(fit):
                return c
    return None


def lightning_fit(f: ScriptFacts, schedule: bool = False) -> tuple[ast.ClassDef, ast.Call, ast.Call] | None:
    """Lightning with the module written here: a LightningModule subclass of this file makes its optimizer in
    `configure_optimizers`, and a Trainer made here with settings written out (no `**kwargs`, no command-line
    Trainer) fits it. Its clipping is the Trainer's `gradient_clip_val`, its schedule what configure_optimizers
    returns: both are this file's to give. Returns (the module, the Trainer call, the fit call).

    `schedule=True` asks only about the schedule: the Trainer's flags hold none (configure_optimizers returns it), so
    a Trainer from the command line (`Trainer.from_argparse_args(args)`) or from `**kwargs` leaves it this file's;
    LightningCLI does not (its `--lr_scheduler` is a command-line setting)."""
    if not uses_lightning(f):
        return None
    module = next(
        (
            cls
            for cls in f.class_defs.values()
            if any(unparse(b).split(".")[-1] == "LightningModule" for b in cls.bases)
            and any(isinstance(n, FuncDef) and n.name == "configure_optimizers" for n in cls.body)
        ),
        None,
    )
    made = ("Trainer", "Trainer.from_argparse_args") if schedule else ("Trainer",)
    trainers = [c for c in f.calls if f.call_name(c).endswith(made) and not f.dead(c)]
    if module is None or len(trainers) != 1 or (has_splat(trainers[0]) and not schedule):
        return None
    if schedule:  # the schedule is configure_optimizers': it must make the optimizer here, not hand the job on
        configure = next(n for n in module.body if isinstance(n, FuncDef) and n.name == "configure_optimizers")
        reached = [n for n, _ in f.reachable(list(configure.body))]
        if not any(isinstance(n, ast.Call) and is_optimizer_constructor(f, n) for n in reached):
            return None  # `return configure_optimizers(self)` of the project's own module (Fengshenbang)
    cli = ("LightningCLI", "CLI") if schedule else ("from_argparse_args", "LightningCLI", "CLI")
    if any(f.call_name(c).split(".")[-1] in cli for c in f.calls):
        return None  # the Trainer's settings come from the command line
    fit = next((c for c in f.calls_named("fit") if isinstance(c.func, ast.Attribute) and not f.dead(c)), None)
    return (module, trainers[0], fit) if fit is not None else None


def _lightning_evidence(found: tuple[ast.ClassDef, ast.Call, ast.Call]) -> Why:
    module, trainer, fit = found
    return (
        (
            module.lineno,
            f"`{module.name}` is a LightningModule of this file: its configure_optimizers makes the optimizer",
        ),
        (
            trainer.lineno,
            f"`{short(trainer)}` is made from the command line: its flags hold no learning-rate schedule"
            if unparse(trainer.func).endswith("from_argparse_args")
            else f"`{short(trainer)}` is made here with its settings written out",
        ),
        (fit.lineno, f"`{short(fit)}` trains it: Lightning's loop steps the optimizer"),
    )


def _compile_fit_evidence(f: ScriptFacts, compiled: ast.Call) -> Why:
    flow = optimizers(f)
    opt = next(a for a in [kwarg(compiled, "optimizer"), *compiled.args] if a is not None and flow.chain(a))
    fit = next(x for x in f.calls_named("fit") if unparse(x.func.value) == unparse(compiled.func.value))
    return (
        *flow.chain(opt),
        (compiled.lineno, f"`{short(compiled.func)}(...)` is given the optimizer"),
        (fit.lineno, f"`{short(fit)}` trains with it: the library's loop steps it with the schedule it was given"),
    )


def _handed_over(f: ScriptFacts, step: ast.Call | None, concern: str) -> Hit | None:
    """The `unknown` finding where the loop's `concern` lives in code this file does not define."""
    if step is not None and deepspeed_engine(f, step):
        why = (
            *loop_evidence(f, step),
            (None, f"DeepSpeed sets {concern} in its JSON config, which this file does not show"),
        )
        return Hit(
            step.lineno,
            f"the DeepSpeed engine steps the optimizer: its {concern} is set in the DeepSpeed config, not in this file",
            why=why,
            unknown=True,
        )
    helper = helper_loop(f) if step is None else None
    compiled = compile_fit(f) if step is None and helper is None else None
    if compiled is not None and concern == "gradient clipping":  # the schedule is what compile() was given; clipping
        return Hit(  # is the library loop's own default, which this file does not show
            compiled.lineno,
            f"`{unparse(compiled.func.value)}.fit` steps the optimizer in the library's loop: whether it applies "
            f"{concern} by default is not known here",
            why=_compile_fit_evidence(f, compiled),
            unknown=True,
        )
    if helper is not None:
        handed = helper.args + [k.value for k in helper.keywords]
        chain = next((optimizers(f).chain(a) for a in handed if optimizers(f).chain(a)), None) or next(
            (
                ((made.lineno, f"`{short(made)}` makes the optimizer: the project's own code"),)
                for a in handed
                if (made := _optimizer_from_helper(f, a)) is not None
            ),
            (),
        )
        why = (
            *chain,
            (
                helper.lineno,
                f"`{unparse(helper.func)}(...)` gets the optimizer: the project's own code, not in this file",
            ),
        )
        return Hit(
            helper.lineno,
            f"the optimizer is stepped inside `{unparse(helper.func)}`, which this file does not define: "
            f"whether it applies {concern} is not known here",
            why=why,
            unknown=True,
        )
    return None


def check_no_grad_clip(f: ScriptFacts) -> list[Hit]:
    """One bad batch can blow the weights up (the course's exploding-gradients notebook)."""
    step = hand_loop(f)
    if clips_gradients(f):
        beside = _step_in_another_branch(f)
        if beside is None:
            return []
        unclipped, cond, clip = beside
        why = (
            (clip.lineno, f"`{short(clip)}` clips, in one arm of the `if` at line {cond.lineno}"),
            (unclipped.lineno, f"`{short(unclipped)}` steps the optimizer in another arm, after its own backward"),
            (None, "nothing clips on the way from that backward to that step"),
        )
        return [
            Hit(
                unclipped.lineno,
                f"this optimizer step is not clipped: the file clips only in another arm of the `if` at line {cond.lineno}",
                why=why,
            )
        ]
    handed = _handed_over(f, step, "gradient clipping")
    if handed is not None:
        return [handed]
    if step is None:
        lit = lightning_fit(f)
        if lit is None:
            return []
        why = (*_lightning_evidence(lit), (None, NO_CLIP + ", no `gradient_clip_val=` given to the Trainer"))
        return [Hit(lit[1].lineno, "Lightning's Trainer steps the optimizer without gradient clipping", why=why)]
    why = (*loop_evidence(f, step), (None, NO_CLIP))
    if step in scaler_steps(f):  # the loss scaler runs backward and the step: it is where clipping goes
        return [
            Hit(
                step.lineno,
                "the loss scaler steps the optimizer without gradient clipping (no `clip_grad=`)",
                "loss_scaler",
                why,
            )
        ]
    return [Hit(step.lineno, "a hand-written loop steps the optimizer without gradient clipping", why=why)]


NO_CLIP = (
    "nothing in the file clips: no clip_grad_norm_/clip_grad_value_/clip_gradients call (its own helpers followed), "
    "no clip_grad=/max_grad_norm= setting, no `p.grad.clamp_()`"
)


DETERMINISM = re.compile(r"determinis", re.I)


def _handed_a_seed(c: ast.Call) -> bool:
    """`set_determinism(cfg.training.seed)`, `make_deterministic(seed=42)`: an argument that is (or names) a seed."""
    return any(k.arg == "seed" for k in c.keywords) or any(
        "seed" in " ".join(names_in(a)).lower() for a in (*c.args, *(k.value for k in c.keywords))
    )


# a framework's call that starts the run (`launch_from_torch`, `init_distributed`, `setup_environment`)
LAUNCH = re.compile(r"launch|^init|setup|initiali[sz]e", re.I)


def _launch_seed(f: ScriptFacts, c: ast.Call) -> bool:
    """`colossalai.launch_from_torch(config={}, seed=42)`: a framework's launch handed `seed=` seeds every process
    it starts (one value for all) -- not this file's own `setup(..., seed=)`, whose body the checks read instead."""
    seed = kwarg(c, "seed")
    return seed is not None and not is_const(seed, None) and not f.targets(c)


def _seed_calls(f: ScriptFacts, numpy_too: bool = False) -> list[ast.Call]:
    """Calls that seed torch (with `numpy_too`, also numpy's and Python's global generators); a project's own
    `init_seeds(...)`/`setup_seed(...)` is given the benefit of the doubt, and so is a project's helper named for
    determinism that is handed the seed (`set_determinism(cfg.seed)`: seeding is what makes a run deterministic;
    torch's own `use_deterministic_algorithms` pins kernels and seeds nothing). Never a seed in dead code."""
    out = []
    for c in f.calls:
        name = f.call_name(c)
        last = name.split(".")[-1]
        if f.dead(c):
            continue
        if DETERMINISM.search(last) and not name.startswith("torch.") and _handed_a_seed(c):
            out.append(c)
            continue
        if LAUNCH.search(last) and _launch_seed(f, c):
            out.append(c)
            continue
        if "seed" not in last.lower():
            continue
        if name in ("random.seed", "numpy.random.seed", "np.random.seed"):
            if numpy_too:
                out.append(c)
            continue
        if last.startswith("manual_seed") and (not name.startswith("torch") or "()" in name):
            continue  # torch.Generator().manual_seed(...) seeds a private generator
        if last == "seed" and c.args and _module_function(f, c) and not name.startswith("torch."):
            out.append(c)  # `util.seed(seed)` (audiotools): a library's function named for seeding, handed the seed
            continue
        if last in ("initial_seed", "seed") or last.startswith("get_"):
            continue  # torch.seed() draws a fresh seed; `env.seed(s)` seeds an environment, not torch
        out.append(c)
    return out


def _module_function(f: ScriptFacts, c: ast.Call) -> bool:
    """`util.seed(...)` where `util` is an imported module (`from audiotools.core import util`), not an object's
    method (`env.seed(...)`)."""
    root = c.func
    while isinstance(root, ast.Attribute):
        root = root.value
    if not (isinstance(root, ast.Name) and isinstance(c.func, ast.Attribute)):
        return False
    return any(
        isinstance(n, (ast.Import, ast.ImportFrom))
        and any((a.asname or a.name).split(".")[0] == root.id for a in n.names)
        for n in ast.walk(f.tree)
    )


def _lift(f: ScriptFacts, node: ast.AST, func: ast.AST | None) -> ast.AST | None:
    """`node`, or the call (of its function, through single callers) that stands for it inside `func`."""
    for _ in range(4):
        outer = f.enclosing_function(node)
        if outer is func:
            return node
        if outer is None:
            return None
        callers = [c for c in f.callers(outer) if not f.dead(c)]
        if len(callers) != 1:
            return None
        node = callers[0]
    return None


def _seeds_each_run(f: ScriptFacts, loop: ast.AST, seed: ast.Call, run: ast.AST) -> bool:
    """`for seed in seeds: set_random_seed(seed); model = build_model(args); pretrain(model, ...)`: the loop is over
    runs, not steps -- after the seed, its body builds the model that the call that trains is handed, so every run
    starts seeded (GraphMAE's repeated runs). A model is what is moved (`.to()`/`.cuda()`) or trained (`.parameters()`)
    in the loop, or what the callee trains. A seed in a loop that trains a model built before it seeds later draws."""
    if not isinstance(run, ast.Call):
        return False
    callee_models = set()
    for target in f.targets(run):  # `train(model, loader)` whose body makes an optimizer of `model.parameters()`
        params = [a.arg for a in target.args.posonlyargs + target.args.args]
        used = {
            unparse(n.func.value)
            for n in ast.walk(target)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "parameters"
        }
        callee_models.update(unparse(a) for a, name in zip(run.args, params) if name in used)
    moved = {
        unparse(n.func.value)
        for n in ast.walk(loop)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("to", "cuda", "parameters")
    }
    handed = {
        unparse(a) for a in (*run.args, *(k.value for k in run.keywords)) if isinstance(a, (ast.Name, ast.Attribute))
    }
    return any(
        isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and seed.lineno < n.lineno < run.lineno
        and any(unparse(t) in handed and (unparse(t) in moved or unparse(t) in callee_models) for t in n.targets)
        for n in ast.walk(loop)
    )


def _seeds_too_late(f: ScriptFacts, seed: ast.Call, training: ast.AST) -> str | None:
    """Why `seed` comes too late to make the run reproducible -- inside the training loop (per-step inputs) or
    after the training step (a sampling generator) -- or None when it can run before training starts."""
    here = _lift(f, training, f.enclosing_function(seed))
    if here is None:
        seed = _lift(f, seed, f.enclosing_function(training))
        here = training if seed is not None else None
    if here is None:
        return None
    inner = next((a for a in f.ancestors(here) if isinstance(a, (ast.For, ast.While))), None)
    if inner is not None and any(a is inner for a in f.ancestors(seed)) and not _seeds_each_run(f, inner, seed, here):
        return (
            f"runs inside the training loop (line {inner.lineno}): it seeds each step's draws, after the model is built"
        )
    if seed.lineno > here.lineno:
        return f"runs after the training step (line {here.lineno}): the model and the data order were drawn unseeded"
    return None


def _fit_on_shuffled_loader(f: ScriptFacts) -> ast.Call | None:
    """`model.fit(train_objectives=[(loader, loss)], ...)`, `trainer.run(train_loader, max_epochs=...)`: a library's
    loop handed a `DataLoader(..., shuffle=True)` this file builds (followed by data flow: through assignments and
    the file's own functions' returns). The order it draws (and the weights the file built) come from torch's global
    generator, which only a seed in this file fixes: the library is handed the loader, not asked to seed. A `run`
    counts only on an engine made from the optimizer (`create_supervised_trainer(model, optimizer, ...)`), not on an
    evaluator's."""
    shuffled = Flow(
        f,
        {
            c: "a DataLoader shuffled here"
            for c in f.calls_named("DataLoader")
            if is_const(kwarg(c, "shuffle"), True) and not f.dead(c)
        },
    )
    opt = optimizers(f)
    engines = Flow(
        f,
        {
            c: "made from the optimizer"
            for c in f.calls
            if not is_optimizer_constructor(f, c)
            and any(opt.chain(a) for a in (*c.args, *(k.value for k in c.keywords)))
        },
    )
    for c in f.calls_named("fit", "train", "run"):
        if not isinstance(c.func, ast.Attribute) or f.dead(c):
            continue
        if c.func.attr == "run" and not engines.chain(c.func.value):
            continue
        given = [n for a in (*c.args, *(k.value for k in c.keywords)) for n in ast.walk(a)]
        if any(isinstance(n, (ast.Name, ast.Attribute, ast.Call)) and shuffled.chain(n) for n in given):
            return c
    return None


def _wrapped_optimizer_step(f: ScriptFacts) -> ast.Call | None:
    """`sched = ScheduledOptim(optim.Adam(...), ...)`, then `sched.step_and_update_lr()` after `loss.backward()`: an
    object built around an optimizer (by code this file does not define) stepped through its own `step...` method.
    The loop is this file's, so is its seeding; what the method does besides stepping (clipping, the schedule) is
    the wrapper's and is not judged from it."""
    if not backward_calls(f):
        return None
    opts = optimizers(f)
    made = {
        c: f"`{short(c.func)}(...)` is built around an optimizer"
        for c in f.calls
        if project_helper(f, c) and any(opts.chain(a) for a in c.args + [k.value for k in c.keywords])
    }
    if not made:
        return None
    around = Flow(f, made)
    for c in f.calls:
        if (
            isinstance(c.func, ast.Attribute)
            and c.func.attr.startswith("step")
            and not f.dead(c)
            and around.chain(c.func.value)
        ):
            return c
    return None


def _spawned(f: ScriptFacts) -> list[tuple[ast.Call, ast.AST]]:
    """`mp.spawn(run, nprocs=n)`: each spawn and the in-file function its children run. torch's spawn always starts
    fresh interpreters (the "spawn" start method): a child imports the file without running its `__main__` block
    and runs only that function, so it inherits none of the parent's generator state."""
    out = []
    for c in f.calls:
        name = f.call_name(c)
        if name.split(".")[-1] != "spawn" or not ("multiprocessing" in name or "mp." in name) or f.dead(c):
            continue
        fn = c.args[0] if c.args else kwarg(c, "fn")
        if isinstance(fn, ast.Name):
            out += [(c, d) for d in f.functions.get(fn.id, [])]
    return out


def _under_main_guard(f: ScriptFacts, node: ast.AST) -> bool:
    return any(
        isinstance(a, ast.If) and "__name__" in unparse(a.test) and "__main__" in unparse(a.test)
        for a in f.ancestors(node)
    )


def _parent_only(f: ScriptFacts, seed: ast.Call, training: ast.AST) -> str | None:
    """Why `seed` never runs in the processes that train: they are `mp.spawn`'s children, and the seed is neither
    in what the child function runs nor at the top of the module (which a spawned child re-imports)."""
    for spawn, child in _spawned(f):
        reached = {id(n) for n, _ in f.reachable([child])}
        if id(training) not in reached or id(seed) in reached:
            continue
        if f.enclosing_function(seed) is None and not _under_main_guard(f, seed):
            continue
        return (
            f"runs only in the parent: the processes `{short(spawn.func)}` starts (line {spawn.lineno}) run "
            f"`{child.name}` in fresh interpreters, which inherit no seed"
        )
    return None


def _gpu_only(f: ScriptFacts, seed: ast.Call) -> str | None:
    """Why `seed` leaves the run unseeded: `torch.cuda.manual_seed(_all)` seeds the CUDA generators only, while a
    model's initial weights are drawn on the CPU (`Model().cuda()`, `.to(device)` copy them afterwards) and the
    DataLoader shuffles with the CPU generator."""
    if f.call_name(seed) in ("torch.cuda.manual_seed", "torch.cuda.manual_seed_all"):
        return "seeds only the GPU generators: weights built on the CPU and the loader's shuffle stay unseeded"
    child = seed
    for a in f.ancestors(seed):  # `if torch.cuda.is_available(): torch.cuda.manual_seed(s) else: torch.manual_seed(s)`
        if isinstance(a, ast.If) and "cuda.is_available" in unparse(a.test):
            negated = isinstance(a.test, ast.UnaryOp) and isinstance(a.test.op, ast.Not)
            if (child in a.orelse) != negated:
                return (
                    f"runs only without a GPU (the CPU arm of `if {short(a.test)}` at line {a.lineno}): on a GPU "
                    "only the CUDA generators are seeded"
                )
        child = a
    return None


def check_no_seed(f: ScriptFacts) -> list[Hit]:
    """Unseeded runs can't be reproduced or compared. Hugging Face's Trainer seeds for you (its
    TrainingArguments default to seed=42); Lightning's does not; a project's own `Trainer` class
    (minGPT-ddp's `from trainer import Trainer`) is not a library that seeds."""
    if uses_hf_arguments(f) or uses_hf_trainer(f):
        return []
    seeds = _seed_calls(f)
    training = hand_loop(f)
    if training is None and uses_lightning(f):
        training = next(iter(f.calls_named("train", "fit")), None)
    if training is None:
        training = helper_loop(f)
    if training is None:
        training = _fit_on_shuffled_loader(f)
    if training is None:
        training = _wrapped_optimizer_step(f)
    if training is not None:
        late = [(s, _gpu_only(f, s) or _seeds_too_late(f, s, training) or _parent_only(f, s, training)) for s in seeds]
        if seeds and not all(why for _, why in late):
            return []
        why = (
            loop_evidence(f, training)
            if training is hand_loop(f)
            else ((training.lineno, f"`{short(training)}` trains"),)
        )
        why = (*why, *((s.lineno, f"`{short(s)}` {reason}") for s, reason in late))
        why = (*why, (None, "no seed call runs before training (torch.manual_seed, a seed_everything/set_seed helper)"))
        return [
            Hit(
                training.lineno,
                "this training script never seeds torch" + (" before training" if seeds else ""),
                why=why,
            )
        ]
    if seeds:
        return []
    own = own_trainer_run(f)
    if own is None:
        return []
    call, cls = own
    where = f"comes from `{cls.rsplit('.', 1)[0]}`" if "." in cls else "is defined in this file"
    return [
        Hit(
            call.lineno,
            f"this training script never seeds torch: its `{cls.split('.')[-1]}` {where}, "
            "the project's own code, not a library that seeds",
            why=((call.lineno, f"`{short(call)}` runs the project's own trainer"), (None, "no seed call in the file")),
        )
    ]


SHUFFLES = ("random_split", "randperm", "shuffle", "sample", "permutation", "train_test_split")


def _sharded(f: ScriptFacts) -> bool:
    """Each rank takes its part of the (shared) dataset: a DistributedSampler, HF's Trainer or accelerate."""
    return f.references("DistributedSampler", "split_dataset_by_node") or uses_hf_trainer(f) or uses_accelerate(f)


def _unseeded_splits(f: ScriptFacts) -> list[Hit]:
    """A split (`random_split`) or a datasets `.shuffle()` with no seed set before it and none of its own, in a
    script every rank runs: each rank draws its own. A `.shuffle()` only matters where the ranks then shard it."""
    if not (multi_process(f) or uses_accelerate(f) or uses_fabric(f)):
        return []
    seeds = _seed_calls(f, numpy_too=True)
    if uses_hf_trainer(f):  # the Trainer seeds (TrainingArguments' seed) when it is built: a seed from there on
        seeds += [c for c in f.calls if f.call_name(c).split(".")[-1] in HF_TRAINERS]
    ops = [c for c in f.calls_named("random_split") if kwarg(c, "generator") is None and len(c.args) <= 2]
    if _sharded(f):  # `ds.shuffle()`: a method given nothing to seed it (random.shuffle(x) takes the data)
        ops += [
            c
            for c in f.calls_named("shuffle")
            if isinstance(c.func, ast.Attribute)
            and unparse(c.func.value) != "self"  # a class of the file reshuffling itself: not the shared dataset
            and not c.args
            and kwarg(c, "seed") is None
            and kwarg(c, "generator") is None
        ]
        # pandas' `df.sample(frac=1.0)` shuffles with numpy's global generator: only a numpy (or a whole-run) seed
        # fixes it, not `torch.manual_seed`
        ops += [
            c
            for c in f.calls_named("sample")
            if isinstance(c.func, ast.Attribute) and kwarg(c, "frac") is not None and kwarg(c, "random_state") is None
        ]
    for op in sorted(ops, key=lambda c: c.lineno):
        in_force = [s for s in seeds if not (_numpy_global(op) and f.call_name(s).startswith("torch."))]
        if f.dead(op) or any(not f.same_function(s, op) or s.lineno < op.lineno for s in in_force):
            continue
        what = "`random_split`" if f.call_name(op).endswith("random_split") else f"`{short(op.func)}()`"
        why = (
            (launch_line(f), "every rank runs this script"),
            (op.lineno, f"{what} has no seed of its own and no seed is set before it"),
            *((s.lineno, f"`{short(s)}` seeds only later") for s in in_force if f.same_function(s, op)),
            *((s.lineno, f"`{short(s)}` seeds torch, not numpy's generator") for s in seeds if s not in in_force),
        )
        harm = (
            "each rank draws a different split, so one rank's training data is another's held-out data"
            if what == "`random_split`"
            else "each rank holds a different order, and the sampler then hands ranks overlapping examples"
        )
        unseeded = (
            "no numpy seed set and no `random_state=`"
            if _numpy_global(op)
            else "no seed set and no generator of its own"
        )
        return [Hit(op.lineno, f"{what} runs on every rank with {unseeded}: {harm}", why=why)]
    return []


def _numpy_global(op: ast.Call) -> bool:
    """`df.sample(frac=...)`: drawn from numpy's global generator, which torch's seed leaves alone."""
    return isinstance(op.func, ast.Attribute) and op.func.attr == "sample" and kwarg(op, "frac") is not None


def _pos(node: ast.AST) -> tuple[int, int]:
    """Where a node starts: `setup_seed(s); perm = torch.randperm(n)` on one line still runs in that order."""
    return node.lineno, node.col_offset


def _ranked(f: ScriptFacts, seed: ast.Call) -> bool:
    return any(f.mentions_rank(a) for a in seed.args + [k.value for k in seed.keywords])


def check_unsynced_seed(f: ScriptFacts) -> list[Hit]:
    """A rank-derived seed -- or no seed at all -- makes each rank split/shuffle the shared dataset
    differently: the ranks' "train" sets overlap the others' validation sets."""
    all_seeds = _seed_calls(f)
    seeds = [c for c in all_seeds if _ranked(f, c)]
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
    ops = [o for o in ops if not f.dead(o) and not (f.same_function(o, seed) and o.lineno < seed.lineno)]
    why = [(seed.lineno, f"`{short(seed)}` derives the seed from the rank")]
    unsynced = []
    for op in ops:  # the seed in force at the op: the last one set before it in its function
        before = [s for s in all_seeds if f.same_function(s, op) and _pos(s) < _pos(op)]
        last = max(before, key=_pos) if before else None
        if last is not None and not _ranked(f, last):
            why.append(
                (
                    op.lineno,
                    f"`{short(op)}` is re-seeded by `{short(last)}` (line {last.lineno}), the same on every rank",
                )
            )
        else:
            unsynced.append(op)
    if not unsynced:
        return []
    why.append((unsynced[0].lineno, f"`{short(unsynced[0])}` splits/shuffles with the rank's seed in force"))
    return [
        Hit(
            seed.lineno,
            f"the torch seed is derived from the rank and line {unsynced[0].lineno} then splits/shuffles the shared dataset with it: every rank gets a different split",
            why=tuple(why),
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
# RAdam rectifies the variance of the adaptive rate over the first steps: the warmup is built into the algorithm
# (Liu et al. 2020, "On the Variance of the Adaptive Learning Rate and Beyond"; torch.optim.RAdam), so a run whose
# only Adam-family optimizer is RAdam needs no schedule warmup of its own
SELF_WARMING = ("RAdam",)
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


def _constant_schedule(call: ast.AST) -> bool:
    """`get_scheduler("constant", opt, num_warmup_steps=...)` (transformers, diffusers): the constant schedule never
    reads its warmup steps (only "constant_with_warmup" and the decaying ones do), so the LR is full from step 0."""
    if not isinstance(call, ast.Call) or "schedul" not in unparse(call.func).lower():
        return False
    name = call.args[0] if call.args else kwarg(call, "name") or kwarg(call, "scheduler_type")
    return is_const(name, "constant")


WARMUP_WORD = re.compile(r"warm_?up", re.I)
SHOWS = ("print", "info", "debug", "warning", "log", "set_description", "set_postfix", "write")
LR_TEXT = re.compile(r"\blr\b|learning_rate|param_groups|sched", re.I)


def _shown(f: ScriptFacts, node: ast.AST) -> bool:
    """`node` only labels output: inside an f-string, a progress bar's `desc=`, or what a print/log call shows."""
    for a in f.ancestors(node):
        if isinstance(a, ast.JoinedStr) or (isinstance(a, ast.keyword) and a.arg in ("desc", "description")):
            return True
        if isinstance(a, ast.Call) and f.call_name(a).split(".")[-1] in SHOWS:
            return True
        if isinstance(a, ast.stmt):
            return False
    return False


def _not_lr_warmups(f: ScriptFacts) -> set[int]:
    """ids of the `warmup` text that has nothing to do with the learning rate: a label shown in the output
    (`tqdm(loader, desc="Warmup")`) and a variable whose every use is shown or gates a branch that touches no
    learning rate (`if step > warmup: time the step`), as a benchmark's timing warmup does."""
    out = {
        id(n)
        for n in ast.walk(f.tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and WARMUP_WORD.search(n.value) and _shown(f, n)
    }

    def idle(use: ast.Name) -> bool:
        if _shown(f, use):
            return True
        test = next((a for a in f.ancestors(use) if isinstance(a, (ast.If, ast.While, ast.IfExp))), None)
        if test is None or not any(use is n for n in ast.walk(test.test)):
            return False
        return not LR_TEXT.search(
            " ".join(unparse(b) for b in (test.body if isinstance(test.body, list) else [test.body]))
        )

    names = [n for n in ast.walk(f.tree) if isinstance(n, ast.Name) and WARMUP_WORD.search(n.id)]
    for name in {n.id for n in names}:
        same = [n for n in names if n.id == name]
        uses = [n for n in same if isinstance(n.ctx, ast.Load)]
        if uses and all(idle(u) for u in uses):
            out |= {id(n) for n in same}
            out |= {id(a) for a in ast.walk(f.tree) if isinstance(a, ast.arg) and a.arg == name}  # `warmup=100`
    return out


def _has_warmup(f: ScriptFacts) -> bool:
    docs = _docstrings(f)
    ignored = {id(n) for c in f.calls if _constant_schedule(c) for n in ast.walk(c)}  # warmup steps it never reads
    ignored |= _not_lr_warmups(f)
    for node in ast.walk(f.tree):
        if id(node) in docs or id(node) in ignored:
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


def _lr_set_here(f: ScriptFacts) -> tuple[int, str] | None:
    """Where this file decides the learning rate itself, outside dead code: it writes a param group's `lr`
    (`for g in opt.param_groups: g["lr"] = ...`) or builds a torch `lr_scheduler` on an optimizer it made. Then
    the schedule, warmup or not, is this file's even when the step is taken in the project's helper."""
    flow = optimizers(f)
    groups = {
        unparse(n.target)
        for n in ast.walk(f.tree)
        if isinstance(n, ast.For) and isinstance(n.target, ast.Name) and unparse(n.iter).endswith("param_groups")
    }
    for node in ast.walk(f.tree):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Store)
            and is_const(node.slice, "lr")
            and (unparse(node.value) in groups or "param_groups" in unparse(node.value))
            and not f.dead(node)
        ):
            return node.lineno, f"`{short(node)} = ...` sets the learning rate in this file"
    for c in f.calls:
        if "lr_scheduler" in f.call_name(c) and not f.dead(c) and any(flow.chain(a) for a in c.args[:1]):
            return c.lineno, f"`{short(c.func)}(...)`: this file builds the learning-rate schedule"
    return None


OPTIMIZER_NAME = re.compile(r"optim|^opts?$", re.I)


def _optimizer_not_shown(f: ScriptFacts, step: ast.Call | None) -> list[Hit]:
    """A hand loop whose optimizer no constructor in this file makes (`opts = model.setup_optimizers(...)`, then
    `opt.step()`) and no warmup anywhere: whether it is an Adam-family optimizer, which needs one, is decided by
    the code that made it -- an `unknown`, not a claim either way."""
    if step is None or any(is_optimizer_constructor(f, c) for c in f.calls):
        return []
    made = next(
        (
            n.value
            for n in ast.walk(f.tree)
            if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Call)
            and not f.dead(n)
            and any(OPTIMIZER_NAME.search(name) for t in n.targets for name in names_in(t))
        ),
        None,
    )
    if made is None:  # nothing says where the optimizer comes from
        return []
    if deepspeed_engine(f, step):  # DeepSpeed's engine: its config's business, left as the DeepSpeed checks have it
        return []
    return [
        Hit(
            step.lineno,
            "the optimizer this loop steps is made by code this file does not define: whether it is an Adam-family "
            "optimizer that needs a learning-rate warmup is not known here (no warmup in the file)",
            why=(
                *loop_evidence(f, step),
                (made.lineno, f"`{short(made)}` makes the optimizer: no optimizer constructor in this file"),
                (None, "no warmup anywhere in the file: no `warmup` setting or schedule, no OneCycleLR/LinearLR"),
            ),
            unknown=True,
        )
    ]


def check_no_warmup(f: ScriptFacts) -> list[Hit]:
    """Adam's first steps use poorly estimated moments: full LR from step 0 derails transformers."""
    step = hand_loop(f)
    compiled = compile_fit(f) if step is None and helper_loop(f) is None else None
    lit = lightning_fit(f, schedule=True) if step is None and helper_loop(f) is None and compiled is None else None
    if _has_warmup(f) or (step is None and helper_loop(f) is None and compiled is None and lit is None):
        return []
    adam = [
        c
        for c in f.calls
        if f.call_name(c).split(".")[-1] in ADAM_FAMILY
        and f.call_name(c).split(".")[-1] not in SELF_WARMING
        and not f.dead(c)
    ]
    models = [c for c in f.calls if TRANSFORMERISH.search(f.call_name(c)) and not f.dead(c)] + [
        c for c in f.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "from_pretrained" and not f.dead(c)
    ]
    if not adam and not models:
        return _optimizer_not_shown(f, step)
    helper = helper_loop(f) if step is None and compiled is None and lit is None else None
    own_lr = _lr_set_here(f) if helper is not None else None
    handed = None if own_lr is not None else _handed_over(f, step, "learning-rate warmup")
    if handed is not None:
        return [handed]
    line = adam[0].lineno if adam else (step or compiled or helper or lit[2]).lineno
    if step is not None:
        loop = loop_evidence(f, step)
    elif lit is not None:
        loop = _lightning_evidence(lit)
    elif compiled is not None:
        loop = _compile_fit_evidence(f, compiled)
    else:  # the project's helper steps the optimizer, but the learning rate is set here
        loop = (
            (helper.lineno, f"`{short(helper)}` steps the optimizer in the project's own code"),
            own_lr,
        )
    why = (
        *loop,
        *(((adam[0].lineno, f"`{short(adam[0].func)}`: an Adam-family optimizer"),) if adam else ()),
        *(((models[0].lineno, f"`{short(models[0].func)}`: a transformer"),) if models else ()),
        (None, "no warmup anywhere in the file: no `warmup` setting or schedule, no OneCycleLR/LinearLR"),
    )
    return [
        Hit(
            line,
            "Adam/transformer training starts at full learning rate (constant LR or a schedule with no warmup)",
            why=why,
        )
    ]
