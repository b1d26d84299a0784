"""The checks judged by a table of answers: for every exercise of notebooks 01-09, right answers written in
different ways must pass, and known wrong answers must fail with the hint for *their* mistake.

Each wrong answer carries a substring that only its own hint contains (not the generic "expected ..." one).
Wrong answers the instructor's guide names under "Common wrong answers" carry the guide's words (`doc`): the
guide's line for that exercise must list exactly those, so the guide says what the checks reject.
Multiple-choice questions (`Quiz`): every right spelling passes, every wrong option fails with its own
explanation, every left-out right option of a multiple-select question with its own `missed` hint; and over
the course the right option is not systematically the longest, the right letters spread over A-D, and every
notebook has a multiple-select question whose options match the notebook's text.

The other kinds of check keep their tables beside their code, in tests/test_exercises_transfer.py: the
find-and-fix checks (CASES: the shipped script, two repairs that pass, wrong repairs with the phrase of their
hint and the guide's words) and 01's labelling check (LABEL_ANSWERS). A predict-then-run reveal judges no
answer right or wrong: any written prediction is compared and explained, only a missing one fails.
"""

from __future__ import annotations

import importlib
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import nbformat
import pytest
import test_exercises_transfer as transfer_table
from exercise_helpers import check_kind

from labkit.exercises import ExerciseFailed, Quiz, predictions

ROOT = Path(__file__).parents[1]
NOTEBOOKS = {p.name[:2]: p for p in sorted((ROOT / "notebooks").glob("0[1-9]_*.ipynb"))}
MODULES = {n: importlib.import_module(f"labkit.exercises.nb{n}") for n in NOTEBOOKS}
ALPHA = 1.2  # a fitted value notebook 03 reports (0.5-3 is accepted there); the wrong answers differ at it


@dataclass
class Wrong:
    answer: Any
    hint: str  # a substring only this mistake's hint has
    doc: str = ""  # the guide's words for it, when docs/workshop.md lists it as a common wrong answer


@dataclass
class Case:
    check: Callable[[Any], bool]  # calls the exercise's check with one answer
    right: list
    wrong: list[Wrong] = field(default_factory=list)


# ---- 01 -------------------------------------------------------------------------------------------------------------
def _share_bar_strip(line):
    s = line.strip()
    return s.startswith(("分享到", "分享至")) and s[3:4] in ("：", ":")


def _script_re(pattern, flags=0):
    return re.compile(pattern, flags)


# ---- 02 -------------------------------------------------------------------------------------------------------------
def _shingles(text, k=5):
    return {text[i : i + k] for i in range(max(1, len(text) - k + 1))}


def _shingles_loop(text, k=5):
    out = set()
    for i in range(len(text) - k + 1):
        out.add(text[i : i + k])
    return out


def _jaccard_dup(a, b, threshold=0.8):
    sa, sb = _shingles(a), _shingles(b)
    return len(sa & sb) / len(sa | sb) >= threshold


def _jaccard_dup_ops(a, b, threshold=0.8):
    sa, sb = _shingles_loop(a), _shingles_loop(b)
    return len(sa.intersection(sb)) / len(sa.union(sb)) >= threshold


def _containment_dup(a, b, threshold=0.8):
    sa, sb = _shingles(a), _shingles(b)
    return len(sa & sb) / len(sa) >= threshold


# ---- 03 -------------------------------------------------------------------------------------------------------------
def _plan(budget_per_gb, ceil=True):
    from labkit.exercises.nb03 import _t5_large
    from labkit.training import memory as mm

    P, large = _t5_large()

    def plan_for(card_gb):
        fit = mm.largest_fitting_batch(large, P, 512, 64, ALPHA, card_gb * budget_per_gb)
        return fit, (-(-16 // fit) if ceil else 16 // fit)

    return plan_for


def _plan_by_hand(card_gb):  # the memory model's formula, walked up by hand
    from labkit.exercises.nb03 import _t5_large
    from labkit.training import memory as mm

    P, large = _t5_large()
    budget = card_gb * 2**30 * 0.95
    b = 0
    while b < 64 and mm.predict_step_bytes(large, P, b + 1, 512, 64, ALPHA)["total"] <= budget:
        b += 1
    return b, math.ceil(16 / b)


# ---- 05 -------------------------------------------------------------------------------------------------------------
def _epochs_before(sampler, epochs):
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


def _epochs_comprehension(sampler, epochs):
    return [(sampler.set_epoch(e), [int(i) for i in sampler])[1] for e in range(epochs)]


def _epochs_after(sampler, epochs):
    orders = []
    for epoch in range(epochs):
        orders.append(list(sampler))
        sampler.set_epoch(epoch)
    return orders


def _epochs_zero(sampler, epochs):
    orders = []
    for _ in range(epochs):
        sampler.set_epoch(0)
        orders.append(list(sampler))
    return orders


def _epochs_never(sampler, epochs):
    return [list(sampler) for _ in range(epochs)]


def _epochs_own_shuffle(sampler, epochs):
    import random

    orders = []
    for epoch in range(epochs):
        order = list(sampler)
        random.Random(epoch).shuffle(order)
        orders.append(order)
    return orders


# ---- 06 -------------------------------------------------------------------------------------------------------------
_TOK = []


def tok():
    if not _TOK:
        from labkit.corpus import generate
        from labkit.text.tokenizer import train_tokenizer
        from labkit.training.recipes import tokenizer_texts

        _TOK.append(train_tokenizer(tokenizer_texts(generate(12, 0))))
    return _TOK[0]


def _trace():
    from labkit.training.explosions import spiky_trace

    return spiky_trace(seed=0)


def _quantile(q):
    import numpy as np

    return float(np.quantile(_trace(), q))


def _median():
    import statistics

    return statistics.median(_trace())


# ---- 08 -------------------------------------------------------------------------------------------------------------
def _load_while(send, max_requests, max_seconds):
    latencies, start = [], time.perf_counter()
    while len(latencies) < max_requests and time.perf_counter() - start < max_seconds:
        t0 = time.perf_counter()
        send()
        latencies.append(time.perf_counter() - t0)
    return latencies


def _load_for(send, max_requests, max_seconds):
    deadline = time.monotonic() + max_seconds
    out = []
    for _ in range(max_requests):
        if time.monotonic() >= deadline:
            break
        t = time.perf_counter()
        send()
        out.append(time.perf_counter() - t)
    return out


def _load_clock_once(send, max_requests, max_seconds):
    latencies, start = [], time.perf_counter()
    if time.perf_counter() - start < max_seconds:  # the clock, checked once
        for _ in range(max_requests):
            t0 = time.perf_counter()
            send()
            latencies.append(time.perf_counter() - t0)
    return latencies


def _load_no_count(send, max_requests, max_seconds):
    latencies, start = [], time.perf_counter()
    while time.perf_counter() - start < max_seconds:
        t0 = time.perf_counter()
        send()
        latencies.append(time.perf_counter() - t0)
    return latencies


def _load_timestamps(send, max_requests, max_seconds):
    out, start = [], time.perf_counter()
    while len(out) < max_requests and time.perf_counter() - start < max_seconds:
        send()
        out.append(time.perf_counter() - start)
    return out


def _nb(n):
    return MODULES[n]


def _zero_bytes(shard):
    """per_rank_bytes written with `shard(stage)` -> which of (weights, grads, adam) are divided by the world."""

    def per_rank_bytes(n_params, world, stage):
        parts = [4 * n_params, 4 * n_params, 8 * n_params]
        return sum(b / world if divided else b for b, divided in zip(parts, shard(stage)))

    return per_rank_bytes


def _zero_bytes_table(n_params, world, stage):  # the same, from a table of the sharded terms
    sharded = {0: 0, 1: 8, 2: 12, 3: 16}[stage] * n_params
    return 16 * n_params - sharded + sharded / world


CASES: dict[str, Case] = {
    "01.1": Case(
        lambda f: _nb("01").ex1(f),
        right=[lambda s: re.match(r"\s*分享[到至]\s*[：:]", s) is not None, _share_bar_strip],
        wrong=[
            Wrong(
                lambda s: re.search(r"分享[到至]\s*[：:]", s) is not None,
                "anchor the pattern",
                "a rule without `^` (flags `用户可一键分享到：微信、微博等平台。`)",
            ),
            Wrong(
                lambda s: re.match(r"\s*分享", s) is not None,
                "require the colon",
                "a rule without the colon (flags `分享经济规模扩大`)",
            ),
            Wrong(
                lambda s: re.match(r"分享[到至][：:]", s) is not None,
                "strip the line",
                "not stripping the line (misses `  分享到：新浪微博  `)",
            ),
            Wrong(
                lambda s: re.match(r"\s*分享[到至]：", s) is not None,
                "half-width",
                "only the full-width `：` (misses `分享到: 微信朋友圈`)",
            ),
            Wrong(lambda s: re.match(r"\s*分享到\s*[：:]", s) is not None, "also start with 分享至"),
        ],
    ),
    "01.2": Case(
        lambda r: _nb("01").ex2(r),
        right=[
            _script_re(r"<script\b.*?</script>", re.DOTALL | re.IGNORECASE),
            _script_re(r"(?is)<script[^>]*>.*?</script\s*>"),
            _script_re(r"<script\b[\s\S]*?</script>", re.I),
        ],
        wrong=[
            Wrong(
                _script_re(r"<script.*?>.*?</script>", re.DOTALL), "re.IGNORECASE", "only `re.S` (`<SCRIPT>` survives)"
            ),
            Wrong(
                _script_re(r"<script.*?>.*?</script>", re.IGNORECASE),
                "re.DOTALL",
                "only `re.I` (a multi-line block survives)",
            ),
            Wrong(
                _script_re(r"<script.*</script>", re.S | re.I),
                "greedy",
                "a greedy `.*` (eats the text between two blocks)",
            ),
            Wrong(_script_re(r"<script>.*?</script>", re.S | re.I), "attributes included"),
            Wrong(r"<script.*?</script>", "compile it"),
        ],
    ),
    "02.1": Case(
        lambda fs: _nb("02").ex1(*fs),
        right=[(_shingles, _jaccard_dup), (_shingles_loop, _jaccard_dup_ops)],
        wrong=[
            Wrong(
                (lambda t, k=5: {t[i : i + k] for i in range(len(t) - k)}, _jaccard_dup),
                "stops one window short",
                "`range(len(text) - k)` (misses the last shingle)",
            ),
            Wrong(
                (lambda t, k=5: [t[i : i + k] for i in range(len(t) - k + 1)], _jaccard_dup),
                "a list keeps repeats",
                "returning shingle *lists* instead of sets",
            ),
            Wrong(
                (_shingles, _containment_dup),
                "union of both sets",
                "dividing by one text's shingles instead of the union (containment, not Jaccard)",
            ),
            Wrong((_shingles, lambda a, b, threshold=0.8: not _jaccard_dup(a, b)), "must return True"),
        ],
    ),
    "03.1": Case(
        lambda f: _nb("03").ex1(f, ALPHA),
        right=[_plan(2**30 * 0.95), _plan_by_hand],
        wrong=[
            Wrong(_plan(2**30), "keep the 5% margin", "forgetting the 5 % margin (one batch too many on some cards)"),
            Wrong(_plan(1e9 * 0.95), "not 1e9", "24e9 bytes for 24 GB"),
            Wrong(_plan(2**30 * 0.95, ceil=False), "rounds down", "`16 // fit` accumulation steps (rounds down)"),
            Wrong(lambda card: 5, "should return a (micro_batch, accumulation_steps) pair"),
        ],
    ),
    "03.2": Case(
        lambda f: _nb("03").ex2(f),
        right=[
            lambda losses, tokens: sum(l * n for l, n in zip(losses, tokens)) / sum(tokens),
            lambda losses, tokens: __import__("numpy").average(losses, weights=tokens),
        ],
        wrong=[
            Wrong(
                lambda losses, tokens: sum(losses) / len(losses), "plain mean", "the plain mean (`loss / grad_accum`)"
            ),
            Wrong(
                lambda losses, tokens: sum(l * n for l, n in zip(losses, tokens)),
                "divide by the window's",
                "the summed token loss, not divided by the tokens",
            ),
            Wrong(lambda losses, tokens: sum(losses), "sum of the micro-batch means"),
        ],
    ),
    "04.1": Case(
        lambda c: _nb("04").ex1(c),
        right=[
            "torchrun --nproc_per_node=4 train.py",
            "torchrun --standalone --nproc-per-node 4 train.py --epochs 3",
            "python -m torch.distributed.run --nproc_per_node=gpu train.py",
            "accelerate launch --multi_gpu --num_processes 4 train.py",
            # accelerate's own defaults on a 4-GPU node without a config file: multi-GPU on when num_processes > 1,
            # num_processes = the GPUs it sees (accelerate/commands/launch.py, _validate_launch_command)
            "accelerate launch --num_processes 4 train.py",
            "accelerate launch --num-processes=4 --mixed_precision bf16 train.py",
            "accelerate launch train.py",
            "torchrun --nproc-per-node auto train.py",
        ],
        wrong=[
            Wrong("python train.py --local_rank=0", "never type --local_rank", "`python train.py --local_rank=0`"),
            Wrong("accelerate launch --num_processes 2 train.py", "starts 2 processes: ask for one per GPU"),
            Wrong("torchrun --nproc_per_node=cpu train.py", "one process per CPU core"),
            Wrong("torchrun --nnodes=2 --nproc_per_node=4 train.py", "wait for 2 nodes"),
            Wrong("accelerate launch --num_proc 4 train.py", "accelerate launch would refuse this command"),
            Wrong("accelerate launch --cpu train.py", "single-process path", "`accelerate launch --cpu`"),
            Wrong("python train.py", "starts ONE process", "`python train.py`"),
            Wrong("torchrun train.py", "torchrun starts one process", "`torchrun` without `--nproc_per_node`"),
            Wrong("python -m torch.distributed.launch --nproc_per_node=4 train.py", "deprecated"),
        ],
    ),
    "04.2": Case(
        lambda f: _nb("04").ex2(f),
        right=[
            lambda env: f"cuda:{int(env['LOCAL_RANK'])}",
            lambda env: __import__("torch").device("cuda", int(env.get("LOCAL_RANK", 0))),
        ],
        wrong=[
            Wrong(
                lambda env: f"cuda:{env['RANK']}",
                "RANK counts across all nodes",
                "`cuda:RANK` (rank 6 has no `cuda:6` on a 4-GPU node)",
            ),
            Wrong(lambda env: "cuda", "cuda:0 pile-up", "`cuda` or `cuda:0` on every rank"),
        ],
    ),
    "05.1": Case(
        lambda f: _nb("05").ex1(f),
        right=[_epochs_before, _epochs_comprehension],
        wrong=[
            Wrong(
                _epochs_after,
                "epochs 0 and 1 replay the same order",
                "calling `set_epoch(epoch)` after iterating the epoch (epochs 0 and 1 replay one order)",
            ),
            Wrong(_epochs_zero, "set_epoch(0) every epoch", "`set_epoch(0)` every epoch"),
            Wrong(_epochs_never, "the epoch stays 0 until you call", "never calling it"),
            Wrong(
                _epochs_own_shuffle, "reordering a rank's own fixed shard", "reshuffling each rank's own shard yourself"
            ),
        ],
    ),
    "05.2": Case(
        lambda pair: _nb("05").ex2(*pair),
        right=[(math.ceil(16 / 3), 3 * math.ceil(16 / 3) - 16), (-(-16 // 3), 2)],
        wrong=[
            Wrong((16 // 3, 1), "pads up", "`16 // 3 = 5` (the sampler pads up, not down)"),
            Wrong((6, 16 % 3), "what is left over", "`16 % 3 = 1` repeats"),
        ],
    ),
    "06.1": Case(
        lambda c: _nb("06").ex1(c, _trace()),
        right=[1.0, 1.2, lambda: _quantile(0.95), lambda: 3 * _median()],
        wrong=[
            Wrong(100.0, "never acts", "a threshold above every norm (never acts)"),
            Wrong(lambda: _median(), "at or below the median norm", "the median or below (a hidden learning-rate cut)"),
            Wrong(
                lambda: _quantile(0.8),
                "quietly lowers the learning rate",
                "any threshold that rescales more than 10 % of the steps",
            ),
            Wrong(
                lambda: _quantile(0.995),
                "most spikes pass through",
                "one that rescales fewer than 2 % (most spikes pass)",
            ),
            Wrong(-1.0, "positive gradient norm"),
        ],
    ),
    "06.2": Case(
        lambda f: _nb("06").ex2(f, tok()),
        right=[
            lambda t, text, n: t(text, truncation=True, max_length=n)["input_ids"],
            lambda t, text, n: t(text)["input_ids"][: n - 1] + [t.eos_token_id],
        ],
        wrong=[
            Wrong(
                lambda t, text, n: t(text)["input_ids"][:n], "keep the closing </s>", "slicing `ids[:N]` (loses `</s>`)"
            ),
            Wrong(lambda t, text, n: t(text)["input_ids"], "nothing was truncated", "no truncation at all"),
            Wrong(lambda t, text, n: t(text, truncation=True, max_length=n - 1)["input_ids"], "counts the special"),
        ],
    ),
    "07.1": Case(
        lambda f: _nb("07").ex1(f),
        right=[
            lambda a: ("首句：" + a["body"], a["body"].split("。")[0] + "。"),
            lambda a: ("首句：" + a["body"], re.match(r"[^。]*。", a["body"]).group(0)),
        ],
        wrong=[
            Wrong(
                lambda a: ("首句：" + a["body"], a["body"].split("。")[0]),
                "lost its 。",
                "dropping the `。` from the target",
            ),
            Wrong(
                lambda a: ("摘要：" + a["body"], a["body"].split("。")[0] + "。"),
                "an existing task's prefix",
                "reusing an existing prefix such as `摘要：`",
            ),
            Wrong(lambda a: ("首句：" + a["body"], a["body"]), "the whole body"),
        ],
    ),
    "07.2": Case(
        lambda f: _nb("07").ex2(f, n_examples=600, nproc=2, global_batch=16),
        right=[
            lambda n, p, g: (g // p, math.ceil(n / p) // (g // p)),
            lambda n, p, g: (g // p, (-(-n // p)) // (g // p)),
        ],
        wrong=[
            Wrong(
                lambda n, p, g: (g // p, n // g),
                "rounds the shard down",
                "dividing 3·n by the *global* batch without the shard (the padded shard rounded down)",
            ),
            Wrong(
                lambda n, p, g: (g // p, math.ceil(n / g)),
                "counts the last, partial batch",
                "counting the last, partial batch",
            ),
            Wrong(
                lambda n, p, g: (g, math.ceil(n / p) // g),
                "is the whole global batch",
                "not splitting the global batch across the processes",
            ),
        ],
    ),
    "08.1": Case(
        lambda f: _nb("08").ex1(f),
        right=[_load_while, _load_for],
        wrong=[
            Wrong(
                _load_clock_once,
                "checking the clock once",
                "checking the clock only at the start (runs past `max_seconds`)",
            ),
            Wrong(_load_no_count, "stop after max_requests", "no `max_requests` bound"),
            Wrong(
                _load_timestamps,
                "not a timestamp",
                "returning the time since the start instead of each request's latency",
            ),
        ],
    ),
    "09.1": Case(
        lambda f: _nb("09").ex1(f),
        right=[_zero_bytes(lambda stage: (stage >= 3, stage >= 2, stage >= 1)), _zero_bytes_table],
        wrong=[
            Wrong(lambda n, world, stage: 16 * n / world, "stage 0 is DDP"),  # "more GPUs divide everything"
            Wrong(  # AdamW counted as one state per parameter
                lambda n, world, stage: (12 * n) / (world if stage == 3 else 1), "two moments per parameter"
            ),
            Wrong(_zero_bytes(lambda stage: (stage >= 1, stage >= 1, stage >= 1)), "stage 1 shards only"),
            Wrong(_zero_bytes(lambda stage: (stage >= 2, stage >= 2, stage >= 1)), "stage 2 shards only"),
            Wrong(lambda n, world, stage: f"{16 * n / world} bytes", "should return a number"),
        ],
    ),
}


def _value(x):
    """Answers that need a computation (a quantile of the trace) are zero-argument lambdas named `<lambda>`."""
    return x() if callable(x) and getattr(x, "__name__", "") == "<lambda>" and _arity(x) == 0 else x


def _arity(f) -> int:
    import inspect

    try:
        return len(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        return -1


def _quizzes() -> dict[str, Quiz]:
    """Every multiple-choice exercise: `EX<k>` in labkit.exercises.nbNN -> "NN.k"."""
    out = {}
    for n, mod in MODULES.items():
        for name, obj in vars(mod).items():
            if isinstance(obj, Quiz) and re.fullmatch(r"EX\d", name):
                out[f"{n}.{name[2:]}"] = obj
    return out


QUIZZES = _quizzes()


def _checks() -> dict[str, str]:
    """Every exercise the notebooks check: "NN.K" (the check cell's nbgrader grade id) -> its kind."""
    out = {}
    for n, path in NOTEBOOKS.items():
        nb = nbformat.read(path, as_version=4)
        for c in nb.cells:
            if "check" in c.metadata.get("tags", []):
                m = re.fullmatch(rf"nb{n}_ex(\d+)_check", c.metadata["nbgrader"]["grade_id"])
                assert m, f"{n}: check cell with grade id {c.metadata['nbgrader']['grade_id']!r}"
                kind = check_kind(c.source, n)
                if kind == "table":
                    assert re.search(rf"\bnb{n}\.ex{m.group(1)}\(", c.source), f"{n}.{m.group(1)}: numbers disagree"
                out[f"{n}.{m.group(1)}"] = kind
    return out


def test_every_exercise_is_in_the_table():
    checks = _checks()
    assert "other" not in checks.values(), checks
    table = [i for i, kind in checks.items() if kind == "table"]
    assert len(table) >= 24
    missing = [i for i in table if i not in CASES and i not in QUIZZES]
    assert not missing, f"exercises without a table of answers: {missing}"
    for i, case in CASES.items():
        assert len(case.right) >= 2 and len(case.wrong) >= 2, i
    # the other kinds, by reference to their tables (tests/test_exercises_transfer.py)
    fixes = sorted(i for i, kind in checks.items() if kind == "find-and-fix")
    assert [i[:2] for i in fixes] == ["02", "04", "05", "06", "07"], fixes
    for i in fixes:
        rows = [c for c in transfer_table.CASES if c[0] == i[:2]]
        right = [c for c in rows if c[2]]
        wrong = [c for c in rows if not c[2] and c[1] is not transfer_table.src]
        assert len(right) >= 2 and len(wrong) >= 2, f"{i}: the find-and-fix table needs 2 repairs and 2 wrong ones"
    assert [i for i, kind in checks.items() if kind == "labelling"] == ["01.4"]
    rows = transfer_table.LABEL_ANSWERS
    assert sum(r[1] for r in rows) >= 2 and sum(not r[1] for r in rows) >= 2
    predicts = sorted(i for i, kind in checks.items() if kind == "predict")
    assert [i[:2] for i in predicts] == sorted(predictions.QUESTIONS), "one predict-then-run question per notebook"


@pytest.mark.parametrize("ex", sorted(CASES))
def test_right_answers_pass(ex, capsys):
    for answer in CASES[ex].right:
        assert CASES[ex].check(_value(answer)) is True, f"{ex}: a right answer failed: {answer!r}"
    assert "❌" not in capsys.readouterr().out


@pytest.mark.parametrize("ex", sorted(CASES))
def test_wrong_answers_fail_with_their_own_hint(ex, capsys):
    hints = []
    for w in CASES[ex].wrong:
        with pytest.raises(ExerciseFailed) as info:
            CASES[ex].check(_value(w.answer))
        hint = str(info.value)
        assert w.hint in hint, f"{ex}: wrong answer {w.answer!r} got the hint {hint!r}, expected one with {w.hint!r}"
        hints.append(hint)
    # each mistake gets its own hint, not one generic message for all
    assert len(set(hints)) == len(hints), f"{ex}: two wrong answers got the same hint"
    for w, hint in zip(CASES[ex].wrong, hints):
        others = [o.hint for o in CASES[ex].wrong if o is not w]
        assert not any(o in hint for o in others), f"{ex}: the hint for {w.answer!r} is not specific: {hint!r}"


def _spellings(letters: str) -> list:
    """Two or more ways a learner writes the same answer."""
    if len(letters) == 1:
        return [letters, f" {letters.lower()} ", f"{letters}."]
    return [", ".join(letters), set(letters), letters.lower()[::-1], " and ".join(letters)]


@pytest.mark.parametrize("ex", sorted(QUIZZES))
def test_quiz_right_spellings_pass_and_every_wrong_option_fails(ex, capsys):
    q = QUIZZES[ex]
    assert set(q.options) == set("ABCD") and set(q.correct) <= set("ABCD")
    for answer in _spellings(q.correct):
        assert q(answer) is True, f"{ex}: {answer!r} failed"
    wrong = [k for k in sorted(q.options) if k not in q.correct]
    assert len(wrong) >= 1
    answers: list[tuple[Any, str]] = []
    for k in wrong:  # a wrong option, alone or with the right ones: its own explanation
        answers.append((k, q.options[k].why))
        if q.multi:
            answers.append((q.correct + k, q.options[k].why))
    if q.multi:  # a right option left out: its own `missed` hint
        for k in q.correct:
            assert q.options[k].missed, f"{ex}: right option {k} has no `missed` hint"
            answers.append((q.correct.replace(k, ""), q.options[k].missed))
    else:  # two letters for a one-answer question
        answers.append((q.correct + wrong[0], "pick one letter"))
    assert len(answers) >= 2
    for answer, hint in answers:
        with pytest.raises(ExerciseFailed) as info:
            q(answer)
        assert hint in str(info.value), f"{ex}: {answer!r} got {info.value}"
    for bad in (None, ..., "E", "maybe"):
        with pytest.raises(ExerciseFailed):
            q(bad)


def test_quizzes_are_balanced_over_the_course():
    qs = QUIZZES
    # the right option is not the giveaway: it is the longest label in at most a third of the questions
    longest_right = [ex for ex, q in qs.items() if max(q.options, key=lambda k: len(q.options[k].label)) in q.correct]
    assert len(longest_right) <= len(qs) / 3, f"the right option is the longest in {longest_right}"
    assert longest_right, "nor is the longest option always wrong (a cue the other way)"
    right_len = [len(q.options[k].label) for q in qs.values() for k in q.correct]
    wrong_len = [len(q.options[k].label) for q in qs.values() for k in q.options if k not in q.correct]
    assert sum(right_len) / len(right_len) <= 1.1 * sum(wrong_len) / len(wrong_len)
    for ex, q in qs.items():
        lens = [len(c.label) for c in q.options.values()]
        assert all(lens) and max(lens) <= 2 * min(lens), f"{ex}: option lengths {lens} are unbalanced"
    # the right letters spread over A-D
    letters = [k for q in qs.values() for k in q.correct]
    for k in "ABCD":
        assert letters.count(k) >= 2, f"{k} is right in {letters.count(k)} questions"
        assert letters.count(k) <= 0.6 * len(qs), f"{k} is right in {letters.count(k)} of {len(qs)} questions"
    singles = [q.correct for q in qs.values() if not q.multi]
    assert len(set(singles)) == len(singles) or len(set(singles)) >= 3, f"single-answer letters {singles}"
    # at least one multiple-select question per notebook
    for n in NOTEBOOKS:
        assert any(ex.startswith(n + ".") and q.multi for ex, q in qs.items()), f"notebook {n}: no multiple-select"


@pytest.mark.parametrize("ex", sorted(QUIZZES))
def test_quiz_options_match_the_notebook(ex):
    """The notebook shows exactly the module's option labels, and says when more than one letter is right."""
    n, k = ex.split(".")
    q = QUIZZES[ex]
    nb = nbformat.read(NOTEBOOKS[n], as_version=4)
    heads = [c for c in nb.cells if "exercise" in c.metadata.get("tags", []) and f"### Exercise {k} " in c.source]
    assert len(heads) == 1, f"{ex}: no single exercise cell headed 'Exercise {k}'"
    text = heads[0].source
    assert q.markdown() in text, f"{ex}: the notebook's options differ from the check's:\n{q.markdown()}"
    assert ("multiple select" in text) == q.multi, (
        f"{ex}: say '(multiple select' exactly when several letters are right"
    )


def _guide_lines() -> dict[str, list[str]]:
    """docs/instructor/answers.md (the guide's instructor-only part): exercise id -> the wrong answers its line lists."""
    text = (ROOT / "docs" / "instructor" / "answers.md").read_text(encoding="utf-8")
    section = text.split("## Common wrong answers", 1)[1].split("\n## ", 1)[0]
    out = {}
    for line in section.splitlines():
        m = re.match(r"\* (\d\d\.\d) — (.*)$", line.strip())
        if m:
            out[m.group(1)] = [p.strip().rstrip(".") for p in m.group(2).split(";")]
    return out


def test_the_guide_lists_exactly_what_the_checks_reject():
    guide = _guide_lines()
    table = {ex: [w.doc for w in case.wrong if w.doc] for ex, case in CASES.items()}
    for ex, kind in _checks().items():
        if kind == "find-and-fix":
            table[ex] = transfer_table.guide_words(ex[:2])
    assert set(guide) == {ex for ex, docs in table.items() if docs}, "exercises in the guide vs in the table"
    for ex, items in guide.items():
        assert items == table[ex], f"{ex}: the guide says {items}, the table rejects {table[ex]}"
