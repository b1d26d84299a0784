"""`labkit doctor log`: silent on healthy noisy runs, names spikes / explosions / NaN / no warmup / flat loss."""

from __future__ import annotations

import json
import math
import random

import pytest

from labkit.cli import main
from labkit.doctor import log as L
from labkit.doctor.log_readers import Run

CODES = {"non_finite_loss", "loss_spike", "grad_norm_explosion", "no_warmup", "loss_not_decreasing"}


# ---- synthetic runs ------------------------------------------------------------
def lr_at(t: int, steps: int, peak: float = 5e-4, warmup: int = 0, schedule: str = "cosine") -> float:
    """HF's schedules: linear warmup, then cosine (or constant) decay."""
    if t < warmup:
        return peak * t / warmup
    if schedule == "constant":
        return peak
    return peak * 0.5 * (1 + math.cos(math.pi * (t - warmup) / max(1, steps - warmup)))


def noisy_run(seed: int, steps: int = 600, start: float = 10.4, floor: float = 2.0, tau: float = 120.0):
    """A healthy run, step by step: loss decaying from ~ln(vocab) with 7% batch noise and 3% hard batches
    (x1.4); grad norm falling from ~4 to ~0.6 with 25% noise and 2% bumpy batches (x3)."""
    rng = random.Random(seed)
    loss, grad = [], []
    for t in range(1, steps + 1):
        base = floor + (start - floor) * math.exp(-t / tau)
        loss.append(base * math.exp(rng.gauss(0, 0.07)) * (1.4 if rng.random() < 0.03 else 1.0))
        g = 0.6 + 3.4 * math.exp(-t / 40)
        grad.append(g * math.exp(rng.gauss(0, 0.25)) * (3.0 if rng.random() < 0.02 else 1.0))
    return loss, grad


def trainer_state(loss, grad, lrs, every: int = 1, eval_every: int = 0) -> dict:
    """What HF's Trainer writes: every `every` steps the mean loss since the last log, that step's grad norm
    and lr; eval rows without a training loss; a final summary row."""
    rows = []
    for t in range(every, len(loss) + 1, every):
        rows.append(
            {
                "epoch": round(t / 100, 2),
                "grad_norm": grad[t - 1],
                "learning_rate": lrs[t - 1],
                "loss": round(sum(loss[t - every : t]) / every, 4),
                "step": t,
            }
        )
        if eval_every and t % eval_every == 0:
            rows.append({"epoch": round(t / 100, 2), "eval_loss": loss[t - 1] * 1.1, "eval_runtime": 1.2, "step": t})
    rows.append(
        {
            "epoch": len(loss) / 100,
            "step": len(loss),
            "train_loss": sum(loss) / len(loss),
            "train_runtime": 60.0,
            "total_flos": 1e12,
        }
    )
    return {"global_step": len(loss), "log_history": rows, "max_steps": len(loss), "logging_steps": every}


def write_state(path, state: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=2))  # json writes NaN / Infinity tokens like HF does
    return path


def doctor(capsys, *argv):
    rc = main(["doctor", "log", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def codes(findings) -> dict[str, int]:
    return {
        f["code"] if isinstance(f, dict) else f.code: (f["step"] if isinstance(f, dict) else f.step) for f in findings
    }


# ---- healthy runs: nothing -------------------------------------------------------
@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("every,warmup,schedule", [(1, 60, "cosine"), (10, 60, "cosine"), (10, 30, "constant")])
def test_healthy_noisy_runs_yield_nothing(tmp_path, capsys, seed, every, warmup, schedule):
    loss, grad = noisy_run(seed)
    lrs = [lr_at(t, len(loss), warmup=warmup, schedule=schedule) for t in range(1, len(loss) + 1)]
    path = write_state(tmp_path / "trainer_state.json", trainer_state(loss, grad, lrs, every, eval_every=100))
    rc, out, err = doctor(capsys, path)
    assert rc == 0, out
    assert "no findings" in out and not err


@pytest.mark.parametrize("seed", range(5))
def test_healthy_fine_tuning_near_zero_loss_yields_nothing(seed):
    """A fine-tuning run that nearly memorises its data: relative noise on a tiny loss is large."""
    rng = random.Random(seed)
    loss = [0.05 + 1.5 * math.exp(-t / 30) * math.exp(rng.gauss(0, 0.3)) for t in range(1, 301)]
    loss = [v + (0.15 if rng.random() < 0.02 else 0.0) for v in loss]  # hard batches quadruple a ~0.05 loss
    lrs = [lr_at(t, 300, warmup=30) for t in range(1, 301)]
    run = Run("x", list(enumerate(loss, 1)), list(enumerate(lrs, 1)))
    assert L.diagnose(run) == []


# ---- broken runs: each code --------------------------------------------------------
def test_broken_hf_state_names_spike_explosion_nan_no_warmup(tmp_path, capsys):
    loss, grad = noisy_run(0, steps=400)
    lrs = [lr_at(t, 400, warmup=0, schedule="constant") for t in range(1, 401)]
    grad[249] *= 60  # step 250: one layer of the model blows up...
    loss[254] *= 5  # step 255: ...the loss follows
    for t in range(300, 400):  # step 301 on: NaN, as HF writes it
        loss[t], grad[t] = math.nan, math.inf
    path = write_state(tmp_path / "out" / "trainer_state.json", trainer_state(loss, grad, lrs, every=1, eval_every=50))
    assert "NaN" in path.read_text() and "Infinity" in path.read_text()
    rc, out, err = doctor(capsys, path, "--format", "json")
    assert rc == 1 and not err
    found = json.loads(out)
    assert codes(found) == {"no_warmup": 1, "grad_norm_explosion": 250, "loss_spike": 255, "non_finite_loss": 301}
    for f in found:
        assert set(f) == {"path", "line", "step", "code", "message", "fix"}
        assert f["line"] == f["step"] and f["path"] == str(path)
    by = {f["code"]: f for f in found}
    assert "clip_grad_norm_(model.parameters(), 1.0)" in by["grad_norm_explosion"]["fix"]
    assert "max_grad_norm" in by["loss_spike"]["fix"] and "truncation=True, max_length=512" in by["loss_spike"]["fix"]
    assert "get_cosine_with_hard_restarts_schedule_with_warmup(optimizer, num_warmup_steps=" in by["no_warmup"]["fix"]
    assert "warmup_ratio" in by["no_warmup"]["fix"]
    assert "lower the learning rate" in by["non_finite_loss"]["fix"] and "notebook 06" in by["non_finite_loss"]["fix"]
    # text: one finding per line, in step order
    rc, out, _ = doctor(capsys, tmp_path / "out")
    lines = out.strip().splitlines()
    assert rc == 1 and len(lines) == 4
    assert lines[1].startswith(f"{path}:step 250: grad_norm_explosion: gradient norm ")
    assert " — fix: " in lines[1]


def test_blow_up_at_step_two_is_a_spike():
    """No warmup and a far too high lr: the loss leaves ln(vocab) for the hundreds at once (a real
    labkit run at lr=10, seed 0); a spike even with one value before it."""
    loss = [7.29, 252.98, 368.21, 386.95, 385.87, 260.05, 226.97, 200.5, 222.77, 215.83, 214.59, 170.42]
    found = codes(L.diagnose(Run("x", list(enumerate(loss, 1)))))
    assert found == {"loss_spike": 2, "loss_not_decreasing": 12}


def test_flat_loss_and_constant_lr(tmp_path):
    rng = random.Random(0)
    loss = [6.0 * math.exp(rng.gauss(0, 0.05)) for _ in range(200)]
    run = Run("x", list(enumerate(loss, 1)), [(t, 1e-4) for t in range(1, 201)])
    found = {f.code: f for f in L.diagnose(run)}
    assert set(found) == {"no_warmup", "loss_not_decreasing"}
    assert found["loss_not_decreasing"].step == 200 and "last 20" in found["loss_not_decreasing"].message
    # a run that learns a little but not 10%: still flagged; one that learns 20%: not
    for drop, flagged in ((0.05, True), (0.2, False)):
        dec = [v * (1 - drop * t / 200) for t, v in enumerate(loss, 1)]
        assert ("loss_not_decreasing" in codes(L.diagnose(Run("x", list(enumerate(dec, 1)))))) == flagged


# ---- folders ---------------------------------------------------------------------
def test_output_dir_reads_latest_checkpoint(tmp_path, capsys):
    loss, grad = noisy_run(1, steps=300)
    lrs = [lr_at(t, 300, warmup=30) for t in range(1, 301)]
    good = trainer_state(loss, grad, lrs, every=10)
    bad_loss = list(loss)
    bad_loss[280] = math.nan
    write_state(tmp_path / "checkpoint-40" / "trainer_state.json", good)
    latest = write_state(
        tmp_path / "checkpoint-300" / "trainer_state.json", trainer_state(bad_loss, grad, lrs, every=1)
    )
    (tmp_path / "checkpoint-100").mkdir()  # no trainer_state.json: not a candidate
    rc, out, _ = doctor(capsys, tmp_path, "--format", "json")
    found = json.loads(out)
    assert rc == 1 and codes(found) == {"non_finite_loss": 281}
    assert found[0]["path"] == str(latest)
    rc, out, _ = doctor(capsys, tmp_path / "checkpoint-40")  # a checkpoint folder
    assert rc == 0


def test_labkit_rank_report(tmp_path, capsys):
    """`labkit train --out OUT` writes OUT/ranks/rank0.json with the run's history."""
    loss, grad = noisy_run(2, steps=100)
    loss[60] = 40.0
    rep = {
        "rank": 0,
        "completed": True,
        "history": {
            "steps": list(range(1, 101)),
            "loss": loss,
            "grad_norm": grad,
            "lr": [lr_at(t - 1, 100, peak=1e-3, warmup=10) for t in range(1, 101)],
            "evals": [],
            "spikes": 0,
        },
    }
    (tmp_path / "ranks").mkdir()
    (tmp_path / "ranks" / "rank0.json").write_text(json.dumps(rep))
    rc, out, _ = doctor(capsys, tmp_path, "--format", "json")
    assert rc == 1 and codes(json.loads(out)) == {"loss_spike": 61}


@pytest.mark.parametrize(
    "strategy,world,optimizer,says",
    [
        ("ddp", 2, 8, "every rank holds all of them: --strategy fsdp divides them"),
        ("ddp", 1, 8, "one process holds all of them: --strategy fsdp divides them"),
        ("fsdp", 2, 4, "already sharded over 2 ranks"),
        ("ddp", 2, 1, None),  # SGD without momentum: the states do not dominate, nothing to say about them
    ],
)
def test_labkit_rank_report_memory_per_rank(tmp_path, capsys, strategy, world, optimizer, says):
    """A labkit run's per-rank bytes (`state_bytes`, measured by the trainer) are reported with the run, and
    when the optimizer states dominate them, what shards them -- a fact, never a finding (exit code unchanged)."""
    loss, grad = noisy_run(3, steps=60)
    mb = 2**20
    params = 4 * mb // (2 if strategy == "fsdp" else 1)
    rep = {
        "rank": 0,
        "completed": True,
        "strategy": strategy,
        "env": {"world_size": world},
        "state_bytes": {
            "params": params,
            "grads": params,
            "optimizer": optimizer * mb,
            "total": 2 * params + optimizer * mb,
        },
        "history": {"steps": list(range(1, 61)), "loss": loss, "grad_norm": grad},
    }
    (tmp_path / "ranks").mkdir()
    (tmp_path / "ranks" / "rank0.json").write_text(json.dumps(rep))
    rc, out, _ = doctor(capsys, tmp_path)
    assert rc == 0 and "no findings" in out
    assert f"({strategy}, {world} rank(s))" in out and "MB optimizer" in out
    if says:
        assert "the optimizer states are" in out and says in out
    else:
        assert "the optimizer states are" not in out


# ---- cannot read: exit 2, one line, no traceback ---------------------------------
def test_unreadable_paths_exit_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.json").write_text("{not json")
    only_eval = {"log_history": [{"eval_loss": 2.0, "step": 10}, {"train_loss": 2.1, "step": 10}]}
    write_state(tmp_path / "evalonly" / "trainer_state.json", only_eval)
    (tmp_path / "notes.txt").write_text("hello")
    for target, says in [
        (tmp_path / "missing", "no such file"),
        (tmp_path / "empty", "no training scalars"),
        (tmp_path / "bad.json", "not valid JSON"),
        (tmp_path / "evalonly", "no training scalars"),
        (tmp_path / "notes.txt", "not a trainer_state.json"),
    ]:
        rc, out, err = doctor(capsys, target)
        assert rc == 2 and not out
        assert len(err.strip().splitlines()) == 1 and str(target) in err and says in err, err
        assert "Traceback" not in err
    _, _, err = doctor(capsys, tmp_path / "empty")
    assert "trainer_state.json" in err and "TensorBoard" in err and "ranks/rank0.json" in err


def test_help_documents_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["doctor", "log", "--help"])
    out = capsys.readouterr().out
    for words in (
        "PATH",
        "trainer_state.json",
        "checkpoint-*",
        "TensorBoard",
        "--format",
        "json",
        "Exit 0",
        "Thresholds",
        "3x the median",
    ):
        assert words in out


# ---- real logs ---------------------------------------------------------------------
def test_real_tensorboard_folder_with_hf_tags(tmp_path, capsys):
    """Event files as HF's TensorBoardCallback writes them (output_dir/runs/<date>_<host>/)."""
    from torch.utils.tensorboard import SummaryWriter

    def write(logdir, spike_at=None):
        loss, grad = noisy_run(3, steps=300)
        w = SummaryWriter(str(logdir))
        for t in range(10, 301, 10):
            v = sum(loss[t - 10 : t]) / 10 * (6.0 if t == spike_at else 1.0)
            w.add_scalar("train/loss", v, t)
            w.add_scalar("train/grad_norm", grad[t - 1], t)
            w.add_scalar("train/learning_rate", lr_at(t, 300, warmup=30), t)
            w.add_scalar("train/epoch", t / 100, t)
            if t % 100 == 0:
                w.add_scalar("eval/loss", loss[t - 1], t)
        w.close()

    write(tmp_path / "healthy" / "runs" / "Jan01_host")
    rc, out, _ = doctor(capsys, tmp_path / "healthy")
    assert rc == 0 and "30 losses, 30 grad norms, 30 learning rates" in out
    write(tmp_path / "broken" / "runs" / "Jan01_host", spike_at=200)
    rc, out, _ = doctor(capsys, tmp_path / "broken", "--format", "json")
    found = json.loads(out)
    assert rc == 1 and codes(found) == {"loss_spike": 200}
    assert found[0]["path"] == str(tmp_path / "broken" / "runs" / "Jan01_host")


def test_labkit_nonfinite_events_between_logged_steps(tmp_path, capsys):
    """labkit logs `nonfinite/events` at every non-finite step, even when log_every skips its loss."""
    from torch.utils.tensorboard import SummaryWriter

    loss, grad = noisy_run(4, steps=100)
    w = SummaryWriter(str(tmp_path))
    for t in range(5, 101, 5):  # log_every=5
        w.add_scalar("train/loss", loss[t - 1], t)
        w.add_scalar("train/lr", lr_at(t - 1, 100, warmup=20), t)
        w.add_scalar("grad_norm/total", grad[t - 1], t)
    w.add_scalar("nonfinite/events", 1, 37)
    w.close()
    rc, out, _ = doctor(capsys, tmp_path, "--format", "json")
    found = json.loads(out)
    assert rc == 1 and codes(found) == {"non_finite_loss": 37} and "nonfinite/events" in found[0]["message"]


def test_real_labkit_run_too_high_lr_no_clipping(tmp_path, capsys):
    """labkit's trainer at a tiny size, lr=0.1, constant schedule, no clipping (notebook 06's broken
    recipe): `doctor log` on its TensorBoard folder names the exploding layer and the missing warmup."""
    from labkit.training.trainer import TrainConfig, Trainer
    from training_helpers import collator, examples, small_model, tokenizer

    run = tmp_path / "run"
    cfg = TrainConfig(
        steps=24,
        batch_size=8,
        lr=0.1,
        seed=0,
        clip=None,
        schedule="constant",
        warmup_steps=0,
        nonfinite="ignore",
        log_dir=str(run),
    )
    hist = Trainer(small_model(len(tokenizer())), examples(), collator(), cfg).fit()
    rc, out, _ = doctor(capsys, run, "--format", "json")
    found = {f["code"]: f for f in json.loads(out)}
    assert rc == 1 and "no_warmup" in found and found["no_warmup"]["step"] == 1
    assert {"loss_spike", "grad_norm_explosion"} & set(found), found
    boom = found["grad_norm_explosion"]
    assert hist.spikes, "the trainer's own monitor saw a layer spike"
    # one definition of a spike: the doctor, reading the logs alone, names the monitor's first spike
    first = hist.verdict["first_spike"]
    assert boom["step"] == first["step"] and f"of {first['layer']} " in boom["message"], (boom, first)
    assert f"{first['factor']:.1f}x its moving baseline" in boom["message"]


def test_layer_spikes_use_the_monitors_rule_not_the_totals():
    """labkit's per-layer series are judged by `monitor.Baselines` (5x a layer's EMA, after 10 steps), a total alone
    (HF) by 10x the median: a layer jumping 7x names that layer; the same 7x on a total alone is no explosion."""
    steps = range(1, 31)
    quiet = [(t, 1.0) for t in steps]
    jumpy = [(t, 3.5 if t == 20 else 0.5) for t in steps]
    run = Run("x", [(t, 5.0 - t / 10) for t in steps], [], [(t, 1.2) for t in steps], {"a": quiet, "b": jumpy})
    found = {f.code: f for f in L.diagnose(run)}
    assert found["grad_norm_explosion"].step == 20 and "of b " in found["grad_norm_explosion"].message
    assert "7.0x its moving baseline" in found["grad_norm_explosion"].message
    total_only = Run("x", run.loss, [], jumpy)
    assert "grad_norm_explosion" not in codes(L.diagnose(total_only))
