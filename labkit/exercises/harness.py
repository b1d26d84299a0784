"""What each process of a find-and-fix check runs: the learner's script, watched by the course's instruments.

`python -m labkit.exercises.harness --script PATH --entry main --kwargs JSON` (started by
`labkit.distributed.launch`, under torchrun for the multi-process exercises) imports the learner's
script as a module, calls its entry function, and writes what it measured into this rank's report
(`labkit.distributed.reports`), for `labkit.exercises.transfer` to grade with the notebooks' audits.
The script is not changed and needs no hooks of its own; the instruments are installed before it is
imported:

- every `DataLoader` iteration records the dataset indices it hands out (one list per epoch), mapped
  through `Subset`s to the root dataset -- the raw material of the data audit;
- `torch.distributed.init_process_group` records the world the script joined;
- the first forward pass of a model records its parameter checksum (after any DDP wrap), the last one is
  taken when the entry returns -- the replica audit's stages;
- each `loss.backward()` feeds the per-layer gradient norms to `labkit.training.monitor.GradMonitor`
  (before any clipping), and each optimizer step records the gradient norm the optimizer actually applied
  and its learning rate;
- `torch.save` records which rank wrote which file.

An exception in the script is recorded (type, message, the script's line) and the process exits 1, so the
launcher stops the other ranks instead of leaving them waiting in a collective.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import traceback
from pathlib import Path

from labkit.i18n import _
from labkit.jsonl import jsonable

SCRIPT_MODULE = "learner_script"
RECORDS = "records.jsonl"


class Instruments:
    """The measurements of one process; `facts()` is what goes into its report."""

    def __init__(self, rank: int):
        self.rank = rank
        self.loaders: dict[int, dict] = {}  # id(root dataset) -> {"dataset_size", "epochs": [[idx, ...], ...]}
        self.joined: dict | None = None
        self.model = None
        self.first_checksum: str | None = None
        self.forwards = 0
        self.monitor = None
        self.pending: dict | None = None  # the last backward's norms, waiting for the optimizer step
        self.last_batch: list[str] = []  # the ids of the batch a DataLoader handed out last
        self.steps: list[dict] = []
        self.losses: list[float] = []
        self.saves: list[str] = []
        self._undo: list = []

    # ---- install ----------------------------------------------------------------------------------------
    def install(self) -> None:
        import torch
        import torch.distributed as dist
        from torch.nn.modules.module import register_module_forward_pre_hook
        from torch.optim.optimizer import register_optimizer_step_pre_hook
        from torch.utils.data import DataLoader

        self._patch(DataLoader, "__iter__", self._loader_iter(DataLoader.__iter__))
        self._patch(dist, "init_process_group", self._init_group(dist.init_process_group))
        self._patch(torch.Tensor, "backward", self._backward(torch.Tensor.backward))
        self._patch(torch, "save", self._save(torch.save))
        self._undo.append(register_module_forward_pre_hook(self._forward).remove)
        self._undo.append(register_optimizer_step_pre_hook(self._step).remove)

    def uninstall(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    def _patch(self, owner, name: str, new) -> None:
        old = getattr(owner, name)
        setattr(owner, name, new)
        self._undo.append(lambda: setattr(owner, name, old))

    # ---- data -------------------------------------------------------------------------------------------
    @staticmethod
    def _root(dataset, indices: list[int]) -> tuple[object, list[int]]:
        """Indices of a (nested) `Subset` mapped to its root dataset."""
        from torch.utils.data import Subset

        while isinstance(dataset, Subset):
            indices = [int(dataset.indices[i]) for i in indices]
            dataset = dataset.dataset
        return dataset, indices

    def _loader_iter(self, original):
        inst = self

        def __iter__(loader):
            it = original(loader)
            root = inst._root(loader.dataset, [])[0]
            try:
                size = len(root)
            except TypeError:  # an iterable dataset: no indices to audit
                return it
            # one record per root dataset (a new DataLoader per epoch over the same data is still one stream);
            # the record holds the dataset, so its id is not reused by another object
            rec = inst.loaders.setdefault(id(root), {"dataset": root, "dataset_size": size, "epochs": [], "ids": []})
            epoch: list[int] = []
            ids: list = []
            rec["epochs"].append(epoch)
            rec["ids"].append(ids)
            drawn = getattr(it, "_sampler_iter", None)
            if drawn is None:
                return it

            def recording():
                for item in drawn:
                    idx = [int(i) for i in item] if isinstance(item, (list, tuple)) else [int(item)]
                    idx = inst._root(loader.dataset, idx)[1]
                    epoch.extend(idx)
                    batch_ids = [_item_id(root, i) for i in idx]
                    ids.extend(batch_ids)
                    inst.last_batch = [i for i in batch_ids if i is not None]
                    yield item

            it._sampler_iter = recording()
            return it

        return __iter__

    def epochs(self) -> tuple[list[list[int]], list[list], int]:
        """The training data's orders (the dataset iterated most often): indices and item ids per epoch, and
        the dataset's size. Item ids name the examples across datasets (a list sliced per rank is a new list)."""
        if not self.loaders:
            return [], [], 0
        rec = max(self.loaders.values(), key=lambda r: (len(r["epochs"]), sum(map(len, r["epochs"]))))
        keep = [i for i, e in enumerate(rec["epochs"]) if e]
        return [rec["epochs"][i] for i in keep], [rec["ids"][i] for i in keep], rec["dataset_size"]

    # ---- process group ----------------------------------------------------------------------------------
    def _init_group(self, original):
        inst = self

        def init_process_group(*args, **kwargs):
            import torch.distributed as dist

            out = original(*args, **kwargs)
            inst.joined = {
                "initialized": True,
                "rank": dist.get_rank(),
                "world_size": dist.get_world_size(),
                "backend": str(dist.get_backend()),
            }
            return out

        return init_process_group

    # ---- model and steps --------------------------------------------------------------------------------
    def _forward(self, module, _args) -> None:
        if self.model is None and hasattr(module, "config") and hasattr(module, "get_input_embeddings"):
            from labkit.distributed.audit import param_checksum
            from labkit.training.monitor import GradMonitor

            self.model = module
            self.first_checksum = param_checksum(module)
            self.monitor = GradMonitor(module)
        if module is self.model:
            self.forwards += 1

    def _backward(self, original):
        inst = self

        def backward(tensor, *args, **kwargs):
            if tensor.dim() == 0 and tensor.requires_grad:
                inst.losses.append(float(tensor.detach()))
            out = original(tensor, *args, **kwargs)
            if inst.monitor is not None:
                norms = [float(x) for x in inst.monitor.layer_norms()]
                total = math.sqrt(sum(x * x for x in norms)) if all(map(math.isfinite, norms)) else math.inf
                inst.pending = {"norms": norms, "pre_clip_norm": total, "ids": list(inst.last_batch)}
            return out

        return backward

    def _step(self, optimizer, _args, _kwargs) -> None:
        import torch

        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        applied = (
            float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))) if grads else 0.0
        )
        step = len(self.steps) + 1  # numbered as the trainer numbers its steps: 1 = the first optimizer step
        entry = {"step": step, "lr": float(optimizer.param_groups[0]["lr"]), "applied_norm": applied}
        if self.pending is not None:
            entry["pre_clip_norm"] = self.pending["pre_clip_norm"]
            self.monitor.observe(step, self.pending["norms"], {"ids": self.pending["ids"]})
            self.pending = None
        self.steps.append(entry)

    def _save(self, original):
        inst = self

        def save(obj, f, *args, **kwargs):
            inst.saves.append(str(f))
            return original(obj, f, *args, **kwargs)

        return save

    # ---- the report ---------------------------------------------------------------------------------------
    def facts(self, returned) -> dict:
        from labkit.distributed.audit import param_checksum

        model = returned if hasattr(returned, "named_parameters") else self.model
        model = getattr(model, "module", model)  # DistributedDataParallel(model) -> model
        samples, sample_ids, size = self.epochs()
        out: dict = {
            "joined": self.joined or {"initialized": False, "rank": 0, "world_size": 1, "backend": None},
            "samples": samples,
            "sample_ids": sample_ids,
            "dataset_size": size,
            "forwards": self.forwards,
            "steps": self.steps,
            "losses": self.losses,
            "saves": self.saves,
            "monitor": self.monitor.verdict() if self.monitor is not None else None,
        }
        if model is not None and hasattr(model, "named_parameters"):
            checks = {"first_forward": self.first_checksum} if self.first_checksum else {}
            checks["final"] = param_checksum(model)
            out["checksums"] = checks
            out["param_devices"] = sorted({str(p.device) for p in model.parameters()})
        return out


def _item_id(dataset, i: int):
    """The `id` of item `i` of a list-like dataset of examples or record dicts (None when it has none)."""
    if not isinstance(dataset, (list, tuple)):
        return None  # a Dataset's __getitem__ may do work; only plain lists are read twice
    item = dataset[i]
    rid = item.get("id") if isinstance(item, dict) else getattr(item, "id", None)
    return None if rid is None else str(rid)


def _write_records(returned, out: Path) -> int | None:
    """A list of record dicts returned by the entry (exercise 02) goes to `<out>/records.jsonl`."""
    if not isinstance(returned, (list, tuple)) or not all(isinstance(r, dict) for r in returned):
        return None
    with open(out / RECORDS, "w", encoding="utf-8") as fh:
        for r in returned:
            fh.write(json.dumps(jsonable(r, finite=False), ensure_ascii=False) + "\n")
    return len(returned)


def _error(exc: BaseException, script: str) -> dict:
    """The exception, and the learner script's deepest line in its traceback."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == script]
    where = frames[-1] if frames else None
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:500],
        "line": where.lineno if where else None,
        "code": (where.line or "").strip() if where else "",
    }


def load_script(path: str):
    """Import the file at `path` as the module `learner_script` (its `__main__` block does not run)."""
    spec = importlib.util.spec_from_file_location(SCRIPT_MODULE, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[SCRIPT_MODULE] = mod
    spec.loader.exec_module(mod)
    return mod


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--script", required=True, help="the learner's script (a .py file)")
    p.add_argument("--entry", default="main", help="the function to call (default main)")
    p.add_argument("--kwargs", default="{}", help="keyword arguments for the entry, as JSON")
    p.add_argument("--out", default=None, help="report folder (default $LABKIT_OUT)")
    args = p.parse_args(argv)
    import os

    from labkit.distributed.env import read_env
    from labkit.distributed.reports import RankReport

    out = Path(args.out or os.environ.get("LABKIT_OUT") or ".")
    env = read_env()
    report = RankReport(out, env.rank)
    report.save(env=env.to_dict())
    report.progress("start")
    inst = Instruments(env.rank)
    script = str(Path(args.script).resolve())
    try:
        import torch

        torch.set_num_threads(1)
        inst.install()
        mod = load_script(script)
        entry = getattr(mod, args.entry, None)
        if not callable(entry):
            raise AttributeError(
                _("the script defines no function {entry}(...): keep it, the check calls it").format(entry=args.entry)
            )
        report.progress("train")
        returned = entry(**json.loads(args.kwargs))
    except BaseException as exc:  # noqa: BLE001 -- the learner's failure is a fact to report, not a crash
        try:
            facts = jsonable(inst.facts(None), finite=False)
        except Exception:  # noqa: BLE001 -- the error is what matters; partial facts are a bonus
            facts = {}
        report.save(error=_error(exc, script), **facts)
        print(
            "[harness] " + _("the script raised {error}: {message}").format(error=type(exc).__name__, message=exc),
            flush=True,
        )
        os._exit(1)  # at once: a peer waiting in a collective is stopped by the launcher, not waited for
    inst.uninstall()
    facts = inst.facts(returned)
    facts["records"] = _write_records(returned, out)
    report.save(**jsonable(facts, finite=False))
    report.progress("done", len(inst.steps))
    report.save(completed=True)
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    from labkit.procs import exit_without_teardown

    # the report says completed: the interpreter's teardown of torch and transformers is only cost (~1.5 CPU-s)
    exit_without_teardown(main())
