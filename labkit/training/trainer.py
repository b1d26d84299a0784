"""The one trainer: AdamW, transformers schedules, clipping, accumulation, bf16,
activation checkpointing, checkpoints, evaluation, tqdm, TensorBoard, monitoring.

Works single-process and under `DistributedDataParallel` (pass the wrapped model
and a `DistributedSampler`): it unwraps `.module` for saving, calls
`sampler.set_epoch(epoch)` iff `cfg.set_epoch`, skips the gradient all-reduce on
non-final accumulation micro-batches, all-reduces logged loss, and lets only
rank 0 write TensorBoard and checkpoints.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import torch

from labkit.distributed.sharding import is_sharded, state_bytes
from labkit.training.checkpoint import load_checkpoint, save_checkpoint, save_sharded_checkpoint
from labkit.training.monitor import GradMonitor, NonFinite
from labkit.training.schedules import SCHEDULES, make_scheduler

POLICIES = ("raise", "skip_step", "ignore")


class NonFiniteError(FloatingPointError):
    """Raised under policy "raise"; the message carries the monitor's diagnosis."""


@dataclass
class TrainConfig:
    steps: int = 150
    stop_after: int = 0  # stop after this many steps (0 = steps); the schedule still spans `steps`
    batch_size: int = 16  # per micro-batch (and per process under DDP)
    lr: float = 1e-3
    weight_decay: float = 0.01
    schedule: str = "linear"  # linear | cosine | cosine_restarts | constant
    warmup_steps: int = 0
    restarts: int = 2  # cycles for cosine_restarts
    clip: float | None = 1.0  # max global grad norm; None = no clipping
    grad_accum: int = 1  # micro-batches per optimizer step
    token_weighted: bool = True  # accumulation weights each micro-batch by its target tokens; False = loss / grad_accum
    precision: str = "fp32"  # fp32 | bf16 (autocast)
    grad_checkpointing: bool = False
    set_epoch: bool = True
    seed: int = 0
    log_dir: str | None = None  # TensorBoard event files (rank 0)
    log_every: int = 1
    eval_every: int = 0  # 0 = only at the end (when eval examples are given)
    nonfinite: str = "raise"  # raise | skip_step | ignore
    monitor: bool = True
    spike_factor: float = 5.0
    ckpt_dir: str | None = None
    ckpt_every: int = 0
    ckpt_keep: int = 2  # newest checkpoints kept; 0 = all
    progress: bool | str = (
        False  # False/"off": silent (notebooks); True/"bar": tqdm bar; "lines": a line every progress_every steps
    )
    progress_every: int = 0  # "lines": a line every N steps (0 = about ten lines per run)

    def __post_init__(self):
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule={self.schedule!r}: choose one of {SCHEDULES}")
        if self.nonfinite not in POLICIES:
            raise ValueError(f"nonfinite={self.nonfinite!r}: choose one of {POLICIES}")
        if self.precision not in ("fp32", "bf16"):
            raise ValueError(f"precision={self.precision!r}: choose 'fp32' or 'bf16'")
        if self.steps < 1 or self.batch_size < 1 or self.grad_accum < 1:
            raise ValueError("steps, batch_size and grad_accum must be >= 1")
        if self.progress not in (False, True, "off", "bar", "lines"):
            raise ValueError(f"progress={self.progress!r}: choose False, True, 'off', 'bar' or 'lines'")


@dataclass
class History:
    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    layer_norms: dict[str, list[float]] = field(default_factory=dict)
    evals: list[dict] = field(default_factory=list)
    # the monitor's events carry the step's number in `steps` (1 = the first optimizer step, as in TensorBoard);
    # skipped_steps are indices into these lists (0 = the first)
    nonfinite: list[dict] = field(default_factory=list)
    skipped_steps: list[int] = field(default_factory=list)
    spikes: list[dict] = field(default_factory=list)
    verdict: dict | None = None
    samples: int = 0
    seen: list[int] = field(default_factory=list)  # this process's example indices, in the order trained on
    seconds: float = 0.0
    # this process's parameters/gradients/optimizer bytes, measured after the first update (before zero_grad)
    state_bytes: dict[str, int] = field(default_factory=dict)

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({"step": self.steps, "loss": self.loss, "lr": self.lr, "grad_norm": self.grad_norm})


@dataclass
class _Run:
    """What one `fit` call carries from step to step."""

    hist: History
    params: list
    opt: Any
    sched: Any
    step: int
    epoch: int
    pos: int
    order: list[int]
    bs: int
    bar: Any
    loop_t0: float


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return model.module if hasattr(model, "module") else model


def _dist():
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


class Trainer:
    """Train `model` on `train_examples` batched by `collator` according to `cfg`."""

    def __init__(
        self,
        model,
        train_examples: Sequence,
        collator,
        cfg: TrainConfig,
        eval_examples: Sequence | None = None,
        sampler=None,
        device=None,
        eval_fn: Callable[[torch.nn.Module], dict] | None = None,
    ):
        from labkit.model import check_vocab

        if len(train_examples) == 0:
            raise ValueError(
                "no training examples: the dataset is empty (did cleaning reject everything, or a filter drop all tasks?)"
            )
        self.model, self.raw = model, unwrap(model)
        self.examples, self.collator, self.cfg = list(train_examples), collator, cfg
        self.eval_examples = list(eval_examples or [])
        self.sampler, self.eval_fn = sampler, eval_fn
        self.device = torch.device(device) if device is not None else next(self.raw.parameters()).device
        check_vocab(self.raw, collator.tokenizer)
        self.dist = _dist()
        self.is_main = self.dist is None or self.dist.get_rank() == 0
        self.monitor = GradMonitor(self.raw, spike_factor=cfg.spike_factor) if cfg.monitor else None
        self._writer = None

    # ---- data -------------------------------------------------------------
    def _order(self, epoch: int) -> list[int]:
        if self.sampler is not None:
            # [fix:set_epoch]
            if self.cfg.set_epoch and hasattr(self.sampler, "set_epoch"):
                self.sampler.set_epoch(epoch)
            # [/fix:set_epoch]
            return list(iter(self.sampler))
        g = torch.Generator().manual_seed(self.cfg.seed * 100_003 + epoch)
        return torch.randperm(len(self.examples), generator=g).tolist()

    def _collate(self, idx: list[int]) -> dict[str, Any]:
        batch = self.collator([self.examples[i] for i in idx])
        limit = getattr(self.raw.config, "n_positions", None)
        if limit and batch["input_ids"].shape[1] > limit:
            worst = max(range(len(idx)), key=lambda k: batch["source_lengths"][k])
            raise ValueError(
                f"example {batch['ids'][worst]!r} has {batch['input_ids'].shape[1]} source tokens but the model supports "
                f"n_positions={limit}: set max_source_len <= {limit} in the collator (truncation)"
            )
        return batch

    # ---- helpers ----------------------------------------------------------
    def _autocast(self):
        if self.cfg.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _forward(self, batch: dict[str, Any]):
        with self._autocast():
            return self.model(
                input_ids=batch["input_ids"].to(self.device),
                attention_mask=batch["attention_mask"].to(self.device),
                labels=batch["labels"].to(self.device),
            )

    def _meta(self) -> dict:
        c = self.raw.config
        keys = ("vocab_size", "d_model", "d_ff", "d_kv", "num_heads", "num_layers", "num_decoder_layers")
        train = {k: getattr(self.cfg, k) for k in ("batch_size", "grad_accum", "schedule", "seed", "warmup_steps")}
        strategy = "fsdp" if is_sharded(self.raw) else "ddp"  # a sharded checkpoint loads only into a sharded model
        return {"model": {k: getattr(c, k, None) for k in keys}, "train": train, "strategy": strategy}

    def writer(self):
        if self._writer is None and self.cfg.log_dir and self.is_main:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(self.cfg.log_dir)
        return self._writer

    def evaluate(self, batch_size: int | None = None) -> dict[str, float]:
        """Token-weighted mean loss on the eval examples (plus `eval_fn`'s metrics)."""
        out: dict[str, float] = {}
        if self.eval_examples:
            bs = batch_size or self.cfg.batch_size
            was = self.model.training
            self.model.eval()
            tot, ntok = 0.0, 0
            with torch.no_grad():
                for i in range(0, len(self.eval_examples), bs):
                    b = self.collator(self.eval_examples[i : i + bs])
                    n = int((b["labels"] != -100).sum())
                    tot += float(self._forward(b).loss) * n
                    ntok += n
            self.model.train(was)
            out["eval_loss"] = tot / max(ntok, 1)
        if self.eval_fn is not None:
            out.update(self.eval_fn(self.raw))
        return out

    def backward(self, batches: list[dict[str, Any]]) -> torch.Tensor:
        """Accumulate gradients over micro-batches; returns the window's loss (detached).

        Each micro-batch's mean token loss is weighted by its share of the
        window's target tokens, so the summed gradient equals that of one batch
        holding all of them (plain division by `grad_accum` is only right when
        every micro-batch has the same number of target tokens).
        """
        # [fix:token_weighted_accumulation]
        n_tok = sum(int((b["labels"] != -100).sum()) for b in batches)
        loss_sum = torch.zeros((), device=self.device)
        for k, b in enumerate(batches):
            sync = self.dist is None or k == len(batches) - 1 or not hasattr(self.model, "no_sync")
            with contextlib.nullcontext() if sync else self.model.no_sync():
                out = self._forward(b)
                share = int((b["labels"] != -100).sum()) / n_tok if self.cfg.token_weighted else 1 / len(batches)
                loss = out.loss.float() * share
                loss.backward()
            loss_sum += loss.detach()
        # [/fix:token_weighted_accumulation]
        return loss_sum

    # ---- the loop -----------------------------------------------------------
    def fit(self, resume_from: str | None = None) -> History:
        """Train for `cfg.steps` optimizer steps, or the first `cfg.stop_after` of them (continuing from a checkpoint if given).

        Each step: the next `grad_accum` micro-batches, backward, clip and measure, update
        (`_train_step`); record it (`_record`); checkpoint and evaluate when they are due.
        """
        run = self._start(resume_from)
        last = min(self.cfg.stop_after or self.cfg.steps, self.cfg.steps)
        while run.step < last:
            micro = self._next_micro_batches(run)
            batches = [self._collate(idx) for idx in micro]
            run.hist.seen.extend(i for idx in micro for i in idx)
            loss_v, total_v, layer_v, lr_now = self._train_step(run, batches)
            self._record(run, micro, loss_v, total_v, layer_v, lr_now)
            self._maybe_checkpoint(run)
            self._maybe_eval(run)
        return self._finish(run)

    def _start(self, resume_from: str | None) -> "_Run":
        """Seed, optimizer and schedule, the resumed position, the first epoch's order, the progress bar."""
        cfg, raw = self.cfg, self.raw
        torch.manual_seed(cfg.seed)
        if cfg.grad_checkpointing:
            raw.config.use_cache = False
            raw.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        params = [p for p in raw.parameters() if p.requires_grad]
        # [fix:schedule]
        opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        sched = make_scheduler(opt, cfg.schedule, cfg.warmup_steps, cfg.steps, cfg.restarts)
        # [/fix:schedule]
        step, epoch, pos = 0, 0, 0
        if resume_from:
            state = load_checkpoint(resume_from, raw, opt, sched, self._meta())
            step, epoch, pos = state["step"], state["epoch"], state["pos"]
        order = self._order(epoch)
        bs = min(cfg.batch_size, len(order))
        if bs == 0:
            raise ValueError("the sampler yields no examples for this process: fewer examples than processes?")
        self.model.train()
        bar = None
        mode = {False: "off", True: "bar"}.get(cfg.progress, cfg.progress)
        if mode != "off" and self.is_main:
            from labkit.progress import Progress

            last = min(cfg.stop_after or cfg.steps, cfg.steps)
            bar = Progress(
                last, "train", "step", mode, every=cfg.progress_every or max(1, math.ceil(last / 10)), initial=step
            )
        return _Run(History(), params, opt, sched, step, epoch, pos, order, bs, bar, time.perf_counter())

    def _next_micro_batches(self, run: "_Run") -> list[list[int]]:
        """The example indices of the next `grad_accum` micro-batches (a new epoch's order when one runs out)."""
        micro = []
        for _ in range(self.cfg.grad_accum):
            if run.pos + run.bs > len(run.order):
                run.epoch, run.pos = run.epoch + 1, 0
                run.order = self._order(run.epoch)
            micro.append(run.order[run.pos : run.pos + run.bs])
            run.pos += run.bs
        return micro

    def _train_step(self, run: "_Run", batches: list[dict]) -> tuple[float, float, list[float], float]:
        """Backward, clip and measure, then update -- unless a non-finite step is skipped.

        Returns (loss, global grad norm, per-layer grad norms, the learning rate used)."""
        cfg, params, opt, sched, hist, step = self.cfg, run.params, run.opt, run.sched, run.hist, run.step
        rng = torch.get_rng_state()
        loss_sum = self.backward(batches)
        # [fix:clip]
        if self.monitor is not None:
            norms = self.monitor.layer_norms()
            total = norms.pow(2).sum().sqrt()
            if cfg.clip is not None:
                torch.nn.utils.clip_grads_with_norm_(params, cfg.clip, total)
        elif cfg.clip is not None:
            norms, total = None, torch.nn.utils.clip_grad_norm_(params, cfg.clip)
        else:
            norms, total = None, torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
        # [/fix:clip]
        if hasattr(total, "full_tensor"):  # sharded gradients (FSDP): the norm comes back as a replicated DTensor
            total = total.full_tensor()
        if self.dist is not None:
            self.dist.all_reduce(loss_sum, op=self.dist.ReduceOp.SUM)
            loss_sum /= self.dist.get_world_size()
        head = torch.stack([loss_sum, total.float().to(loss_sum.device)])
        vals = (torch.cat([head, norms.to(head.device)]) if norms is not None else head).tolist()
        loss_v, total_v, layer_v = vals[0], vals[1], vals[2:]
        info = {
            "ids": [i for b in batches for i in b["ids"]],
            "source_lengths": [n for b in batches for n in b["source_lengths"]],
        }
        lr_now = sched.get_last_lr()[0]
        skip = False
        if not (math.isfinite(loss_v) and math.isfinite(total_v)):
            skip = self._on_nonfinite(step, loss_v, layer_v, batches, rng, info, hist)
        elif self.monitor is not None:  # numbered like History.steps and TensorBoard: `labkit doctor log` agrees
            spike = self.monitor.observe(step + 1, layer_v, info)
            if spike is not None:
                hist.spikes.append({**spike.__dict__, "factor": spike.factor})
        if skip:
            hist.skipped_steps.append(step)
        else:
            opt.step()
            if not hist.state_bytes:  # gradients and optimizer states both exist only now
                hist.state_bytes = state_bytes(self.raw, opt)
        sched.step()
        opt.zero_grad(set_to_none=True)
        return loss_v, total_v, layer_v, lr_now

    def _record(
        self, run: "_Run", micro: list[list[int]], loss_v: float, total_v: float, layer_v: list[float], lr_now: float
    ) -> None:
        """Count the step; history, TensorBoard and progress bar get its figures."""
        hist = run.hist
        run.step += 1
        step = run.step
        hist.steps.append(step)
        hist.loss.append(loss_v)
        hist.lr.append(lr_now)
        hist.grad_norm.append(total_v)
        if self.monitor is not None:
            for name, v in zip(self.monitor.layers, layer_v):
                hist.layer_norms.setdefault(name, []).append(v)
        hist.samples += sum(len(m) for m in micro) * (self.dist.get_world_size() if self.dist else 1)
        self._log(step, hist, layer_v)
        if run.bar is not None:
            seconds = time.perf_counter() - run.loop_t0
            run.bar.update(
                1,
                loss=f"{loss_v:.4f}",
                lr=f"{lr_now:.2e}",
                **{"samples/s": f"{hist.samples / seconds:.1f}" if seconds > 0 else "-"},
            )

    def _maybe_checkpoint(self, run: "_Run") -> None:
        cfg, step = self.cfg, run.step
        if cfg.ckpt_dir and cfg.ckpt_every and (step % cfg.ckpt_every == 0 or step == cfg.steps):
            self._save(step, run.opt, run.sched, {"epoch": run.epoch, "pos": run.pos})

    def _maybe_eval(self, run: "_Run") -> None:
        """Evaluate every `eval_every` steps and at the end; the time it takes is not training time."""
        cfg, step = self.cfg, run.step
        if (self.eval_examples or self.eval_fn) and (
            (cfg.eval_every and step % cfg.eval_every == 0) or step == cfg.steps
        ):
            t_eval = time.perf_counter()
            ev = {"step": step, **self.evaluate()}
            run.hist.evals.append(ev)
            w = self.writer()
            if w is not None:
                for k, v in ev.items():
                    if k != "step" and isinstance(v, (int, float)):
                        w.add_scalar(f"eval/{k}", v, step)
            run.loop_t0 += time.perf_counter() - t_eval  # throughput counts training only

    def _finish(self, run: "_Run") -> History:
        """Training time, the monitor's verdict, the last scalars; the history."""
        hist = run.hist
        hist.seconds = time.perf_counter() - run.loop_t0
        if run.bar is not None:
            run.bar.close()
        if self.monitor is not None:
            hist.verdict = self.monitor.verdict()
        if self._writer is not None:
            self._writer.add_scalar("train/samples_per_s", hist.samples_per_s, run.step)
            self._writer.flush()
        return hist

    def _on_nonfinite(self, step, loss_v, layer_v, batches, rng, info, hist) -> bool:
        """Diagnose a non-finite loss/gradient, apply the policy; True = skip the update."""
        mon = self.monitor or GradMonitor(self.raw)
        if not layer_v:
            layer_v = mon.layer_norms().tolist()

        def replay():
            with torch.random.fork_rng(devices=[]):
                torch.set_rng_state(rng)
                for b in batches:
                    self._forward(b)

        module = mon.first_nonfinite_module(replay)
        where = "loss" if not math.isfinite(loss_v) else "grad"
        if module is not None:
            where = "activation"
        event = NonFinite(
            step + 1,
            where,
            module or (mon.nonfinite_grad_layers(layer_v)[-1:] or [None])[0],
            info["ids"],
            info["source_lengths"],
            mon.nonfinite_grad_layers(layer_v),
        )
        mon.record_nonfinite(event)
        hist.nonfinite.append(dict(event.__dict__))
        w = self.writer()
        if w is not None:
            w.add_scalar("nonfinite/events", len(hist.nonfinite), step + 1)
        if self.cfg.nonfinite == "raise":
            hist.verdict = mon.verdict()
            raise NonFiniteError(
                f"non-finite {where} at step {step + 1} (loss={loss_v}); first module with inf/NaN output: {module}; "
                f"layers with non-finite grads: {event.grad_layers[:4]}; batch ids {info['ids'][:4]}. "
                f"Fix: lower lr / add warmup, clip gradients (clip=1.0), truncate long inputs; or nonfinite='skip_step'."
            )
        if self.cfg.nonfinite == "skip_step":
            if w is not None:
                w.add_scalar("nonfinite/skipped_steps", len(hist.skipped_steps) + 1, step + 1)
            return True
        return False

    def _log(self, step: int, hist: History, layer_v: list[float]) -> None:
        w = self.writer()
        if w is None or step % self.cfg.log_every:
            return
        w.add_scalar("train/loss", hist.loss[-1], step)
        w.add_scalar("train/lr", hist.lr[-1], step)
        w.add_scalar("grad_norm/total", hist.grad_norm[-1], step)
        if self.monitor is not None:
            for name, v in zip(self.monitor.layers, layer_v):
                w.add_scalar(f"grad_norm_layer/{name}", v, step)
        if self.device.type == "cuda":
            w.add_scalar("memory/max_allocated_mb", torch.cuda.max_memory_allocated(self.device) / 2**20, step)

    def _save(self, step: int, opt, sched, data_pos: dict) -> None:
        if self.dist is not None:
            self.dist.barrier()
        if is_sharded(self.raw):  # every rank writes its own shards (a collective)
            save_sharded_checkpoint(
                self.cfg.ckpt_dir,
                step,
                self.raw,
                opt,
                sched,
                data_pos,
                {**self._meta(), "config": asdict(self.cfg)},
                is_main=self.is_main,
                barrier=self.dist.barrier,
                keep=self.cfg.ckpt_keep,
            )
        elif self.is_main:
            save_checkpoint(
                self.cfg.ckpt_dir,
                step,
                self.raw,
                opt,
                sched,
                data_pos,
                {**self._meta(), "config": asdict(self.cfg)},
                keep=self.cfg.ckpt_keep,
            )
        if self.dist is not None:
            self.dist.barrier()
