"""The rank-report protocol, both sides: what each rank writes under `<out>/ranks/` and how a launcher reads it.

Each rank of `labkit.train` keeps two files, each rewritten atomically (a reader never sees half a file):
`rank<R>.json`, its facts (the world it joined, its device, the example indices it saw, checksums, losses,
`completed`), and `rank<R>.progress`, its heartbeat (stage, step, phase, time).  `labkit.distributed.launcher`
judges a run by them (a rank that recorded completion and then aborted at exit did its work; a rank whose
heartbeat stopped is the one the others wait for); `labkit.distributed.audit` compares the facts across ranks.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from labkit.atomic import atomic_write_text

REPORTS_DIR = "ranks"


def reports_dir(out_dir: str | Path) -> Path:
    return Path(out_dir) / REPORTS_DIR


class RankReport:
    """This rank's facts (JSON, rewritten atomically) and heartbeat."""

    def __init__(self, out: Path, rank: int):
        self.dir = reports_dir(out)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path, self.beat = self.dir / f"rank{rank}.json", self.dir / f"rank{rank}.progress"
        self.data: dict = {"rank": rank, "pid": os.getpid(), "host": socket.gethostname(), "completed": False}

    @staticmethod
    def _write(path: Path, obj) -> None:
        atomic_write_text(path, json.dumps(obj, ensure_ascii=False))

    def save(self, **facts) -> None:
        self.data.update(facts)
        self._write(self.path, self.data)

    def progress(self, stage: str, step: int = 0, phase: str = "") -> None:
        self._write(self.beat, {"stage": stage, "step": step, "phase": phase, "time": time.time(), "pid": os.getpid()})


def read_reports(out_dir: str | Path) -> tuple[dict[int, dict], dict[int, dict]]:
    """Each rank's report and heartbeat under `<out>/ranks/`: ({rank: facts}, {rank: heartbeat})."""
    ranks, beats = {}, {}
    for p in sorted(reports_dir(out_dir).glob("rank*.json")):
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
            ranks[int(d["rank"])] = d
        except (json.JSONDecodeError, KeyError, ValueError):
            continue  # a report being replaced right now; the atomic rename makes this rare
    for p in sorted(reports_dir(out_dir).glob("rank*.progress")):
        try:
            beats[int(p.name[4:].split(".")[0])] = json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, ValueError):
            continue
    return ranks, beats


def clear_reports(out_dir: str | Path) -> None:
    """Remove an earlier run's reports, so a new attempt is judged by its own."""
    for p in list(reports_dir(out_dir).glob("rank*")):
        p.unlink(missing_ok=True)
