"""`labkit doctor script`: the static checker, judged on fixture scripts in many real styles.

Every correct fixture must give zero findings (a false alarm is a defect); every
broken fixture must give exactly its expected set of codes.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from labkit.cli import main
from labkit.doctor.script import CHECKS, FIXES, check_file, check_source

FIXTURES = Path(__file__).parent / "fixtures" / "scripts"
# the story's own script and its fix ship with the course (notebook 05 checks them)
STORY = Path(__file__).parent.parent / "data_samples" / "scripts"


def _path(name: str) -> Path:
    return STORY / name if (STORY / name).exists() else FIXTURES / name

# fixture -> the exact set of codes it must produce (empty set: a correct script)
EXPECTED: dict[str, set[str]] = {
    # pytorch/examples distributed/ddp-tutorial-series: no seed and no clipping, as upstream
    "ddp_tutorial_single_gpu.py": {"no_grad_clip", "no_seed"},
    "ddp_tutorial_multigpu_spawn.py": {"no_grad_clip", "no_seed"},
    "ddp_tutorial_multigpu_torchrun.py": {"no_grad_clip", "no_seed", "unsafe_torch_load"},
    # nanoGPT: per-rank seed with independent random batches is intended; resume uses torch.load
    "nanogpt_train.py": {"unsafe_torch_load"},
    # HF Trainer owns seed, clipping, warmup and the sampler
    "hf_seq2seq_trainer.py": set(),
    "hf_trainer_local_rank_arg.py": {"legacy_launch"},
    # accelerate: prepare() shards, but run_summarization_no_trainer-style loops don't clip
    "accelerate_summarization_no_trainer.py": {"no_grad_clip"},
    "accelerate_t5_clipped.py": set(),
    "accelerate_clm_group_texts.py": set(),
    "lightning_t5.py": set(),
    "legacy_launch_resnet.py": {"legacy_launch"},
    "single_process_t5_correct.py": set(),
    "single_process_adam_broken.py": {"no_grad_clip", "no_seed", "no_warmup"},
    "story_broken.py": {
        "legacy_launch", "model_not_on_device", "no_distributed_sampler", "no_grad_clip",
        "unsafe_torch_load", "checkpoint_all_ranks", "no_truncation", "no_warmup",
    },
    "story_fixed.py": set(),
    "set_epoch_missing.py": {"missing_set_epoch"},
    "set_epoch_in_helper.py": set(),
    "unsynced_seed_split.py": {"unsynced_seed"},
    "per_rank_random_draws.py": set(),
    "cuda_without_device.py": {"model_not_on_device"},
    "rank_strided_shards.py": set(),
    "gloo_cpu_spawn.py": set(),
    "batch_generate_untruncated.py": {"no_truncation", "unsafe_torch_load"},
}


def test_every_fixture_has_an_expectation():
    assert {p.name for p in [*FIXTURES.glob("*.py"), *STORY.glob("*.py")]} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_codes(name):
    found = {f.code for f in check_file(str(_path(name)))}
    assert found == EXPECTED[name]


def test_correct_fixtures_have_zero_findings():
    correct = [n for n, codes in EXPECTED.items() if not codes]
    assert len(correct) >= 10
    for name in correct:
        assert check_file(str(_path(name))) == [], name


def test_every_code_is_exercised_by_some_fixture():
    assert set().union(*EXPECTED.values()) == set(CHECKS) == set(FIXES)


def test_set_epoch_in_helper_called_from_epoch_loop_counts():
    helper = """
import torch.distributed as dist
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP
class T:
    def _run_epoch(self, epoch):
        self.loader.sampler.set_epoch(epoch)
        for batch in self.loader:
            pass
    def train(self, n):
        for epoch in range(n):
            self._run_epoch(epoch)
"""
    assert [f.code for f in check_source(helper)] == []
    outside = helper.replace("        self.loader.sampler.set_epoch(epoch)\n", "").replace(
        "    def train(self, n):\n", "    def train(self, n):\n        self.loader.sampler.set_epoch(0)\n")
    assert [f.code for f in check_source(outside)] == ["missing_set_epoch"]


def test_guard_at_the_call_site_counts():
    src = """
import torch, torch.distributed as dist
def save(m):
    torch.save(m.state_dict(), "m.pt")
def main():
    dist.init_process_group("gloo")
    if dist.get_rank() == 0:
        save(m)
"""
    assert check_source(src) == []
    assert [f.code for f in check_source(src.replace("    if dist.get_rank() == 0:\n        save", "    save"))] == [
        "checkpoint_all_ranks"]


def test_text_output_and_exit_1(capsys):
    rc = main(["doctor", "script", str(FIXTURES / "set_epoch_missing.py")])
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 1
    assert len(out) == 1
    path, line, code, rest = out[0].split(":", 3)
    assert path.endswith("set_epoch_missing.py") and int(line) > 0 and code == " missing_set_epoch"
    assert "— fix: call `sampler.set_epoch(epoch)` at the top of the epoch loop" in rest


def test_json_output_shape(capsys):
    rc = main(["doctor", "script", "--format", "json", str(STORY / "story_broken.py"), str(STORY / "story_fixed.py")])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert isinstance(data, list) and data
    for item in data:
        assert set(item) == {"path", "line", "code", "message", "fix"}
        assert item["path"].endswith("story_broken.py") and isinstance(item["line"], int)
    assert {d["code"] for d in data} == EXPECTED["story_broken.py"]


def test_clean_file_exits_0(capsys):
    assert main(["doctor", "script", "--format", "json", str(STORY / "story_fixed.py")]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_syntax_error_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "broken_train.py"
    bad.write_text("import torch\n\nfor epoch in range(3)\n    pass\n", encoding="utf-8")
    rc = main(["doctor", "script", str(bad)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1
    assert "broken_train.py" in err and "line 3" in err and "Traceback" not in err


def test_missing_file_exits_2(tmp_path, capsys):
    rc = main(["doctor", "script", str(tmp_path / "nope.py"), str(STORY / "story_fixed.py")])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and "nope.py" in err and "Traceback" not in err


def test_help_documents_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["doctor", "script", "--help"])
    out = capsys.readouterr().out
    assert "--format" in out and "PATH" in out and "never" in out


def test_script_is_never_executed(tmp_path):
    trap = tmp_path / "trap.py"
    marker = tmp_path / "ran"
    trap.write_text(f"open({str(marker)!r}, 'w').write('x')\n", encoding="utf-8")
    assert check_file(str(trap)) == []
    assert not marker.exists()


@pytest.mark.parametrize("build", [
    "def build():\n    net = Net()\n    net.cuda(local_rank)\n    return net\nmodel = build()\n",
    "model = Net(device=f'cuda:{local_rank}')\n",
    "model = Net().to(local_rank)\n",
])
def test_model_placed_on_device_other_ways_is_not_a_finding(build):
    src = ("import os, torch, torch.distributed as dist\n"
           "from torch.nn.parallel import DistributedDataParallel as DDP\n"
           "local_rank = int(os.environ['LOCAL_RANK'])\ndist.init_process_group('nccl')\n"
           + build + "model = DDP(model, device_ids=[local_rank])\n")
    assert [f.code for f in check_source(src)] == []


def test_private_generator_seeds_are_not_the_torch_seed():
    src = ("import torch, torch.distributed as dist\n"
           "dist.init_process_group('gloo')\nrank = dist.get_rank()\ntorch.manual_seed(0)\n"
           "g = torch.Generator().manual_seed(1000 + rank)\norder = torch.randperm(100, generator=g)\n")
    assert [f.code for f in check_source(src)] == []
    assert [f.code for f in check_source(src.replace("torch.manual_seed(0)", "torch.manual_seed(rank)"))] == [
        "unsynced_seed"]
