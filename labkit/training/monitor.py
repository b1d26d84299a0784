"""Gradient monitoring that diagnoses: which layer spiked first, and where inf/NaN began.

* Per-layer gradient norms every step (one fused `_foreach_norm`, one host sync),
  each compared with its own moving baseline (EMA); the first layer whose norm
  exceeds `spike_factor` x baseline is reported with the step and the batch
  (example ids and source lengths).  The rule is `Baselines`, the course's one
  definition of a gradient spike: `labkit doctor log` replays it on the logged
  per-layer series, so both name the same step and layer for the same run.
* Non-finite detection on the loss and on every layer's gradients; when one is
  found the batch is *replayed* (same RNG state, weights not yet updated) with
  forward hooks on every leaf module, which name the first module whose output
  was inf/NaN.  Replaying only on failure keeps the hooks' cost out of normal steps.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from labkit.i18n import _

if TYPE_CHECKING:
    import torch

# sub-layers a T5 block is made of: group parameters up to these names
_GROUP_AT = re.compile(r"^(SelfAttention|EncDecAttention|DenseReluDense|layer_norm|final_layer_norm)$")


def layer_name(param_name: str) -> str:
    """The monitored layer a parameter belongs to, e.g.
    `decoder.block.1.layer.1.EncDecAttention.q.weight` -> `decoder.block.1.layer.1.EncDecAttention`."""
    parts = param_name.split(".")[:-1] or [param_name]
    for i, p in enumerate(parts):
        if _GROUP_AT.match(p):
            return ".".join(parts[: i + 1])
    return ".".join(parts)


# the spike rule (`Baselines`): a norm above SPIKE_FACTOR x its series' moving baseline, an EMA with this weight on
# the old value, judged only once WARMUP observations have built the baseline (the first steps of a fresh model
# swing several-fold while Adam's moments fill)
SPIKE_FACTOR, EMA, WARMUP = 5.0, 0.9, 10


class Baselines:
    """One moving baseline per series (a layer's gradient norm): the course's one definition of a spike.

    `GradMonitor` feeds it every optimizer step during training; `labkit doctor log` feeds it the per-layer norms
    the trainer logged, step by step, and so names the same first spike. Plain floats, no torch: a run's logs are
    read without it."""

    def __init__(self, factor: float = SPIKE_FACTOR, ema: float = EMA, warmup: int = WARMUP):
        self.factor, self.ema, self.warmup = factor, ema, warmup
        self.values: list[float] | None = None
        self.seen = 0
        self.max_ratio = 0.0  # the largest ratio judged so far: how close the run came to a spike

    def observe(self, norms: list[float]) -> tuple[int, float, float] | None:
        """Judge one step's norms against the baselines, then update them. Returns (index, ratio, baseline) of the
        worst series when its ratio is above `factor`, else None."""
        finite = [math.isfinite(v) for v in norms]
        hit = None
        if self.values is None:
            self.values = [v if ok else 0.0 for v, ok in zip(norms, finite)]
        elif self.seen >= self.warmup:
            ratios = [v / max(b, 1e-12) if ok and b > 0 else 0.0 for v, b, ok in zip(norms, self.values, finite)]
            worst = max(range(len(ratios)), key=ratios.__getitem__) if ratios else 0
            if ratios:
                self.max_ratio = max(self.max_ratio, ratios[worst])
                if ratios[worst] > self.factor:
                    hit = (worst, ratios[worst], self.values[worst])
        if self.seen > 0:
            # after the warm-up a spiking value enters the baseline damped, so one spike does not mask the next
            damp = self.seen >= self.warmup
            self.values = [
                self.ema * b + (1 - self.ema) * (min(v, b * self.factor) if damp else v) if ok else b
                for v, b, ok in zip(norms, self.values, finite)
            ]
        self.seen += 1
        return hit


@dataclass
class Spike:
    step: int
    layer: str
    norm: float
    baseline: float
    ids: list[str] = field(default_factory=list)
    source_lengths: list[int] = field(default_factory=list)

    @property
    def factor(self) -> float:
        return self.norm / self.baseline if self.baseline > 0 else math.inf


@dataclass
class NonFinite:
    step: int
    where: str  # "loss" | "grad" | "activation"
    module: str | None  # first module with a non-finite output (activation replay) or gradient
    ids: list[str] = field(default_factory=list)
    source_lengths: list[int] = field(default_factory=list)
    grad_layers: list[str] = field(default_factory=list)


class GradMonitor:
    """Per-layer gradient norms with moving baselines, spike and non-finite detection."""

    def __init__(
        self, model: torch.nn.Module, spike_factor: float = SPIKE_FACTOR, ema: float = EMA, warmup: int = WARMUP
    ):
        import torch  # here, not at import: `labkit doctor log` uses `Baselines` without torch

        self.model = model
        self.spike_factor, self.ema, self.warmup = spike_factor, ema, warmup
        self.baselines = Baselines(spike_factor, ema, warmup)
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.params = [p for _n, p in named]
        self.layers: list[str] = []
        index: list[int] = []
        for n, _p in named:
            g = layer_name(n)
            if g not in self.layers:
                self.layers.append(g)
            index.append(self.layers.index(g))
        self._index = torch.tensor(index)
        self.spikes: list[Spike] = []
        self.nonfinite: list[NonFinite] = []

    def layer_norms(self) -> torch.Tensor:
        """Per-layer L2 norms of the current gradients (float32 tensor, len(self.layers))."""
        import torch

        ps = [p for p in self.params if p.grad is not None]
        idx = (
            self._index
            if len(ps) == len(self.params)
            else torch.tensor([int(self._index[i]) for i, p in enumerate(self.params) if p.grad is not None])
        )
        if not ps:
            return torch.zeros(len(self.layers))
        grads = [p.grad for p in ps]
        sharded = hasattr(grads[0], "to_local")  # FSDP: each rank holds a disjoint shard of every gradient
        norms = torch._foreach_norm([g.to_local() for g in grads] if sharded else grads)
        sq = torch.stack([n.float() for n in norms]).pow(2)
        out = torch.zeros(len(self.layers), device=sq.device).index_add_(0, idx.to(sq.device), sq)
        if sharded:  # the shards' squared norms add up to the whole gradient's (a collective, every rank)
            import torch.distributed as dist

            dist.all_reduce(out)
        return out.sqrt()

    def observe(self, step: int, norms: list[float], batch: dict[str, Any] | None = None) -> Spike | None:
        """Compare this step's layer norms with their baselines (`Baselines`); record and return the worst spike.

        `step` is the number the run gives the step (the trainer's: 1 for the first optimizer step, as in its
        History and TensorBoard), so the verdict and `labkit doctor log` name the same step."""
        hit = self.baselines.observe([float(v) for v in norms])
        if hit is None:
            return None
        worst, _ratio, baseline = hit
        spike = Spike(
            step,
            self.layers[worst],
            float(norms[worst]),
            baseline,
            list((batch or {}).get("ids", [])),
            list((batch or {}).get("source_lengths", [])),
        )
        self.spikes.append(spike)
        return spike

    def nonfinite_grad_layers(self, norms: list[float]) -> list[str]:
        return [self.layers[i] for i, v in enumerate(norms) if not math.isfinite(v)]

    def first_nonfinite_module(self, forward) -> str | None:
        """Run `forward()` with hooks on every leaf module; the first whose output is inf/NaN."""
        import torch

        flags: list[tuple[str, torch.Tensor]] = []

        def hook(name):
            def fn(_mod, _inp, out):
                t = out[0] if isinstance(out, (tuple, list)) else out
                if isinstance(t, torch.Tensor) and t.is_floating_point():
                    flags.append((name, torch.isfinite(t).all()))

            return fn

        handles = [
            m.register_forward_hook(hook(n))
            for n, m in self.model.named_modules()
            if n and not any(True for _c in m.children())
        ]
        try:
            with torch.no_grad():
                forward()
        finally:
            for h in handles:
                h.remove()
        if not flags:
            return None
        ok = torch.stack([f for _name, f in flags]).tolist()
        for (name, _flag), good in zip(flags, ok):
            if not good:
                return name
        return None

    def record_nonfinite(self, event: NonFinite) -> None:
        self.nonfinite.append(event)

    def verdict(self) -> dict[str, Any]:
        """Machine-readable diagnosis: first spike and first non-finite event, with counts."""
        first_spike = self.spikes[0] if self.spikes else None
        first_nf = self.nonfinite[0] if self.nonfinite else None
        return {
            "first_spike": None if first_spike is None else {**first_spike.__dict__, "factor": first_spike.factor},
            "first_nonfinite": None if first_nf is None else dict(first_nf.__dict__),
            "n_spikes": len(self.spikes),
            "max_factor": self.baselines.max_ratio,
            "n_nonfinite": len(self.nonfinite),
            "spiking_layers": sorted({s.layer for s in self.spikes}),
        }

    def report(self) -> str:
        """The verdict in one or two sentences for a notebook or log."""
        return report(self.verdict())


def report(v: dict[str, Any] | None) -> str:
    """Human-readable form of `GradMonitor.verdict()` (also stored in `History.verdict`)."""
    if not v:
        return _("monitoring was off")
    lines = []
    if v["first_spike"]:
        s = v["first_spike"]
        lines.append(
            _(
                "first gradient spike at step {step} in {layer}: norm {norm:.3g} = {factor:.1f}x its moving "
                "baseline {baseline:.3g}; batch ids {ids}{more}, source lengths max {max_len}"
            ).format(
                step=s["step"],
                layer=s["layer"],
                norm=s["norm"],
                factor=s["factor"],
                baseline=s["baseline"],
                ids=s["ids"][:4],
                more="..." if len(s["ids"]) > 4 else "",
                max_len=max(s["source_lengths"], default=0),
            )
        )
    if v["first_nonfinite"]:
        n = v["first_nonfinite"]
        lines.append(
            _(
                "first non-finite {where} at step {step}: first module with inf/NaN output {module}; "
                "layers with non-finite grads {layers}"
            ).format(
                where=n["where"],
                step=n["step"],
                module=n["module"] or _("(none in forward: it arose in backward)"),
                layers=n["grad_layers"][:3],
            )
        )
    return "\n".join(lines) or _("no gradient spikes and no non-finite values")
