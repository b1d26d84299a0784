"""Notebook 05's runs: one data set and one budget, launched once per sampler / seed setting.

Every run is `labkit.train` on the same data, steps, batch and seed; only the flags a run names
(`--sampler`, `--no-set-epoch`, `--seed-mode`, ...) differ, so each comparison changes one setting.
The rank reports that come back are what `labkit.distributed.audit` reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass
class SamplerRuns:
    data_dir: str | Path  # prepared by `labkit.training.own_data.prepare_data`
    out_dir: str | Path  # each run writes <out_dir>/<name>/
    nproc: int
    steps: int
    batch_size: int  # per process
    seed: int
    max_source_len: int
    device: str = "auto"
    timeout_s: float = 300.0
    echo: Callable[[str], None] | None = print  # one line per run; None = silent
    preset: str = "tiny"  # the model every run trains (labkit.model.PRESETS); the ranks' threads follow it

    def args(self, *flags: str) -> list[str]:
        """The `labkit.train` arguments of a run: the shared budget, then `flags`."""
        return [
            "--data",
            str(self.data_dir),
            "--steps",
            str(self.steps),
            "--batch-size",
            str(self.batch_size),
            "--seed",
            str(self.seed),
            "--max-source-len",
            str(self.max_source_len),
            "--preset",
            self.preset,
            "--no-grad-monitor",
            *flags,
        ]

    def run(self, name: str, *flags: str) -> dict[int, dict]:
        """Launch one run on `nproc` processes; returns its rank reports (rank -> report)."""
        from labkit.distributed import launch

        r = launch(
            self.args(*flags),
            self.nproc,
            out_dir=Path(self.out_dir) / name,
            device=self.device,
            timeout_s=self.timeout_s,
            preset=self.preset,
            echo=None,
        )
        if self.echo:
            self.echo(f"{name}: {r.world_size} ranks completed in {r.seconds:.0f} s {'; '.join(r.notes)}")
        return r.ranks
