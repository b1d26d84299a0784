"""`labkit clean --engine datatrove`: the cleaning pipeline as datatrove stages (local processes or Slurm).

The same decisions as `labkit clean` (same clean and rejected ids, same reasons
and details), computed so that no process ever holds every record:

1. **sign** (one task per shard of files, files `i % tasks == rank`): read, decode,
   repair, extract, validate and sign each record with `labkit.cleaning.pipeline.process_file`
   -- the very code `labkit clean` runs.  Every record carries its input-order
   index `order = file index << 32 | record index in file` (the order `labkit clean`
   decides duplicates in).  Writes the outcomes (a spool per shard), the
   signatures of valid records, and each record's dedup keys (the exact digest and
   the LSH band keys of `dedup.signature`) into `BUCKETS` key partitions.
2. **buckets** (one task per key partition): sort the keys; every key shared by two
   or more records links them (star edges).  A record that shares no key with any
   other can be neither a duplicate nor anyone's original: it is kept without
   further work -- the bulk of a crawl.
3. **components** (one task, edges only -- like datatrove's MinHash stage 3):
   union-find over the edges -> connected components of colliding records.
4. **resolve** (one task per component partition): each component's records, in
   input order, go through `dedup.Deduper` -- the same class `labkit clean` uses.
   Its answer for a record depends only on earlier kept records sharing one of
   its keys (exact dict, band buckets with their cap, ties to the earliest kept),
   all of which are in the record's component, so the decisions are identical.
5. **write** (one task per shard): apply the duplicate decisions to the spooled
   outcomes -> `OUT/clean/NNNNN.jsonl`, `OUT/rejects/NNNNN.jsonl` (rows as
   `labkit clean` writes them); the driver sums the shard counts into `OUT/report.json`.

Intermediate files live in `OUT/.work/` (a shared filesystem on a cluster); it is
removed after a successful run unless `keep_work`.  docs/cleaning_at_scale.md has
the cluster recipe; docs/decisions.md why datatrove rather than Ray Data.
"""

from __future__ import annotations

import json
import pickle
import shutil
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import numpy as np

from labkit.cleaning import dedup
from labkit.cleaning.pipeline import plan_files as pipeline_plan
from labkit.cleaning.pipeline import process_file
from labkit.cleaning.rows import KeptRow, reject_line
from labkit.cleaning.validate import Limits
from labkit.procs import worker_start_method

BUCKETS = 16  # key partitions of stage 2 (a power of two; spread by the key's low bits)
_KEY = np.dtype([("key", "<u8"), ("order", "<i8")])


def plan_files(inputs) -> tuple[list[tuple[str, str]], list[str], int]:
    """`pipeline.plan_files` with the paths as text (they travel to the datatrove tasks)."""
    files, skipped, total = pipeline_plan(inputs)
    return [(str(p), rel) for p, rel in files], skipped, total


def _keys(sig) -> list[int]:
    """A record's dedup keys as uint64: its exact digest's first 8 bytes and its band keys.
    A 64-bit collision only adds a record to a component, never changes a decision."""
    bands = sig.bands or dedup.band_keys(np.frombuffer(sig.minhash, "<u4"))
    return [int.from_bytes(sig.exact[:8], "little"), *bands]


def _shard(work: Path, name: str, rank: int) -> Path:
    d = work / name
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{rank:05d}"


# --- stage 1 ---------------------------------------------------------------------------------
def stage_sign(
    files: list[tuple[str, str]], limits: Limits, work: Path, rank: int, tasks: int, buckets: int = BUCKETS
) -> None:
    keys: list[tuple[int, int]] = []
    sigs: dict[int, tuple[str, object]] = {}
    with open(_shard(work, "records", rank).with_suffix(".pkl"), "wb") as f:
        for fi in range(rank, len(files), tasks):
            path, rel = files[fi]
            for ri, (out, sig) in enumerate(process_file(Path(path), rel, limits)):
                order = fi << 32 | ri
                pickle.dump((order, out), f, protocol=pickle.HIGHEST_PROTOCOL)
                if sig is not None:
                    sigs[order] = (out.id, sig)
                    keys.extend((k, order) for k in _keys(sig))
    with open(_shard(work, "sigs", rank).with_suffix(".pkl"), "wb") as f:
        pickle.dump(sigs, f, protocol=pickle.HIGHEST_PROTOCOL)
    arr = np.array(keys, dtype=_KEY) if keys else np.empty(0, _KEY)
    part = arr["key"] & np.uint64(buckets - 1)
    for b in range(buckets):
        np.save(_shard(work / "keys", f"{b:05d}", rank).with_suffix(".npy"), arr[part == b])


# --- stage 2 ---------------------------------------------------------------------------------
def stage_buckets(work: Path, rank: int, tasks: int, buckets: int = BUCKETS) -> None:
    for b in range(rank, buckets, tasks):
        d = work / "keys" / f"{b:05d}"
        parts = [np.load(p) for p in sorted(d.glob("*.npy"))]
        arr = np.concatenate(parts) if parts else np.empty(0, _KEY)
        arr = np.unique(arr)  # a record listing a key twice links to itself only once
        arr.sort(order=["key", "order"])
        k = arr["key"]
        start = np.r_[True, k[1:] != k[:-1]] if len(k) else np.empty(0, bool)
        run = np.cumsum(start) - 1
        first = arr["order"][np.flatnonzero(start)][run] if len(k) else np.empty(0, np.int64)
        linked = ~start  # every later member of a run links to the run's first member
        edges = np.stack([first[linked], arr["order"][linked]], axis=1) if len(k) else np.empty((0, 2), np.int64)
        np.save(_shard(work, "edges", b).with_suffix(".npy"), np.unique(edges, axis=0))


# --- stage 3 ---------------------------------------------------------------------------------
def stage_components(work: Path, tasks: int, rank: int = 0) -> None:
    parts = [np.load(p) for p in sorted((work / "edges").glob("*.npy"))]
    edges = np.concatenate(parts) if parts else np.empty((0, 2), np.int64)
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    for a, b in edges.tolist():
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)  # the root is the component's first record
    members = np.array(sorted(parent.keys() | set(parent.values())), dtype=np.int64)
    roots = np.array([find(int(m)) for m in members], dtype=np.int64)
    part = (roots * 0x9E3779B1 >> 7) % max(1, tasks)
    for r in range(tasks):
        sel = part == r
        np.save(_shard(work, "components", r).with_suffix(".npy"), np.stack([members[sel], roots[sel]], axis=1))


# --- stage 4 ---------------------------------------------------------------------------------
def stage_resolve(work: Path, rank: int, near_threshold: float) -> None:
    comp = np.load(_shard(work, "components", rank).with_suffix(".npy"))
    root_of = dict(zip(comp[:, 0].tolist(), comp[:, 1].tolist())) if len(comp) else {}
    rows: list[tuple[int, int, str, object]] = []  # (root, order, id, signature)
    for p in sorted((work / "sigs").glob("*.pkl")):
        with open(p, "rb") as f:
            sigs = pickle.load(f)
        rows.extend((root_of[o], o, rid, sig) for o, (rid, sig) in sigs.items() if o in root_of)
    rows.sort(key=lambda r: (r[0], r[1]))
    decisions: dict[int, str] = {}
    deduper, current = None, None
    for root, order, rid, sig in rows:
        if root != current:
            deduper, current = dedup.Deduper(near_threshold), root
        dup = deduper.check(rid, sig)
        if dup:
            decisions[order] = f"{dup[0]} duplicate of {dup[1]}"
    with open(_shard(work, "decisions", rank).with_suffix(".pkl"), "wb") as f:
        pickle.dump(decisions, f, protocol=pickle.HIGHEST_PROTOCOL)


# --- stage 5 ---------------------------------------------------------------------------------
def stage_write(work: Path, out: Path, rank: int) -> None:
    decisions: dict[int, str] = {}
    for p in sorted((work / "decisions").glob("*.pkl")):
        with open(p, "rb") as f:
            decisions.update(pickle.load(f))
    reasons, fixes = Counter(), Counter()
    n_clean = n_rej = 0
    (out / "clean").mkdir(exist_ok=True)
    (out / "rejects").mkdir(exist_ok=True)
    with (
        open(_shard(work, "records", rank).with_suffix(".pkl"), "rb") as f,
        open(out / "clean" / f"{rank:05d}.jsonl", "wb") as fc,
        open(out / "rejects" / f"{rank:05d}.jsonl", "wb") as fr,
    ):
        while True:
            try:
                order, rec = pickle.load(f)
            except EOFError:
                break
            if rec.reason is None and order not in decisions:
                fixes.update(rec.fixes)
                n_clean += 1
                fc.write(KeptRow.of(rec).clean_line())
                continue
            n_rej += 1
            if rec.reason is None:
                reasons["duplicate"] += 1
                fr.write(KeptRow.of(rec).duplicate_line(decisions[order]))
            else:
                reasons[rec.reason] += 1
                fr.write(reject_line(rec))
    stats = {"clean": n_clean, "rejected": n_rej, "reasons": reasons, "fixes": fixes}
    _shard(work, "stats", rank).with_suffix(".json").write_text(json.dumps(stats), encoding="utf-8")


# --- datatrove --------------------------------------------------------------------------------
def _step(stage: str, fn, **kw):
    """A datatrove PipelineStep running `fn(..., rank=, tasks=)` (built lazily: datatrove is optional)."""
    from datatrove.pipeline.base import PipelineStep

    class LabkitStage(PipelineStep):
        name = f"labkit {stage}"
        type = "🧹 CLEAN"

        def __init__(self):
            super().__init__()
            self.kw = kw

        def run(self, data, rank: int = 0, world_size: int = 1):
            fn(rank=rank, **self.kw)
            return data

    return LabkitStage()


def _executors(
    files,
    limits,
    out: Path,
    work: Path,
    tasks: int,
    workers: int,
    near_threshold: float,
    executor: str,
    slurm: dict | None,
):
    if executor == "slurm":
        from datatrove.executor import SlurmPipelineExecutor as Ex

        extra = dict(
            time=slurm.get("time", "04:00:00"),
            partition=slurm["partition"],
            cpus_per_task=1,
            mem_per_cpu_gb=slurm.get("mem_per_cpu_gb", 4),
        )
        base = {}
    else:
        from datatrove.executor import LocalPipelineExecutor as Ex

        extra = {}
        base = {"workers": workers, "start_method": worker_start_method()}  # never fork a kernel
    logs = work / "logs"
    nb = min(tasks, BUCKETS)
    stages = [  # (name, tasks, function, its arguments besides rank)
        ("sign", tasks, stage_sign, dict(files=files, limits=limits, work=work, tasks=tasks)),
        ("buckets", nb, stage_buckets, dict(work=work, tasks=nb)),
        ("components", 1, stage_components, dict(work=work, tasks=tasks)),
        ("resolve", tasks, stage_resolve, dict(work=work, near_threshold=near_threshold)),
        ("write", tasks, stage_write, dict(work=work, out=out)),
        ("report", 1, lambda out, rank: finish(out, keep_work=True), dict(out=out)),
    ]
    prev = None
    for name, n, fn, kw in stages:
        opts = (
            dict(extra, job_name=f"labkit-clean-{name}") if executor == "slurm" else dict(base, workers=min(workers, n))
        )
        prev = Ex(
            pipeline=[_step(name, fn, **kw)], tasks=n, logging_dir=str(logs / name), depends=prev, **opts
        )  # skip_completed: .work is fresh
    return prev


def clean_distributed(
    inputs,
    out_dir,
    tasks: int = 2,
    workers: int = 2,
    executor: str = "local",
    min_title: int = 10,
    max_title: int = 60,
    min_body: int = 50,
    max_body: int | None = None,
    near_threshold: float = dedup.THRESHOLD,
    slurm: dict | None = None,
    keep_work: bool = False,
) -> dict:
    """Run the five stages (and a one-task report stage) on datatrove; returns the report
    (also OUT/report.json).  With executor="slurm" the six jobs are submitted, each
    depending on the previous, and this returns the run's metadata at once: OUT/report.json
    appears when the last job has run (OUT/.work/logs/STAGE/ has each stage's logs)."""
    t0 = time.perf_counter()
    limits = Limits(min_title, max_title, min_body, max_body)
    out = Path(out_dir).absolute()
    out.mkdir(parents=True, exist_ok=True)
    work = out / ".work"
    for stale in (work, out / "clean", out / "rejects"):
        shutil.rmtree(stale, ignore_errors=True)
    files, skipped, total_bytes = plan_files(inputs)
    tasks = max(1, min(tasks, len(files) or 1))
    meta = {
        "inputs": [str(p) for p in inputs],
        "files": len(files),
        "skipped_files": skipped[:100],
        "n_skipped_files": len(skipped),
        "bytes": total_bytes,
        "tasks": tasks,
        "workers": workers,
        "executor": executor,
        "limits": asdict(limits),
        "near_threshold": near_threshold,
    }
    work.mkdir(parents=True)
    (work / "meta.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
    _executors(files, limits, out, work, tasks, workers, near_threshold, executor, slurm).run()
    if executor == "slurm":
        return meta
    return finish(out, seconds=time.perf_counter() - t0, keep_work=keep_work)


def finish(out_dir, seconds: float | None = None, keep_work: bool = False) -> dict:
    """Sum the write stage's per-shard counts into OUT/report.json (and drop OUT/.work)."""
    out = Path(out_dir)
    work = out / ".work"
    meta = json.loads((work / "meta.json").read_text(encoding="utf-8"))
    shards = sorted((work / "stats").glob("*.json"))
    if len(shards) != meta["tasks"]:
        raise RuntimeError(
            f"{out}: {len(shards)} of {meta['tasks']} shards written; "
            f"see {work / 'logs'} and rerun when every stage has finished"
        )
    reasons, fixes = Counter(), Counter()
    n_clean = n_rej = 0
    for p in shards:
        s = json.loads(p.read_text(encoding="utf-8"))
        n_clean += s["clean"]
        n_rej += s["rejected"]
        reasons.update(s["reasons"])
        fixes.update(s["fixes"])
    n = n_clean + n_rej
    report = {
        **meta,
        "records": n,
        "clean": n_clean,
        "rejected": n_rej,
        "reasons": dict(sorted(reasons.items())),
        "fixes": dict(sorted(fixes.items())),
        "outputs": {"clean": str(out / "clean"), "rejects": str(out / "rejects")},
    }
    if seconds:
        report.update(
            seconds=round(seconds, 3),
            records_per_s=round(n / seconds, 1),
            mb_per_s=round(meta["bytes"] / 1e6 / seconds, 3),
        )
    (out / "report.json").write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)
    return report
