"""`labkit doctor script PATH...`: the course's pitfalls, found by reading your training script.

The script is parsed with `ast`, never imported or run, so it is safe on any
file and needs no GPU.  Each check below is one pitfall of the course; it
follows calls between the functions defined in the file (a `set_epoch` in
`_run_epoch()` called from the epoch loop counts as inside the loop) and stays
quiet when a library owns the concern (HF `Trainer`, accelerate, Lightning).
A false alarm on a correct script is a bug: when in doubt, a check says nothing.
"""
from __future__ import annotations

import ast
import json
import re
import sys
from dataclasses import asdict, dataclass

from labkit.doctor.ast_facts import (
    ScriptFacts, chunks_text, epoch_loops, guarded, hand_loop, has_splat, is_const, is_ddp, kwarg,
    loader_dataset_is_iterable, names_in, rank_strided, strings, unparse, uses_accelerate, uses_hf_trainer,
    uses_lightning,
)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    code: str
    message: str
    fix: str

    def as_text(self) -> str:
        return f"{self.path}:{self.line}: {self.code}: {self.message} — fix: {self.fix}"


# ---- one function per code ------------------------------------------------------------
def check_legacy_launch(f: ScriptFacts) -> list[tuple[int, str]]:
    """`--local_rank` arguments and `torch.distributed.launch` are the deprecated launcher's
    contract; torchrun passes LOCAL_RANK in the environment instead."""
    hits = []
    for c in f.calls_named("add_argument"):
        flags = [a.value for a in c.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if any(fl in ("--local_rank", "--local-rank") for fl in flags):
            default = kwarg(c, "default")
            if default is not None and any(s == "LOCAL_RANK" for s in strings(default)):
                continue  # default=int(os.environ["LOCAL_RANK"]): works under torchrun
            hits.append((c.lineno, f"local rank comes from the `{flags[0]}` command-line argument"))
    for node in ast.walk(f.tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                f"{node.module}.{a.name}" for a in node.names]
            if any(m == "torch.distributed.launch" for m in mods):
                hits.append((node.lineno, "imports torch.distributed.launch"))
    for line, text in f.comments_and_strings():
        if "torch.distributed.launch" in text and not re.search(r"torchrun|instead|deprecat|legacy", text, re.I):
            hits.append((line, "launches or documents `python -m torch.distributed.launch`"))
    return hits[:1]


def _is_move(f: ScriptFacts, call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr in ("to", "cuda")


def _bare_cuda(call: ast.Call) -> bool:
    """`.cuda()` / `.to("cuda")`: card 0 for every rank unless a per-rank device was set."""
    if call.func.attr == "cuda":
        return not call.args and kwarg(call, "device") is None
    arg = call.args[0] if call.args else kwarg(call, "device")
    if is_const(arg, "cuda"):
        return True
    return isinstance(arg, ast.Call) and unparse(arg.func).endswith("device") and len(arg.args) == 1 and is_const(arg.args[0], "cuda")


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
    moves = []
    for node in ast.walk(f.tree):  # model = Net(device=...) / model = build_model() whose body moves it
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                {unparse(t) for t in node.targets} & keys:
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
        target_keys = {unparse(t) for t in assigned.targets} if isinstance(assigned, ast.Assign) else set()
        if recv in keys or recv.split(".")[-1] in keys or target_keys & keys or \
                any(t.split(".")[-1] in keys for t in target_keys):
            if f.same_function(c, ddp) and c.lineno > ddp.lineno:
                continue  # moved after wrapping: too late
            moves.append(c)
    return moves


def check_model_not_on_device(f: ScriptFacts) -> list[tuple[int, str]]:
    """DDP wraps the module where it is: an unmoved model trains on CPU (or fails), and
    `.cuda()` without a per-rank device piles every rank onto cuda:0."""
    if not re.search(r"nccl|cuda", f.source, re.I):
        return []
    set_device = bool(f.calls_named("set_device")) or "CUDA_VISIBLE_DEVICES" in f.source
    hits = []
    for ddp in f.calls_named("DistributedDataParallel"):
        moves = _model_moves(f, ddp)
        if moves is None:
            continue
        has_ids = kwarg(ddp, "device_ids") is not None or len(ddp.args) > 1
        if not moves:
            hits.append((ddp.lineno, "the model is wrapped in DistributedDataParallel without first being moved to this rank's GPU"))
        elif not set_device and not has_ids and any(_bare_cuda(m) for m in moves):
            hits.append((ddp.lineno, "`.cuda()` with no per-rank device and no `device_ids`: every rank lands on cuda:0"))
    if not hits and not set_device and f.calls_named("DistributedDataParallel"):
        if all(kwarg(d, "device_ids") is None and len(d.args) < 2 for d in f.calls_named("DistributedDataParallel")):
            bare = [c for c in f.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "cuda" and _bare_cuda(c)]
            if bare:
                hits.append((bare[0].lineno, "`.cuda()` with no per-rank device and no `device_ids`: every rank lands on cuda:0"))
    return hits


def check_no_distributed_sampler(f: ScriptFacts) -> list[tuple[int, str]]:
    """Without per-rank sharding every rank trains on the whole dataset: N times the work, no speed-up."""
    if not is_ddp(f) or uses_accelerate(f) or uses_hf_trainer(f) or uses_lightning(f):
        return []
    if f.references("DistributedSampler", "split_dataset_by_node") or rank_strided(f):
        return []
    loaders = [c for c in f.calls_named("DataLoader") if not has_splat(c)]
    loaders = [c for c in loaders if kwarg(c, "sampler") is None and kwarg(c, "batch_sampler") is None]
    loaders = [c for c in loaders if not loader_dataset_is_iterable(f, c)]
    if not loaders:
        return []

    def is_train(c):
        parent = f.parents.get(c)
        text = unparse(c) + (" ".join(unparse(t) for t in parent.targets) if isinstance(parent, ast.Assign) else "")
        return "train" in text.lower()

    train = [c for c in loaders if is_train(c)] or ([loaders[0]] if not any(
        re.search(r"val|test|eval", unparse(f.parents.get(c)), re.I) for c in loaders[:1]) else [])
    return [(train[0].lineno, "the training DataLoader has no DistributedSampler: every rank sees the whole dataset")] if train else []


def check_missing_set_epoch(f: ScriptFacts) -> list[tuple[int, str]]:
    """DistributedSampler shuffles with seed + epoch: without set_epoch every epoch repeats one order."""
    if not f.references("DistributedSampler"):
        return []
    hits = []
    for loop in epoch_loops(f):
        var = {unparse(loop.target)}
        ok = False
        for node, names in f.reachable(list(loop.body), var):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "set_epoch":
                if any(f.uses(a, names) or "epoch" in " ".join(names_in(a)).lower() for a in node.args):
                    ok = True
                    break
        if not ok:
            hits.append((loop.lineno, "the DistributedSampler is iterated over several epochs without `sampler.set_epoch(epoch)` in the epoch loop: every epoch repeats the same order"))
    return hits


def check_no_grad_clip(f: ScriptFacts) -> list[tuple[int, str]]:
    """One bad batch can blow the weights up (the course's exploding-gradients notebook)."""
    step = hand_loop(f)
    if step is None or f.calls_named("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "clip_gradients"):
        return []
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
    """Unseeded runs can't be reproduced or compared; TrainingArguments seeds for you (seed=42)."""
    training = hand_loop(f)
    if training is None and (uses_hf_trainer(f) or uses_lightning(f)):
        training = next(iter(f.calls_named("train", "fit")), None)
    if training is None or _seed_calls(f) or f.references("TrainingArguments", "Seq2SeqTrainingArguments", "SFTConfig"):
        return []
    return [(training.lineno, "this training script never seeds torch")]


SHUFFLES = ("random_split", "randperm", "shuffle", "sample", "permutation", "train_test_split")


def check_unsynced_seed(f: ScriptFacts) -> list[tuple[int, str]]:
    """A rank-derived seed makes each rank split/shuffle the shared dataset differently:
    the ranks' "train" sets overlap the others' validation sets."""
    seeds = [c for c in _seed_calls(f) if any(f.mentions_rank(a) for a in c.args + [k.value for k in c.keywords])]
    if not seeds:
        return []
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
    return [(seed.lineno, f"the torch seed is derived from the rank and line {ops[0].lineno} then splits/shuffles the shared dataset with it: every rank gets a different split")]


TOKENIZE_METHODS = ("encode", "encode_plus", "batch_encode_plus", "__call__")
BUILD_FUNC = re.compile(r"preprocess|tokeniz|encode|convert_examples|build|prepare_(data|features|dataset)|load_(data|dataset)|_features|examples", re.I)


def _is_tokenizer_call(c: ast.Call) -> bool:
    func = c.func
    if isinstance(func, ast.Name):
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
        unparse(kwarg(m, "function")) for m in f.calls_named("map") if kwarg(m, "function") is not None}
    if func.name in mapped or BUILD_FUNC.search(func.name):
        return True
    cls = f.enclosing_class(c)
    return cls is not None and any("Dataset" in unparse(b) for b in cls.bases)


def check_no_truncation(f: ScriptFacts) -> list[tuple[int, str]]:
    """Untruncated inputs overflow the model's max length (T5: 512) or the GPU's memory on one long text."""
    hits = []
    chunked = chunks_text(f)
    for c in f.calls:
        if not _is_tokenizer_call(c) or has_splat(c):
            continue
        trunc = kwarg(c, "truncation")
        if trunc is not None and not is_const(trunc, False, None, "do_not_truncate"):
            continue
        padding = kwarg(c, "padding")
        padded = padding is not None and not is_const(padding, False, None, "do_not_pad")
        if padded or (_builds_examples(f, c) and not chunked):
            hits.append((c.lineno, "the tokenizer is called without `truncation=True`: long texts go past the model's max length"))
    return hits


def check_unsafe_torch_load(f: ScriptFacts) -> list[tuple[int, str]]:
    """`torch.load` unpickles: a checkpoint from elsewhere can run arbitrary code."""
    return [(c.lineno, "`torch.load` without `weights_only=True` unpickles arbitrary objects (code execution on a hostile file)")
            for c in f.calls if f.call_name(c) == "torch.load" and not is_const(kwarg(c, "weights_only"), True)
            and not has_splat(c)]


def check_checkpoint_all_ranks(f: ScriptFacts) -> list[tuple[int, str]]:
    """Every rank writing the same file at once corrupts it (and wastes N-1 writes)."""
    if not (is_ddp(f) or f.references("Accelerator")):
        return []
    hits = []
    for c in f.calls:
        name = f.call_name(c)
        is_save = name == "torch.save" or (
            isinstance(c.func, ast.Attribute) and c.func.attr == "save_pretrained"
            and not re.search(r"tokeni|config|processor|extractor", unparse(c.func.value), re.I))
        if not is_save or kwarg(c, "is_main_process") is not None or has_splat(c):
            continue
        if not guarded(f, c):
            hits.append((c.lineno, "the checkpoint is saved on every rank (no rank-0 guard): they all write the same file"))
    return hits


ADAM_FAMILY = ("Adam", "AdamW", "Adamax", "NAdam", "RAdam", "SparseAdam", "Adafactor", "AdamW8bit",
               "Adam8bit", "PagedAdamW", "FusedAdam", "DeepSpeedCPUAdam", "Lamb", "LAMB")
TRANSFORMERISH = re.compile(r"Transformer|T5|GPT|Bert|BERT|Bart|Llama|AutoModel|Mistral|Qwen")  # case matters: resnet50


def _has_warmup(f: ScriptFacts) -> bool:
    for node in ast.walk(f.tree):
        if isinstance(node, ast.keyword) and node.arg and "warmup" in node.arg.lower() and is_const(node.value, 0):
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
        c.func.attr == "from_pretrained" for c in f.calls if isinstance(c.func, ast.Attribute))
    if not adam and not transformer:
        return []
    line = adam[0].lineno if adam else step.lineno
    return [(line, "Adam/transformer training starts at full learning rate (constant LR or a schedule with no warmup)")]


FIXES = {
    "legacy_launch": "launch with `torchrun --nproc_per_node=N train.py` instead of `python -m torch.distributed.launch`, and read `local_rank = int(os.environ[\"LOCAL_RANK\"])` instead of a `--local_rank` argument",
    "model_not_on_device": "call `torch.cuda.set_device(local_rank)` and `model.to(local_rank)` before `DistributedDataParallel(model, device_ids=[local_rank])`",
    "no_distributed_sampler": "`sampler = DistributedSampler(dataset)` and `DataLoader(dataset, sampler=sampler, shuffle=False)`, then `sampler.set_epoch(epoch)` each epoch",
    "missing_set_epoch": "call `sampler.set_epoch(epoch)` at the top of the epoch loop",
    "no_grad_clip": "call `torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)` between `loss.backward()` and `optimizer.step()` (`accelerator.clip_grad_norm_` with accelerate)",
    "no_seed": "seed once at start: `torch.manual_seed(seed)` or `transformers.set_seed(seed)` (the same seed on every rank)",
    "unsynced_seed": "seed with the same value on every rank (`torch.manual_seed(seed)`) and shard with `DistributedSampler(dataset)`; add the rank only to seeds of per-rank draws",
    "no_truncation": "`tokenizer(..., truncation=True, max_length=512)`",
    "unsafe_torch_load": "`torch.load(path, weights_only=True)` (save a `state_dict`, not a pickled object)",
    "checkpoint_all_ranks": "save from one process: `if rank == 0: torch.save(model.module.state_dict(), path)` (then `dist.barrier()` before others read it)",
    "no_warmup": "warm the LR up, e.g. `get_cosine_with_hard_restarts_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps)` (or `get_scheduler(..., num_warmup_steps=...)`)",
}

CHECKS = {
    "legacy_launch": check_legacy_launch,
    "model_not_on_device": check_model_not_on_device,
    "no_distributed_sampler": check_no_distributed_sampler,
    "missing_set_epoch": check_missing_set_epoch,
    "no_grad_clip": check_no_grad_clip,
    "no_seed": check_no_seed,
    "unsynced_seed": check_unsynced_seed,
    "no_truncation": check_no_truncation,
    "unsafe_torch_load": check_unsafe_torch_load,
    "checkpoint_all_ranks": check_checkpoint_all_ranks,
    "no_warmup": check_no_warmup,
}


def check_source(source: str, path: str = "<script>") -> list[Finding]:
    """All findings for one script's text (raises SyntaxError if it does not parse)."""
    facts = ScriptFacts.from_source(source, path)
    out = []
    for code, check in CHECKS.items():
        for line, message in check(facts):
            out.append(Finding(path, line, code, message, FIXES[code]))
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
        print(json.dumps([asdict(x) for x in findings], ensure_ascii=False, indent=2))
    else:
        for x in findings:
            print(x.as_text())
        if not findings and not failed:
            print(f"no findings in {len(args.paths)} file(s)")
    return 2 if failed else (1 if findings else 0)


def register(dsub) -> None:
    p = dsub.add_parser(
        "script",
        help="read a training script (never run it) and report the course's DDP/training pitfalls",
        description=__doc__.splitlines()[0] + " Codes: " + ", ".join(CHECKS) + ".",
    )
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="Python training script(s) to check; each is parsed, never imported or executed")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (default): one `path:line: code: message — fix: ...` line per finding; "
                        "json: a list of {path, line, code, message, fix} objects. "
                        "Exit status: 0 nothing found, 1 findings, 2 a file could not be read or parsed")
    p.set_defaults(func=_cmd_script)
