import math

import pytest
import torch

from labkit.model import PRESETS, count_parameters, model_config
from labkit.training import memory as mm
from labkit.training.explosions import hostile_examples, loss_spike_factor
from training_helpers import collator, examples, small_model, tokenizer


def test_cpu_peak_sees_torch_allocations_that_tracemalloc_misses():
    def alloc():
        x = torch.ones(64 * 2**20 // 4)  # 64 MB, touched
        return float(x[-1])

    _, peak = mm.measure_peak(alloc, "cpu")
    assert 60 * 2**20 <= peak <= 120 * 2**20
    _, idle = mm.measure_peak(lambda: None, "cpu")
    assert idle < 8 * 2**20


def test_step_peak_grows_with_batch_and_alpha_is_recovered():
    tok_model = lambda: small_model(len(tokenizer()))  # noqa: E731
    ex = examples()
    p4 = mm.training_step_peak(tok_model(), collator(64)(ex[:4]))
    p16 = mm.training_step_peak(tok_model(), collator(64)(ex[:16]))
    assert p16 > p4 > 0
    shape = mm.Shape.of(tok_model().config)
    pts = [
        (b, s, t, 4 * 1000 + 1.7 * 4 * mm.activation_elements(shape, b, s, t))
        for b, s, t in [(2, 32, 8), (8, 64, 16), (4, 128, 8)]
    ]
    assert mm.fit_alpha(shape, 1000, pts) == pytest.approx(1.7)


def test_timed_step_peak_reports_the_spread_of_the_same_step_repeated():
    model = small_model(len(tokenizer()))
    out = mm.timed_step_peak(model, collator(64)(examples()[:8]), repeats=2)
    assert out["peak_mb"] > 0 and out["step_s"] > 0
    # (max - min) / median of 3 peaks of one setting: the noise a comparison of settings is read against
    assert 0.0 <= out["peak_spread"] < 1.0


def test_a_change_reads_against_the_noise_it_must_exceed():
    assert mm.against_noise(0.119, 0.02) == "more" and mm.against_noise(-0.3, 0.02) == "less"
    assert mm.against_noise(0.05, 0.08) == "within" and mm.against_noise(-0.08, 0.08) == "within"


def test_t5_large_needs_accumulation_on_16gb():
    P = count_parameters("t5-large")
    assert 700e6 < P < 780e6  # the published 738M
    shape = mm.Shape.of(model_config("t5-large", 32128))
    pred = mm.predict_step_bytes(shape, P, 16, 512, 64, alpha=1.0)
    assert pred["weights"] + pred["gradients"] + pred["optimizer"] == 16 * P
    assert pred["total"] > 16 * 2**30
    assert 1 <= mm.largest_fitting_batch(shape, P, 512, 64, 1.0, 16 * 2**30) < 8
    assert set(PRESETS) == {"tiny", "t5-small", "t5-base", "t5-large", "t5-3b"}
    assert 2.8e9 < count_parameters("t5-3b") < 2.9e9  # the published 2.85B


def test_sharding_divides_the_state_not_the_activations():
    P = count_parameters("t5-large")
    shape = mm.Shape.of(model_config("t5-large", 32128))
    ddp = mm.predict_step_bytes(shape, P, 8, 512, 64, alpha=1.0, world=4, stage=0)
    fsdp = mm.predict_step_bytes(shape, P, 8, 512, 64, alpha=1.0, world=4, stage=3)
    assert ddp["weights"] + ddp["gradients"] + ddp["optimizer"] == 16 * P  # DDP: 4 cards change nothing
    assert fsdp["weights"] + fsdp["gradients"] + fsdp["optimizer"] == 16 * P / 4
    assert fsdp["activations"] == ddp["activations"]
    budget = 16 * 2**30
    ddp_fit = mm.largest_fitting_batch(shape, P, 512, 64, 1.0, budget, world=4, stage=0)
    fsdp_fit = mm.largest_fitting_batch(shape, P, 512, 64, 1.0, budget, world=4, stage=3)
    assert ddp_fit == mm.largest_fitting_batch(shape, P, 512, 64, 1.0, budget) and fsdp_fit > ddp_fit


def test_hostile_examples_and_spike_factor():
    ex = examples()
    h = hostile_examples(ex, 3, seed=0, repeat=3)
    assert len(h) == 3 and all(e.id.startswith("hostile-") for e in h)
    src = {e.id: e for e in ex}
    for e in h:
        orig = src[e.id.split("/", 1)[1]]
        assert len(e.source) > 3 * len(orig.source) and e.target == orig.target
    assert h == hostile_examples(ex, 3, seed=0, repeat=3)
    assert loss_spike_factor([5, 5, 5, 5, 5, 20]) == pytest.approx(4.0)
    assert loss_spike_factor([5, 5, 5, 5, 5, float("nan")]) == math.inf
