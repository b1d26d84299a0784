"""Notebook 07 (multi-task, several processes): a fourth task prompt, the batch arithmetic, a question."""
from __future__ import annotations

import math

from labkit.exercises import answered, call, fail, passed, quiz

ARTICLE = {"id": "a1", "title": "本市一季度经济稳中有进", "body": "一季度全市地区生产总值同比增长5.2%。工业生产稳定恢复。消费市场持续回暖。",
           "summary": "一季度经济稳中有进。", "keywords": ["经济", "增长"]}


def ex1(lead_example) -> bool:
    """A fourth task: prefix `首句：` + body -> the body's first sentence (up to and including the first 。)."""
    from labkit.text.tasks import PREFIX

    got = call(lead_example, dict(ARTICLE))
    if not (isinstance(got, tuple) and len(got) == 2):
        fail("lead_example(article) should return a (source, target) pair")
    source, target = got
    if not str(source).startswith("首句："):
        fail(f"the source should start with the new prefix 首句：, got {str(source)[:8]!r}")
    if any(str(source).startswith(p) for p in PREFIX.values()):
        fail("the prefix collides with an existing task's: the model could not tell the tasks apart")
    if source != "首句：" + ARTICLE["body"]:
        fail("the source is the prefix followed by the whole body, like the other tasks (labkit.text.tasks.PREFIX)")
    want = ARTICLE["body"].split("。")[0] + "。"
    if target != want:
        fail(f"target {target!r}, expected the first sentence {want!r} (split on 。 and keep the 。)")
    return passed("a fourth task is one more prefix: the model, the collator and the sampler do not change")


def ex2(per_process_batch, steps_per_epoch, n_examples: int = 600, nproc: int = 2, global_batch: int = 16) -> bool:
    """With the run's DistributedSampler: per-process batch and optimizer steps per epoch."""
    answered(per_process_batch)
    answered(steps_per_epoch)
    ppb = global_batch // nproc
    per_rank = math.ceil(n_examples / nproc)
    spe = per_rank // ppb
    if int(per_process_batch) != ppb:
        fail(f"per_process_batch = {per_process_batch}: the global batch {global_batch} is split across {nproc} "
             f"processes, {ppb} each (the same 16 examples per step as one process)")
    if int(steps_per_epoch) != spe:
        fail(f"steps_per_epoch = {steps_per_epoch}: each rank's shard holds ceil({n_examples}/{nproc}) = {per_rank} "
             f"examples, taken {ppb} at a time (whole batches) -> {spe}")
    return passed(f"{ppb} per process, {spe} steps per epoch: both runs see {global_batch} examples per step")


def ex3(answer) -> bool:
    """Scaling efficiency 0.6 on 2 CPU processes: what does it tell you?"""
    return quiz(answer, "C", {
        "A": "The loss curves agree within the measured tolerance: DDP trains the same model; efficiency says nothing "
             "about correctness.",
        "B": "On GPUs each process owns a card and the all-reduce overlaps the backward pass; a CPU number does not "
             "predict that.",
        "C": "Right: the run proves the distributed code path; on 2 shared cores with gloo over TCP the speed is not the "
             "point -- measure throughput on the hardware you will train on.",
        "D": "Both runs process the same global batch per step, so neither trains on less data.",
    })
