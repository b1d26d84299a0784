"""Notebook 05 (samplers and seeds): add the missing set_epoch, count what DistributedSampler pads, a question;
`grade_fix`, the find-and-fix grader."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labkit.exercises import Choice, Quiz, answered, call, fail, passed
from labkit.exercises.nb04 import replicas
from labkit.i18n import N_, _

if TYPE_CHECKING:
    from labkit.exercises.transfer import Run

N_EXAMPLES, WORLD, EPOCHS = 48, 2, 3


def _samplers(n: int, world: int, seed: int = 0, watched: bool = False):
    """One DistributedSampler per rank; `watched` wraps each so the check sees when set_epoch was called."""
    from torch.utils.data import DistributedSampler

    samplers = [DistributedSampler(range(n), num_replicas=world, rank=r, shuffle=True, seed=seed) for r in range(world)]
    if not watched:
        return samplers
    from labkit.distributed.samplers import RecordingSampler

    class Watched(RecordingSampler):
        """Records the order of events too: ('set_epoch', e) and ('iter', None)."""

        def __init__(self, inner):
            super().__init__(inner)
            self.events: list[tuple[str, int | None]] = []

        def set_epoch(self, epoch: int) -> None:
            self.events.append(("set_epoch", epoch))
            super().set_epoch(epoch)

        def __iter__(self):
            self.events.append(("iter", None))
            return super().__iter__()

    return [Watched(s) for s in samplers]


def ex1(run_epochs) -> bool:
    """`run_epochs(sampler, epochs)` returns each epoch's order; the data audit must see the order change at every
    epoch boundary on every rank."""
    from labkit.distributed import audit

    ranks, samplers = {}, _samplers(N_EXAMPLES, WORLD, watched=True)
    for r, s in enumerate(samplers):
        orders = call(run_epochs, s, EPOCHS)
        if not isinstance(orders, list) or len(orders) != EPOCHS:
            fail(
                _(
                    "run_epochs(sampler, {epochs}) should return a list of {epochs} epoch orders (list(sampler) once "
                    "per epoch)"
                ).format(epochs=EPOCHS)
            )
        ranks[r] = {
            "samples": [list(map(int, o)) for o in orders],
            "dataset_size": N_EXAMPLES,
            "set_epoch_calls": list(s.set_epoch_calls),
        }
    a = audit.data_audit(ranks)
    if a["overlap_pct"] != 0 or a["coverage_pct"] != 100:
        fail(
            _(
                "overlap {overlap:.0f}%, coverage {coverage:.0f}%: iterate the sampler you were given, once per epoch, "
                "and keep what it yields"
            ).format(overlap=a["overlap_pct"], coverage=a["coverage_pct"])
        )
    changed, boundaries = a["order_changes"]
    if changed != boundaries:
        calls = a["set_epoch_called"][0]
        events = samplers[0].events
        if not calls:
            fail(
                _(
                    "the data audit: the order changed at {changed} of {boundaries} epoch boundaries -- every epoch "
                    "replays the same order. DistributedSampler seeds its shuffle with seed + epoch, and the epoch "
                    "stays 0 until you call sampler.set_epoch(epoch) at the start of each epoch"
                ).format(changed=changed, boundaries=boundaries)
            )
        if set(calls) == {calls[0]}:
            fail(
                _(
                    "the data audit: the order changed at {changed} of {boundaries} epoch boundaries. You call "
                    "set_epoch({value}) every epoch, so the shuffle's seed never changes: pass the loop's epoch, "
                    "sampler.set_epoch(epoch)"
                ).format(changed=changed, boundaries=boundaries, value=calls[0])
            )
        if events and events[0][0] == "iter":
            fail(
                _(
                    "the data audit: the order changed at {changed} of {boundaries} epoch boundaries -- epochs 0 and 1 "
                    "replay the same order. set_epoch(epoch) after iterating the epoch only affects the *next* one, so "
                    "epoch 1 reuses epoch 0's shuffle: call it at the start of the epoch, before iterating"
                ).format(changed=changed, boundaries=boundaries)
            )
        fail(
            _(
                "the data audit: the order changed at only {changed} of {boundaries} epoch boundaries: every epoch "
                "needs its own sampler.set_epoch(epoch) before it is iterated"
            ).format(changed=changed, boundaries=boundaries)
        )
    shard_changed = a["shard_changes"][0]
    if shard_changed != boundaries:
        fail(
            _(
                "the order changes, but each rank keeps the same examples every epoch (its shard changed at "
                "{shard_changed} of {boundaries} boundaries): reordering a rank's own fixed shard is not a reshuffle. "
                "sampler.set_epoch(epoch) reshuffles the whole data set before it is dealt out to the ranks"
            ).format(shard_changed=shard_changed, boundaries=boundaries)
        )
    return passed(
        _(
            "the audit: the order changed at {changed} of {boundaries} epoch boundaries on {world} ranks, every rank "
            "got new examples each epoch, overlap 0 %, coverage 100 %"
        ).format(changed=changed, boundaries=boundaries, world=WORLD)
    )


def ex2(per_rank, padded) -> bool:
    """16 examples on 3 ranks (drop_last=False): examples per rank per epoch, and how many are repeats."""
    answered(per_rank)
    answered(padded)
    lens = [len(list(s)) for s in _samplers(16, 3)]
    want_pad = sum(lens) - 16
    if int(per_rank) != lens[0]:
        if int(per_rank) == 16 // 3:
            fail(
                _(
                    "per_rank = {per_rank} = 16 // 3 rounds down, but with drop_last=False DistributedSampler pads up: "
                    "every rank gets ceil(16 / 3) = {n} indices so the ranks step in lockstep"
                ).format(per_rank=per_rank, n=lens[0])
            )
        fail(
            _("per_rank = {per_rank}: DistributedSampler gives every rank ceil(16 / 3) = {n} indices").format(
                per_rank=per_rank, n=lens[0]
            )
        )
    if int(padded) != want_pad:
        if int(padded) == 16 % 3:
            fail(
                _(
                    "padded = {padded} = 16 % 3 is what is left over, not what is added: 3 ranks x {n} = "
                    "{total} indices for 16 examples"
                ).format(padded=padded, n=lens[0], total=sum(lens))
            )
        fail(
            _("padded = {padded}: 3 ranks x {n} = {total} indices for 16 examples, so {pad} are repeats").format(
                padded=padded, n=lens[0], total=sum(lens), pad=want_pad
            )
        )
    return passed(
        _(
            "{n} per rank, {pad} repeated examples -- keep the data set divisible by the world size, "
            "or set drop_last=True, when exact counts matter (the audits here do)"
        ).format(n=lens[0], pad=want_pad)
    )


EX3 = Quiz(
    "AD",
    {
        "A": Choice(
            N_("some examples are seen by two ranks, others by no rank"),
            N_(
                "Right: each rank shuffles with its own seed, so 'every N-th example of my shuffle' is not a "
                "partition -- the audit shows overlap and examples never seen."
            ),
            missed=N_("one true statement is about what the data audit measured for this split (overlap, never seen)."),
        ),
        "B": Choice(
            N_("the model replicas drift apart during training"),
            N_(
                "The replicas are identical after wrapping: DDP broadcasts rank 0's weights, and every step applies "
                "the same all-reduced gradient."
            ),
        ),
        "C": Choice(
            N_("the run stops with an error at the first all-reduce"),
            N_(
                "Nothing crashes: every rank has the same number of batches, so the all-reduces line up and the run "
                "completes."
            ),
        ),
        "D": Choice(
            N_("the loss falls and the replicas stay identical"),
            N_(
                "Right: that is what hides the bug -- DDP's broadcast at wrap time makes the *models* identical "
                "although the freshly built ones differed, while the *data* split stays wrong. Only the data audit "
                "shows it."
            ),
            missed=N_(
                "one true statement is about what you would see if you watched only the loss and the replica audit."
            ),
        ),
    },
)


def ex3(answer) -> bool:
    """Per-rank seeds and a hand-made split: which statements are true? (select all that apply)"""
    return EX3(answer)


# ---- find and fix: `grade_fix` grades what `labkit.exercises.transfer` measured running the repaired script
def _audit_input(run: Run) -> dict[int, dict]:
    return {
        r: {"samples": rep.get("samples", []), "dataset_size": rep.get("dataset_size", 0)}
        for r, rep in sorted(run.ranks.items())
    }


def _data_audit(run: Run) -> dict:
    from labkit.distributed import audit

    ranks = _audit_input(run)
    if not all(len(r["samples"]) >= 2 for r in ranks.values()):
        fail(
            _(
                "the check saw fewer than 2 epochs of a DataLoader on some rank: keep one DataLoader pass over the "
                "examples per epoch (the data audit reads the indices it hands out)"
            )
        )
    return audit.data_audit(ranks)


def _first_bad_epoch(a: dict, key: str) -> dict:
    return max(a["epochs"], key=lambda e: e[key])


def grade_fix(run: Run) -> bool:
    a = _data_audit(run)
    world = len(run.ranks)
    n_changed, n_bounds = a["order_changes"]
    if a["overlap_pct"] >= 99.9 and a["work_factor"] >= world - 1e-9:
        fail(
            _(
                "the data audit: overlap {overlap:.0f} %, work factor {work_factor:.1f} -- every rank trained on every "
                "example, so the ranks repeat each other's work. Give each rank its own shard: "
                "DistributedSampler(dataset, num_replicas=world, rank=rank, seed=seed)"
            ).format(overlap=a["overlap_pct"], work_factor=a["work_factor"])
        )
    if a["overlap_pct"] > 0 or a["missing"] > 0:
        e = _first_bad_epoch(a, "overlap_pct")
        fail(
            _(
                "the data audit: in epoch {epoch} the ranks' shards overlap ({overlap:.0f} % of the examples seen were "
                "seen by more than one rank) and {missing} of {size} examples were never seen. Each rank shuffled "
                "with its own seed, so 'every N-th example of my shuffle' is not a partition: shuffle with the same "
                "seed on every rank (plus the epoch), or use DistributedSampler + set_epoch"
            ).format(epoch=e["epoch"], overlap=e["overlap_pct"], missing=e["missing"], size=a["dataset_size"])
        )
    if n_changed == 0:
        fail(
            _(
                "the data audit: disjoint and complete, but the order changed at 0 of {boundaries} epoch boundaries -- "
                "every epoch replays the same order. Put the epoch into the shuffle's seed (DistributedSampler: "
                "sampler.set_epoch(epoch) at the start of every epoch)"
            ).format(boundaries=n_bounds)
        )
    if n_changed < n_bounds:
        fail(
            _(
                "the data audit: the order changed at only {changed} of {boundaries} (rank x epoch) boundaries: "
                "reshuffle at the start of every epoch, before the epoch's batches are drawn"
            ).format(changed=n_changed, boundaries=n_bounds)
        )
    rep = replicas(run)
    if not rep["identical"].get("final", True):
        fail(_("the data split is right now, but the replicas differ after training: keep the model wrapped in DDP"))
    return passed(
        _(
            "the data audit: overlap 0 %, coverage {coverage:.0f} %, the order changed at {changed} of {boundaries} "
            "epoch boundaries; replicas identical after training"
        ).format(coverage=a["coverage_pct"], changed=n_changed, boundaries=n_bounds)
    )
