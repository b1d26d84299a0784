"""Notebook 09 (sharding): per-rank bytes at each ZeRO stage, and which saves of a sharded model can be loaded."""

from __future__ import annotations

from labkit.exercises import Choice, Quiz, answered, call, fail, passed
from labkit.i18n import N_, _

# (n_params, world, stage) the check tries: every stage, one rank and several, a size that does not divide evenly
CASES = [(1_000_000, 4, 0), (1_000_000, 4, 1), (1_000_000, 4, 2), (1_000_000, 4, 3), (737_668_096, 8, 3), (999, 3, 2)]


def _reference(n_params: int, world: int, stage: int) -> float:
    from labkit.training.memory import sharded_static_bytes

    return sharded_static_bytes(n_params, world, stage)["total"]


def ex1(per_rank_bytes) -> bool:
    """`per_rank_bytes(n_params, world, stage)`: fp32 weights + gradients + AdamW states per rank at ZeRO `stage`."""
    for n, world, stage in CASES:
        got = call(per_rank_bytes, n, world, stage)
        answered(got)  # the untouched `...` body returns None
        want = _reference(n, world, stage)
        try:
            ok = abs(float(got) - want) <= 1e-6 * want
        except (TypeError, ValueError):
            fail(
                _("per_rank_bytes({n}, {world}, {stage}) should return a number of bytes, got {got}").format(
                    n=n, world=world, stage=stage, got=repr(got)
                )
            )
        if ok:
            continue
        full = 16 * n
        if stage == 0 and abs(float(got) - full / world) <= 1e-6 * full:
            fail(
                N_(
                    "stage 0 is DDP: every rank holds the whole model, gradients and optimizer states -- 16 bytes per "
                    "parameter on each rank, whatever the world size (that is the pitfall)"
                )
            )
        if abs(float(got) - 12 * n / (world if stage == 3 else 1)) <= 1e-6 * full:
            fail(N_("AdamW keeps two moments per parameter (exp_avg, exp_avg_sq): 8 bytes in fp32, beside 4 + 4"))
        if stage in (1, 2) and abs(float(got) - full / world) <= 1e-6 * full:
            fail(
                N_("stage 1 shards only the optimizer states; the parameters stay whole on every rank until stage 3")
                if stage == 1
                else N_(
                    "stage 2 shards only the optimizer states and the gradients; the parameters stay whole on every "
                    "rank until stage 3"
                )
            )
        fail(
            _("per_rank_bytes({n}, {world}, {stage}) = {got}, expected {want:.0f} bytes").format(
                n=n, world=world, stage=stage, got=got, want=want
            )
        )
    return passed(
        N_(
            "16P on every DDP rank; stage 1 divides the 8P of AdamW, stage 2 also the 4P of gradients, stage 3 everything"
        )
    )


EX2 = Quiz(
    "AC",
    {
        "A": Choice(
            N_("`dcp.save(...)` of `get_model_state_dict(model)` on every rank"),
            N_(
                "Right: every rank writes its own shards; the checkpoint loads at any world size (DCP reshards on load)."
            ),
            missed=N_("one save you left out writes shards from every rank, the sharded way."),
        ),
        "B": Choice(
            N_("rank 0 alone: `torch.save(model.state_dict(), path)`"),
            N_(
                "Rank 0's state_dict() of an FSDP model holds DTensors with its own shards only: 1/8 of the model; a plain "
                "model refuses it (section 4a)."
            ),
        ),
        "C": Choice(
            N_("every rank gathers a full, CPU-offloaded state dict; rank 0 saves it"),
            N_(
                "Right: the gather is a collective every rank joins; then rank 0 holds one whole copy to save (for export)."
            ),
            missed=N_("one save you left out gathers one whole copy with every rank taking part."),
        ),
        "D": Choice(
            N_("rank 0 alone gathers a full, CPU-offloaded state dict, then saves it to disk"),
            N_(
                "The full-state-dict gather is a collective: rank 0 alone waits for ranks that never join -- it hangs "
                "until the timeout."
            ),
        ),
    },
)


def ex2(answer) -> bool:
    """Which saves of an FSDP model on 8 GPUs can be loaded later? (select all)"""
    return EX2(answer)
