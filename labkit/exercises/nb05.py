"""Notebook 05 (samplers and seeds): add the missing set_epoch, count what DistributedSampler pads, a question."""
from __future__ import annotations

from labkit.exercises import answered, call, fail, passed, quiz


def _samplers(n: int, world: int, seed: int = 0):
    from torch.utils.data import DistributedSampler

    return [DistributedSampler(range(n), num_replicas=world, rank=r, shuffle=True, seed=seed) for r in range(world)]


def ex1(run_epochs) -> bool:
    """`run_epochs(sampler, epochs)` returns each epoch's order; the data audit must see the order change."""
    from labkit.distributed import audit

    ranks = {}
    for r, s in enumerate(_samplers(48, 2)):
        orders = call(run_epochs, s, 3)
        if not isinstance(orders, list) or len(orders) != 3:
            fail("run_epochs(sampler, 3) should return a list of 3 epoch orders (list(sampler) once per epoch)")
        ranks[r] = {"samples": [list(map(int, o)) for o in orders], "dataset_size": 48}
    a = audit.data_audit(ranks)
    if a["same_order_every_epoch"]:
        fail("the data audit says every epoch replays the same order: DistributedSampler seeds its shuffle with "
             "seed + epoch, and the epoch stays 0 until you call sampler.set_epoch(epoch) at the start of each epoch")
    if a["overlap_pct"] != 0 or a["coverage_pct"] != 100:
        fail(f"overlap {a['overlap_pct']}%, coverage {a['coverage_pct']}%: iterate the sampler you were given, once per epoch")
    return passed("the audit now reports order_changed_between_epochs=True, overlap 0 %, coverage 100 %")


def ex2(per_rank, padded) -> bool:
    """16 examples on 3 ranks (drop_last=False): examples per rank per epoch, and how many are repeats."""
    answered(per_rank)
    answered(padded)
    lens = [len(list(s)) for s in _samplers(16, 3)]
    want_pad = sum(lens) - 16
    if int(per_rank) != lens[0]:
        fail(f"per_rank = {per_rank}: DistributedSampler gives every rank ceil(16 / 3) = {lens[0]} indices so the "
             "ranks step in lockstep")
    if int(padded) != want_pad:
        fail(f"padded = {padded}: 3 ranks x {lens[0]} = {sum(lens)} indices for 16 examples, so {want_pad} are repeats")
    return passed(f"{lens[0]} per rank, {want_pad} repeated examples -- keep the data set divisible by the world size, "
                  "or set drop_last=True, when exact counts matter (the audits here do)")


def ex3(answer) -> bool:
    """Per-rank seeds: what breaks, what hides it?"""
    return quiz(answer, "A", {
        "A": "Right: each rank shuffles with its own seed, so 'every N-th example of my shuffle' overlaps with the "
             "other ranks' shards and leaves gaps; DDP's broadcast at wrap time makes the *models* identical, which "
             "hides that the *data* split is wrong.",
        "B": "The replicas are identical after wrapping (DDP broadcasts rank 0's weights), so the models do not diverge.",
        "C": "Nothing crashes: the run completes and the loss falls. The audit is what shows overlap and gaps.",
        "D": "Dropout noise per rank is harmless and often wanted; the problem is the data split, not the model's "
             "randomness.",
    })
