"""Peak memory: measured (CUDA allocator / Linux kernel high-water mark) and modelled.

CPU measurement: torch allocates tensors with its own allocator straight from
malloc/mmap, so `tracemalloc` (Python objects only) sees none of it, and
sampling RSS from a thread misses short peaks between samples.  The kernel
tracks the exact peak resident set size (`VmHWM` in /proc/self/status) and lets
a process reset it (writing "5" to /proc/self/clear_refs, Linux >= 4.0).  We
return freed heap to the OS first (`malloc_trim`) so the baseline is honest,
reset the mark, run the code, and report `VmHWM - baseline`.  Where that is
unavailable we fall back to sampling RSS with psutil every millisecond.

Memory model of one training step (bytes), fp32 AdamW::

    weights 4P + gradients 4P + optimizer states 8P + activations alpha * 4 * A(B, S, T)

where A counts the activation elements a T5 forward keeps for backward (below)
and alpha is fitted on the tiny model's measurements (it absorbs allocator
slack and the temporaries we do not count).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

_STATUS = Path("/proc/self/status")
_CLEAR = Path("/proc/self/clear_refs")


def _status_kb(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _trim() -> None:
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def cpu_peak_method() -> str:
    """ "kernel-hwm" where the kernel peak can be reset, else "psutil-sampling"."""
    try:
        _CLEAR.write_text("5")
        _status_kb("VmHWM")
        return "kernel-hwm"
    except (OSError, KeyError):
        return "psutil-sampling"


def measure_peak(fn: Callable[[], object], device: str | torch.device = "cpu") -> tuple[object, int]:
    """Run `fn()`; return (its result, peak bytes above the memory in use before it)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
        out = fn()
        torch.cuda.synchronize(dev)
        return out, torch.cuda.max_memory_allocated(dev) - base
    _trim()
    if cpu_peak_method() == "kernel-hwm":
        _CLEAR.write_text("5")  # resets VmHWM to the current RSS
        base = _status_kb("VmRSS")
        out = fn()
        return out, max(0, _status_kb("VmHWM") - base) * 1024
    import psutil

    proc, peak, stop = psutil.Process(), [0], threading.Event()
    base = proc.memory_info().rss

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.001)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        out = fn()
    finally:
        stop.set()
        t.join()
    return out, max(0, max(peak[0], proc.memory_info().rss) - base)


def training_step_peak(
    model,
    batch: dict,
    optimizer=None,
    precision: str = "fp32",
    grad_checkpointing: bool = False,
    device: str | torch.device = "cpu",
) -> int:
    """Peak bytes of one forward+backward+optimizer step *above* resident weights and optimizer
    state (so: gradients + activations + temporaries).  One warm-up step first creates the
    optimizer state and lets allocator caches settle."""
    dev = torch.device(device)
    model.to(dev).train()
    if grad_checkpointing:
        model.config.use_cache = False
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_disable()
    opt = optimizer or torch.optim.AdamW(model.parameters(), lr=1e-4)
    inputs = {k: batch[k].to(dev) for k in ("input_ids", "attention_mask", "labels")}
    ctx = (lambda: torch.autocast(dev.type, dtype=torch.bfloat16)) if precision == "bf16" else contextlib.nullcontext

    def step():
        with ctx():
            loss = model(**inputs).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss.detach())

    step()
    return measure_peak(step, dev)[1]


@dataclass(frozen=True)
class Shape:
    d_model: int
    d_ff: int
    d_kv: int
    num_heads: int
    num_layers: int
    num_decoder_layers: int
    vocab_size: int

    @classmethod
    def of(cls, config) -> "Shape":
        return cls(*(getattr(config, f) for f in cls.__dataclass_fields__))


def activation_elements(s: Shape, batch: int, src_len: int, tgt_len: int) -> int:
    """Elements a T5 forward keeps for backward (one per saved tensor, fp32 counted once).

    Encoder layer: 2 layer-norm in/out pairs (4·S·d), q,k,v,context (4·S·inner),
    scores + softmax (2·h·S²), FF hidden pre/post ReLU (2·S·f), sub-layer outputs (2·S·d).
    Decoder layer: the same with T for self-attention, plus cross-attention
    (q, context: 2·T·inner; k, v over the encoder output: 2·S·inner; scores 2·h·T·S;
    one more norm pair and output: 3·T·d).  Logits: log-softmax in/out (2·T·V).
    """
    d, f, h, inner = s.d_model, s.d_ff, s.num_heads, s.num_heads * s.d_kv
    S, T = src_len, tgt_len
    enc = 6 * S * d + 4 * S * inner + 2 * h * S * S + 2 * S * f
    dec = 9 * T * d + 6 * T * inner + 2 * S * inner + 2 * h * T * T + 2 * h * T * S + 2 * T * f
    return batch * (s.num_layers * enc + s.num_decoder_layers * dec + 2 * T * s.vocab_size)


def static_bytes(n_params: int, optimizer_states: int = 2, bytes_per: int = 4) -> dict[str, int]:
    """Weights, gradients and AdamW's two moments, fp32."""
    return {
        "weights": bytes_per * n_params,
        "gradients": bytes_per * n_params,
        "optimizer": optimizer_states * bytes_per * n_params,
    }


ZERO_STAGES = {
    0: "DDP: everything replicated",
    1: "optimizer states sharded",
    2: "+ gradients",
    3: "+ parameters (FSDP)",
}


def sharded_static_bytes(
    n_params: int, world: int, stage: int, optimizer_states: int = 2, bytes_per: int = 4
) -> dict[str, float]:
    """Per-rank weights, gradients and optimizer states at ZeRO `stage` on `world` ranks (fp32 AdamW).

    Stage 0 is DDP (16P on every rank whatever the world size); stage 1 shards the optimizer states,
    2 also the gradients, 3 also the parameters (FSDP's full sharding: 16P / N). The block FSDP
    gathers for compute is transient and counted with the activations, not here."""
    if stage not in ZERO_STAGES:
        raise ValueError(f"ZeRO stage {stage}: choose one of {sorted(ZERO_STAGES)}")
    if world < 1:
        raise ValueError(f"world size {world}: at least 1")
    full = static_bytes(n_params, optimizer_states, bytes_per)
    sharded = {"optimizer": stage >= 1, "gradients": stage >= 2, "weights": stage >= 3}
    out: dict[str, float] = {k: v / world if sharded[k] else float(v) for k, v in full.items()}
    out["total"] = sum(out.values())
    return out


def fit_alpha(shape: Shape, n_params: int, points: list[tuple[int, int, int, int]]) -> float:
    """Least-squares scale on activations from measured (batch, S, T, peak_bytes) step peaks.

    The measured peak above resident weights+optimizer is gradients (4P) plus
    activations; alpha = argmin sum (peak - 4P - alpha * 4A)^2."""
    num = den = 0.0
    for b, S, T, peak in points:
        a = 4.0 * activation_elements(shape, b, S, T)
        num += a * (peak - 4.0 * n_params)
        den += a * a
    return num / den


def predict_step_bytes(
    shape: Shape,
    n_params: int,
    batch: int,
    src_len: int,
    tgt_len: int,
    alpha: float = 1.0,
    world: int = 1,
    stage: int = 0,
) -> dict[str, float]:
    """Whole-step peak estimate per rank: static parts (sharded at ZeRO `stage` over `world` ranks) + alpha x
    activations of this rank's micro-batch, with the total. Sharding never divides the activations."""
    out: dict[str, float] = {k: v for k, v in sharded_static_bytes(n_params, world, stage).items() if k != "total"}
    out["activations"] = alpha * 4.0 * activation_elements(shape, batch, src_len, tgt_len)
    out["total"] = sum(out.values())
    return out


def measure_grid(make_model, collate, examples, batches, seq_lens, device="cpu", **step_kw) -> list[dict]:
    """Measured step peaks for every (batch, max_source_len); `collate(examples, max_len)` builds a batch."""
    rows = []
    for s in seq_lens:
        for b in batches:
            batch = collate(list(examples[:b]), s)
            peak = training_step_peak(make_model(), batch, device=device, **step_kw)
            rows.append(
                {
                    "batch": b,
                    "src_len": batch["input_ids"].shape[1],
                    "tgt_len": batch["labels"].shape[1],
                    "peak_mb": peak / 2**20,
                }
            )
    return rows


def largest_fitting_batch(
    shape: Shape,
    n_params: int,
    src_len: int,
    tgt_len: int,
    alpha: float,
    budget_bytes: float,
    max_batch: int = 64,
    world: int = 1,
    stage: int = 0,
) -> int:
    """Largest micro-batch whose predicted step fits in `budget_bytes` per rank (0 if not even 1)."""
    best = 0
    for b in range(1, max_batch + 1):
        if predict_step_bytes(shape, n_params, b, src_len, tgt_len, alpha, world, stage)["total"] <= budget_bytes:
            best = b
    return best


def against_noise(change: float, spread: float) -> str:
    """How a setting's relative change in measured peak reads against the measurement's own spread: "within" it,
    or beyond it as "more" or "less" memory."""
    if abs(change) <= spread:
        return "within"
    return "more" if change > 0 else "less"


def timed_step_peak(model, batch: dict, device="cpu", repeats: int = 3, **step_kw) -> dict:
    """Median seconds of a training step, its median measured peak and how far the peaks of the same step spread
    over `repeats + 1` measurements (`peak_spread`, (max - min) / median: the measurement's own noise, against
    which a comparison of settings is read)."""
    import statistics

    peaks = [training_step_peak(model, batch, device=device, **step_kw)]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        peaks.append(training_step_peak(model, batch, device=device, **step_kw))
        times.append((time.perf_counter() - t0) / 2)  # training_step_peak runs two steps
    mid = statistics.median(peaks)
    return {
        "peak_mb": mid / 2**20,
        "peak_spread": (max(peaks) - min(peaks)) / mid if mid else 0.0,
        "step_s": statistics.median(times),
    }
