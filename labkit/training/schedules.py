"""Learning-rate schedules: thin names over `transformers`' schedule factories."""

from __future__ import annotations

SCHEDULES = ("linear", "cosine", "cosine_restarts", "constant")


def make_scheduler(optimizer, name: str, warmup_steps: int, total_steps: int, restarts: int = 2):
    """A `LambdaLR` from transformers for `name` in SCHEDULES (all with linear warmup)."""
    from transformers import (
        get_constant_schedule_with_warmup,
        get_cosine_schedule_with_warmup,
        get_cosine_with_hard_restarts_schedule_with_warmup,
        get_linear_schedule_with_warmup,
    )

    if name == "linear":
        return get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps)
    if name == "cosine":
        return get_cosine_schedule_with_warmup(optimizer, warmup_steps, total_steps)
    # [fix:cosine_restarts]
    if name == "cosine_restarts":
        return get_cosine_with_hard_restarts_schedule_with_warmup(
            optimizer, warmup_steps, total_steps, num_cycles=restarts
        )
    # [/fix:cosine_restarts]
    if name == "constant":
        return get_constant_schedule_with_warmup(optimizer, warmup_steps)
    raise ValueError(f"unknown schedule {name!r}: choose one of {SCHEDULES}")
