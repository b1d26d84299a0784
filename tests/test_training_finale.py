"""Notebook 07's recipe in one place (labkit.training.finale): 07 runs it on N processes, 08 on one when 07 has not run."""

from labkit.config import get_config
from labkit.training.finale import GLOBAL_BATCH, finale_args, finale_sizes


def test_the_recipe_is_the_profiles_and_a_papermill_value_wins():
    cfg = get_config("smoke")
    n, steps, lr, compare, src = finale_sizes(cfg)
    assert (steps, lr, compare, src) == (600, 5e-3, 100, 64) and n == cfg.corpus_size
    assert finale_sizes(cfg, STEPS=40)[1] == 40
    args = finale_args(cfg, "data", 3, steps, lr, src, cpu=True)
    pairs = dict(zip(args[::2], args[1::2]))
    assert pairs["--seed"] == "3" and pairs["--schedule"] == "cosine" and pairs["--warmup-steps"] == "60"
    assert pairs["--max-source-len"] == "64" and args[-2:] == ["--threads", "1"]
    assert "--threads" not in finale_args(cfg, "data", 3, steps, lr, src, cpu=False)
    assert GLOBAL_BATCH == 16
