"""Predict, then run: one question per notebook, answered before the cell that measures it.

The learner writes a prediction (`predict("05", 100)`) before the cell that measures the quantity; after it,
`reveal("05", res)` reads the measured value from the notebook's own results (`labkit.results.Results`, by the
question's results key), compares it with the prediction within the question's stated tolerance, and explains
why the number is what it is. A prediction is not a test: a far-off one is answered with the explanation, not
a failure (✅ close / 🔎 off); only a missing prediction fails, with `UNANSWERED`.

Keys: `metric:NAME` (a `res.metric`) or `expect:NAME` (the observed value of a `res.expect` claim), with `[i]`
to take one element of a tuple.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from labkit.atomic import atomic_write_text
from labkit.exercises import UNANSWERED, fail, passed
from labkit.i18n import N_, _


@dataclass(frozen=True)
class Question:
    id: str
    notebook: str
    text: str
    key: str  # where the notebook records the measured value (see the module doc)
    unit: str
    tolerance: tuple  # ("abs", d): |p - m| <= d; ("factor", f): m/f <= p <= m*f; ("exact",); ("choice",)
    explain: str
    scale: float = 1.0  # measured value x scale = the unit the question asks in
    choices: tuple[str, ...] = ()
    classify: Callable[[Any], str] | None = None  # measured value -> one of `choices`
    # the values an answer can take, in the question's unit (inclusive), and how to say so; a prediction outside
    # them is a slip of units or of the question (28 where a share is asked), refused with a hint, never compared
    bounds: tuple[float, float] = (-math.inf, math.inf)
    asks: str = ""
    whole: bool = False  # a count: no fractions

    @property
    def rule(self) -> str:
        kind = self.tolerance[0]
        if kind == "abs":
            return _("within ±{tolerance} {unit}").format(tolerance=f"{self.tolerance[1]:g}", unit=_(self.unit))
        if kind == "factor":
            return _("within a factor of {factor}").format(factor=f"{self.tolerance[1]:g}")
        if kind == "choice":
            return _("the same choice")
        return _("exactly")


def _layer_kind(name: Any) -> str:
    name = str(name or "")
    if "layer_norm" in name:
        return "layer norm"
    if "Attention" in name:
        return "attention"
    if "DenseReluDense" in name:
        return "feed-forward"
    return "embedding or output" if name else "none"


QUESTIONS: dict[str, Question] = {
    q.id: q
    for q in (
        Question(
            "01",
            "01_dirty_data",
            N_(
                "Of the records the naive loader kept, what share carry visible noise (JavaScript, CSS, tags, page "
                "furniture, control characters, U+FFFD or mojibake)? Answer as a share between 0 and 1."
            ),
            "metric:sample_noise_share",
            N_("(share of the sample)"),
            ("abs", 0.15),
            N_(
                "The naive loader keeps almost every record (~89 % of the crawl) and about two in three of them carry "
                "page furniture, script code or damaged text -- a team that looked at a screenful of samples would "
                "have seen it before training anything."
            ),
            bounds=(0.0, 1.0),
            asks=N_("a share between 0 and 1"),
        ),
        Question(
            "02",
            "02_cleaning_pipeline",
            N_("What share of the crawl's records will the cleaning pipeline reject (as a share between 0 and 1)?"),
            "metric:rejected_share",
            N_("(share of the records)"),
            ("abs", 0.08),
            N_(
                "About 27-30 %: the generator damages a quarter of the records beyond repair (missing or absurd titles, "
                "U+FFFD, shifted CSV rows, truncated JSON) and adds ~8 % duplicates; everything else -- encodings, "
                "latin-1 mojibake, scripts, furniture, swapped columns -- is repaired and kept."
            ),
            bounds=(0.0, 1.0),
            asks=N_("a share between 0 and 1"),
        ),
        Question(
            "03",
            "03_memory_and_accumulation",
            N_(
                "The memory grid measures one training step from batch 4 x 64 tokens up to batch 16 x 256 tokens (16x the "
                "tokens). How many times more step memory will the largest configuration need than the smallest?"
            ),
            "expect:largest vs smallest configuration",
            N_("x"),  # a multiplier: 倍 in Chinese
            ("factor", 1.5),
            N_(
                "Activations grow with batch x length, and attention's scores with length squared, but at 256 tokens "
                "and d_model 128 the per-token tensors (q/k/v, feed-forward, logits over the vocabulary) dominate: the "
                "measured peak grows a little less than the 16x tokens, because gradients and the allocator's slack do "
                "not grow with the batch at all."
            ),
            bounds=(0.0, math.inf),
            asks=N_("a multiplier: how many times the smallest configuration's memory"),
        ),
        Question(
            "04",
            "04_launching_ddp",
            N_(
                "`python -m labkit.train --local_rank=0` is started where 2 processes were asked for. What world size "
                "will the ranks report?"
            ),
            "expect:wrong launch: processes started and world size[1]",
            N_("process(es)"),
            ("exact",),
            N_(
                "1. `--local_rank` is what the old launcher passed *to* the processes it started; typing it starts "
                "nothing. No launcher set WORLD_SIZE, so the script is one ordinary process -- the run that 'trained "
                "fine for a day' at world size 1."
            ),
            bounds=(1.0, math.inf),
            asks=N_("a whole number of processes, 1 or more"),
            whole=True,
        ),
        Question(
            "05",
            "05_samplers_and_seeds",
            N_(
                "Without any sampler, every rank shuffles the whole data set with the same seed. What share of the "
                "examples seen in an epoch will more than one rank see (overlap, in %)?"
            ),
            "expect:no sampler: overlap across ranks",
            "%",
            ("abs", 10.0),
            N_(
                "100 %: the same seed gives every rank the same shuffle, so the ranks draw identical batches and compute "
                "identical gradients -- N processes doing one process's work N times (work factor = N)."
            ),
            bounds=(0.0, 100.0),
            asks=N_("a percentage between 0 and 100"),
        ),
        Question(
            "06",
            "06_exploding_gradients",
            N_(
                "In the broken run (lr 0.1, no warmup, no clipping), which kind of layer will the gradient monitor name "
                "as the first to spike: 'layer norm', 'attention', 'feed-forward' or 'embedding or output'?"
            ),
            "metric:first_spike_layer",
            "",
            ("choice",),
            N_(
                "In this tiny pre-norm T5 the RMS layer-norm weights in front of the attention sub-layers spike first: "
                "they scale everything the attention sees, have few parameters, and AdamW moves each of them by ~lr per "
                "step -- at lr 0.1 the learning rate alone throws them off, before any hostile batch does."
            ),
            choices=("layer norm", "attention", "feed-forward", "embedding or output"),
            classify=_layer_kind,
        ),
        Question(
            "07",
            "07_multitask_distributed_training",
            N_(
                "1 process with batch 16 vs 2 processes with batch 8 each, the same examples in every step: how far "
                "apart will the two loss curves be on average (mean relative gap, in %)?"
            ),
            "metric:loss_mean_rel_gap",
            "%",
            ("abs", 0.5),
            N_(
                "About 0.5-0.7 %, not 0: each rank averages the loss over its own tokens and DDP averages the ranks' "
                "gradients, while one process averages over all tokens at once; float sums also run in another order, "
                "and training amplifies the tiny differences step by step. Close, not bit-identical."
            ),
            scale=100.0,
            bounds=(0.0, 100.0),
            asks=N_("a percentage between 0 and 100"),
        ),
        Question(
            "08",
            "08_deployment",
            N_(
                "On the served stack (API + dynamic batching, int8 ONNX Runtime), how many times the requests per second "
                "will 16 simultaneous clients get compared with 1 client?"
            ),
            "metric:qps_c16_over_c1",
            N_("x"),
            ("factor", 2.0),
            N_(
                "About 2-3x on a 2-core CPU, not 16x: the batcher gathers concurrent requests into one model call, and "
                "one batch of 16 costs more than one request but far less than 16. Without batching (FIX=False) the "
                "ratio stays near 1: the requests just queue."
            ),
            bounds=(0.0, math.inf),
            asks=N_("a multiplier: how many times the requests per second of 1 client"),
        ),
        Question(
            "09",
            "09_sharding",
            N_(
                "The same model, data and batch on 2 ranks: how many times longer will one optimizer step take under "
                "FSDP than under DDP?"
            ),
            "metric:ms_per_step_ratio_sharded_vs_ddp",
            N_("x"),
            ("factor", 2.0),
            N_(
                "About 3x on this tiny model on 2 idle CPU cores (up to 5x on a busy machine): every one of its blocks all-gathers its parameters "
                "before the forward and again before the backward, and reduce-scatters its gradients -- dozens of "
                "small collectives per step, each costing more than the block's own arithmetic -- where DDP sends "
                "the gradients in a few bucketed all-reduces. FSDP buys memory, not speed; with a model big enough to "
                "need it, the arithmetic grows and the collectives overlap with it, so the price shrinks: measure it "
                "on your own cards."
            ),
            bounds=(0.0, math.inf),
            asks=N_("a multiplier: how many times a DDP step's time"),
        ),
    )
}

_PREDICTIONS: dict[str, Any] = {}
# question id -> what the last reveal compared (`revealed()`); the grader records a predict-then-run answer as
# answered, with the prediction and the measurement -- never as a pass or a fail -- from the file it names in this
# variable, written at each reveal (so a notebook stopped later by a time limit still has its answers recorded)
_REVEALED: dict[str, dict] = {}
REVEALED_FILE_ENV = "LABKIT_REVEALED_FILE"


def revealed() -> dict[str, dict]:
    """Each question revealed in this kernel: {"prediction", "measured", "unit", "close"} (plain JSON values)."""
    return {k: dict(v) for k, v in _REVEALED.items()}


def question(qid: str) -> Question:
    key = str(qid).strip().split(".")[0].zfill(2)
    if key not in QUESTIONS:
        raise KeyError(
            _("no prediction question {qid}: choose one of {ids}").format(qid=repr(qid), ids=sorted(QUESTIONS))
        )
    return QUESTIONS[key]


def ask(qid: str) -> str:
    """Print the question (and how close counts as close)."""
    q = question(qid)
    text = _(q.text)
    shown = (
        _("{question} Choose one of: {choices}.").format(question=text, choices=", ".join(q.choices))
        if q.choices
        else text
    )
    print("🔮 " + _("{question} (close = {rule})").format(question=shown, rule=q.rule))
    return text


def _valid(q: Question, value: Any):
    if q.tolerance[0] == "choice":
        v = str(value).strip().lower() if isinstance(value, str) else None
        if v not in q.choices:
            fail(_("predict one of {choices}").format(choices=", ".join(repr(c) for c in q.choices)))
        return v
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        fail(_("predict a number ({unit})").format(unit=_(q.unit)) if q.unit else _("predict a number"))
    v = float(value)
    lo, hi = q.bounds
    if hi == 1.0 and 1.0 < v <= 100.0:
        fail(
            _("{value:g} looks like a percent; the question asks for a share between 0 and 1 -- {share:g}?").format(
                value=v, share=v / 100
            )
        )
    if not lo <= v <= hi or (q.whole and v != int(v)):
        fail(_("{value:g} cannot be the answer: the question asks for {asks}").format(value=v, asks=_(q.asks)))
    return v


def predict(qid: str, value: Any) -> None:
    """Record a prediction before running the cell that measures it (a placeholder records nothing)."""
    q = question(qid)
    if value is None or value is Ellipsis:
        _PREDICTIONS.pop(q.id, None)
        print(
            "⏳ "
            + _("no prediction recorded for {id} yet: replace the `...` with your guess before running on").format(
                id=q.id
            )
        )
        return
    _PREDICTIONS[q.id] = _valid(q, value)
    print(
        "🔮 "
        + _("prediction recorded: {value} -- now run the cells that measure it").format(value=repr(_PREDICTIONS[q.id]))
    )


_KEY = re.compile(r"^(metric|expect):(.*?)(?:\[(\d+)\])?$")


def measured_value(q: Question, measured: Any):
    """The measured value: a number or choice as given, or read from a Results object / results.json dict by key."""
    source = None
    if hasattr(measured, "metrics") and hasattr(measured, "expectations"):
        source = {"metrics": measured.metrics, "expectations": measured.expectations}
    elif isinstance(measured, dict) and ("metrics" in measured or "expectations" in measured):
        source = measured
    if source is None:
        return measured
    kind, name, index = _KEY.match(q.key).groups()
    if kind == "metric":
        if name not in source.get("metrics", {}):
            fail(
                _("the notebook has not measured {name} yet: run the cell that measures it, then reveal").format(
                    name=repr(name)
                )
            )
        value = source["metrics"][name]
    else:
        hits = [e for e in source.get("expectations", []) if e["name"] == name]
        if not hits:
            fail(
                _("the notebook has not checked {name} yet: run the cell that measures it, then reveal").format(
                    name=repr(name)
                )
            )
        value = hits[-1]["observed"]
    return value[int(index)] if index is not None else value


def reveal(qid: str, measured: Any) -> bool:
    """Compare the recorded prediction with the measured value (a number, or the notebook's `res`) and explain.

    Returns True when the prediction was close; raises (UNANSWERED) only when nothing was predicted."""
    q = question(qid)
    if q.id not in _PREDICTIONS:
        fail(
            _("{unanswered} -- write your prediction in the predict cell for {id} and run it before this one").format(
                unanswered=_(UNANSWERED), id=q.id
            )
        )
    pred = _PREDICTIONS[q.id]
    raw = measured_value(q, measured)
    if q.tolerance[0] == "choice":
        value = q.classify(raw) if q.classify else str(raw)
        close = pred == value
        shown = f"{value!r} ({raw})"
    else:
        value = float(raw) * q.scale
        if q.tolerance[0] == "abs":
            close = abs(pred - value) <= q.tolerance[1]
        elif q.tolerance[0] == "factor":
            f = q.tolerance[1]
            close = pred > 0 and value > 0 and value / f <= pred <= value * f
        else:
            close = pred == value
        shown = f"{value:.3g} {_(q.unit)}".rstrip()
    _REVEALED[q.id] = {
        "prediction": pred if isinstance(pred, (int, float, str)) else str(pred),
        "measured": value if isinstance(value, (int, float, str)) else str(value),
        "unit": q.unit if q.tolerance[0] != "choice" else "",
        "close": bool(close),
    }
    if os.environ.get(REVEALED_FILE_ENV):
        atomic_write_text(Path(os.environ[REVEALED_FILE_ENV]), json.dumps(revealed(), default=str))
    msg = _("you predicted {prediction}, the notebook measured {measured} (close = {rule}). {explanation}").format(
        prediction=repr(pred), measured=shown, rule=q.rule, explanation=_(q.explain)
    )
    if close:
        return passed(_("close. {message}").format(message=msg))
    print("🔎 " + _("not quite: {message}").format(message=msg))
    return False
