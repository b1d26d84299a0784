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
from dataclasses import asdict, dataclass

from labkit.doctor.ast_facts import (
    ScriptFacts,
    chunks_text,
    epoch_loops,
    guarded,
    has_splat,
    is_const,
    is_ddp,
    kwarg,
    loader_dataset_is_iterable,
    names_in,
    rank_strided,
    unparse,
)
from labkit.doctor.frameworks import framework
from labkit.doctor.launch_checks import check_legacy_launch, check_model_not_on_device, check_unused_local_rank_arg
from labkit.doctor.loop_checks import check_no_grad_clip, check_no_seed, check_no_warmup, check_unsynced_seed
from labkit.doctor.script_fixes import FIXES, fix_for, severity  # noqa: F401  (FIXES: one fix per code, tests)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    code: str
    message: str
    fix: str
    severity: str = "warning"  # "note": true, but changes nothing at run time (exit status 0 on notes alone)

    def as_text(self) -> str:
        note = "note: " if self.severity == "note" else ""
        return f"{self.path}:{self.line}: {self.code}: {note}{self.message} — fix: {self.fix}"


# ---- one function per code (the launch checks live in labkit.doctor.launch_checks, the loop's in loop_checks) ----
def check_no_distributed_sampler(f: ScriptFacts) -> list[tuple[int, str]]:
    """Without per-rank sharding every rank trains on the whole dataset: N times the work, no speed-up."""
    if not is_ddp(f) or framework(f) != "torch":
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

    train = [c for c in loaders if is_train(c)] or (
        [loaders[0]]
        if not any(re.search(r"val|test|eval", unparse(f.parents.get(c)), re.I) for c in loaders[:1])
        else []
    )
    return (
        [(train[0].lineno, "the training DataLoader has no DistributedSampler: every rank sees the whole dataset")]
        if train
        else []
    )


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
            hits.append(
                (
                    loop.lineno,
                    "the DistributedSampler is iterated over several epochs without `sampler.set_epoch(epoch)` in the epoch loop: every epoch repeats the same order",
                )
            )
    return hits


TOKENIZE_METHODS = ("encode", "encode_plus", "batch_encode_plus", "__call__")
BUILD_FUNC = re.compile(
    r"preprocess|tokeniz|encode|convert_examples|build|prepare_(data|features|dataset)|load_(data|dataset)|_features|examples",
    re.I,
)


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
        unparse(kwarg(m, "function")) for m in f.calls_named("map") if kwarg(m, "function") is not None
    }
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
            hits.append(
                (
                    c.lineno,
                    "the tokenizer is called without `truncation=True`: long texts go past the model's max length",
                )
            )
    return hits


def check_unsafe_torch_load(f: ScriptFacts) -> list[tuple[int, str]]:
    """`torch.load` unpickles: a checkpoint from elsewhere can run arbitrary code."""
    return [
        (
            c.lineno,
            "`torch.load` without `weights_only=True` unpickles arbitrary objects (code execution on a hostile file)",
        )
        for c in f.calls
        if f.call_name(c) == "torch.load" and not is_const(kwarg(c, "weights_only"), True) and not has_splat(c)
    ]


def check_checkpoint_all_ranks(f: ScriptFacts) -> list[tuple[int, str]]:
    """Every rank writing the same file at once corrupts it (and wastes N-1 writes)."""
    if not (is_ddp(f) or f.references("Accelerator")):
        return []
    hits = []
    for c in f.calls:
        name = f.call_name(c)
        is_save = name == "torch.save" or (
            isinstance(c.func, ast.Attribute)
            and c.func.attr == "save_pretrained"
            and not re.search(r"tokeni|config|processor|extractor", unparse(c.func.value), re.I)
        )
        if not is_save or kwarg(c, "is_main_process") is not None or has_splat(c):
            continue
        if not guarded(f, c):
            hits.append(
                (c.lineno, "the checkpoint is saved on every rank (no rank-0 guard): they all write the same file")
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
        for line, message, *variant in check(facts):  # a check may name the situation its fix is for
            out.append(
                Finding(path, line, code, message, fix_for(code, variant[0] if variant else frame), severity(code))
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
        print(json.dumps([asdict(x) for x in findings], ensure_ascii=False, indent=2))
    else:
        for x in findings:
            print(x.as_text())
        if not findings and not failed:
            print(f"no findings in {len(args.paths)} file(s)")
    warnings = [x for x in findings if x.severity != "note"]
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
        + " is a note: true, but it changes nothing at run time).",
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
        "(severity: warning or note). "
        "Exit status: 0 nothing found or only notes, 1 warnings, 2 a file could not be read or parsed",
    )
    p.set_defaults(func=_cmd_script)
