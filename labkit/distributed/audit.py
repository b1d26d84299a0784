"""Audits: turn each DDP pitfall into a measured fact.

Every rank of `labkit.train` records what it saw into its report
(`<out>/ranks/rank<R>.json`): the world it joined, its device, the example
indices its sampler produced in each epoch, checksums of its parameters, its
local loss.  The functions here compare those reports *across* ranks:

- `launch_audit`: how many processes really joined, with which backend
- `device_audit`: where each rank's parameters live (the cuda:0 pile-up on GPUs)
- `data_audit`:   overlap between ranks, coverage of the dataset, reshuffling per epoch
- `replica_audit`: are the model replicas bit-identical after wrapping and after training?
- `loss_spread`:  how far the ranks' local losses drift apart
- `curve_gap`:    how far two runs' loss curves are apart (1 process vs N processes)
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Mapping

Reports = Mapping[int, dict]


def param_checksum(model) -> str:
    """SHA-256 over every parameter (name order), so equal means bit-identical."""
    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
        h.update(name.encode())
        h.update(p.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def launch_audit(ranks: Reports) -> dict:
    """World size each process believed in, the ranks that reported, backend and launcher."""
    if not ranks:
        return {"processes": 0, "world_size": 0, "ranks_seen": [], "distributed": False}
    worlds = sorted({r["env"]["world_size"] for r in ranks.values()})
    rank_ids = sorted(r["env"]["rank"] for r in ranks.values())
    return {
        "processes": len(ranks),
        "world_size": worlds[0] if len(worlds) == 1 else worlds,
        "ranks_seen": rank_ids,
        "backend": sorted({str(r.get("backend")) for r in ranks.values()}),
        "launcher": sorted({r["env"]["launcher"] for r in ranks.values()}),
        "hosts": sorted({r.get("host", "?") for r in ranks.values()}),
        "distinct_pids": len({r.get("pid") for r in ranks.values()}),
        # distributed = one process group that every process joined
        "distributed": len(worlds) == 1 and worlds[0] > 1 and rank_ids == list(range(worlds[0])),
        "legacy_warnings": [r["legacy_warning"] for r in ranks.values() if r.get("legacy_warning")],
    }


def device_audit(ranks: Reports) -> dict:
    """Which device holds each rank's parameters, and how many ranks share one device."""
    per_rank = {k: r.get("param_devices", []) for k, r in sorted(ranks.items())}
    load = Counter(d for devs in per_rank.values() for d in set(devs))
    accel = {d: n for d, n in load.items() if not d.startswith("cpu")}
    own = all(
        all(d.startswith("cpu") or d == f"cuda:{ranks[k]['env']['local_rank']}" for d in devs)
        for k, devs in per_rank.items()
    )
    return {
        "param_devices": per_rank,
        "ranks_per_device": dict(load),
        "each_rank_on_own_device": own,
        # GPUs only: two ranks on one card = the pile-up (on CPU every rank shares the host by design)
        "accelerator_pileup": any(n > 1 for n in accel.values()),
    }


def data_audit(ranks: Reports, dataset_size: int | None = None) -> dict:
    """Overlap/coverage per epoch and whether each rank's order changed between epochs.

    overlap_pct:  share of the examples seen in an epoch that more than one rank saw
    coverage_pct: share of the dataset that some rank saw in the epoch
    work_factor:  examples processed / distinct examples (1.0 = no duplicated work)
    """
    if not ranks:
        raise ValueError("data_audit got no rank reports: did the launch fail?")
    n = dataset_size or max(r.get("dataset_size", 0) for r in ranks.values())
    n_epochs = min(len(r.get("samples", [])) for r in ranks.values())
    epochs = []
    for e in range(n_epochs):
        sets = {k: r["samples"][e] for k, r in ranks.items()}
        count = Counter(i for order in sets.values() for i in set(order))
        union = len(count)
        shared = sum(1 for c in count.values() if c > 1)
        total = sum(len(o) for o in sets.values())
        epochs.append(
            {
                "epoch": e,
                "overlap_pct": 100.0 * shared / max(union, 1),
                "coverage_pct": 100.0 * union / max(n, 1),
                "missing": n - union,
                "work_factor": total / max(union, 1),
            }
        )
    changed = {
        k: [r["samples"][e] != r["samples"][e + 1] for e in range(n_epochs - 1)] for k, r in sorted(ranks.items())
    }
    # the *set* of examples a rank holds: a fresh shuffle of the whole data set deals each rank a new shard; a rank
    # that only reorders its own fixed shard (or never reshuffles) keeps the same examples every epoch
    shard_changed = {
        k: [set(r["samples"][e]) != set(r["samples"][e + 1]) for e in range(n_epochs - 1)]
        for k, r in sorted(ranks.items())
    }
    mean = lambda key: sum(ep[key] for ep in epochs) / max(len(epochs), 1)  # noqa: E731
    return {
        "dataset_size": n,
        "epochs": epochs,
        "overlap_pct": mean("overlap_pct"),
        "coverage_pct": mean("coverage_pct"),
        "missing": max((ep["missing"] for ep in epochs), default=n),
        "work_factor": mean("work_factor"),
        "order_changed": changed,
        # (rank x epoch-boundary pairs whose order changed, all such pairs): (n, n) reshuffles, (0, n) never does
        "order_changes": (sum(sum(c) for c in changed.values()), sum(len(c) for c in changed.values())),
        # None: a single epoch says nothing about reshuffling
        "order_changed_between_epochs": all(all(c) for c in changed.values()) if n_epochs > 1 else None,
        "same_order_every_epoch": not any(any(c) for c in changed.values()) if n_epochs > 1 else None,
        "shard_changes": (
            sum(sum(c) for c in shard_changed.values()),
            sum(len(c) for c in shard_changed.values()),
        ),
        "set_epoch_called": {k: r.get("set_epoch_calls", []) for k, r in sorted(ranks.items())},
    }


def replica_audit(ranks: Reports) -> dict:
    """Per stage (init, wrapped, final): are all ranks' parameter checksums equal?"""
    stages: dict[str, dict] = {}
    for k, r in sorted(ranks.items()):
        for stage, digest in r.get("checksums", {}).items():
            stages.setdefault(stage, {})[k] = digest
    return {
        "checksums": stages,
        "identical": {stage: len(set(d.values())) == 1 and len(d) == len(ranks) for stage, d in stages.items()},
    }


def loss_spread(ranks: Reports) -> dict:
    """Per step: max |local loss - mean| across ranks, relative to the mean (ranks' view of "the" loss)."""
    curves = {k: r.get("local_loss", []) for k, r in sorted(ranks.items())}
    steps = min((len(c) for c in curves.values()), default=0)
    rel = []
    for s in range(steps):
        vals = [c[s] for c in curves.values()]
        m = sum(vals) / len(vals)
        rel.append(max(abs(v - m) for v in vals) / max(abs(m), 1e-12))
    return {
        "curves": curves,
        "max_rel_spread": max(rel, default=0.0),
        "mean_rel_spread": sum(rel) / len(rel) if rel else 0.0,
    }


def curve_gap(reference: list[float], other: list[float], window: int = 10) -> dict:
    """Relative gap between two loss curves over the reference's steps: per step, and of `window`-step means.

    One step's loss depends on the batch's padding and, across processes, on how the batch's tokens
    split between ranks (each rank averages over its own tokens), so a single-step maximum swings from
    seed to seed (07's single-step maximum: 5.03 % on seed 1234 against its 5 % line); the maximum over
    `window`-step means measures the same drift steadily.
    """
    n = min(len(reference), len(other))
    if n == 0:
        raise ValueError("curve_gap: an empty loss curve")
    rel = [abs(a - b) / max(abs(a), 1e-12) for a, b in zip(reference[:n], other[:n])]
    w = max(1, min(window, n))
    means = [(sum(reference[i : i + w]) / w, sum(other[i : i + w]) / w) for i in range(0, n - w + 1)]
    windowed = [abs(a - b) / max(abs(a), 1e-12) for a, b in means]
    return {
        "per_step": rel,
        "max_rel": max(rel),
        "mean_rel": sum(rel) / n,
        "window": w,
        "max_windowed_rel": max(windowed),
    }
