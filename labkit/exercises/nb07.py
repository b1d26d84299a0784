"""Notebook 07 (multi-task, several processes): a fourth task prompt, the batch arithmetic, a question;
`grade_fix`, the find-and-fix grader."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from labkit.exercises import Choice, Quiz, answered, call, fail, passed
from labkit.exercises.nb04 import audit_sequence, joined, placed
from labkit.i18n import N_, _

if TYPE_CHECKING:
    from labkit.exercises.transfer import Run

ARTICLE = {
    "id": "a1",
    "title": "本市一季度经济稳中有进",
    "body": "一季度全市地区生产总值同比增长5.2%。工业生产稳定恢复。消费市场持续回暖。",
    "summary": "一季度经济稳中有进。",
    "keywords": ["经济", "增长"],
}


def ex1(lead_example) -> bool:
    """A fourth task: prefix `首句：` + body -> the body's first sentence (up to and including the first 。)."""
    from labkit.text.tasks import PREFIX

    got = call(lead_example, dict(ARTICLE))
    answered(got)
    if not (isinstance(got, tuple) and len(got) == 2):
        fail(N_("lead_example(article) should return a (source, target) pair"))
    source, target = got
    if any(str(source).startswith(p) for p in PREFIX.values()):
        fail(
            _(
                "the source starts with {prefix}, an existing task's prefix: the model could not tell the "
                "tasks apart. Use the new prefix 首句："
            ).format(prefix=repr(str(source)[:3]))
        )
    if not str(source).startswith("首句："):
        fail(_("the source should start with the new prefix 首句：, got {got}").format(got=repr(str(source)[:8])))
    if source != "首句：" + ARTICLE["body"]:
        fail(N_("the source is the prefix followed by the whole body, like the other tasks (labkit.text.tasks.PREFIX)"))
    first = ARTICLE["body"].split("。")[0]
    want = first + "。"
    if target == first:
        fail(
            _(
                "target {target} lost its 。: split on 。 and add it back (the first sentence *including* the 。)"
            ).format(target=repr(target))
        )
    if target == ARTICLE["body"]:
        fail(N_("the target is the whole body: keep only the first sentence, up to and including the first 。"))
    if target != want:
        fail(
            _("target {target}, expected the first sentence {want} (split on 。 and keep the 。)").format(
                target=repr(target), want=repr(want)
            )
        )
    return passed(N_("a fourth task is one more prefix: the model, the collator and the sampler do not change"))


# (examples, processes, global batch): the notebook's own run, then plans where the sampler's padding and the
# whole-batch rule change the answer
PLANS = ((600, 2, 16), (47, 2, 16), (100, 3, 12), (3600, 4, 32))


def reference_plan(n_examples: int, nproc: int, global_batch: int) -> tuple[int, int]:
    ppb = global_batch // nproc
    return ppb, math.ceil(n_examples / nproc) // ppb


def ex2(batch_plan, n_examples: int = 600, nproc: int = 2, global_batch: int = 16) -> bool:
    """`batch_plan(n_examples, nproc, global_batch)` -> (per-process batch, optimizer steps per epoch) with the run's
    DistributedSampler (drop_last=False) and whole batches; checked on this run's numbers and three other plans."""
    for n, p, g in ((n_examples, nproc, global_batch), *PLANS):
        got = call(batch_plan, n, p, g)
        answered(got)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            fail(_("batch_plan(n_examples, nproc, global_batch) should return a pair, got {got}").format(got=repr(got)))
        ppb, spe = got
        want_ppb, want_spe = reference_plan(n, p, g)
        if ppb != want_ppb:
            if ppb == g:
                fail(
                    _(
                        "batch_plan({n}, {p}, {g}): per-process batch {ppb} is the whole global batch -- with {p} "
                        "processes each takes {g} // {p} = {want_ppb}, so a step still sees {g} examples"
                    ).format(n=n, p=p, g=g, ppb=ppb, want_ppb=want_ppb)
                )
            fail(
                _("batch_plan({n}, {p}, {g}): per-process batch {ppb}, expected {g} // {p} = {want_ppb}").format(
                    n=n, p=p, g=g, ppb=ppb, want_ppb=want_ppb
                )
            )
        if spe != want_spe:
            shard = math.ceil(n / p)
            if spe == n // g:
                fail(
                    _(
                        "batch_plan({n}, {p}, {g}): {spe} = {n} // {g} (or {n} // {p} // {want_ppb}) rounds the shard "
                        "down, but each rank steps through its own DistributedSampler shard, padded up (drop_last=False) "
                        "to ceil({n} / {p}) = {shard} examples, {want_ppb} at a time -> {want_spe}"
                    ).format(n=n, p=p, g=g, spe=spe, want_ppb=want_ppb, shard=shard, want_spe=want_spe)
                )
            if spe == math.ceil(shard / want_ppb) or spe == math.ceil(n / g):
                fail(
                    _(
                        "batch_plan({n}, {p}, {g}): {spe} counts the last, partial batch; the run takes whole batches "
                        "only: {shard} // {want_ppb} = {want_spe}"
                    ).format(n=n, p=p, g=g, spe=spe, shard=shard, want_ppb=want_ppb, want_spe=want_spe)
                )
            fail(
                _("batch_plan({n}, {p}, {g}): {spe} steps, expected ceil({n} / {p}) // {want_ppb} = {want_spe}").format(
                    n=n, p=p, g=g, spe=spe, want_ppb=want_ppb, want_spe=want_spe
                )
            )
    ppb, spe = reference_plan(n_examples, nproc, global_batch)
    return passed(
        _("{ppb} per process, {spe} steps per epoch: both runs see {global_batch} examples per step").format(
            ppb=ppb, spe=spe, global_batch=global_batch
        )
    )


EX3 = Quiz(
    "AB",
    {
        "A": Choice(
            N_("the distributed code path works: the curves agree"),
            N_(
                "Right: the run proves the distributed code path -- the 1-process and N-process loss curves agree "
                "within the measured gap."
            ),
            missed=N_("one statement you left out is about what the two runs' loss curves prove."),
        ),
        "B": Choice(
            N_("speed must be measured on the hardware you train on"),
            N_(
                "Right: on 2 shared cores with gloo over TCP the speed is not the point -- measure throughput on the "
                "hardware you will train on."
            ),
            missed=N_("one statement you left out is about where a throughput number means something."),
        ),
        "C": Choice(
            N_("DDP trained another model than one process would"),
            N_(
                "The loss curves agree within the measured tolerance: DDP trains the same model; efficiency says "
                "nothing about correctness."
            ),
        ),
        "D": Choice(
            N_("GPUs will scale as poorly as these CPU processes"),
            N_(
                "On GPUs each process owns a card and the all-reduce overlaps the backward pass; a CPU number does "
                "not predict that."
            ),
        ),
    },
)


def ex3(answer) -> bool:
    """Scaling efficiency well below 1 on 2 CPU processes: which statements follow? (select all)"""
    return EX3(answer)


# ---- find and fix: `grade_fix` grades what `labkit.exercises.transfer` measured running the repaired script
def _diverged(run: Run) -> str:
    warned = any("autograd kernel was not registered" in line for line in run.log)
    return (
        _(
            "the replica audit: the ranks' models start identical and differ after training -- every rank "
            "stepped with the gradients of its own shard only. Averaging the loss *value* averages nothing that "
            "backward sees: dist.all_reduce is not differentiable"
        )
        + (_(" (torch even warned: 'c10d::allreduce_: an autograd kernel was not registered')") if warned else "")
        + _(
            ". Wrap the model in DistributedDataParallel (it all-reduces the gradients during backward), or "
            "all-reduce every parameter's .grad and divide by the world size before optimizer.step()"
        )
    )


def grade_fix(run: Run) -> bool:
    from labkit.distributed import audit

    la = audit.launch_audit(joined(run))
    audit_sequence(
        run,
        la,
        launch=N_(
            "the launch audit: world size {world_size}, ranks seen {ranks_seen}: keep init_process_group -- the "
            "ranks must form one process group of 2"
        ),
        overlap=N_(
            "the data audit: the ranks' examples overlap ({overlap:.0f} %): keep the DistributedSampler (and "
            "set_epoch) -- each rank trains on its own shard"
        ),
        first_forward=N_(
            "the replica audit: the ranks' models differ already at the first forward pass: build them from the "
            "same seed, or let DistributedDataParallel broadcast rank 0's weights when it wraps the model"
        ),
        final=_diverged,
    )
    placed(run)
    return passed(
        _(
            "the launch audit: one process group of {world_size}; the data audit: disjoint shards; the replica audit: "
            "identical at the first forward pass and after training -- the ranks trained one model"
        ).format(world_size=la["world_size"])
    )
