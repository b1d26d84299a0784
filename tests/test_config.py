import random

import numpy as np
import pytest
import torch

from labkit.config import PROFILES, get_config, resolve_device, seed_everything, setup


def test_profiles_differ_in_size_and_smoke_fits_a_cpu():
    smoke, full = PROFILES["smoke"], PROFILES["full"]
    assert smoke.model_preset == "tiny" and full.model_preset != "tiny"
    assert smoke.steps < full.steps and smoke.corpus_size < full.corpus_size
    assert full.max_source_len == 512


def test_overrides_known_fields_and_keep_unknown_ones_in_extra():
    cfg = get_config("smoke", steps=7, LR=0.5, n_articles=99, device=None)
    assert cfg.steps == 7 and cfg.lr == 0.5
    assert cfg.extra == {"n_articles": 99}
    assert cfg.device == "auto"  # None means "keep the profile's"
    assert PROFILES["smoke"].steps != 7  # profiles are not mutated


def test_unknown_profile_names_the_choices():
    with pytest.raises(ValueError, match="smoke"):
        get_config("medium")


def test_seed_everything_repeats_all_generators():
    def draw():
        return random.random(), np.random.rand(), torch.rand(1).item()

    seed_everything(3)
    a = draw()
    seed_everything(3)
    assert draw() == a
    seed_everything(4)
    assert draw() != a


def test_device_autodetect_and_clear_error_for_missing_cuda():
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="DEVICE='auto'"):
            resolve_device("cuda")


def test_setup_applies_seed_and_threads():
    cfg = setup("smoke", seed=5, threads=1)
    assert cfg.seed == 5 and torch.get_num_threads() == 1
