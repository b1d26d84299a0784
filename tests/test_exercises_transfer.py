"""Find-and-fix exercises, 01's labelling exercise and predict-then-run (labkit.exercises.transfer, labelling,
predictions).

The slow tests run the real checks: for each find-and-fix exercise the shipped broken script fails with its
pitfall's hint, two repairs written differently pass, and wrong repairs (half a fix, or a fix of something
else) fail with the hint of what is still wrong. Each is one run of the learner's code (2 gloo ranks through
the course's launcher, or one process), about 20 s on a 2-core machine.
"""

from __future__ import annotations

import ast
import json
import linecache
import math
import time
from pathlib import Path

import pytest

from labkit.exercises import UNANSWERED, ExerciseFailed, labelling, predictions, transfer

ROOT = Path(__file__).parents[1]


def edit(text: str, *changes: tuple[str, str]) -> str:
    """`text` with each (old, new) applied; each `old` must occur exactly once (the repair stays honest)."""
    for old, new in changes:
        assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
        text = text.replace(old, new)
    return text


def verdict(exercise_id: str, answer, capsys, **kw) -> tuple[bool, str]:
    """(passed, the printed line) of one check."""
    try:
        transfer.check_fix(exercise_id, answer, **kw)
        ok = True
    except ExerciseFailed:
        ok = False
    out = capsys.readouterr().out.strip().splitlines()
    return ok, out[-1] if out else ""


# ---- the answers ------------------------------------------------------------------------------------------------
def src(exercise_id: str) -> str:
    return transfer.source(exercise_id)


# 02: the loader
PIPELINE = (
    "def load_records(crawl_dir):\n    records = []",
    "def load_records(crawl_dir):\n"
    "    import tempfile\n"
    "    from labkit.cleaning import clean_paths\n\n"
    "    out = Path(tempfile.mkdtemp())\n"
    "    clean_paths([crawl_dir], out)\n"
    '    return [json.loads(line) for line in open(out / "clean.jsonl", encoding="utf-8")]\n\n\n'
    "def unused(crawl_dir):\n    records = []",
)
READERS = (
    "def load_records(crawl_dir):\n    records = []",
    "def load_records(crawl_dir):\n"
    "    from labkit.cleaning.readers import iter_files, read_file\n"
    "    from labkit.cleaning.validate import clean_record\n\n"
    "    kept = []\n"
    "    for path, rel in iter_files([crawl_dir]):\n"
    "        for raw in read_file(path, rel):\n"
    "            out = clean_record(raw)\n"
    "            if out.reason is None:\n"
    '                kept.append({"title": out.title, "body": out.body})\n'
    "    return kept\n\n\n"
    "def unused(crawl_dir):\n    records = []",
)
SCRIPT_REGEX_ONLY = (
    'SCRIPT = re.compile(r"<script.*?>.*?</script>")',
    'SCRIPT = re.compile(r"<(script|style)\\b.*?</(script|style)>", re.S | re.I)',
)
REPAIR_TEXT = (  # decoded, repaired and U+FFFD-free -- but the classic script regex stays
    (
        'def read_text(path):\n    return path.read_bytes().decode("utf-8", errors="replace")',
        "def read_text(path):\n"
        "    from labkit.cleaning.decode import decode_bytes\n\n"
        '    return decode_bytes(path.read_bytes()).text or ""',
    ),
    (
        "def strip(text):\n",
        "def strip(text):\n"
        "    from labkit.cleaning.repair import repair_mojibake, strip_controls\n\n"
        "    text = strip_controls(repair_mojibake(text)[0])[0]\n",
    ),
    ("            if title and body:\n", '            if title and body and "\\ufffd" not in title + body:\n'),
)
DECODE_ONLY = (
    'def read_text(path):\n    return path.read_bytes().decode("utf-8", errors="replace")',
    "def read_text(path):\n"
    "    from labkit.cleaning.decode import decode_bytes\n\n"
    "    decoded = decode_bytes(path.read_bytes())\n"
    '    return decoded.text or ""',
)

# 04: the launch
_04_IMPORTS = (
    "import argparse\n",
    "import argparse\nimport os\n\nimport torch.distributed as dist\n"
    "from torch.nn.parallel import DistributedDataParallel as DDP\n",
)
_04_NO_ARGS = (
    '    p.add_argument("--local_rank", type=int, default=0)\n    p.add_argument("--world_size", type=int, default=2)\n',
    "",
)
_04_GROUP = (
    "    args = parse_args(argv)\n",
    "    args = parse_args(argv)\n"
    '    local_rank = int(os.environ["LOCAL_RANK"])\n'
    '    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")\n'
    "    rank, world = dist.get_rank(), dist.get_world_size()\n",
)
_04_SHARD = ("examples[args.local_rank :: args.world_size]", "examples[rank::world]")
_04_DEVICE = (
    '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
    '    model = build_model("tiny", len(tokenizer)).to(device)\n',
    '    device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")\n'
    '    model = build_model("tiny", len(tokenizer)).to(device)\n'
    '    model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)\n',
)
_04_PRINT = ("rank {args.local_rank}", "rank {rank}")


def fix04_torch() -> str:
    return edit(src("04"), _04_IMPORTS, _04_NO_ARGS, _04_GROUP, _04_SHARD, _04_DEVICE, _04_PRINT)


def fix04_labkit_env() -> str:
    """The course's own helpers: rank and world from the environment, the rank's device, a DistributedSampler."""
    return edit(
        src("04"),
        (
            "from torch.utils.data import DataLoader\n",
            "from torch.nn.parallel import DistributedDataParallel\n"
            "from torch.utils.data import DataLoader, DistributedSampler\n\n"
            "from labkit.distributed import env as denv\n",
        ),
        _04_NO_ARGS,
        (
            "    args = parse_args(argv)\n",
            "    args = parse_args(argv)\n    me = denv.read_env()\n    device = denv.rank_device(me)\n    denv.init(me, device)\n",
        ),
        ("    shard = examples[args.local_rank :: args.world_size]  # this process's half of the data\n", ""),
        (
            "        shard, batch_size=args.batch_size, shuffle=True,",
            "        examples,\n        batch_size=args.batch_size,\n"
            "        sampler=DistributedSampler(examples, num_replicas=me.world_size, rank=me.rank, seed=args.seed),",
        ),
        (
            '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            '    model = build_model("tiny", len(tokenizer)).to(device)\n',
            '    model = build_model("tiny", len(tokenizer)).to(device)\n'
            '    model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)\n',
        ),
        ("rank {args.local_rank}", "rank {me.rank}"),
    )


def fix04_no_ddp() -> str:
    """Joins the group, shards by rank -- and never wraps the model: each process trains its own copy."""
    return edit(src("04"), _04_IMPORTS, _04_NO_ARGS, _04_GROUP, _04_SHARD, _04_PRINT)


def fix04_pile_up() -> str:
    """Joins the group, shards by rank and wraps in DDP -- but keeps the tutorial's device line and `DDP(model)`
    without device_ids: right on CPU, every rank on cuda:0 on a GPU node (notebook 04's pile-up)."""
    return edit(
        src("04"),
        _04_IMPORTS,
        _04_NO_ARGS,
        _04_GROUP,
        _04_SHARD,
        (
            '    model = build_model("tiny", len(tokenizer)).to(device)\n',
            '    model = build_model("tiny", len(tokenizer)).to(device)\n    model = DDP(model)\n',
        ),
        _04_PRINT,
    )


def fix04_env_only() -> str:
    """Reads LOCAL_RANK from the environment (so the shards differ) but never joins a process group."""
    return edit(
        src("04"),
        ("import argparse\n", "import argparse\nimport os\n"),
        ("examples[args.local_rank :: args.world_size]", 'examples[int(os.environ["LOCAL_RANK"]) :: args.world_size]'),
    )


# 05: who trains on what
_05_SEED = "self.seed + 1000 * self.rank + epoch"


def fix05_shared_seed() -> str:
    return edit(src("05"), (_05_SEED, "self.seed + epoch"))


def _05_distributed_sampler(set_epoch: str) -> str:
    return edit(
        src("05"),
        ("from torch.utils.data import DataLoader\n", "from torch.utils.data import DataLoader, DistributedSampler\n"),
        (
            "        self.batch_size = batch_size\n",
            "        self.batch_size = batch_size\n"
            "        self.sampler = DistributedSampler(self.examples, num_replicas=self.world, rank=self.rank, seed=seed)\n",
        ),
        ("sampler=self.shard(epoch)", "sampler=self.sampler"),
        ("        for epoch in range(epochs):\n", "        for epoch in range(epochs):\n" + set_epoch),
    )


def fix05_distributed_sampler() -> str:
    return _05_distributed_sampler("            self.sampler.set_epoch(epoch)\n")


def fix05_sampler_without_set_epoch() -> str:
    return _05_distributed_sampler("")


def fix05_seed_without_epoch() -> str:
    return edit(src("05"), (_05_SEED, "self.seed"))


def fix05_something_else() -> str:
    """Lowers the learning rate and drops the warmup: the split stays wrong."""
    return edit(src("05"), ("lr=1e-3, seed=0", "lr=5e-4, seed=0"), ("start_factor=0.1", "start_factor=1.0"))


# 06: clipping and warmup
_06_WARMUP = (
    "    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n",
    "    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n"
    "    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=8)\n",
)
_06_STEP = ("        loss.backward()\n        optimizer.step()\n",)


def fix06_torch() -> str:
    return edit(
        src("06"),
        _06_WARMUP,
        (
            _06_STEP[0],
            "        loss.backward()\n"
            "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "        optimizer.step()\n"
            "        warmup.step()\n",
        ),
    )


def fix06_own_clip_hf_schedule() -> str:
    """A hand-written clip to 0.5 in a helper, and transformers' cosine schedule with warmup."""
    return edit(
        src("06"),
        (
            "    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n",
            "    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n"
            "    from transformers import get_cosine_schedule_with_warmup\n\n"
            "    schedule = get_cosine_schedule_with_warmup(optimizer, num_warmup_steps=steps // 4, num_training_steps=steps)\n",
        ),
        (
            _06_STEP[0],
            "        loss.backward()\n        clip(model, max_norm=0.5)\n        optimizer.step()\n        schedule.step()\n",
        ),
        (
            "def fit(",
            "def clip(model, max_norm):\n"
            "    grads = [p.grad for p in model.parameters() if p.grad is not None]\n"
            "    total = float(torch.norm(torch.stack([g.norm() for g in grads])))\n"
            "    for g in grads:\n"
            "        g.mul_(min(1.0, max_norm / (total + 1e-6)))\n\n\n"
            "def fit(",
        ),
    )


def fix06_clip_only() -> str:
    return edit(
        src("06"),
        (
            _06_STEP[0],
            "        loss.backward()\n        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n        optimizer.step()\n",
        ),
    )


def fix06_warmup_only() -> str:
    return edit(
        src("06"),
        _06_WARMUP,
        (_06_STEP[0], "        loss.backward()\n        optimizer.step()\n        warmup.step()\n"),
    )


def fix06_lower_lr() -> str:
    """The notebook's sane learning rate (section 3's `+ lr 3e-3`, the recipe that ends lowest): no spike left."""
    return edit(src("06"), ("lr=3e-2, n_articles", "lr=3e-3, n_articles"))


def fix06_lr_not_low_enough() -> str:
    """A third of the learning rate, nothing else: the monitor still sees a layer spike."""
    return edit(src("06"), ("lr=3e-2, n_articles", "lr=1e-2, n_articles"))


# 07: the gradients
def fix07_ddp() -> str:
    return edit(
        src("07"),
        (
            "from torch.utils.data import DataLoader, DistributedSampler\n",
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "from torch.utils.data import DataLoader, DistributedSampler\n",
        ),
        ('    model = build_model("tiny", len(tokenizer))\n', '    model = DDP(build_model("tiny", len(tokenizer)))\n'),
        ("    loss = sync_loss(out.loss, world)\n", "    loss = out.loss\n"),
        ("model.state_dict()", "model.module.state_dict()"),
    )


def fix07_allreduce_grads() -> str:
    return edit(
        src("07"),
        (
            "    loss = sync_loss(out.loss, world)\n    optimizer.zero_grad()\n    loss.backward()\n",
            "    loss = out.loss\n    optimizer.zero_grad()\n    loss.backward()\n"
            "    for p in model.parameters():\n"
            "        if p.grad is not None:\n"
            "            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)\n"
            "            p.grad /= world\n",
        ),
    )


def fix07_broadcast_once() -> str:
    """Synchronises the starting weights only: the replicas still drift apart."""
    return edit(
        src("07"),
        (
            '    model = build_model("tiny", len(tokenizer))\n',
            '    model = build_model("tiny", len(tokenizer))\n    for p in model.parameters():\n        dist.broadcast(p.data, src=0)\n',
        ),
    )


def fix07_average_op() -> str:
    """A 'better' loss average (ReduceOp.AVG): still the loss value, still no gradient sync."""
    return edit(
        src("07"),
        (
            "    dist.all_reduce(loss, op=dist.ReduceOp.SUM)\n    return loss / world\n",
            "    dist.all_reduce(loss, op=dist.ReduceOp.AVG)\n    return loss\n",
        ),
    )


# (exercise, answer builder, passes?, a phrase the printed line must hold[, the guide's words for a wrong repair])
# A wrong repair with the guide's words is listed under "Common wrong answers" in docs/instructor/answers.md (NN.K, the
# notebook's exercise number): tests/test_exercise_answers.py checks the guide lists exactly these.
CASES = [
    ("02", src, False, "U+FFFD where bytes were thrown away"),
    ("02", lambda _: edit(src("02"), PIPELINE), True, "the cleaning audit"),
    ("02", lambda _: edit(src("02"), READERS), True, "the cleaning audit"),
    (
        "02",
        lambda _: edit(src("02"), SCRIPT_REGEX_ONLY),
        False,
        "U+FFFD where bytes were thrown away",
        "repairing only the script regex (U+FFFD and mojibake stay)",
    ),
    (
        "02",
        lambda _: edit(src("02"), DECODE_ONLY),
        False,
        "UTF-8 read as latin-1",
        "decoding by the real encoding only (mojibake stays)",
    ),
    (
        "02",
        lambda _: edit(src("02"), *REPAIR_TEXT),
        False,
        "script/style code or tags",
        "decoding, repairing mojibake and dropping U+FFFD but keeping the classic script regex",
    ),
    ("04", src, False, "each one is alone"),
    ("04", lambda _: fix04_torch(), True, "world size 2"),
    ("04", lambda _: fix04_labkit_env(), True, "world size 2"),
    (
        "04",
        lambda _: fix04_no_ddp(),
        False,
        "the two models differ after training",
        "a process group and a shard per rank without wrapping the model in DDP (the models drift apart)",
    ),
    (
        "04",
        lambda _: fix04_env_only(),
        False,
        "two single-process runs",
        "reading `LOCAL_RANK` from the environment without joining a process group",
    ),
    (
        "04",
        lambda _: fix04_pile_up(),
        False,
        "with `device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')`",
        'keeping `torch.device("cuda" if ... else "cpu")` and `DDP(model)` without `device_ids` (every rank on '
        "cuda:0 on a GPU node)",
    ),
    ("05", src, False, "shards overlap"),
    ("05", lambda _: fix05_shared_seed(), True, "overlap 0 %"),
    ("05", lambda _: fix05_distributed_sampler(), True, "overlap 0 %"),
    (
        "05",
        lambda _: fix05_seed_without_epoch(),
        False,
        "replays the same order",
        "one seed for every rank that never changes with the epoch (every epoch replays one order)",
    ),
    (
        "05",
        lambda _: fix05_sampler_without_set_epoch(),
        False,
        "replays the same order",
        "a `DistributedSampler` without `set_epoch`",
    ),
    (
        "05",
        lambda _: fix05_something_else(),
        False,
        "shards overlap",
        "changing the learning rate and warmup instead (the shards still overlap)",
    ),
    ("06", src, False, "Nothing bounds"),
    ("06", lambda _: fix06_torch(), True, "the optimizer applied at most 1"),
    ("06", lambda _: fix06_own_clip_hf_schedule(), True, "the optimizer applied at most 0.5"),
    (
        "06",
        lambda _: fix06_clip_only(),
        False,
        "the full learning rate",
        "clipping without warmup (the first step at the full learning rate)",
    ),
    ("06", lambda _: fix06_warmup_only(), False, "Nothing bounds", "warmup without clipping"),
    ("06", lambda _: fix06_lower_lr(), True, "the grad-norm monitor saw no layer spike"),
    (
        "06",
        lambda _: fix06_lr_not_low_enough(),
        False,
        "Nothing bounds these steps",
        "a learning rate lowered only to 1e-2, without clipping (the monitor still sees a layer spike)",
    ),
    ("07", src, False, "differ after training"),
    ("07", lambda _: fix07_ddp(), True, "trained one model"),
    ("07", lambda _: fix07_allreduce_grads(), True, "trained one model"),
    (
        "07",
        lambda _: fix07_broadcast_once(),
        False,
        "differ after training",
        "broadcasting the starting weights once (the replicas still drift apart)",
    ),
    (
        "07",
        lambda _: fix07_average_op(),
        False,
        "differ after training",
        "averaging the loss with `ReduceOp.AVG` (the gradients stay each rank's own)",
    ),
]


def guide_words(exercise_id: str) -> list[str]:
    """The guide's words for the wrong repairs of find-and-fix exercise `exercise_id` ("05"), in table order."""
    return [c[4] for c in CASES if c[0] == exercise_id and len(c) > 4]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_find_and_fix(case, capsys):
    exercise_id, build, should_pass, phrase = case[:4]
    ok, line = verdict(exercise_id, build(exercise_id), capsys)
    assert ok is should_pass, line
    assert phrase in line, line
    assert line.startswith("✅ pass" if should_pass else "❌ fail"), line


def test_every_exercise_has_two_repairs_and_two_wrong_answers():
    for ex in transfer.EXERCISES:
        rows = [c for c in CASES if c[0] == ex]
        assert sum(c[2] for c in rows) >= 2 and sum(not c[2] for c in rows if c[1] is not src) >= 2, ex
        assert any(c[1] is src and not c[2] for c in rows), f"{ex}: the shipped script must fail"
        assert all(len(c) > 4 for c in rows if not c[2] and c[1] is not src), f"{ex}: name each wrong repair"


def _check_cell_output(executed: Path, exercise_id: str) -> str:
    """What the check cell `transfer.check_fix("NN", fixed_NN)` printed in an executed notebook."""
    nb = json.loads(executed.read_text(encoding="utf-8"))
    (outputs,) = [
        c.get("outputs", [])
        for c in nb["cells"]
        if c["cell_type"] == "code"
        and f'check_fix("{exercise_id}", {transfer.answer_name(exercise_id)})' in "".join(c["source"])
    ]
    return "".join("".join(o["text"]) if isinstance(o.get("text"), list) else o.get("text", "") for o in outputs)


@pytest.mark.notebook
@pytest.mark.parametrize("exercise_id", sorted(transfer.EXERCISES))
def test_the_notebooks_solution_passes(exercise_id):
    """The instructor's repair, exactly as the notebook's solution cell holds it (a third right answer): the check
    cell's verdict in this session's English run of the notebook, which executes the solution cell and then the
    check (tests/course_runs.py; no second run of the check here)."""
    from course_runs import course_run

    run = course_run(transfer.exercise(exercise_id).notebook)
    out = _check_cell_output(Path(run.output), exercise_id).strip().splitlines()
    assert out and out[-1].startswith("✅ pass"), f"{exercise_id}: {out[-3:]} ({run.status}: {run.reason[:300]})"


@pytest.mark.slow
def test_a_script_that_hangs_is_stopped(capsys):
    """Rank 0 waits in an all_reduce rank 1 never reaches: the check stops the job once it has sat idle for
    `transfer.STALL_S` (20 s), long before its 150 s limit, with a hint."""
    hang = edit(
        src("07"),
        (
            "    rank, world = setup()\n",
            "    rank, world = setup()\n    if rank == 0:\n        dist.all_reduce(torch.ones(1))\n",
        ),
    )
    t0 = time.monotonic()
    ok, line = verdict("07", hang, capsys)
    assert not ok and "did not finish" in line and "no rank having moved for 20 s" in line, line
    assert time.monotonic() - t0 < 75


@pytest.mark.slow
def test_a_script_that_raises_names_the_line(capsys):
    ok, line = verdict("06", edit(src("06"), ("    losses = []\n", "    losses = []\n    1 / 0\n")), capsys)
    assert not ok and "ZeroDivisionError" in line and "line" in line, line


# ---- the learner's answer: placeholder, function, text, path ---------------------------------------------------
@pytest.mark.parametrize("answer", [None, ..., "...  # YOUR CODE HERE", "# nothing yet\n...\n"])
def test_a_placeholder_is_unanswered(answer, capsys):
    with pytest.raises(ExerciseFailed, match="not answered yet"):
        transfer.answer_source(answer)
    assert UNANSWERED in capsys.readouterr().out


def test_a_function_brings_its_whole_cell():
    """In a notebook the learner passes `main`: the check reads the whole cell it was defined in (IPython caches
    each cell's source under its file name), imports and helpers included."""
    cell = src("05") + "\nprint('defined')\n"
    name = "/tmp/ipykernel_0/1234.py"
    linecache.cache[name] = (len(cell), None, cell.splitlines(True), name)
    ns: dict = {"__name__": "__notebook__"}
    exec(compile(cell, name, "exec"), ns)
    assert transfer.answer_source(ns["main"]) == (cell, "main")
    assert transfer.answer_source(ns["ShardedTrainer"].fit) == (cell, "main")  # a method: the cell, its main


def test_text_and_path_answers(tmp_path):
    assert transfer.answer_source(src("06")) == (src("06"), "main")
    path = tmp_path / "mine.py"
    path.write_text(src("06"), encoding="utf-8")
    assert transfer.answer_source(path)[0] == src("06")
    assert transfer.answer_source(str(path))[0] == src("06")


@pytest.mark.parametrize(
    "text, hint",
    [("def main(:\n", "does not parse"), ("def train():\n    pass\n", "no top-level `def main")],
)
def test_a_broken_answer_gets_a_hint(text, hint, capsys):
    with pytest.raises(ExerciseFailed, match=hint):
        transfer.answer_source(text)


def test_the_scripts_ship_and_show(capsys):
    for ex_id, ex in transfer.EXERCISES.items():
        path = transfer.script_path(ex_id)
        assert path.exists() and path.parent == ROOT / "data_samples" / "scripts"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body), ex_id
        assert transfer.show(ex_id) == path.read_text(encoding="utf-8")
        shown = capsys.readouterr().out
        assert ex.notebook in shown and "  1  " in shown
    transfer.load("05")  # outside IPython it prints the script
    assert "class ShardedTrainer" in capsys.readouterr().out


def test_the_harness_imports_no_torch_at_import():
    """The launcher imports the harness in the notebook's kernel (to ask for a preflight): it must stay cheap."""
    import subprocess
    import sys

    code = "import sys, labkit.exercises.harness, labkit.exercises.transfer; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ---- 01: labelling -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sample():
    return labelling.sample_records(10, seed=0)


@pytest.fixture(scope="module")
def truth(sample):
    _, t, _ = labelling._draw(sample.n, sample.seed)
    return [t[r["id"]] for r in sample]


def test_the_sample_is_balanced_and_readable(sample, truth):
    assert len(sample) == 10 and [r["n"] for r in sample] == list(range(1, 11))
    assert sorted(truth) == sorted(labelling.LABELS * 2)
    assert all(r["title"] is not None and r["body"] for r in sample)
    # notebook 01's instruments see what the labels say
    from labkit.corpus import inspection as ins

    flags, lengths = ins.noise_flags(sample), ins.field_lengths(sample)
    for i, want in enumerate(truth):
        if want == "title too long":
            assert lengths.loc[i, "title_len"] > 60
        if want == "mojibake":
            assert flags.loc[i, ["U+FFFD", "mojibake"]].any()
        if want == "clean":
            assert lengths.loc[i, "outlier"] == "ok" and not flags.loc[i, ["U+FFFD", "mojibake", "JavaScript"]].any()


def test_the_same_seed_draws_the_same_sample(sample):
    assert labelling.sample_records(10, seed=0) == sample
    assert labelling.sample_records(10, seed=1) != sample


def test_labels_all_right_and_one_slip_pass(sample, truth, capsys):
    assert labelling.check_labels(sample, truth) is True
    slipped = list(truth)
    slipped[0] = "clean" if truth[0] != "clean" else "mojibake"
    assert labelling.check_labels(sample, {r["n"]: lab for r, lab in zip(sample, slipped)}) is True
    out = capsys.readouterr().out
    assert out.count("  ✗ #") == 1 and "9 of 10 right" in out


def test_two_wrong_labels_fail_with_feedback_per_record(sample, truth, capsys):
    wrong = ["clean"] * len(truth)
    with pytest.raises(ExerciseFailed, match="at least 9 needed"):
        labelling.check_labels(sample, wrong)
    out = capsys.readouterr().out
    assert out.count("  ✓ #") == 2 and out.count("  ✗ #") == 8
    assert "the generator says 'script noise'" in out and "look for `<script>`" in out


def _slip(truth):
    out = list(truth)
    out[0] = "clean" if truth[0] != "clean" else "mojibake"
    return out


def _synonyms(truth):
    names = {"script noise": "Script", "title too long": "too_long", "misaligned": "swapped"}
    return [names.get(t, t) for t in truth]


# 01's labelling exercise, as a table: (answer from the generator's labels, passes?, a phrase of the verdict)
LABEL_ANSWERS = [
    (list, True, "10 of 10 right"),
    (_slip, True, "9 of 10 right"),
    (_synonyms, True, "10 of 10 right"),
    (lambda truth: ["clean"] * len(truth), False, "at least 9 needed"),
    (lambda truth: ["dirty"] * len(truth), False, "is not a label"),
    (lambda truth: truth[:5], False, "one label per record"),
]


@pytest.mark.parametrize("row", range(len(LABEL_ANSWERS)))
def test_labelling_answer_table(row, sample, truth, capsys):
    build, should_pass, phrase = LABEL_ANSWERS[row]
    try:
        ok = labelling.check_labels(sample, build(truth))
    except ExerciseFailed:
        ok = False
    out = capsys.readouterr().out
    assert ok is should_pass and phrase in out, out


def test_labels_accept_synonyms_and_reject_nonsense(sample, truth, capsys):
    loose = [{"script noise": "Script", "title too long": "too_long", "misaligned": "swapped"}.get(t, t) for t in truth]
    assert labelling.check_labels(sample, loose) is True
    with pytest.raises(ExerciseFailed, match="is not a label"):
        labelling.check_labels(sample, ["dirty"] * 10)
    with pytest.raises(ExerciseFailed, match="not answered yet"):
        labelling.check_labels(sample, None)
    with pytest.raises(ExerciseFailed, match="not answered yet"):
        labelling.check_labels(sample, [...] * 10)
    with pytest.raises(ExerciseFailed, match="one label per record"):
        labelling.check_labels(sample, truth[:5])


# ---- predict, then run --------------------------------------------------------------------------------------------
def _notebook_text(stem: str) -> str:
    nb = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


def test_one_question_per_notebook_on_a_key_the_notebook_records():
    lessons = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb") if p.name[:2] != "00")
    assert sorted(predictions.QUESTIONS) == lessons  # 00 is the environment check: nothing to predict
    for q in predictions.QUESTIONS.values():
        kind, name, _ = predictions._KEY.match(q.key).groups()
        code = _notebook_text(q.notebook)
        recorded = (
            f'res.metric("{name}"' in code or f'"{name}":' in code
            if kind == "metric"
            else f'res.expect("{name}"' in code
        )
        assert recorded, f"{q.id}: {q.key} is not recorded by {q.notebook}"


class FakeResults:
    def __init__(self, metrics=None, expectations=None):
        self.metrics, self.expectations = metrics or {}, expectations or []


def test_a_close_prediction_passes_and_explains(capsys):
    predictions.predict("05", 100)
    res = FakeResults(expectations=[{"name": "no sampler: overlap across ranks", "observed": 100.0}])
    assert predictions.reveal("05", res) is True
    out = capsys.readouterr().out
    assert "✅ pass: close" in out and "the same seed gives every rank the same shuffle" in out


def test_a_far_prediction_is_explained_not_failed(capsys):
    predictions.predict("07", 0)
    assert predictions.reveal("07", FakeResults(metrics={"loss_mean_rel_gap": 0.0055})) is False
    out = capsys.readouterr().out
    assert "🔎 not quite" in out and "0.55 %" in out and "not bit-identical" in out


def test_reveal_reads_tuples_choices_and_factors(capsys):
    predictions.predict("04", 1)
    obs = [{"name": "wrong launch: processes started and world size", "observed": [1, 1]}]
    assert predictions.reveal("04", FakeResults(expectations=obs)) is True
    predictions.predict("06", "layer norm")
    assert predictions.reveal("06", {"metrics": {"first_spike_layer": "decoder.block.0.layer.0.layer_norm"}}) is True
    predictions.predict("06", "attention")
    assert predictions.reveal("06", {"metrics": {"first_spike_layer": "decoder.block.0.layer.0.layer_norm"}}) is False
    predictions.predict("03", 16)
    assert predictions.reveal("03", 13.2) is True  # a number is taken as measured
    predictions.predict("03", 64)
    assert predictions.reveal("03", 13.2) is False  # 64 is off by more than a factor of 1.5


def test_no_prediction_is_unanswered(capsys):
    predictions.predict("08", ...)
    assert "no prediction recorded" in capsys.readouterr().out
    with pytest.raises(ExerciseFailed, match="not answered yet"):
        predictions.reveal("08", 2.5)


def test_reveal_before_the_measurement_and_bad_predictions(capsys):
    predictions.predict("02", 0.3)
    with pytest.raises(ExerciseFailed, match="has not measured 'rejected_share' yet"):
        predictions.reveal("02", FakeResults())
    with pytest.raises(ExerciseFailed, match="predict a number"):
        predictions.predict("02", "thirty percent")
    with pytest.raises(ExerciseFailed, match="predict one of"):
        predictions.predict("06", "the loss")


@pytest.mark.parametrize(
    "qid,value,hint",
    [
        ("02", 28, "28 looks like a percent; the question asks for a share between 0 and 1 -- 0.28?"),
        ("01", 65, "65 looks like a percent; the question asks for a share between 0 and 1 -- 0.65?"),
        ("02", -0.1, "cannot be the answer: the question asks for a share between 0 and 1"),
        ("05", 150, "150 cannot be the answer: the question asks for a percentage between 0 and 100"),
        ("04", 0, "0 cannot be the answer: the question asks for a whole number of processes, 1 or more"),
        ("04", 1.5, "1.5 cannot be the answer: the question asks for a whole number of processes"),
        ("09", -2, "-2 cannot be the answer: the question asks for a multiplier"),
    ],
)
def test_a_prediction_outside_the_questions_range_gets_a_units_hint(qid, value, hint, capsys):
    """A percent where a share is asked is refused with the share it probably meant, never compared silently."""
    predictions.predict(qid, ...)
    with pytest.raises(ExerciseFailed) as info:
        predictions.predict(qid, value)
    assert hint in str(info.value) and qid not in predictions._PREDICTIONS
    assert "❌" in capsys.readouterr().out


def test_every_numeric_question_declares_its_range():
    for q in predictions.QUESTIONS.values():
        if q.tolerance[0] == "choice":
            continue
        assert q.asks and q.bounds != (-math.inf, math.inf), q.id
        # the instructor's own answer (the solution region of the notebook's predict cell) lies inside it
        nb = json.loads((ROOT / "notebooks" / f"{q.notebook}.ipynb").read_text(encoding="utf-8"))
        (cell,) = ["".join(c["source"]) for c in nb["cells"] if f'predict("{q.id}"' in "".join(c["source"])]
        answer = ast.literal_eval(cell.split("### BEGIN SOLUTION", 1)[1].split("=", 1)[1].split("\n", 1)[0].strip())
        predictions.predict(q.id, answer)
        assert predictions._PREDICTIONS[q.id] == answer


def test_the_cell_text_defines_the_answer_and_does_not_run(capsys):
    """What transfer.load puts into the learner's cell: the script without its __main__ block (a kernel's
    __name__ is "__main__"), ending with fixed_NN = main -- running the cell trains nothing."""
    for ex_id in transfer.EXERCISES:
        cell = transfer.cell_text(ex_id)
        assert "__main__" not in cell and cell.rstrip().endswith("# the check runs this main")
        name = f"/tmp/ipykernel_0/cell{ex_id}.py"
        linecache.cache[name] = (len(cell), None, cell.splitlines(True), name)
        ns: dict = {"__name__": "__main__"}
        exec(compile(cell, name, "exec"), ns)
        fixed = ns[transfer.answer_name(ex_id)]
        assert transfer.answer_source(fixed) == (cell, "main")
    assert capsys.readouterr().out == ""


def rule_labels(sample) -> list[str]:
    """The instructor's solution of 01's labelling exercise: notebook 01's instruments, read in a fixed order."""
    from labkit.corpus import inspection as ins

    flags, lengths = ins.noise_flags(sample), ins.field_lengths(sample)
    out = []
    for i in range(len(sample)):
        if flags.loc[i, ["U+FFFD", "mojibake"]].any():
            out.append("mojibake")
        elif flags.loc[i, ["JavaScript", "CSS", "HTML tags"]].any():
            out.append("script noise")
        elif lengths.loc[i, "title_len"] < 10 or lengths.loc[i, "body_len"] < 50:
            out.append("misaligned")
        elif lengths.loc[i, "title_len"] > 60:
            out.append("title too long")
        else:
            out.append("clean")
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_instructor_solution_passes_on_every_course_seed(seed, capsys):
    s = labelling.sample_records(10, seed=seed)
    assert labelling.check_labels(s, rule_labels(s)) is True


# ---- the grading, on recorded facts (no processes): the hints of the branches the runs above do not reach ------
def fake_run(exercise_id: str, ranks: dict, source: str = "", **context) -> transfer.Run:
    return transfer.Run(transfer.exercise(exercise_id), source, Path("."), ranks=ranks, ok=True, context=context)


def _ranks(samples: dict[int, list[list[int]]], size: int = 8, ids=None) -> dict:
    good = {"first_forward": "a", "final": "b"}
    return {
        r: {
            "samples": s,
            "sample_ids": ids[r] if ids else [[str(i) for i in e] for e in s],
            "dataset_size": size,
            "checksums": good,
            "joined": {"initialized": True, "rank": r, "world_size": len(samples), "backend": "gloo"},
            "pid": 100 + r,
        }
        for r, s in samples.items()
    }


def _grade(grade, run, capsys) -> str:
    with pytest.raises(ExerciseFailed):
        grade(run)
    return capsys.readouterr().out


def test_05_no_sampler_and_a_late_set_epoch(capsys):
    everything = [[3, 1, 7, 0, 2, 6, 5, 4], [5, 0, 2, 7, 1, 3, 4, 6]]
    out = _grade(transfer.grade_05, fake_run("05", _ranks({0: everything, 1: everything})), capsys)
    assert "every rank trained on every example" in out
    # set_epoch called after each epoch's loop: epochs 0 and 1 replay one order, then it changes
    late = {0: [[0, 2, 4, 6], [0, 2, 4, 6], [6, 0, 4, 2]], 1: [[1, 3, 5, 7], [1, 3, 5, 7], [5, 1, 7, 3]]}
    out = _grade(transfer.grade_05, fake_run("05", _ranks(late)), capsys)
    assert "only 2 of 4" in out
    with pytest.raises(ExerciseFailed, match="fewer than 2 epochs"):
        transfer.grade_05(fake_run("05", _ranks({0: [[0, 2]], 1: [[1, 3]]})))


def test_05_replicas_that_differ_fail_even_with_a_right_split(capsys):
    ranks = _ranks({0: [[0, 2], [2, 0]], 1: [[1, 3], [3, 1]]}, size=4)
    ranks[1]["checksums"] = {"first_forward": "a", "final": "c"}
    assert "keep the model wrapped in DDP" in _grade(transfer.grade_05, fake_run("05", ranks), capsys)


def test_04_a_model_never_moved_to_its_device_fails_on_the_doctor(capsys):
    """On CPU an unmoved model trains fine; on a GPU node DDP would leave it on the CPU: the doctor names it."""
    unmoved = edit(
        fix04_torch(),
        (
            '    model = build_model("tiny", len(tokenizer)).to(device)\n'
            '    model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)\n',
            '    model = DDP(build_model("tiny", len(tokenizer)))\n',
        ),
    )
    ranks = _ranks({0: [[0, 2], [2, 0]], 1: [[1, 3], [3, 1]]}, size=4)
    out = _grade(transfer.grade_04, fake_run("04", ranks, unmoved), capsys)
    assert "labkit doctor script finds" in out and "without first being moved" in out
    assert transfer.grade_04(fake_run("04", ranks, fix04_torch())) is True


def test_06_needs_steps_and_a_gradient_to_clip(capsys):
    few = {0: {"steps": [{"step": 1, "lr": 1e-3, "applied_norm": 0.5, "pre_clip_norm": 0.5}], "losses": [1.0]}}
    assert "at least 10 needed" in _grade(transfer.grade_06, fake_run("06", few), capsys)
    falling = [7.0 - 0.2 * i for i in range(12)]
    spiky = {"n_spikes": 2, "max_factor": 9.0, "first_spike": {"step": 11, "layer": "enc.ln", "factor": 9.0, "ids": []}}
    calm = [
        {"step": i + 1, "lr": 1e-3 * min(1, (i + 1) / 5), "applied_norm": 0.5, "pre_clip_norm": 0.5} for i in range(12)
    ]
    out = _grade(transfer.grade_06, fake_run("06", {0: {"steps": calm, "losses": falling, "monitor": spiky}}), capsys)
    assert "cannot see your clipping act" in out
    nan = [dict(s, pre_clip_norm=5.0, applied_norm=1.0) for s in calm]
    out = _grade(transfer.grade_06, fake_run("06", {0: {"steps": nan, "losses": [1.0] * 11 + [float("nan")]}}), capsys)
    assert "non-finite at step 12" in out


def test_06_either_fix_the_notebook_measures_passes_and_half_fixes_fail(capsys):
    """A learning rate the monitor sees no spike at passes; so do clipping + warmup. Spikes with unclipped steps, or
    clipping without warmup, fail; so does a learning rate too low to learn."""
    falling = [7.0 - 0.2 * i for i in range(12)]
    quiet = {"n_spikes": 0, "max_factor": 2.5, "first_spike": None}
    spiky = {"n_spikes": 3, "max_factor": 30.0, "first_spike": {"step": 11, "layer": "enc.ln", "factor": 30, "ids": []}}
    flat_lr = [
        {"step": i + 1, "lr": 3e-3, "applied_norm": 4.0 if i == 0 else 0.8, "pre_clip_norm": 4.0} for i in range(12)
    ]
    run = fake_run("06", {0: {"steps": flat_lr, "losses": falling, "monitor": quiet}})
    assert transfer.grade_06(run) is True
    assert "saw no layer spike in 12 steps (the largest jump: 2.5x" in capsys.readouterr().out
    out = _grade(
        transfer.grade_06, fake_run("06", {0: {"steps": flat_lr, "losses": falling, "monitor": spiky}}), capsys
    )
    assert (
        "Nothing bounds these steps" in out
        and "(layer spikes in 12 steps: 3)" in out
        and "a warmup and clipping" in out
    )
    clipped = [dict(s, applied_norm=1.0) for s in flat_lr]
    out = _grade(
        transfer.grade_06, fake_run("06", {0: {"steps": clipped, "losses": falling, "monitor": spiky}}), capsys
    )
    assert "the full learning rate" in out
    warm = [dict(s, lr=3e-3 * min(1, s["step"] / 5)) for s in clipped]
    assert transfer.grade_06(fake_run("06", {0: {"steps": warm, "losses": falling, "monitor": spiky}})) is True
    assert "The monitor still saw 3 layer spike(s)" in capsys.readouterr().out
    assert transfer.grade_06(fake_run("06", {0: {"steps": warm, "losses": falling, "monitor": quiet}})) is True
    assert "the optimizer applied at most 1; " in (out := capsys.readouterr().out) and "saw no layer spike" in out
    stuck = [7.0 - 0.01 * i for i in range(12)]
    out = _grade(transfer.grade_06, fake_run("06", {0: {"steps": flat_lr, "losses": stuck, "monitor": quiet}}), capsys)
    assert "no longer learns in 12 steps" in out


def test_02_a_cleaner_that_throws_good_data_away(capsys):
    good = [
        {
            "title": "杭州外贸进出口同比增长百分之六点八",
            "body": "据杭州海关消息，今年前十个月杭州外贸进出口总额同比增长。" * 3,
        }
    ]
    out = _grade(transfer.grade_02, fake_run("02", {}, records=good * 10, n_clean=160, n_records=218), capsys)
    assert "kept only 10 records where a correct cleaner keeps 160" in out
    assert "must return the records" in _grade(transfer.grade_02, fake_run("02", {}), capsys)
    assert "kept no record at all" in _grade(transfer.grade_02, fake_run("02", {}, records=[]), capsys)


def test_a_kernel_that_used_its_gpu_can_still_launch_a_cpu_check(monkeypatch):
    """The checks launch gloo processes on the CPU (CUDA hidden from them): a notebook kernel that already holds a
    CUDA context (07 on a GPU machine) must not be refused, while a GPU launch still is."""
    import torch

    from labkit.distributed.launcher import LaunchError, check_devices

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert check_devices(2, "cpu") == (2, "cpu")
    with pytest.raises(LaunchError, match="already initialised CUDA"):
        check_devices(2, "auto")
