import os
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


def test_seed_everything_leaves_the_environment_alone(monkeypatch):
    """PYTHONHASHSEED is read once, when an interpreter starts: set here it only leaked into every child."""
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    before = dict(os.environ)
    seed_everything(5)
    assert dict(os.environ) == before


def test_device_autodetect_and_clear_error_for_missing_cuda():
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="DEVICE='auto'"):
            resolve_device("cuda")


@pytest.fixture
def torch_threads():
    """`setup` sets torch's thread count for the whole process: put it back for the tests that run after."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_setup_applies_seed_and_threads(torch_threads):
    def draws():
        return random.random(), np.random.rand(), torch.rand(3).tolist()

    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    seeded = random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state()
    expected = draws()
    random.seed(99)  # leave every generator somewhere else before setup
    np.random.seed(99)
    torch.manual_seed(99)

    cfg = setup("smoke", seed=5, threads=1)
    assert random.getstate() == seeded[0]
    assert np.array_equal(np.random.get_state()[1], seeded[1])
    assert torch.equal(torch.get_rng_state(), seeded[2])
    assert draws() == expected
    assert cfg.seed == 5 and torch.get_num_threads() == 1

    setup("smoke", seed=6, threads=1)
    assert draws() != expected


def test_every_notebook_size_is_in_both_profiles_and_the_notebooks_ask_only_for_those():
    import ast
    import json
    from pathlib import Path

    from labkit.config import NOTEBOOK_SIZES

    assert set(NOTEBOOK_SIZES["smoke"]) == set(NOTEBOOK_SIZES["full"])
    for nb, table in NOTEBOOK_SIZES["smoke"].items():
        assert set(table) == set(NOTEBOOK_SIZES["full"][nb]), nb
    asked = {}
    for path in sorted(Path("notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code" or "cfg.sizes(" not in "".join(cell["source"]):
                continue
            for node in ast.walk(ast.parse("".join(cell["source"]))):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "sizes":
                    assert node.args[0].value == path.stem, f"{path.name} asks for {node.args[0].value}'s sizes"
                    asked[path.stem] = {k.arg for k in node.keywords}
    assert asked, "no notebook reads its sizes from labkit.config"
    for nb, names in asked.items():
        assert names == set(NOTEBOOK_SIZES["smoke"][nb]), (nb, names ^ set(NOTEBOOK_SIZES["smoke"][nb]))


def test_a_set_parameter_wins_over_the_profile_and_an_unknown_size_is_named():
    from labkit.config import get_config

    cfg = get_config("full")
    assert cfg.sizes("06_exploding_gradients", STEPS=None, BATCH=4) == (1000, 4)
    with pytest.raises(KeyError, match="NO_SUCH"):
        cfg.sizes("06_exploding_gradients", NO_SUCH=None)
