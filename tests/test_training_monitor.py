import pytest
import torch

from labkit.training.monitor import GradMonitor, layer_name
from labkit.training.trainer import TrainConfig, Trainer
from training_helpers import collator, examples, small_model, tokenizer


def test_layer_names_group_t5_sublayers():
    assert layer_name("decoder.block.1.layer.1.EncDecAttention.q.weight") == "decoder.block.1.layer.1.EncDecAttention"
    assert layer_name("encoder.block.0.layer.1.DenseReluDense.wi.weight") == "encoder.block.0.layer.1.DenseReluDense"
    assert layer_name("decoder.final_layer_norm.weight") == "decoder.final_layer_norm"
    assert layer_name("shared.weight") == "shared"
    assert layer_name("bias") == "bias"


def test_layer_norms_match_direct_computation():
    m = small_model(len(tokenizer()))
    b = collator()(examples()[:4])
    m(input_ids=b["input_ids"], attention_mask=b["attention_mask"], labels=b["labels"]).loss.backward()
    mon = GradMonitor(m)
    norms = mon.layer_norms()
    for name, got in zip(mon.layers, norms.tolist()):
        grads = [p.grad.flatten() for n, p in m.named_parameters() if layer_name(n) == name and p.grad is not None]
        assert got == pytest.approx(float(torch.cat(grads).norm()), rel=1e-5), name
    total = norms.pow(2).sum().sqrt()
    ref = torch.nn.utils.get_total_norm([p.grad for p in m.parameters() if p.grad is not None])
    assert float(total) == pytest.approx(float(ref), rel=1e-5)


def test_spike_names_first_layer_step_and_batch():
    mon = GradMonitor(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)), spike_factor=5.0, warmup=5)
    assert mon.layers == ["0", "1"]
    batch = {"ids": ["a", "b"], "source_lengths": [12, 900]}
    for step in range(10):
        assert mon.observe(step, [1.0, 2.0], batch) is None
    assert mon.observe(10, [1.5, 30.0], batch).layer == "1"
    mon.observe(11, [40.0, 2.0], batch)  # a later spike elsewhere does not change "first"
    v = mon.verdict()
    assert v["first_spike"]["step"] == 10 and v["first_spike"]["layer"] == "1"
    assert v["first_spike"]["factor"] == pytest.approx(15.0, rel=0.01)
    assert v["first_spike"]["source_lengths"] == [12, 900] and v["n_spikes"] == 2
    assert "step 10 in 1" in mon.report()


def test_no_spike_during_warmup_or_steady_training():
    mon = GradMonitor(torch.nn.Linear(2, 2), warmup=5)
    for step, v in enumerate([100.0, 1.0, 1.0, 1.0, 1.0, 1.2, 0.9, 1.1]):
        mon.observe(step, [v])
    assert mon.spikes == [] and mon.report() == "no gradient spikes and no non-finite values"


def test_trainer_records_spike_from_a_corrupted_batch():
    """Scale the loss of one step by 1000 through a hook: the monitor must flag exactly that step."""
    m = small_model(len(tokenizer()))
    calls = {"n": 0}

    def hook(_mod, _inp, out):
        calls["n"] += 1
        return out * 1000.0 if calls["n"] == 14 else out

    m.lm_head.register_forward_hook(hook)
    tr = Trainer(m, examples(), collator(), TrainConfig(steps=16, batch_size=8, lr=1e-3, spike_factor=5.0))
    h = tr.fit()
    # the 14th forward is optimizer step 14, the number History and TensorBoard give it
    assert h.spikes and h.spikes[0]["step"] == 14 and h.steps[13] == 14
    assert h.verdict["first_spike"]["step"] == 14 and len(h.spikes[0]["ids"]) == 8
