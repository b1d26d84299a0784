"""Who trains on what: the three ways a rank can pick its examples, and a recorder.

`none`        every rank shuffles the WHOLE dataset (a single-process script run N times)
`distributed` `torch.utils.data.DistributedSampler`: disjoint shards, reshuffled by `set_epoch`
`split`       a hand-made random split: shuffle with the rank's seed, keep every N-th example
              (correct only while every rank uses the same seed)

`RecordingSampler` wraps any of them and keeps the order it produced in each
epoch -- the raw material of the data audit.
"""

from __future__ import annotations

from typing import Iterator

import torch
from torch.utils.data import DistributedSampler, Sampler

from labkit.distributed import SAMPLERS


class _Shuffled(Sampler[int]):
    """A seeded reshuffle of `range(n)` per epoch, keeping `stride`-th items from `offset`."""

    def __init__(self, n: int, seed: int, offset: int = 0, stride: int = 1, reshuffle: bool = True):
        self.n, self.seed, self.offset, self.stride, self.reshuffle = n, seed, offset, stride, reshuffle
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        g = torch.Generator().manual_seed(self.seed + (self.epoch if self.reshuffle else 0))
        return iter(torch.randperm(self.n, generator=g)[self.offset :: self.stride].tolist())

    def __len__(self) -> int:
        return len(range(self.offset, self.n, self.stride))


def make_sampler(kind: str, n: int, rank: int, world_size: int, seed: int) -> Sampler[int]:
    """The sampler for `kind` (see module doc); `seed` is this rank's seed."""
    if kind == "none":
        return _Shuffled(n, seed)
    # [fix:distributed_sampler]
    if kind == "distributed":
        # drop_last=False pads by repeating a few examples when n % world != 0; keep n divisible
        return DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
    # [/fix:distributed_sampler]
    if kind == "split":
        return _Shuffled(n, seed, offset=rank, stride=world_size)
    raise ValueError(f"unknown sampler {kind!r}: choose one of {SAMPLERS}")


class RecordingSampler(Sampler[int]):
    """Delegates to `inner` and records each epoch's order (one list per `__iter__`)."""

    def __init__(self, inner: Sampler[int]):
        self.inner = inner
        self.epochs: list[list[int]] = []
        self.set_epoch_calls: list[int] = []

    def set_epoch(self, epoch: int) -> None:
        self.set_epoch_calls.append(epoch)
        if hasattr(self.inner, "set_epoch"):
            self.inner.set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        order = list(iter(self.inner))
        self.epochs.append(order)
        return iter(order)

    def __len__(self) -> int:
        return len(self.inner)
