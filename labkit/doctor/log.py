"""`labkit doctor log PATH`: read a run's logged scalars and name what went wrong, with the fix.

PATH is a Hugging Face `trainer_state.json`, a checkpoint folder holding one, an
output dir with `checkpoint-*` folders (the latest is read), a labkit run folder
(`labkit train --out OUT`: `ranks/rank0.json`, else its TensorBoard `tb/`), or
any folder of TensorBoard event files (HF's or labkit's tags); see
`labkit.doctor.log_readers`.

Codes, each reported once at the step where it first happened:

* `non_finite_loss`     a logged loss is NaN/inf
* `loss_spike`          a loss several times the median of the window before it
* `grad_norm_explosion` a grad norm an order of magnitude above the window before it, or NaN/inf; on labkit's
                        per-layer series, the trainer's own spike rule (`labkit.training.monitor.Baselines`),
                        so the step and layer are the ones its gradient monitor named during the run
* `no_warmup`           the first logged learning rate is already the run's peak
* `loss_not_decreasing` the end of the run is not meaningfully below its start

Exit 0: nothing found; 1: findings; 2: the path cannot be read or holds no training scalars.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass

from labkit.doctor.log_readers import LOOKED_FOR, LogReadError, Run, finite, read_runs
from labkit.training.monitor import SPIKE_FACTOR as SPIKE_FACTOR_LAYER
from labkit.training.monitor import Baselines

# ---- thresholds ------------------------------------------------------------
# Compared with the median of a trailing window, not the previous value: a median
# ignores the one noisy batch in it, and a window of 20 logged values follows a
# decaying loss closely enough that "3x the median" means "3x where the run is now".
# tests/test_doctor_log.py checks them on noisy decaying runs (several seeds, 5-10%
# batch noise plus occasional hard batches, every-step and every-10-steps logging)
# where they stay silent, and on a real labkit run at lr=0.1 without clipping.
WINDOW = 20  # trailing logged values a spike is measured against
LOSS_MIN_HISTORY = 1  # a loss never triples in healthy training, not even between the first two logged
#                           values (a fresh model starts at its highest loss, ~ln(vocab)): the classic
#                           no-warmup blow-up at step 2 is caught
GRAD_MIN_HISTORY = 5  # grad norms swing several-fold in the first steps (Adam's moments, warmup): wait for 5
SPIKE_FACTOR = 3.0  # healthy batch noise is ~5-30% of the loss; a 3x jump is a different run, not noise
SPIKE_MIN_RISE = 0.5  # ...and at least 0.5 nats above it: near-zero losses (memorised data) triple on noise
EXPLOSION_FACTOR = 10.0  # grad norms are far noisier than losses (2-3x swings are normal): an order of
#                           magnitude, on the total norm (HF's logs).  Where labkit logged every layer's norm, a
#                           layer's spike is judged by the trainer's own rule instead (monitor.Baselines: > 5x the
#                           layer's moving baseline): one definition of a spike, so `doctor log` and the monitor
#                           name the same step and layer (healthy tiny runs: <2x; lr=0.1 without clipping:
#                           5-400x in one layer, while the total, diluted by the quiet layers, stays under 10x)
NO_WARMUP_FRACTION = 0.95  # first logged lr >= 95% of the peak: a warmup longer than the logging interval shows
#                           as a first lr well below it (10 steps into 100 of warmup: 10%)
MIN_LR_POINTS = 3  # one or two logged rates cannot show a schedule
TREND_MIN_POINTS = 10  # fewer logged losses are too short to call a trend
TREND_EDGE = 0.1  # "start" and "end" = the mean of the first / last 10% of logged losses...
TREND_EDGE_MIN = 3  # ...but at least 3 values each, so one noisy batch does not decide
NOT_DECREASING_RATIO = 0.9  # the end must be at least 10% below the start; healthy runs are far below

# ---- the story's fixes -------------------------------------------------------
CLIP = (
    "clip gradients: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0) before optimizer.step() "
    "(HF Trainer: max_grad_norm=1.0; labkit: TrainConfig(clip=1.0))"
)
WARMUP = (
    "warm up the learning rate: get_cosine_with_hard_restarts_schedule_with_warmup(optimizer, "
    "num_warmup_steps=..., num_training_steps=...) (HF Trainer: warmup_ratio=0.1; labkit: warmup_steps=...)"
)
LOWER_LR = "lower the learning rate (with AdamW it sets the step size whatever the gradient; notebook 06: 0.1 -> 3e-3)"
TRUNCATE = "truncate inputs: tokenizer(..., truncation=True, max_length=512)"
LAYERS = "find the layer that goes first with per-layer grad norms (labkit.training.monitor.GradMonitor, notebook 06)"
FIXES = {
    "non_finite_loss": f"{LOWER_LR}; {CLIP}; {TRUNCATE}; {LAYERS}",
    "loss_spike": f"{CLIP}; {TRUNCATE}; {LOWER_LR}; {LAYERS}",
    "grad_norm_explosion": f"{CLIP}; {LOWER_LR}; {LAYERS}",
    "no_warmup": WARMUP,
    "loss_not_decreasing": (
        f"if the loss spiked or oscillated, {LOWER_LR} and add warmup; if it is flat from the "
        f"start, check the learning rate is not ~0 and the labels are not all masked (-100)"
    ),
}
ORDER = list(FIXES)


@dataclass
class Finding:
    path: str
    line: int  # the step, under the name `labkit doctor script` uses
    step: int
    code: str
    message: str
    fix: str


def _g(x: float) -> str:
    return f"{x:.4g}"


def _jump(points, factor: float, min_history: int, min_rise: float = 0.0):
    """First (step, value, median, n) whose value > factor x the median of the WINDOW finite values before it."""
    prev: list[float] = []
    for step, v in points:
        if not math.isfinite(v):
            continue
        if len(prev) >= min_history:
            med = statistics.median(prev[-WINDOW:])
            if med > 0 and v > factor * med and v - med >= min_rise:
                return step, v, med, min(len(prev), WINDOW)
        prev.append(v)
    return None


def _layer_spike(run: Run) -> tuple[int, float, str, str] | None:
    """The first spike by the trainer's own rule (`monitor.Baselines`), replayed on labkit's per-layer series: the
    step and layer its gradient monitor named during the run (when every step was logged, the default)."""
    layers = sorted(run.layer_grad_norms)
    rows: dict[int, dict[str, float]] = {}
    for name in layers:
        for step, v in run.layer_grad_norms[name]:
            rows.setdefault(step, {})[name] = v
    bad_loss = {s for s, v in run.loss if not math.isfinite(v)}
    rule = Baselines()
    for step in sorted(rows):
        row = rows[step]
        if len(row) < len(layers) or step in bad_loss or not all(map(math.isfinite, row.values())):
            continue  # the trainer hands a non-finite step to its replay, not to the spike rule
        hit = rule.observe([row[n] for n in layers])
        if hit:
            i, ratio, baseline = hit
            return (
                step,
                ratio,
                layers[i],
                f"gradient norm of {layers[i]} {_g(row[layers[i]])} at step {step} is {ratio:.1f}x its moving "
                f"baseline {_g(baseline)} (the trainer's spike rule: > {rule.factor:g}x an EMA of the layer's own "
                f"norms, from the {rule.warmup + 1}th logged step on)",
            )
    return None


def _grad_explosion(run: Run) -> tuple[int, str] | None:
    """The earliest non-finite grad norm (total or a layer's), or the earliest jump: a layer's spike by the trainer's
    rule where labkit logged per-layer norms, else a 10x jump of the total."""
    events = []  # (step, ratio, layer or "", message)
    for layer, points in [("", run.grad_norm), *run.layer_grad_norms.items()]:
        of = f" of {layer}" if layer else ""
        bad = next(((s, v) for s, v in points if not math.isfinite(v)), None)
        if bad:
            events.append((bad[0], math.inf, layer, f"the gradient norm{of} is {bad[1]} at step {bad[0]}"))
    spike = _layer_spike(run) if run.layer_grad_norms else None
    if spike:
        events.append(spike)
    jump = None if run.layer_grad_norms else _jump(run.grad_norm, EXPLOSION_FACTOR, GRAD_MIN_HISTORY)
    if jump:
        s, v, med, n = jump
        events.append(
            (
                s,
                v / med,
                "",
                f"gradient norm {_g(v)} at step {s} is {v / med:.1f}x the median {_g(med)} of the {n} logged values "
                f"before it (threshold {EXPLOSION_FACTOR:g}x)",
            )
        )
    if not events:
        return None
    first = min(e[0] for e in events)
    at = sorted((e for e in events if e[0] == first), key=lambda e: (bool(e[2]), -e[1]))
    return first, at[0][3]


def diagnose(run: Run) -> list[Finding]:
    found: dict[str, tuple[int, str]] = {}
    loss, lr = run.loss, run.lr

    bad = next(((s, v) for s, v in loss if not math.isfinite(v)), None)
    if bad:
        found["non_finite_loss"] = (bad[0], f"the logged loss is {bad[1]} at step {bad[0]}")
    elif run.nonfinite_steps:
        s = run.nonfinite_steps[0]
        found["non_finite_loss"] = (
            s,
            f"labkit's trainer recorded a non-finite loss or gradient at step {s} "
            f"(TensorBoard tag nonfinite/events) that the logged values do not show",
        )

    spike = _jump(loss, SPIKE_FACTOR, LOSS_MIN_HISTORY, SPIKE_MIN_RISE)
    if spike:
        s, v, med, n = spike
        found["loss_spike"] = (
            s,
            f"loss {_g(v)} at step {s} is {v / med:.1f}x the median {_g(med)} of "
            f"the {n} logged values before it (threshold {SPIKE_FACTOR:g}x)",
        )
    explosion = _grad_explosion(run)
    if explosion:
        found["grad_norm_explosion"] = explosion

    rates = finite(lr)
    if len(rates) >= MIN_LR_POINTS:
        peak = max(v for _, v in rates)
        s0, first = rates[0]
        if peak > 0 and first >= NO_WARMUP_FRACTION * peak:
            found["no_warmup"] = (
                s0,
                f"the first logged learning rate ({_g(first)} at step {s0}) is already the "
                f"run's peak {_g(peak)}: no warmup",
            )

    fl = finite(loss)
    if len(fl) >= TREND_MIN_POINTS and loss and math.isfinite(loss[-1][1]):
        k = max(TREND_EDGE_MIN, math.ceil(len(fl) * TREND_EDGE))
        start = statistics.fmean(v for _, v in fl[:k])
        end = statistics.fmean(v for _, v in fl[-k:])
        if end > NOT_DECREASING_RATIO * start:
            found["loss_not_decreasing"] = (
                fl[-1][0],
                f"the mean loss of the last {k} logged values ({_g(end)}, to step {fl[-1][0]}) is not "
                f"below {NOT_DECREASING_RATIO:g}x the mean of the first {k} ({_g(start)})",
            )

    out = [Finding(run.path, s, s, code, msg, FIXES[code]) for code, (s, msg) in found.items()]
    return sorted(out, key=lambda f: (f.step, ORDER.index(f.code)))


def check(path: str) -> list[Finding]:
    """Findings for every run under `path` (LogReadError if it cannot be read or has no training scalars)."""
    return [f for run in read_runs(path) for f in diagnose(run)]


OPTIMIZER_DOMINATES = 0.4  # AdamW's two moments are half of fp32 weights + gradients + states (8P of 16P)


def memory_note(run: Run) -> str | None:
    """What one rank held (labkit rank reports), and when the optimizer states dominate it, what shards them."""
    m = run.memory
    if not m:
        return None
    mb = 2**20
    share = m["optimizer"] / m["total"]
    text = (
        f"{run.path}: per-rank state {m['params'] / mb:.1f} MB parameters + {m['grads'] / mb:.1f} MB gradients + "
        f"{m['optimizer'] / mb:.1f} MB optimizer = {m['total'] / mb:.1f} MB ({m['strategy']}, {m['world']} rank(s))"
    )
    if share < OPTIMIZER_DOMINATES:
        return text
    text += f"; the optimizer states are {share:.0%} of it"
    if m["strategy"] == "fsdp":
        return text + f", already sharded over {m['world']} ranks"
    more = "every rank holds all of them" if m["world"] > 1 else "one process holds all of them"
    return text + f" and {more}: --strategy fsdp divides them (and the rest) by the number of ranks (notebook 09)"


def format_text(findings: list[Finding]) -> str:
    return "\n".join(f"{f.path}:step {f.step}: {f.code}: {f.message} — fix: {f.fix}" for f in findings)


def _cmd_log(args) -> int:
    try:
        runs = read_runs(args.path)
    except LogReadError as exc:
        print(f"labkit doctor log: {exc}", file=sys.stderr)
        return 2
    findings = [f for run in runs for f in diagnose(run)]
    if args.format == "json":
        print(json.dumps([asdict(f) for f in findings], ensure_ascii=False, indent=1))
        return 1 if findings else 0
    if findings:
        print(format_text(findings))
    else:
        for run in runs:
            print(
                f"{run.path}: no findings ({len(run.loss)} losses, {len(run.grad_norm)} grad norms, "
                f"{len(run.lr)} learning rates logged)"
            )
    for run in runs:  # a fact about the run, not a finding: it never changes the exit code
        note = memory_note(run)
        if note:
            print(note)
    return 1 if findings else 0


def register(dsub) -> None:
    p = dsub.add_parser(
        "log",
        help="find loss spikes, exploding gradients, NaN, missing warmup in a run's logs",
        description=__doc__.split("\n", 1)[1].strip().replace("`", ""),
        epilog=(
            f"Thresholds: a loss spike is > {SPIKE_FACTOR:g}x the median of the previous {WINDOW} logged losses; "
            f"a grad-norm explosion > {EXPLOSION_FACTOR:g}x the median of the previous {WINDOW} grad norms "
            f"(after {GRAD_MIN_HISTORY}) or NaN/inf -- on labkit's per-layer norms, the trainer's spike rule "
            f"(> {SPIKE_FACTOR_LAYER:g}x the layer's moving baseline, as its gradient monitor); "
            f"no warmup: first lr >= {NO_WARMUP_FRACTION:g}x the peak; "
            f"not decreasing: mean of the last {TREND_EDGE:.0%} of losses > {NOT_DECREASING_RATIO:g}x the mean "
            f"of the first {TREND_EDGE:.0%}.\nA folder is searched for {LOOKED_FOR}."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "path",
        metavar="PATH",
        help="a trainer_state.json, an HF checkpoint or output dir (the latest checkpoint-* is read), "
        "a labkit run folder (labkit train --out), or a folder of TensorBoard event files",
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: one 'PATH:step N: code: message — fix: ...' line per finding (default); "
        "json: a list of {path, line, step, code, message, fix} (line = step)",
    )
    p.set_defaults(func=_cmd_log)
