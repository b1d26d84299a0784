"""Notebook 07's recipe in one place: the multi-task run's data, command line and budget.

Notebook 07 trains it on every process (`labkit.train` under torchrun); notebook 08 serves the
result, and when 07 has not run (`labkit course run --only 08`) trains the same recipe here on one
process -- the same data, steps, schedule and global batch -- so the model it serves writes titles
and its served-title floor is judged, never skipped.
"""

from __future__ import annotations

from pathlib import Path

NOTEBOOK = "07_multitask_distributed_training"
GLOBAL_BATCH = 16  # examples per optimizer step, split across the processes
EVAL_ARTICLES = 10  # held-out articles after the training ones


def finale_sizes(cfg, **params) -> tuple:
    """(n_articles, steps, lr, compare_steps, max_source_len) of this profile; a papermill value (not 0) wins."""
    defaults = dict(N_ARTICLES=0, STEPS=0, LR=0.0, COMPARE_STEPS=0, MAX_SOURCE_LEN=0)
    return cfg.sizes(NOTEBOOK, **{**defaults, **params})


def finale_data(cfg, out_dir: str | Path, seed: int, n_articles: int, eval_articles: int = EVAL_ARTICLES):
    """(data folder for `labkit.train --data`, training articles, held-out articles)."""
    from labkit.corpus import generate
    from labkit.training.own_data import prepare_data

    articles = generate(n_articles + eval_articles, seed=seed)
    train, held_out = articles[:n_articles], articles[n_articles:]
    return prepare_data(train, held_out, Path(out_dir) / "data"), train, held_out


def finale_args(
    cfg, data_dir: str | Path, seed: int, steps: int, lr: float, max_source_len: int, cpu: bool
) -> list[str]:
    """`labkit.train` arguments shared by every run of the recipe (the batch size and sampler are per run)."""
    args = [
        "--data",
        str(data_dir),
        "--steps",
        str(steps),
        "--seed",
        str(seed),
        "--preset",
        cfg.model_preset,
        "--lr",
        str(lr),
        "--schedule",
        "cosine",
        "--warmup-steps",
        str(max(1, steps // 10)),
        "--clip",
        "1.0",
        "--max-source-len",
        str(max_source_len),
        "--max-target-len",
        str(cfg.max_target_len),
        "--set-epoch",
        "--grad-monitor",
        "--tensorboard",
    ]
    if cpu:
        args += ["--threads", "1"]  # one core per process, as one GPU per process
    return args


def train_finale_model(cfg, out_dir: str | Path, timeout_s: float = 900.0) -> Path:
    """The recipe on one process at this profile's budget; returns the saved model folder (`<out_dir>/model`)."""
    from labkit.distributed import launch

    out_dir = Path(out_dir)
    if (out_dir / "model" / "config.json").exists():
        return out_dir / "model"
    n_articles, steps, lr, _, max_source_len = finale_sizes(cfg)
    data_dir, _, _ = finale_data(cfg, out_dir, cfg.seed, n_articles)
    args = finale_args(cfg, data_dir, cfg.seed, steps, lr, max_source_len, cpu=cfg.torch_device.type == "cpu")
    launch(
        args + ["--batch-size", str(GLOBAL_BATCH), "--sampler", "distributed", "--save-model"],
        1,
        out_dir=out_dir,
        device=cfg.device,
        timeout_s=timeout_s,
        preset=cfg.model_preset,
        echo=None,
    )
    return out_dir / "model"
