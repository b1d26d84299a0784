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
        "legacy_launch",
        "model_not_on_device",
        "no_distributed_sampler",
        "no_grad_clip",
        "unsafe_torch_load",
        "checkpoint_all_ranks",
        "no_truncation",
        "no_warmup",
    },
    "story_fixed.py": set(),
    # the find-and-fix exercises (labkit.exercises.transfer): the doctor sees 06's pitfall, 04's leftover argument and
    # 07's unsynced gradients (a process group, a loop, the loss all-reduced but no wrapper and no gradient
    # all-reduce); 02's data, 04's missing process group and 05's per-rank seed only show when they run
    "exercise02_crawl_to_pairs.py": set(),
    "exercise04_train_argparse.py": {"unused_local_rank_arg"},
    "exercise05_sharded_trainer.py": set(),
    "exercise06_title_loop.py": {"no_grad_clip", "no_warmup"},
    "exercise07_multitask_loop.py": {"model_not_wrapped"},
    "set_epoch_missing.py": {"missing_set_epoch"},
    "fsdp_rank0_save_broken.py": {"fsdp_local_state_dict"},
    "fsdp_dcp_save.py": set(),
    "set_epoch_in_helper.py": set(),
    "unsynced_seed_split.py": {"unsynced_seed"},
    "per_rank_random_draws.py": set(),
    "cuda_without_device.py": {"model_not_on_device"},
    # the single-GPU tutorial's `torch.device("cuda" if ... else "cpu")` kept under torchrun, DDP without device_ids
    "device_if_available_ddp.py": {"model_not_on_device"},
    "device_per_rank_ddp.py": set(),
    "rank_strided_shards.py": set(),
    "gloo_cpu_spawn.py": set(),
    "batch_generate_untruncated.py": {"no_truncation", "unsafe_torch_load"},
    # Written from scratch in the styles of public scripts the doctor had never seen (issue 19); each
    # correct variant must stay silent, each broken one gives exactly its set.
    # timm train.py: clipping through `loss_scaler(..., clip_grad=)` and `dispatch_clip_grad` (a star import)
    "timm_train.py": set(),
    "timm_train_broken.py": {"legacy_launch", "no_grad_clip"},
    # MAE main_pretrain.py: a loss-scaler loop; `--local_rank` declared, the rank read from LOCAL_RANK
    "mae_pretrain.py": set(),
    "mae_pretrain_broken.py": {"unused_local_rank_arg", "no_grad_clip"},
    # DINO main_dino.py: the file's own `clip_gradients` helper; `--local_rank` "please ignore"
    "dino_train.py": set(),
    "dino_train_broken.py": {"unused_local_rank_arg", "missing_set_epoch"},
    # diffusers train_text_to_image.py: accelerate; `--local_rank` overwritten by LOCAL_RANK in parse_args
    "diffusers_text_to_image.py": set(),
    "diffusers_text_to_image_broken.py": {"unused_local_rank_arg", "no_grad_clip"},
    # pytorch/examples minGPT-ddp: `from trainer import Trainer` is the project's own class
    "mingpt_ddp_main.py": {"no_seed", "unsynced_seed"},
    "mingpt_ddp_main_seeded.py": set(),
    # pytorch/examples imagenet/main.py: bare .cuda() + DDP without device_ids in the branch without --gpu; the seed
    # is set in main() only, which mp.spawn's children (--multiprocessing-distributed) never run
    "imagenet_main.py": {"model_not_on_device", "no_grad_clip", "no_seed", "unsafe_torch_load"},
    "imagenet_main_fixed.py": set(),
    # Lightning Fabric and accelerate's nlp_example.py: the fixes in their own idiom
    "fabric_train.py": set(),
    "fabric_train_broken.py": {"no_grad_clip", "no_seed", "no_warmup"},
    "accelerate_nlp_example.py": set(),
    "accelerate_nlp_example_broken.py": {"no_grad_clip", "no_warmup"},
    # issue 29: facts from data flow, not names -- each a case the doctor misread when it judged by names
    "ddp_textbook_clip.py": set(),  # clipping the wrapped model's parameters, or the optimizer's param groups
    "save_guard_through_variable.py": set(),  # `should_save = ... and is_master(args)`; `if args.should_save:`
    "optimizer_other_name.py": {"no_grad_clip", "no_seed", "no_warmup"},  # `adam = torch.optim.Adam(...)`
    "truncation_strategy.py": set(),  # truncation="only_first", truncation_strategy="only_first"
    "rank_aware_batch_sampler.py": set(),  # DistributedBucketSampler(num_replicas=..., rank=...)
    "rank_offset_seed_synced_shuffle.py": set(),  # seed 42 + rank, the shuffle re-seeded alike on every rank
    "required_local_rank.py": {"legacy_launch"},  # `--local_rank` required: it cannot start under torchrun
    "never_wrapped.py": {"model_not_wrapped"},
    "wrap_then_unwrap.py": {"model_not_wrapped"},
    # general facts the held-out corpus showed the doctor lacked (by category only; these are written here)
    "save_guard_env_rank.py": set(),  # `int(os.environ.get("RANK", 0)) == 0`, `is_zero = ...`, is_world_process_zero
    "model_from_init_helper.py": set(),  # `model, tokenizer = init_model(cfg, device=...)`: placed by the factory
    "hand_truncated_ids.py": set(),  # `a_ids = a_ids[: max_len]` after encode: truncated by hand
    "loader_params_unsharded.py": {"no_distributed_sampler"},  # DataLoader(ds, **params), params written out
    "device_list_pile_up.py": {"model_not_on_device"},  # `.to(devices[0])`, devices = ["cuda" if ... else "cpu"]
    "launch_documented_two_ways.py": set(),  # torch.distributed.launch documented beside torchrun
    "compile_fit_no_warmup.py": {"no_warmup", "no_grad_clip"},  # compile(optimizer=Adam) + fit; clipping unknown
    "tokenizer_lengths_only.py": set(),  # `len(tokenizer(turn).input_ids)`: counted, no example built from it
    "sampler_endless_passes.py": {"missing_set_epoch"},  # `while True: for batch in loader: yield`: passes = epochs
    "train_loop_class_unseeded.py": {"no_seed"},  # `TrainLoop(model=model, ...).run_loop()`: the project's own loop
    "library_fit_shuffled_unseeded.py": {"no_seed"},  # a library's fit handed a loader shuffled here, no seed
    "pandas_sample_torch_seed.py": {"unsynced_seed"},  # `df.sample(frac=1.0)` under DDP, only torch seeded
    "cuda_then_rank_device_ids.py": {"model_not_on_device"},  # bare `.cuda()` then device_ids of the rank's cards
    # round 3: general facts heldout3 showed the doctor lacked (each written here, none keyed to a script's names)
    "rank_picked_partition.py": set(),  # `Parts(ds, fractions).pick(dist.get_rank())` loaded: each rank its part
    "ids_concatenated_then_cut.py": set(),  # pieces encoded one by one, concatenated, the whole cut to max_len
    "engine_run_shuffled_unseeded.py": {"no_seed"},  # an engine made from the optimizer runs a loader shuffled here
    # the step in a project object's method (`mp.optimize(opt)`), the LR written here: no ramp; clipping unknown
    "helper_step_own_lr_schedule.py": {"no_seed", "no_warmup", "no_grad_clip"},
    # round 5: general facts heldout4 showed the doctor lacked (each written here, none keyed to a script's names)
    "model_made_by_project_builder.py": {"model_not_wrapped"},  # `build_network` from `mylab.distributed`: unknown
    "tokenizer_factory_defined_here.py": set(),  # `tokenizer = make_tokenizer(name)`: the file's own function
    "ema_copy_wrapped.py": set(),  # `teacher = copy.deepcopy(student)` of a model already on the rank's GPU
    "local_rank_arg_fills_env.py": set(),  # `os.environ.setdefault("LOCAL_RANK", str(args.local_rank))`
    "seed_through_determinism_helper.py": set(),  # `set_determinism(cfg.seed)`: a helper named for it, given the seed
    "seed_given_to_launch.py": set(),  # `hpcframe.launch_from_env(config={}, seed=args.seed)` seeds every process
    "sampler_imported_unused.py": set(),  # DistributedSampler imported, never built: nothing to set_epoch
    # `get_scheduler("constant", num_warmup_steps=...)`: the constant schedule never reads its warmup steps
    "constant_schedule_warmup_ignored.py": {"no_warmup"},
    "spawn_parent_seeded.py": {"no_seed"},  # the parent of mp.spawn seeds, the children that train do not
    "cuda_only_seed.py": {
        "no_seed"
    },  # `torch.cuda.manual_seed_all` only: the CPU-built weights and the shuffle are not
    "rank_picked_indices.py": set(),  # `mine = idx.chunk(world)[rank]`, then `Subset(data, mine)`: the rank's part
    "loader_use_ddp_no_set_epoch.py": {"missing_set_epoch"},  # `GraphDataLoader(..., use_ddp=True)`, no set_epoch
    # `with training_args.main_process_first():` is written for several processes; `model.save_pretrained` unguarded
    "main_process_first_unguarded_save.py": {"checkpoint_all_ranks"},
    "weights_copied_every_rank.py": {"checkpoint_all_ranks"},  # `shutil.copyfile("last.pt", "best.pt")` unguarded
    "optimizer_made_elsewhere.py": {"no_warmup"},  # unknown: `model.setup_optimizers()` decides the optimizer's kind
    "timing_warmup_not_lr.py": {"no_warmup"},  # a stopwatch's "warmup" (`if step > warmup: time`): no LR warmup
    "wrapper_moved_after_wrap.py": {"model_not_on_device"},  # `net = DDP(net, device_ids=[rank]).to(device)`
    "click_local_rank_option.py": {"legacy_launch"},  # `@click.option("--local_rank")`, `fit(**kwargs)`
    "lightning_module_here_unclipped.py": {"no_grad_clip", "no_warmup"},  # the module's, the Trainer's settings here
    "optimizer_wrapper_step_method.py": {"no_seed"},  # `noam = NoamOpt(Adam(...))`; `noam.step_and_schedule()`
    # round 7 (heldout6 fed back)
    "local_rank_alias_dest.py": {"legacy_launch"},  # `add_argument("--rank", "--local_rank")` is `args.rank`
    "dict_of_models_moved.py": set(),  # `{"generator": G().to(device)}`, then `DDP(models["generator"], ...)`
    "radam_constant_rate.py": set(),  # RAdam's rectification is its warmup
    "cycled_sharded_loader.py": {"missing_set_epoch"},  # `itertools.cycle(loader)` replays the first epoch
    "allreduce_helper_handed_grads.py": set(),  # `all_reduce_and_rescale_tensors(grads, 1.0)` before each step
    "joined_by_helper_not_wrapped.py": {"model_not_wrapped"},  # `set_dist(args)` joins; only DataParallel
    "lightning_trainer_from_argparse.py": {"no_warmup"},  # the Trainer's flags hold no schedule
    "clip_in_one_branch.py": {"no_grad_clip"},  # the clip is in the a2c arm, the ppo arm steps unclipped
    "length_filter_instead_of_truncation.py": set(),  # `.filter(fits)` drops examples past the window
    # round 8 (heldout7 fed back)
    "seed_through_library_module.py": set(),  # `util.seed(args.seed)`: a library's module function named for it
    "seed_per_run_loop.py": set(),  # `for seed in seeds: set_random_seed(seed); model = ...; train(model)`
    "namespace_handed_to_config.py": set(),  # `config = get_config(args)` reads `--local_rank` elsewhere
    # round 9 (heldout8 fed back)
    "seed_cpu_arm_only.py": {"no_seed"},  # torch.manual_seed only in the `else` of `if torch.cuda.is_available()`
    "own_trainer_private_epoch.py": {"no_seed"},  # the project's Trainer run through `trainer._train_epoch()`
    # round 10 (heldout9 read): `optimizer = get_optimizer(cfg, model)` handed to the project's `train(...)` per epoch
    "optimizer_from_project_helper.py": {"no_seed", "no_grad_clip"},  # no_grad_clip: unknown (the helper's)
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
        "    def train(self, n):\n", "    def train(self, n):\n        self.loader.sampler.set_epoch(0)\n"
    )
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
        "checkpoint_all_ranks"
    ]


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
        assert set(item) == {"path", "line", "code", "message", "fix", "severity"}
        assert item["severity"] == "warning"
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


@pytest.mark.parametrize(
    "build",
    [
        "def build():\n    net = Net()\n    net.cuda(local_rank)\n    return net\nmodel = build()\n",
        "model = Net(device=f'cuda:{local_rank}')\n",
        "model = Net().to(local_rank)\n",
    ],
)
def test_model_placed_on_device_other_ways_is_not_a_finding(build):
    src = (
        "import os, torch, torch.distributed as dist\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "local_rank = int(os.environ['LOCAL_RANK'])\ndist.init_process_group('nccl')\n"
        + build
        + "model = DDP(model, device_ids=[local_rank])\n"
    )
    assert [f.code for f in check_source(src)] == []


def test_private_generator_seeds_are_not_the_torch_seed():
    src = (
        "import torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\nrank = dist.get_rank()\ntorch.manual_seed(0)\n"
        "g = torch.Generator().manual_seed(1000 + rank)\norder = torch.randperm(100, generator=g)\n"
    )
    assert [f.code for f in check_source(src)] == []
    assert [f.code for f in check_source(src.replace("torch.manual_seed(0)", "torch.manual_seed(rank)"))] == [
        "unsynced_seed"
    ]


# ---- issue 19: the doctor on real scripts it had never seen -------------------------------------
def _codes(src: str) -> list[str]:
    return sorted(f.code for f in check_source(src))


def _finding(name: str, code: str):
    return next(f for f in check_file(str(_path(name))) if f.code == code)


LOOP = """import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
{helpers}
for x, y in loader:
    loss = ((model(x) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    {clip}
    optimizer.step()
"""


@pytest.mark.parametrize(
    "helpers, clip",
    [
        ("def tidy_grads(m):\n    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)", "tidy_grads(model)"),
        ("from timm.utils import dispatch_clip_grad", "dispatch_clip_grad(model.parameters(), value=1.0, mode='agc')"),
        ("", "fabric.clip_gradients(model, optimizer, max_norm=1.0)"),
        ("", "model.clip_grad_norm_(1.0)"),
        ("def bound(m):\n    for p in m.parameters():\n        p.grad.data.clamp_(-1, 1)", "bound(model)"),
    ],
)
def test_clipping_is_recognised_through_helpers_and_library_idioms(helpers, clip):
    assert _codes(LOOP.format(helpers=helpers, clip=clip)) == []
    assert _codes(LOOP.format(helpers=helpers, clip="pass")) == ["no_grad_clip"]


def test_a_loss_scaler_clips_only_when_told_to():
    src = (
        "import torch\ntorch.manual_seed(0)\nfrom timm.utils import NativeScaler\nloss_scaler = NativeScaler()\n"
        "for x, y in loader:\n    loss = model(x).mean()\n    optimizer.zero_grad()\n"
        "    loss_scaler(loss, optimizer, clip_grad={}, parameters=model.parameters())\n"
    )
    assert _codes(src.format("args.clip_grad")) == []
    unclipped = check_source(src.format("None"))
    assert [f.code for f in unclipped] == ["no_grad_clip"]
    assert "clip_grad=" in unclipped[0].fix and "loss scaler" in unclipped[0].fix


def test_a_library_owns_a_concern_only_when_the_name_comes_from_it():
    own = """import torch.distributed as dist
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM
from trainer import Trainer
dist.init_process_group("nccl")
model = AutoModelForCausalLM.from_pretrained("gpt2")
train_loader = DataLoader(train_set, batch_size=8, shuffle=True)
trainer = Trainer(model, train_loader)
trainer.train()
"""
    # the project's own Trainer: nobody shards or seeds for it
    assert _codes(own) == ["no_distributed_sampler", "no_seed"]
    seed_msg = next(f.message for f in check_source(own) if f.code == "no_seed")
    assert "`Trainer` comes from `trainer`" in seed_msg
    # Hugging Face's Trainer shards through its own sampler and seeds (TrainingArguments' seed=42)
    assert _codes(own.replace("from trainer import Trainer", "from transformers import Trainer")) == []
    assert (
        _codes(
            own.replace("from trainer import Trainer\n", "")
            .replace("trainer = Trainer(", "trainer = transformers.Trainer(")
            .replace("from transformers", "import transformers\nfrom transformers")
        )
        == []
    )


LOCAL_RANK_BASE = """import argparse, os, torch, torch.distributed as dist
parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=0)
args = parser.parse_args()
dist.init_process_group("nccl")
"""


@pytest.mark.parametrize(
    "body, expected",
    [
        # the command-line value reaches the device: the legacy contract
        ("torch.cuda.set_device(args.local_rank)\n", "legacy_launch"),
        ("local_rank = args.local_rank\ndevice = f'cuda:{local_rank}'\n", "legacy_launch"),
        (
            "def setup(rank_on_node):\n    torch.cuda.set_device(rank_on_node)\nsetup(args.local_rank)\n",
            "legacy_launch",
        ),
        (
            "def main():\n    torch.cuda.set_device(args.local_rank)\n    args.local_rank = int(os.environ['LOCAL_RANK'])\n",
            "legacy_launch",
        ),  # used before it is overwritten
        # declared but the rank comes from elsewhere: a lower-severity note
        (
            "args.local_rank = int(os.environ['LOCAL_RANK'])\ntorch.cuda.set_device(args.local_rank)\n",
            "unused_local_rank_arg",
        ),
        ("local_rank = int(os.environ['LOCAL_RANK'])\ntorch.cuda.set_device(local_rank)\n", "unused_local_rank_arg"),
        ("if args.local_rank == 0:\n    print('hello')\n", "unused_local_rank_arg"),
        # a same-named variable in another function is another variable
        (
            "def a():\n    local_rank = args.local_rank\n    print(local_rank)\n"
            "def b():\n    local_rank = int(os.environ['LOCAL_RANK'])\n    torch.cuda.set_device(local_rank)\n",
            "unused_local_rank_arg",
        ),
    ],
)
def test_legacy_launch_only_where_the_argument_reaches_the_device(body, expected):
    assert _codes(LOCAL_RANK_BASE + body) == [expected]


def test_a_required_local_rank_argument_is_legacy_launch_whatever_its_value_does():
    finding = _finding("required_local_rank.py", "legacy_launch")
    assert "`required=True`" in finding.message and "argparse exits" in finding.message
    assert "drop `required=True`" in finding.fix and "torchrun --nproc_per_node=N" in finding.fix
    used = LOCAL_RANK_BASE.replace("default=0", "required=True") + "torch.cuda.set_device(args.local_rank)\n"
    assert _codes(used) == ["legacy_launch"]
    assert "`required=True`" in check_source(used)[0].message  # not "every rank would keep the default"


def test_a_local_rank_argument_defaulting_to_the_environment_is_fine():
    src = LOCAL_RANK_BASE.replace("default=0", "default=int(os.environ.get('LOCAL_RANK', 0))")
    assert _codes(src + "torch.cuda.set_device(args.local_rank)\n") == []


def test_unused_local_rank_arg_is_a_note_with_its_own_message(tmp_path, capsys):
    overwritten = _finding("diffusers_text_to_image_broken.py", "unused_local_rank_arg")
    assert overwritten.severity == "note"
    assert "replaces it with LOCAL_RANK from the environment" in overwritten.message
    assert "comes from" not in overwritten.message and "torchrun passes none" in overwritten.fix
    unread = _finding("mae_pretrain_broken.py", "unused_local_rank_arg")
    assert "never uses its value" in unread.message
    assert _finding("story_broken.py", "legacy_launch").severity == "warning"
    only_note = tmp_path / "train.py"
    only_note.write_text(LOCAL_RANK_BASE + "torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n", encoding="utf-8")
    assert main(["doctor", "script", str(only_note)]) == 0  # a note alone does not fail a CI gate
    out = capsys.readouterr().out
    assert ": unused_local_rank_arg: note: `--local_rank` is declared" in out
    assert main(["doctor", "script", str(_path("mae_pretrain_broken.py"))]) == 1  # its no_grad_clip does


def test_legacy_launch_documented_in_a_script_that_reads_local_rank_asks_only_for_torchrun():
    src = (
        '"""python -m torch.distributed.launch --nproc_per_node=8 train.py"""\n'
        "import os, torch, torch.distributed as dist\n"
        "dist.init_process_group('nccl')\ntorch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n"
    )
    [finding] = check_source(src)
    assert finding.code == "legacy_launch"
    assert "already reads" in finding.fix and "instead of a `--local_rank` argument" not in finding.fix


@pytest.mark.parametrize(
    "name, code, says, never",
    [
        ("story_broken.py", "no_grad_clip", "torch.nn.utils.clip_grad_norm_", "accelerator"),
        ("single_process_adam_broken.py", "no_warmup", "SequentialLR", "get_cosine_with_hard_restarts"),
        ("fabric_train_broken.py", "no_grad_clip", "fabric.clip_gradients(model, optimizer", "torch.nn.utils"),
        ("fabric_train_broken.py", "no_seed", "fabric.seed_everything", "torch.manual_seed"),
        ("fabric_train_broken.py", "no_warmup", "LinearLR", "transformers"),
        ("accelerate_nlp_example_broken.py", "no_grad_clip", "accelerator.clip_grad_norm_", "torch.nn.utils"),
        ("accelerate_nlp_example_broken.py", "no_warmup", "accelerator.prepare", "hard_restarts"),
        ("diffusers_text_to_image_broken.py", "no_grad_clip", "accelerator.clip_grad_norm_", "fabric"),
        ("hf_trainer_local_rank_arg.py", "legacy_launch", "TrainingArguments reads LOCAL_RANK", "int(os.environ"),
        ("mae_pretrain_broken.py", "no_grad_clip", "clip_grad=1.0", "between `loss.backward()`"),
    ],
)
def test_fixes_are_phrased_for_the_scripts_framework(name, code, says, never):
    fix = _finding(name, code).fix
    assert says in fix and never not in fix


def test_set_device_in_the_other_branch_does_not_place_this_branch():
    src = """import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("nccl")
model = Net()
{set_device_here}if gpu is not None:
    torch.cuda.set_device(gpu)
    model.cuda(gpu)
    model = DDP(model, device_ids=[gpu])
else:
    model.cuda()
    model = DDP(model)
"""
    found = check_source(src.format(set_device_here=""))
    assert [f.code for f in found] == ["model_not_on_device"]
    assert found[0].line == 11 and "only in the other branch" in found[0].message
    # a set_device every path runs through does place it
    assert _codes(src.format(set_device_here="torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n")) == []


@pytest.mark.parametrize(
    "device,wrap,card",
    [
        ('torch.device("cuda" if torch.cuda.is_available() else "cpu")', "DDP(model)", "cuda:0"),
        ('"cuda" if torch.cuda.is_available() else "cpu"', "DDP(model)", "cuda:0"),
        ('torch.device("cuda")', "DDP(model)", "cuda:0"),
        ('"cuda:1"', "DDP(model)", "cuda:1"),
        # a per-rank index or a set_device every path runs through places the rank (device_ids alone does not: DDP
        # never moves the module, see test_a_bare_cuda_move_is_not_on_the_cards_ddp_is_told_for_this_rank)
        ('torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")', "DDP(model)", None),
        ('f"cuda:{local_rank}"', "DDP(model)", None),
        ('torch.cuda.set_device(local_rank) or torch.device("cuda")', "DDP(model)", None),
    ],
)
def test_a_device_variable_without_a_per_rank_index_piles_every_rank_onto_one_card(device, wrap, card):
    """Notebook 04's pile-up in the single-GPU tutorial's idiom: `device = torch.device("cuda" if ... else "cpu")`,
    `model.to(device)`, `DDP(model)` -- not only a bare `.cuda()`. The finding names the device and the card."""
    src = f"""import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
local_rank = int(os.environ["LOCAL_RANK"])
device = {device}
model = build_model().to(device)
model = {wrap}
"""
    found = [f for f in check_source(src) if f.code == "model_not_on_device"]
    if card is None:
        assert found == [], found[0].message
        return
    assert len(found) == 1 and found[0].line == 7, found
    msg = found[0].message
    assert "`.to(device)` with `device = " in msg and "(line 5)" in msg and f"every rank lands on {card}" in msg
    assert "set_device(local_rank)" in found[0].fix and "device_ids=[local_rank]" in found[0].fix


def test_doctor_script_exits_1_on_the_pile_up(capsys):
    rc = main(["doctor", "script", str(FIXTURES / "device_if_available_ddp.py")])
    out = capsys.readouterr().out
    assert rc == 1 and "model_not_on_device" in out and "cuda:0" in out


def test_an_unseeded_random_split_differs_across_ranks_but_not_in_one_process():
    src = """import torch, torch.distributed as dist
from torch.utils.data import random_split
dist.init_process_group("nccl")
{seed}train_set, val_set = random_split(dataset, [900, 100]{generator})
"""
    assert _codes(src.format(seed="", generator="")) == ["unsynced_seed"]
    assert _codes(src.format(seed="torch.manual_seed(0)\n", generator="")) == []
    assert _codes(src.format(seed="", generator=", generator=torch.Generator().manual_seed(0)")) == []
    assert _codes(src.format(seed="", generator="").replace('dist.init_process_group("nccl")\n', "")) == []


# ---- issue 29: facts from data flow, not names; model_not_wrapped; --explain --------------------------------
DDP_LOOP = """import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
torch.manual_seed(0)
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=8, sampler=sampler)
model = Net().to(local_rank)
{wrap}
sgd = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for x, y in loader:
        loss = {forward}(x).sub(y).pow(2).mean()
        sgd.zero_grad()
        loss.backward()
        {sync}
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        sgd.step()
"""


@pytest.mark.parametrize(
    "wrap, forward, sync, expected",
    [
        ("model = DDP(model, device_ids=[local_rank])", "model", "pass", []),
        # nanoGPT: the bare model kept aside for saving, training goes through the wrapper
        ("model = DDP(model, device_ids=[local_rank])\nraw_model = model.module", "model", "pass", []),
        ("", "model", "pass", ["model_not_wrapped"]),
        # wrapped, then trained around the wrapper: never run, so nothing is all-reduced
        ("ddp_model = DDP(model, device_ids=[local_rank])", "model", "pass", ["model_not_wrapped"]),
        ("ddp_model = DDP(model, device_ids=[local_rank])", "ddp_model", "pass", []),
        ("model = DDP(model, device_ids=[local_rank])\nmodel = model.module", "model", "pass", ["model_not_wrapped"]),
        # gradients all-reduced by hand, or a helper named for it: one model
        ("", "model", "for p in model.parameters():\n            dist.all_reduce(p.grad)", []),
        ("from utils import average_gradients", "model", "average_gradients(model)", []),
        # a loss all-reduced for the log syncs nothing backward sees
        ("", "model", "dist.all_reduce(loss)", ["model_not_wrapped"]),
    ],
)
def test_model_not_wrapped_follows_the_wrapper_to_the_loop(wrap, forward, sync, expected):
    assert _codes(DDP_LOOP.format(wrap=wrap, forward=forward, sync=sync)) == expected


def test_a_model_handed_to_the_projects_own_helper_is_unknown_not_claimed(capsys, tmp_path):
    src = DDP_LOOP.format(
        wrap="from my_dist import setup_model\nmodel = setup_model(model, args)", forward="model", sync="pass"
    )
    [finding] = check_source(src)
    assert finding.code == "model_not_wrapped" and finding.severity == "unknown"
    assert "`setup_model`, which this file does not define" in finding.message
    script = tmp_path / "train.py"
    script.write_text(src, encoding="utf-8")
    assert main(["doctor", "script", str(script)]) == 0  # an unknown fails no CI gate
    assert ": model_not_wrapped: unknown: " in capsys.readouterr().out


def test_a_model_made_by_the_projects_own_builder_is_unknown_not_claimed():
    # the builder is another module's: it may return the model wrapped (DDP, FSDP), so nothing is claimed
    [finding] = [f for f in check_file(str(_path("model_made_by_project_builder.py"))) if f.code == "model_not_wrapped"]
    assert finding.severity == "unknown" and "`build_network`, which this file does not define" in finding.message
    # a builder from a module not named for the run's setup (the course's `labkit.model.build_model`) makes a bare model
    plain = _fixture("model_made_by_project_builder.py").replace("mylab.distributed import", "mylab.nets import")
    [finding] = [f for f in check_source(plain) if f.code == "model_not_wrapped"]
    assert finding.severity == "warning"


def test_a_deep_copy_is_on_its_sources_device_and_only_there():
    src = _fixture("ema_copy_wrapped.py")
    assert _codes(src) == []
    # the source left on the CPU: both the model and its copy are wrapped unmoved
    unmoved = src.replace("nn.Linear(64, 1)).to(local_rank)", "nn.Linear(64, 1))")
    assert [(f.code, f.line) for f in check_source(unmoved)] == [
        ("model_not_on_device", 26),
        ("model_not_on_device", 27),
    ]


@pytest.mark.parametrize(
    "fill, expected",
    [
        ('os.environ.setdefault("LOCAL_RANK", str(args.local_rank))', []),
        ('if "LOCAL_RANK" not in os.environ:\n        os.environ["LOCAL_RANK"] = str(args.local_rank)', []),
        # another variable filled: LOCAL_RANK still never gets the value
        ('os.environ["RUN_NAME"] = str(args.local_rank)', ["unused_local_rank_arg"]),
        ("pass", ["unused_local_rank_arg"]),
    ],
)
def test_a_local_rank_arg_that_fills_the_environment_is_used(fill, expected):
    src = _fixture("local_rank_arg_fills_env.py")
    assert _codes(src.replace('os.environ.setdefault("LOCAL_RANK", str(args.local_rank))', fill)) == expected


def test_moving_the_wrapper_is_after_the_wrap_moving_the_model_is_before():
    src = _fixture("wrapper_moved_after_wrap.py")
    assert [(f.code, f.line) for f in check_source(src)] == [("model_not_on_device", 22)]
    fixed = src.replace(
        "DistributedDataParallel(net, device_ids=[rank]).to(device)",
        "DistributedDataParallel(net.to(device), device_ids=[rank])",
    )
    assert _codes(fixed) == []


@pytest.mark.parametrize(
    "main, expected",
    [
        ("def main(**kwargs):\n    fit(**kwargs)", ["legacy_launch"]),
        # the option lands in the decorated function's own parameter
        (
            "def main(model_name, out_dir, epochs, local_rank):\n    fit(model_name, out_dir, epochs, local_rank)",
            ["legacy_launch"],
        ),
        # declared, never handed on: only there so the old launcher's argument parses
        (
            "def main(**kwargs):\n    fit(kwargs['model_name'], kwargs['out_dir'], kwargs['epochs'], -1)",
            ["unused_local_rank_arg"],
        ),
    ],
)
def test_a_local_rank_declared_through_click_is_followed(main, expected):
    src = _fixture("click_local_rank_option.py")
    assert _codes(src.replace("def main(**kwargs):\n    fit(**kwargs)", main)) == expected


CLIPPED = 'L.Trainer(accelerator="gpu", devices=2, strategy="ddp", max_epochs=5, gradient_clip_val=1.0)'
WARMED = """opt = torch.optim.AdamW(self.parameters(), lr=self.lr)
        ramp = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.01, total_iters=100)
        return [opt], [{"scheduler": ramp, "interval": "step"}]"""


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ("", "", ["no_grad_clip", "no_warmup"]),
        ('L.Trainer(accelerator="gpu", devices=2, strategy="ddp", max_epochs=5)', CLIPPED, ["no_warmup"]),
        ("return torch.optim.AdamW(self.parameters(), lr=self.lr)", WARMED, ["no_grad_clip"]),
        # the Trainer's settings come from the command line: clipping may be set there, but its flags hold no
        # learning-rate schedule -- configure_optimizers returns that, here a constant AdamW (round 7)
        (
            'L.Trainer(accelerator="gpu", devices=2, strategy="ddp", max_epochs=5)',
            "L.Trainer(**vars(args))",
            ["no_warmup"],
        ),
    ],
)
def test_lightning_with_its_module_here_is_judged_on_the_trainer_and_configure_optimizers(old, new, expected):
    src = _fixture("lightning_module_here_unclipped.py")
    assert _codes(src.replace(old, new) if old else src) == expected


def test_a_step_through_the_projects_optimizer_wrapper_is_a_loop_to_seed():
    src = _fixture("optimizer_wrapper_step_method.py")
    assert [(f.code, f.line) for f in check_source(src)] == [("no_seed", 19)]
    seeded = src.replace("def main():\n", "def main():\n    torch.manual_seed(0)\n")
    assert _codes(seeded) == []
    # a wrapper not built around an optimizer is no optimizer: its `step...` method is no training step
    assert (
        _codes(src.replace("NoamOpt(torch.optim.Adam(model.parameters(), betas=(0.9, 0.98), eps=1e-9),", "NoamOpt("))
        == []
    )


def test_model_not_wrapped_fix_shows_the_ddp_line_and_torchrun():
    fix = _finding("never_wrapped.py", "model_not_wrapped").fix
    assert "DistributedDataParallel(model, device_ids=[local_rank])" in fix and "torchrun --nproc_per_node=N" in fix
    unwrapped = _finding("wrap_then_unwrap.py", "model_not_wrapped")
    assert unwrapped.line == 23 and "model = model.module" in unwrapped.message


SAVE = """import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
def is_master(args):
    return args.rank == 0
def configure(args):
    args.rank = int(os.environ["RANK"])
    {decide}
    args.should_save = should_save
    return args
args = configure(parser.parse_args())
if args.should_save:
    torch.save(model.state_dict(), "m.pt")
"""


def test_a_guard_is_followed_through_variables_attributes_and_the_files_functions():
    assert _codes(SAVE.format(decide="should_save = args.save_steps > 0 and is_master(args)")) == []
    assert _codes(SAVE.format(decide="should_save = args.local_rank in (-1, 0)")) == []
    broken = SAVE.format(decide="should_save = args.save_steps > 0")
    [finding] = check_source(broken)
    assert finding.code == "checkpoint_all_ranks"
    assert any("`args.should_save` is not a rank test" in what for _, what in finding.why)


def test_an_unguarded_save_in_a_function_nothing_calls_is_dead_code():
    src = SAVE.format(decide="should_save = is_master(args)") + (
        "@torch.no_grad()\ndef validate():\n    torch.save(model.state_dict(), 'best.pt')\n"
    )
    assert _codes(src) == []
    assert _codes(src + "validate()\n") == ["checkpoint_all_ranks"]


OPT = """import torch
torch.manual_seed(0)
{make}
for x, y in loader:
    loss = model(x).sub(y).pow(2).mean()
    loss.backward()
    {step}
"""


@pytest.mark.parametrize(
    "make, step",
    [
        ("adam = torch.optim.Adam(model.parameters(), lr=1e-3)", "adam.step()"),
        ("from torch import optim\nsolver = optim.SGD(model.parameters(), lr=0.1)", "solver.step()"),
        (
            "class Loop:\n    def __init__(self, m, o):\n        self.m, self.o = m, o\n"
            "    def once(self):\n        self.o.step()\n"
            "loop = Loop(model, torch.optim.SGD(model.parameters(), lr=0.1))",
            "loop.once()",
        ),
        ("def build():\n    return torch.optim.SGD(model.parameters(), lr=0.1)\nupdater = build()", "updater.step()"),
    ],
)
def test_the_optimizer_is_whatever_an_optimizer_constructor_returned(make, step):
    assert "no_grad_clip" in _codes(OPT.format(make=make, step=step))


def test_a_deepspeed_engine_clips_and_warms_up_from_its_config_unknown_here():
    src = OPT.format(
        make="import deepspeed\nengine, optimizer, _, _ = deepspeed.initialize(model=model, config='ds.json')",
        step="engine.step()",
    ).replace("loss.backward()", "engine.backward(loss)")
    found = {f.code: f.severity for f in check_source(src)}
    assert found == {"no_grad_clip": "unknown"}
    assert _codes(src.replace("torch.manual_seed(0)\n", "")) == ["no_grad_clip", "no_seed"]


def test_a_seed_inside_the_loop_or_after_it_does_not_seed_the_run():
    src = OPT.format(make="optimizer = torch.optim.SGD(model.parameters(), lr=0.1)", step="optimizer.step()")
    in_loop = src.replace("torch.manual_seed(0)\n", "").replace(
        "    loss = ", "    torch.manual_seed(step)\n    loss = "
    )
    after = src.replace("torch.manual_seed(0)\n", "") + "torch.manual_seed(0)\nsample(model)\n"
    for variant in (in_loop, after):
        [finding] = [f for f in check_source(variant) if f.code == "no_seed"]
        assert "before training" in finding.message
    assert "no_seed" not in _codes(src)


@pytest.mark.parametrize(
    "call, flagged",
    [
        ('tokenizer(q, c, truncation="only_first", max_length=384, padding="max_length")', False),
        ('tokenizer(q, c, truncation=TruncationStrategy.LONGEST_FIRST, padding="max_length")', False),
        ('tokenizer.encode_plus(q, c, truncation_strategy="only_second", padding="max_length")', False),
        ('tokenizer(q, c, truncation=False, padding="max_length")', True),
        ('tokenizer(q, c, truncation=TruncationStrategy.DO_NOT_TRUNCATE, padding="max_length")', True),
        ('tokenizer.encode_plus(q, c, truncation_strategy="do_not_truncate", padding="max_length")', True),
    ],
)
def test_truncation_strategies_truncate(call, flagged):
    assert (_codes(f"from transformers import AutoTokenizer\nenc = {call}\n") == ["no_truncation"]) is flagged


def test_a_rank_aware_sampler_shards_whatever_its_name():
    src = """import torch.distributed as dist
from torch.utils.data import DataLoader
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
train_loader = DataLoader(train_set, batch_sampler={sampler})
"""
    assert _codes(src.format(sampler="BucketSampler(train_set, 8, num_replicas=world, rank=rank)")) == []
    assert _codes(src.format(sampler="BucketSampler(train_set, 8, rank, world)")) == []
    assert _codes(src.format(sampler="None").replace(", batch_sampler=None", "")) == ["no_distributed_sampler"]


SEEDED = """import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(42 + rank)
for epoch in range(3):
    {reseed}order = torch.randperm(1000)
"""


def test_a_shuffle_reseeded_alike_on_every_rank_is_synchronised():
    assert _codes(SEEDED.format(reseed="torch.manual_seed(42 + epoch); ")) == []
    assert _codes(SEEDED.format(reseed="torch.manual_seed(42 + epoch + rank); ")) == ["unsynced_seed"]
    assert _codes(SEEDED.format(reseed="")) == ["unsynced_seed"]


def test_an_unseeded_datasets_shuffle_before_the_trainer_seeds_differs_per_rank():
    """alpaca-lora's shape: torchrun is visible only through WORLD_SIZE; `.shuffle()` runs before the Trainer
    (which seeds) exists, so every rank shards a different order; the unguarded save_pretrained runs on all."""
    src = """import os, transformers
world_size = int(os.environ.get("WORLD_SIZE", 1))
train_data = data["train"].shuffle({seed}).map(tokenize)
trainer = transformers.Trainer(model=model, train_dataset=train_data, args=transformers.TrainingArguments("out"))
trainer.train()
model.save_pretrained("out")
"""
    assert _codes(src.format(seed="")) == ["checkpoint_all_ranks", "unsynced_seed"]
    assert _codes(src.format(seed="seed=42")) == ["checkpoint_all_ranks"]


def test_explain_prints_the_chain_of_evidence_with_line_numbers(capsys):
    assert main(["doctor", "script", "--explain", str(FIXTURES / "optimizer_other_name.py")]) == 1
    out = capsys.readouterr().out
    assert "    line 6: `torch.optim.Adam(...)` makes an optimizer, held by `adam`" in out
    assert "    line 12: `loss.backward()`: the backward pass" in out
    assert "    line 13: `adam.step()` steps the optimizer, in the loop at line 10" in out
    assert "    file: the rule: One bad batch can blow the weights up" in out
    assert main(["doctor", "script", str(FIXTURES / "optimizer_other_name.py")]) == 1
    assert "held by" not in capsys.readouterr().out  # evidence only when asked for
    assert main(["doctor", "script", "--format", "json", "--explain", str(FIXTURES / "wrap_then_unwrap.py")]) == 1
    [item] = json.loads(capsys.readouterr().out)
    assert {"line": 23, "evidence": "`model = model.module` takes the bare model back out"} in item["why"]


def test_the_readmes_explain_example_is_the_real_output(tmp_path, capsys, monkeypatch):
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    shown = readme.split("$ labkit doctor script --explain train.py\n", 1)[1].split("```", 1)[0]
    (tmp_path / "train.py").write_text((FIXTURES / "never_wrapped.py").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    main(["doctor", "script", "--explain", "train.py"])
    assert capsys.readouterr().out == shown


GUARDED = """import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
{pre}
if {test}:
    torch.save(model.state_dict(), "m.pt")
"""


@pytest.mark.parametrize(
    "pre, test",
    [
        ("", 'int(os.environ.get("RANK", 0)) == 0'),
        ("", 'os.environ["LOCAL_RANK"] == "0"'),
        ("", 'int(os.getenv("SLURM_PROCID", "0")) == 0'),
        ("is_zero = dist.get_rank() == 0", "is_zero"),
        ("lead = int(os.environ.get('RANK', 0)) == 0", "lead"),
        ("", "accelerator.is_local_main_process"),
        ("", "trainer.is_world_process_zero()"),
        ("", "self.global_rank == 0"),
    ],
)
def test_a_rank_test_is_recognised_in_the_forms_real_scripts_write(pre, test):
    assert _codes(GUARDED.format(pre=pre, test=test)) == []


def test_a_test_that_reads_no_rank_is_no_guard():
    [finding] = check_source(GUARDED.format(pre="", test='os.environ.get("SAVE", "1") == "1"'))
    assert finding.code == "checkpoint_all_ranks"


PLACED = """import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from myproject.modeling import build_model
dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
model = {make}
model = DDP(model, device_ids=[local_rank])
"""


def test_a_model_from_the_projects_own_factory_is_unknown_placement_not_a_warning():
    """detectron2's `build_model(cfg)` places the model on cfg.MODEL.DEVICE in another file: the doctor says it
    cannot see it; a model the file makes itself and never moves is still the warning."""
    [note] = check_source(PLACED.format(make="build_model(cfg)"))
    assert (note.code, note.severity) == ("model_not_on_device", "unknown") and "build_model" in note.message
    [warning] = check_source(PLACED.format(make="torch.nn.Linear(4, 2)"))
    assert (warning.code, warning.severity) == ("model_not_on_device", "warning")


@pytest.mark.parametrize(
    "cut, flagged",
    [
        ("ids = ids[:510]", False),
        ("ids = ids[-510:]", False),
        ("ids = ids[1:]", True),  # dropping a token bounds nothing
        ("pass", True),
    ],
)
def test_ids_cut_to_length_after_encoding_are_truncated_by_hand(cut, flagged):
    src = (
        "from transformers import AutoTokenizer\n"
        "def preprocess(example):\n"
        "    ids = tokenizer.encode(example['text'])\n"
        f"    {cut}\n"
        "    return ids\n"
        "ds = ds.map(preprocess)\n"
    )
    assert (_codes(src) == ["no_truncation"]) is flagged


@pytest.mark.parametrize(
    "params, flagged",
    [
        ('{"batch_size": 8, "shuffle": True}', True),
        ("dict(batch_size=8, shuffle=True)", True),
        ('{"batch_size": 8, "sampler": DistributedSampler(train_set)}', False),
        ("cfg.loader_kwargs", False),  # not written out here: anything could be in it
    ],
)
def test_loader_settings_in_a_dict_written_out_in_the_file_are_read(params, flagged):
    src = (
        "import torch.distributed as dist\nfrom torch.utils.data import DataLoader\n"
        f'dist.init_process_group("nccl")\nloader_params = {params}\n'
        "train_loader = DataLoader(train_set, **loader_params)\n"
    )
    assert (_codes(src) == ["no_distributed_sampler"]) is flagged


def test_the_old_launcher_documented_alone_is_legacy_launch():
    src = (FIXTURES / "launch_documented_two_ways.py").read_text(encoding="utf-8")
    alone = src.replace("# launch: torchrun --nproc_per_node=8 train.py\n", "").replace("beside torchrun", "")
    assert "torchrun" not in alone
    assert [f.code for f in check_source(alone)] == ["legacy_launch"]


def test_compile_and_fit_train_with_the_schedule_compile_was_given():
    src = (FIXTURES / "compile_fit_no_warmup.py").read_text(encoding="utf-8")
    found = {f.code: f.severity for f in check_source(src)}
    assert found == {"no_warmup": "warning", "no_grad_clip": "unknown"}
    warmed = src.replace("lr=2e-5))", "lr=2e-5), scheduler=get_linear_schedule_with_warmup(optimizer, 100, 1000))")
    assert {f.code: f.severity for f in check_source(warmed)} == {"no_grad_clip": "unknown"}
    assert _codes("import torch\nmodel = torch.compile(model)\nmodel.fit(x)\n") == []  # no optimizer handed over


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_a_tokenizer_call_only_measured_builds_nothing_but_one_that_builds_an_example_is_read():
    src = _fixture("tokenizer_lengths_only.py")
    kept = src.replace("turn_len = len(tokenizer(turn).input_ids)", "turn_ids = tokenizer(turn).input_ids")
    assert _codes(src) == [] and _codes(kept) == ["no_truncation"]


def test_a_loader_run_pass_after_pass_by_an_endless_loop_needs_set_epoch():
    src = _fixture("sampler_endless_passes.py")
    [hit] = check_source(src)
    assert hit.code == "missing_set_epoch" and any("pass after pass" in text for _, text in hit.why)
    counted = src.replace("for batch in loader:", "for batch in range(10):")
    assert _codes(counted) == []  # a count, not a pass over the sampler
    told = src.replace(
        "    while True:\n",
        "    epoch = 0\n    while True:\n        loader.sampler.set_epoch(epoch)\n        epoch += 1\n",
    )
    assert "set_epoch" in told
    assert _codes(told) == []


def test_a_project_class_handed_the_model_runs_the_training_whatever_it_is_called():
    src = _fixture("train_loop_class_unseeded.py")
    assert _codes(src) == ["no_seed"]
    assert _codes(src.replace("    model = create_model", "    torch.manual_seed(0)\n    model = create_model")) == []
    assert _codes(src.replace("TrainLoop(model=model, data=data", "TrainLoop(data=data")) == []  # no model handed over


def test_a_library_fit_on_a_loader_shuffled_here_needs_a_seed_here():
    src = _fixture("library_fit_shuffled_unseeded.py")
    assert _codes(src) == ["no_seed"]
    seeded = src.replace(
        "model = SentenceTransformer", "import torch\ntorch.manual_seed(0)\nmodel = SentenceTransformer"
    )
    assert _codes(seeded) == []
    assert _codes(src.replace("shuffle=True", "shuffle=False")) == []


@pytest.mark.parametrize(
    "change, flagged",
    [
        (("", ""), True),
        (("df.sample(frac=1.0)", "df.sample(frac=1.0, random_state=0)"), False),
        (("torch.manual_seed(1337)", "torch.manual_seed(1337)\nimport numpy as np\nnp.random.seed(1337)"), False),
    ],
)
def test_a_pandas_shuffle_on_every_rank_needs_numpys_seed_not_torchs(change, flagged):
    src = _fixture("pandas_sample_torch_seed.py").replace(*change)
    assert (_codes(src) == ["unsynced_seed"]) is flagged


def test_a_bare_cuda_move_is_not_on_the_cards_ddp_is_told_for_this_rank():
    src = _fixture("cuda_then_rank_device_ids.py")
    assert _codes(src) == ["model_not_on_device"]
    assert _codes(src.replace("    model.cuda()\n", "    torch.cuda.set_device(devices[0])\n    model.cuda()\n")) == []
    assert _codes(src.replace("model.cuda()", "model.cuda(devices[0])")) == []
    # the same with the tutorial's device variable: `"cuda"` is the current card, not `device_ids=[local_rank]`
    to_device = src.replace(
        "    model.cuda()\n", '    model.to(torch.device("cuda" if torch.cuda.is_available() else "cpu"))\n'
    )
    [hit] = check_source(to_device)
    assert hit.code == "model_not_on_device" and "names this rank's card" in hit.message


def test_a_loader_of_the_part_the_rank_picks_is_sharded_by_hand():
    src = _fixture("rank_picked_partition.py")
    assert _codes(src) == []
    assert _codes(src.replace(".pick(dist.get_rank())", ".pick(0)")) == ["no_distributed_sampler"]  # one part for all
    # the rank only kept by a constructor's keyword (a cache barrier) picks nothing
    kept = src.replace("Parts(dataset, [1.0 / world] * world).pick(dist.get_rank())", "Subset(dataset, range(512))")
    kept = kept.replace("mine = Subset", "mine = Keep(local_rank=dist.get_rank()) or Subset")
    assert _codes(kept) == ["no_distributed_sampler"]


def test_ids_concatenated_from_pieces_are_truncated_where_the_whole_is_cut():
    src = _fixture("ids_concatenated_then_cut.py")
    assert _codes(src) == []
    uncut = src.replace("        input_ids = input_ids[: self.max_len]\n", "")
    assert _codes(uncut) == ["no_truncation"] * 3  # the two markers and the content all flow into an uncut list
    only_labels = uncut.replace("labels += [-100] * len(self.bot_ids) + piece", "labels += [-100] * len(piece)")
    assert _codes(only_labels) == ["no_truncation"] * 3  # cutting another list bounds nothing


def test_an_engine_made_from_the_optimizer_runs_a_loader_shuffled_here_and_needs_a_seed_here():
    src = _fixture("engine_run_shuffled_unseeded.py")
    [hit] = check_source(src)
    assert hit.code == "no_seed" and "trainer.run(train_loader" in " ".join(t for _, t in hit.why)
    assert (
        _codes(src.replace("    train_loader, val_loader", "    torch.manual_seed(0)\n    train_loader, val_loader"))
        == []
    )
    assert _codes(src.replace("batch_size, shuffle=True)", "batch_size, shuffle=False)")) == []
    # an evaluator's run on the shuffled loader trains nothing
    assert _codes(src.replace("trainer.run(train_loader, max_epochs=epochs)", "evaluator.run(train_loader)")) == []


def test_a_step_in_a_project_objects_method_is_the_loop_and_a_learning_rate_set_here_is_this_files_warmup():
    src = _fixture("helper_step_own_lr_schedule.py")
    found = {f.code: f.severity for f in check_source(src)}
    assert found == {"no_seed": "warning", "no_warmup": "warning", "no_grad_clip": "unknown"}
    no_lr = src.replace("        set_lr(opt, base_lr, step / steps)\n", "")
    assert {f.code: f.severity for f in check_source(no_lr)}["no_warmup"] == "unknown"  # the helper's business
    warmed = src.replace("base_lr * (1 - frac_done)", "base_lr * min(1.0, frac_done * 50) * (1 - frac_done)")
    warmed = warmed.replace("def set_lr(", "def set_lr_with_warmup(").replace("set_lr(opt", "set_lr_with_warmup(opt")
    assert "no_warmup" not in _codes(warmed)
    seeded = src.replace("    model = build_classifier()", "    torch.manual_seed(0)\n    model = build_classifier()")
    assert "no_seed" not in _codes(seeded)


def test_a_helper_named_for_determinism_and_handed_the_seed_seeds():
    src = _fixture("seed_through_determinism_helper.py")
    assert _codes(src) == []
    assert _codes(src.replace("set_determinism(cfg.seed)", "set_determinism(seed=1234)")) == []
    # handed no seed, it only pins algorithms; torch's own determinism switch seeds nothing
    assert _codes(src.replace("set_determinism(cfg.seed)", "set_determinism()")) == ["no_seed"]
    assert _codes(src.replace("set_determinism(cfg.seed)", "torch.use_deterministic_algorithms(True)")) == ["no_seed"]
    assert _codes(src.replace("    set_determinism(cfg.seed)\n", "")) == ["no_seed"]


def test_a_framework_launch_handed_a_seed_seeds_every_process():
    src = _fixture("seed_given_to_launch.py")
    assert _codes(src) == []
    assert _codes(src.replace("config={}, seed=args.seed)", "config={})")) == ["no_seed"]
    assert _codes(src.replace("seed=args.seed)", "seed=None)")) == ["no_seed"]
    # this file's own setup function, given a seed it never uses, is read, not trusted by its name
    own = src.replace("hpcframe.launch_from_env(", "setup_run(").replace(
        "def main():", "def setup_run(config, seed):\n    hpcframe.launch_from_env(config=config)\n\n\ndef main():"
    )
    assert _codes(own) == ["no_seed"]


def test_a_distributed_sampler_that_is_only_imported_shards_nothing():
    src = _fixture("sampler_imported_unused.py")
    assert _codes(src) == []
    built = src.replace("sampler=RandomSampler(train)", "sampler=DistributedSampler(train, num_replicas=1, rank=0)")
    assert _codes(built) == ["missing_set_epoch"]
    assert (
        _codes(
            built.replace(
                "    for epoch in range(epochs):\n",
                "    for epoch in range(epochs):\n        loader.sampler.set_epoch(epoch)\n",
            )
        )
        == []
    )


def test_a_constant_schedule_ignores_the_warmup_steps_it_is_handed():
    src = _fixture("constant_schedule_warmup_ignored.py")
    assert _codes(src) == ["no_warmup"]
    for warmed in ("constant_with_warmup", "linear", "cosine"):
        assert _codes(src.replace('get_scheduler("constant"', f'get_scheduler("{warmed}"')) == []
    assert _codes(
        src.replace('get_scheduler("constant", optimizer=opt', 'get_scheduler(name="constant", optimizer=opt')
    ) == ["no_warmup"]


def test_a_gpu_only_seed_leaves_the_cpu_generator_unseeded():
    src = _fixture("cuda_only_seed.py")
    [hit] = check_source(src)
    assert hit.code == "no_seed" and "seeds only the GPU generators" in " ".join(t for _, t in hit.why)
    assert _codes(src.replace("torch.cuda.manual_seed_all(seed)", "torch.manual_seed(seed)")) == []
    # beside a CPU seed it changes nothing
    both = src.replace(
        "    torch.cuda.manual_seed_all(seed)\n", "    torch.manual_seed(seed)\n    torch.cuda.manual_seed_all(seed)\n"
    )
    assert _codes(both) == []


def test_the_children_of_mp_spawn_do_not_inherit_the_parents_seed():
    src = _fixture("spawn_parent_seeded.py")
    [hit] = check_source(src)
    assert hit.code == "no_seed" and "runs only in the parent" in " ".join(t for _, t in hit.why)
    in_child = src.replace("    torch.manual_seed(1)\n", "").replace(
        "    dist.init_process_group(", "    torch.manual_seed(1)\n    dist.init_process_group("
    )
    assert _codes(in_child) == []
    # the top of the module runs again in every child that imports it
    at_top = src.replace("    torch.manual_seed(1)\n", "").replace(
        "\n\n\ndef worker(", "\ntorch.manual_seed(1)\n\n\ndef worker("
    )
    assert _codes(at_top) == []
    # called in this process (no spawn), the parent's seed is the run's
    direct = src.replace("mp.spawn(worker, args=(n, args.epochs), nprocs=n, join=True)", "worker(0, 1, args.epochs)")
    assert _codes(direct) == []


def test_indices_the_rank_picked_make_the_loaders_data_the_ranks_part():
    src = _fixture("rank_picked_indices.py")
    assert _codes(src) == []
    assert _codes(src.replace("order.chunk(world)[rank]", "order.chunk(world)[0]")) == ["no_distributed_sampler"]
    # three steps away: the indices go through one more name
    farther = src.replace(
        "    train_part = Subset(data, mine.tolist())",
        "    picked = mine.tolist()\n    train_part = Subset(data, picked)",
    )
    assert _codes(farther) == []
    # a device made from the rank, further back, picks no data
    device = src.replace(
        "    mine = order.chunk(world)[rank]\n",
        "    dev = torch.device('cuda', local_rank)\n    mine = order.to(dev)\n",
    )
    assert _codes(device) == ["no_distributed_sampler"]


def test_a_warmup_that_only_labels_output_or_gates_timing_is_not_a_learning_rate_warmup():
    src = _fixture("timing_warmup_not_lr.py")
    assert _codes(src) == ["no_warmup"]
    # the same variable gating a learning-rate ramp is a warmup
    ramp = src.replace(
        "        if step > warmup and step % every == 0:\n",
        "        if step < warmup:\n            for g in opt.param_groups:\n                g['lr'] = 1e-3 * (step + 1) / warmup\n"
        "        if step > warmup and step % every == 0:\n",
    )
    assert _codes(ramp) == []
    # and so is one handed to a schedule
    sched = src.replace(
        "StepLR(opt, step_size=10, gamma=0.5)", "LambdaLR(opt, lambda e: min(1.0, (e + 1) / warmup_epochs))"
    )
    assert (
        _codes(sched.replace("    for epoch in range(30):", "    warmup_epochs = 3\n    for epoch in range(30):")) == []
    )


def test_a_loader_asked_to_shard_itself_for_ddp_needs_set_epoch():
    src = _fixture("loader_use_ddp_no_set_epoch.py")
    [hit] = check_source(src)
    assert hit.code == "missing_set_epoch" and "use_ddp=True" in " ".join(t for _, t in hit.why)
    fixed = src.replace(
        "    for epoch in range(20):\n", "    for epoch in range(20):\n        loader.set_epoch(epoch)\n"
    )
    assert _codes(fixed) == []
    assert _codes(src.replace("use_ddp=True", "use_ddp=False")) == []  # no sampler inside: no epoch to hand on


def test_a_main_process_first_block_means_several_processes_so_an_unguarded_save_is_on_every_rank():
    src = _fixture("main_process_first_unguarded_save.py")
    [hit] = check_source(src)
    assert hit.code == "checkpoint_all_ranks" and hit.line == 31
    guarded = src.replace(
        '    model.save_pretrained(training_args.output_dir + "/final")\n',
        '    if trainer.is_world_process_zero():\n        model.save_pretrained(training_args.output_dir + "/final")\n',
    )
    assert _codes(guarded) == []
    alone = src.replace('    with training_args.main_process_first(desc="tokenizing"):\n        ', "    ")
    assert _codes(alone) == []  # nothing says the run has several processes


def test_copying_a_weights_file_writes_a_checkpoint():
    src = _fixture("weights_copied_every_rank.py")
    [hit] = check_source(src)
    assert hit.code == "checkpoint_all_ranks" and "copyfile" in src.splitlines()[hit.line - 1]
    guarded = src.replace("        if loss.item() < best:", "        if dist.get_rank() == 0 and loss.item() < best:")
    assert _codes(guarded) == []
    assert _codes(src.replace('copyfile("last.pt", "best.pt")', 'copyfile("train.log", "best.log")')) == []


def test_a_loop_whose_optimizer_is_made_elsewhere_leaves_warmup_unknown():
    src = _fixture("optimizer_made_elsewhere.py")
    assert {f.code: f.severity for f in check_source(src)} == {"no_warmup": "unknown"}
    # made here, an SGD needs no warmup and an Adam does
    sgd = src.replace("model.setup_optimizers(weight_decay=0.0)", "[torch.optim.SGD(model.parameters(), lr=0.1)]")
    assert _codes(sgd) == []
    adam = src.replace("model.setup_optimizers(weight_decay=0.0)", "[torch.optim.AdamW(model.parameters(), lr=3e-4)]")
    assert {f.code: f.severity for f in check_source(adam)} == {"no_warmup": "warning"}
    ramp = src.replace('group["start_lr"] *', 'warmup_factor(step) * group["start_lr"] *')
    assert _codes(ramp) == []


# ---- round 7: heldout6 fed back (each fact with its fixture; the counter-case is the one-line edit) ----------------
def test_argparse_stores_an_aliased_local_rank_under_its_first_long_flag():
    src = _fixture("local_rank_alias_dest.py")
    [hit] = check_source(src)
    assert hit.code == "legacy_launch" and "args.rank" in " ".join(t for _, t in hit.why)
    # an explicit dest wins, as in argparse: the value then lives in `args.local_rank`, which decides nothing here
    named = src.replace('"--rank", "--local_rank", type=int', '"--rank", "--local_rank", dest="lr_unused", type=int')
    assert "legacy_launch" not in _codes(named)


def test_a_model_kept_in_a_dict_is_placed_by_its_entrys_own_move():
    src = _fixture("dict_of_models_moved.py")
    assert _codes(src) == []
    unmoved = src.replace(
        "torch.nn.Sequential(torch.nn.Linear(64, 1)).to(device)", "torch.nn.Sequential(torch.nn.Linear(64, 1))"
    )
    assert _codes(unmoved) == ["model_not_on_device"]


def test_radam_needs_no_schedule_warmup_but_adam_does():
    src = _fixture("radam_constant_rate.py")
    assert _codes(src) == []
    assert _codes(src.replace("torch.optim.RAdam(", "torch.optim.Adam(")) == ["no_warmup"]
    # beside an Adam of its own, the Adam still needs one
    both = src.replace(
        "    for _ in range(epochs):", "    other = torch.optim.Adam(net.parameters())\n    for _ in range(epochs):"
    )
    assert _codes(both) == ["no_warmup"]


def test_a_cycled_distributed_loader_replays_its_first_epoch():
    src = _fixture("cycled_sharded_loader.py")
    [hit] = check_source(src)
    assert hit.code == "missing_set_epoch" and "itertools.cycle" in hit.message
    # iterating the loader anew each epoch with set_epoch is the fix; a plain loader (no DistributedSampler) is fine
    plain = src.replace("sampler=DistributedSampler(data)", "shuffle=True")
    assert "missing_set_epoch" not in _codes(plain)


def test_an_allreduce_helper_handed_the_gradients_keeps_the_ranks_one_model():
    src = _fixture("allreduce_helper_handed_grads.py")
    assert _codes(src) == []
    # handed the loss (a value for the log), it syncs nothing
    loss_only = src.replace("all_reduce_and_rescale_tensors(grads, 1.0)", "all_reduce_and_rescale_tensors([loss], 1.0)")
    assert _codes(loss_only) == ["model_not_wrapped"]


def test_a_helper_named_for_joining_joins_and_data_parallel_is_not_a_wrapper():
    src = _fixture("joined_by_helper_not_wrapped.py")
    [hit] = check_source(src)
    assert hit.code == "model_not_wrapped" and "`set_dist(...)` joins the process group" in " ".join(
        t for _, t in hit.why
    )
    ddp = src.replace("torch.nn.DataParallel(model)", "torch.nn.parallel.DistributedDataParallel(model)").replace(
        "    if args.n_gpu > 1:\n", "    if True:\n"
    )
    assert _codes(ddp) == []
    # the optimizer made by the project too (SlowFast's `construct_optimizer(model, cfg)`): its setup, not this file's
    elsewhere = src.replace("torch.optim.SGD(model.parameters(), lr=0.01)", "construct_optimizer(model, args)")
    assert "model_not_wrapped" not in _codes("from configs import construct_optimizer\n" + elsewhere)


def test_a_command_line_trainer_leaves_the_schedule_to_configure_optimizers():
    src = _fixture("lightning_trainer_from_argparse.py")
    [hit] = check_source(src)
    assert hit.code == "no_warmup" and "hold no learning-rate schedule" in " ".join(t for _, t in hit.why)
    # a schedule with warmup returned by configure_optimizers, or the job handed to the project's own helper
    warm = src.replace(
        "return torch.optim.Adam(self.parameters(), lr=1e-3)",
        "opt = torch.optim.Adam(self.parameters(), lr=1e-3)\n"
        "        return [opt], [torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.01, total_iters=100)]",
    )
    assert _codes(warm) == []
    handed = src.replace("return torch.optim.Adam(self.parameters(), lr=1e-3)", "return make_optimizers(self)")
    assert _codes("from myproject.optim import make_optimizers\n" + handed) == []


def test_a_clip_in_another_arm_does_not_clip_this_step():
    src = _fixture("clip_in_one_branch.py")
    [hit] = check_source(src)
    assert hit.code == "no_grad_clip" and "another arm" in hit.message
    # a clip before the branch, or one in each arm, clips every step
    both = src.replace(
        "                loss.backward()\n                opt.step()",
        "                loss.backward()\n"
        "                torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)\n                opt.step()",
    )
    assert _codes(both) == []
    # a clip behind its own setting in the ppo arm (`if args.updates:`), the step after that `if`: a wired setting
    wired = src.replace(
        "                loss.backward()\n                opt.step()",
        "                loss.backward()\n                if args.updates:\n"
        "                    torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)\n                opt.step()",
    )
    assert _codes(wired) == []


def test_examples_filtered_to_the_window_need_no_truncation():
    src = _fixture("length_filter_instead_of_truncation.py")
    assert _codes(src) == []
    # a filter that bounds nothing (drops empty summaries by content) leaves the lengths open
    loose = src.replace("return len(input_ids) <= MAX_LEN and len(labels) <= 128", "return bool(labels)")
    assert set(_codes(loose)) == {"no_truncation"}


# ---- round 8: heldout7 fed back ------------------------------------------------------------------------------------
def test_a_library_modules_seed_function_seeds_but_an_objects_seed_method_does_not():
    src = _fixture("seed_through_library_module.py")
    assert _codes(src) == []
    # gym's `env.seed(s)` seeds the environment only; torch's `torch.seed()` draws a fresh, random seed
    env = src.replace("    util.seed(args.seed)\n", "    env = make_env()\n    env.seed(args.seed)\n")
    assert _codes(env) == ["no_seed"]
    assert _codes(src.replace("util.seed(args.seed)", "torch.seed()")) == ["no_seed"]


def test_a_seed_at_the_top_of_each_run_seeds_the_model_that_run_builds():
    src = _fixture("seed_per_run_loop.py")
    assert _codes(src) == []
    # the model built once, before the loop: a seed per iteration then only seeds the later draws
    before = src.replace(
        "        model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))\n", ""
    ).replace(
        "    losses = []\n",
        "    losses = []\n    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))\n",
    )
    assert _codes(before) == ["no_seed"]


def test_a_namespace_handed_to_the_projects_config_may_use_its_local_rank():
    src = _fixture("namespace_handed_to_config.py")
    assert _codes(src) == []
    kept = src.replace("    config = get_config(args)\n", "    config = load_yaml(args.cfg)\n")
    assert _codes("from config import load_yaml\n" + kept) == ["unused_local_rank_arg"]


# ---- round 9: heldout8 fed back ------------------------------------------------------------------------------------
def test_a_seed_only_in_the_cpu_arm_leaves_a_gpu_run_unseeded():
    src = _fixture("seed_cpu_arm_only.py")
    [hit] = check_source(src)
    assert hit.code == "no_seed" and "runs only without a GPU" in " ".join(t for _, t in hit.why)
    # seeded in both arms (or before the `if`), the run is seeded
    both = src.replace("        torch.cuda.manual_seed(123)\n", "        torch.manual_seed(123)\n")
    assert _codes(both) == []
    # `if not torch.cuda.is_available(): torch.manual_seed(...)`: the same CPU-only seed, written the other way round
    negated = src.replace(
        "    if torch.cuda.is_available():\n        torch.cuda.manual_seed(123)\n    else:\n        torch.manual_seed(123)\n",
        "    if not torch.cuda.is_available():\n        torch.manual_seed(123)\n",
    )
    assert _codes(negated) == ["no_seed"]


def test_the_projects_trainer_run_through_its_private_epoch_method_is_a_run_to_seed():
    src = _fixture("own_trainer_private_epoch.py")
    [hit] = check_source(src)
    assert hit.code == "no_seed" and "the project's own code" in hit.message
    assert _codes(src.replace("    model = torch.nn", "    torch.manual_seed(0)\n    model = torch.nn")) == []


# ---- round 10: heldout9 read (after its blind score) ---------------------------------------------------------------
def test_an_optimizer_from_the_projects_helper_handed_to_its_train_function_is_a_run():
    src = _fixture("optimizer_from_project_helper.py")
    found = {f.code: f.severity for f in check_source(src)}
    assert found == {"no_seed": "warning", "no_grad_clip": "unknown"}
    assert _codes(src.replace("    model = torch.nn", "    torch.manual_seed(0)\n    model = torch.nn")) == [
        "no_grad_clip"
    ]
    # a helper not named for an optimizer hands on nothing the doctor can call one
    other = src.replace("optimizer = get_optimizer(args, model)", "optimizer = get_config(args, model)").replace(
        "from utils.utils import get_optimizer", "from utils.utils import get_config"
    )
    assert _codes(other) == []
