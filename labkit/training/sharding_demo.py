"""Notebook 09 on GPUs: a model that runs out of memory under DDP on every card trains under FSDP on the same cards.

Real cards are not all 16 GB, so the card is made to measure: every rank's CUDA allocator is capped
(`labkit.train --cuda-memory-gb`, `torch.cuda.set_per_process_memory_fraction`) at 1.2x the peak one FSDP rank
reserved uncapped (reserved, not allocated: the cap limits the caching allocator's blocks, fragmentation
included). The same cap is below the 16 bytes per parameter any DDP rank must hold (fp32 weights, gradients
and AdamW's two moments, before activations and DDP's gradient buckets), so DDP runs out of memory on each card
whatever their number, and FSDP trains. The model is t5-base on the notebook's data: big enough
that its state, not the CUDA context, fills the card; small enough to train in a minute.

Needs >= 2 CUDA GPUs (FSDP divides the state over cards); elsewhere `run` returns `skip_reason`'s reason.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from labkit.i18n import _

PRESET = "t5-base"
HEADROOM = 1.2  # the cap over FSDP's measured peak: allocator rounding and run-to-run variation
GiB = 2**30


def skip_reason(n_gpu: int) -> str | None:
    """Why this machine cannot show it, or None when it can."""
    if n_gpu >= 2:
        return None
    return _(
        "needs >= 2 CUDA GPUs: FSDP divides a model's state over cards, and this machine has {n} "
        "(the CPU runs above measure the same bytes with gloo processes)"
    ).format(n=n_gpu)


@dataclasses.dataclass
class Outcome:
    strategy: str
    ranks: int
    cap_gb: float | None
    trained_steps: int  # steps every rank completed (0 when a rank failed)
    out_of_memory: bool  # a rank recorded an allocation failure
    peak_gb: float | None  # the largest rank's reserved CUDA peak (at the failure, for an out-of-memory run)

    def row(self) -> dict:
        return {
            "strategy": self.strategy,
            "ranks": self.ranks,
            "card (capped) GB": None if self.cap_gb is None else round(self.cap_gb, 2),
            "outcome": _("out of memory")
            if self.out_of_memory
            else _("trained {n} steps").format(n=self.trained_steps),
            "peak GB per rank": None if self.peak_gb is None else round(self.peak_gb, 2),
        }


def _outcome(strategy: str, n: int, cap_gb: float | None, result) -> Outcome:
    ranks = result.ranks
    oom = any("out_of_memory" in r for r in ranks.values())
    peaks = [
        r.get("cuda_peak_reserved_bytes") or r.get("out_of_memory", {}).get("peak_reserved_bytes")
        for r in ranks.values()
    ]
    peaks = [p for p in peaks if p]
    steps = min((len(r["history"]["steps"]) for r in ranks.values() if r.get("completed")), default=0)
    return Outcome(
        strategy,
        n,
        cap_gb,
        steps if result.ok else 0,
        oom,
        max(peaks) / GiB if peaks else None,
    )


@dataclasses.dataclass
class Demo:
    skipped: str | None = None  # why this machine cannot show it; then nothing below was run
    n_params: int = 0
    ddp_floor_gb: float = 0.0  # 16P: what one DDP rank holds before any activation
    probe: Outcome | None = None  # FSDP uncapped: the peak the cap is set from
    cap_gb: float = 0.0
    ddp: Outcome | None = None
    fixed: Outcome | None = None  # the notebook's fixed arm (FSDP; DDP with FIX=False) on the capped cards

    def table(self):
        import pandas as pd

        return pd.DataFrame([o.row() for o in (self.probe, self.ddp, self.fixed) if o is not None])


def run(runs, n_gpu: int, fixed_strategy: str, steps: int = 3, echo=print) -> Demo:
    """Probe FSDP's peak uncapped, cap every card at HEADROOM x that peak, then DDP and the fixed arm capped.

    `runs`: the notebook's `ShardingRuns` (its data, batch and seed); each run is `labkit.train` on `n_gpu`
    processes, one per GPU (0 or 1: nothing runs, `Demo.skipped` says why). Also skipped, with the numbers, when
    the cap would not sit below DDP's 16P (a model too small for the difference to show)."""
    import json

    from labkit.distributed import launch

    reason = skip_reason(n_gpu)
    if reason:
        return Demo(skipped=reason)
    gpu = dataclasses.replace(runs, device="cuda", steps=steps, preset=PRESET)

    def go(name: str, strategy: str, cap_gb: float | None) -> Outcome:
        flags = ["--strategy", strategy]  # the preset is the runs' own (gpu.preset)
        if cap_gb is not None:
            flags += ["--cuda-memory-gb", f"{cap_gb:.3f}"]
        shutil.rmtree(Path(runs.out_dir) / name, ignore_errors=True)  # a rerun starts from nothing
        result = launch(
            gpu.args(*flags),
            n_gpu,
            out_dir=Path(runs.out_dir) / name,
            device="cuda",
            timeout_s=runs.timeout_s,
            preset=gpu.preset,
            echo=None,
            check=False,
        )
        out = _outcome(strategy, n_gpu, cap_gb, result)
        if echo:
            echo(f"{name}: {out.row()['outcome']} ({result.seconds:.0f} s)")
        return out

    probe = go("gpu_probe_fsdp", "fsdp", None)
    if probe.out_of_memory or probe.trained_steps == 0 or probe.peak_gb is None:
        raise RuntimeError(f"FSDP did not train {PRESET} on {n_gpu} uncapped GPUs: see {runs.out_dir}/gpu_probe_fsdp")
    report = Path(runs.out_dir) / "gpu_probe_fsdp" / "ranks" / "rank0.json"
    n_params = json.loads(report.read_text(encoding="utf-8"))["n_params"]
    demo = Demo(n_params=n_params, ddp_floor_gb=16 * n_params / GiB, probe=probe, cap_gb=HEADROOM * probe.peak_gb)
    if demo.cap_gb >= demo.ddp_floor_gb:
        demo.skipped = _(
            "FSDP on {n} GPUs reserved {peak:.2f} GB at its peak: {headroom}x that is not below DDP's 16P = "
            "{floor:.2f} GB, so no cap lies between them"
        ).format(n=n_gpu, peak=probe.peak_gb, headroom=HEADROOM, floor=demo.ddp_floor_gb)
        return demo
    demo.ddp = go("gpu_capped_ddp", "ddp", demo.cap_gb)
    demo.fixed = go("gpu_capped_fixed", fixed_strategy, demo.cap_gb)
    return demo
