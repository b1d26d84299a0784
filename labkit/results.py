"""Recorded results: each notebook states its claims as expectations.

A run writes `runs/<notebook-stem>/results.json` with exactly this shape::

    {"notebook": "01_dirty_data", "profile": "smoke", "seed": 0, "seconds": 41.2,
     "date": "2026-12-02T01:51:07+00:00",
     "expectations": [{"name": "...", "passed": true, "observed": ..., "expected": "...", "kind": "fix"}],
     "metrics": {"name": value},
     "skipped": [{"name": "...", "reason": "..."}]}

An expectation's `kind` (present only when the notebook gives one) says what it
proves: "pitfall" (the damage is reproduced) or "fix" (the fix removes it).
Running a pitfall notebook with `-p FIX False` must fail exactly its "fix"
claims.  `skipped` lists demonstrations this machine cannot run (e.g. they need
a GPU), each with the reason, so the report shows them instead of hiding them.

`finish()` raises `ExpectationFailed` naming every failed claim, so a papermill
run fails and CI goes red.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from labkit.atomic import atomic_write_text
from labkit.i18n import _, claim
from labkit.jsonl import jsonable
from labkit.paths import runs_dir


class ExpectationFailed(AssertionError):
    pass


KINDS = (None, "pitfall", "fix")


class Results:
    """Collects expectations and metrics for one notebook run."""

    def __init__(self, notebook: str, profile: str = "smoke", seed: int = 0, out_dir: str | Path | None = None):
        self.notebook = Path(notebook).stem
        self.profile = profile
        self.seed = seed
        self.out_dir = Path(out_dir) if out_dir else runs_dir() / self.notebook
        self.expectations: list[dict] = []
        self.metrics: dict[str, Any] = {}
        self.skipped: list[dict] = []
        self._t0 = time.perf_counter()

    def expect(
        self, name: str, observed: Any, condition: bool | Callable[[Any], bool], expected: str, kind: str | None = None
    ) -> bool:
        """Record a claim. `condition` is a bool or a predicate applied to `observed`.

        `kind` is "pitfall" (the damage shows) or "fix" (the fix removes it); None for neither."""
        if kind not in KINDS:
            raise ValueError(f"kind={kind!r}: choose one of {KINDS}")
        passed = bool(condition(observed) if callable(condition) else condition)
        entry = {"name": name, "passed": passed, "observed": jsonable(observed), "expected": expected}
        if kind is not None:
            entry["kind"] = kind
        self.expectations.append(entry)
        mark = _("PASS") if passed else _("FAIL")
        # the name stays the key (the same in every edition); the learner reads it in the course language
        print(
            _("[{mark}] {name}: observed {observed}; expected {expected}").format(
                mark=mark, name=claim(self.notebook, name), observed=_short(observed), expected=expected
            )
        )
        return passed

    def skip(self, name: str, reason: str) -> None:
        """Record a demonstration this machine cannot run (shown as SKIP in the report, with the reason)."""
        self.skipped.append({"name": name, "reason": reason})
        print(_("[{mark}] {name}: {reason}").format(mark=_("SKIP"), name=claim(self.notebook, name), reason=reason))

    def metric(self, name: str, value: Any) -> Any:
        self.metrics[name] = jsonable(value)
        return value

    def update(self, metrics: dict) -> None:
        for k, v in metrics.items():
            self.metric(k, v)

    @property
    def failed(self) -> list[dict]:
        return [e for e in self.expectations if not e["passed"]]

    def to_dict(self) -> dict:
        return {
            "notebook": self.notebook,
            "profile": self.profile,
            "seed": self.seed,
            "seconds": round(time.perf_counter() - self._t0, 2),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),  # when the run ended (the site shows it)
            "expectations": self.expectations,
            "metrics": self.metrics,
            "skipped": self.skipped,
        }

    def save(self) -> Path:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / "results.json"
        return atomic_write_text(path, json.dumps(self.to_dict(), ensure_ascii=False, indent=2))

    def finish(self) -> Path:
        """Save, then raise if any expectation failed (the last cell of every notebook)."""
        path = self.save()
        if not self.expectations:
            raise ExpectationFailed(
                _("{notebook}: no expectations were recorded; a notebook must prove something").format(
                    notebook=self.notebook
                )
            )
        if self.failed:
            line = _("- {name}: expected {expected}, observed {observed}")
            lines = [
                line.format(
                    name=claim(self.notebook, e["name"]), expected=e["expected"], observed=_short(e["observed"])
                )
                for e in self.failed
            ]
            head = _("{notebook}: {failed} of {total} expectations failed")
            raise ExpectationFailed(
                head.format(notebook=self.notebook, failed=len(self.failed), total=len(self.expectations))
                + "\n"
                + "\n".join(lines)
            )
        print(
            _("{notebook}: all {total} expectations passed -> {path}").format(
                notebook=self.notebook, total=len(self.expectations), path=path
            )
        )
        return path


def load(path: str | Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


# ---- reading a run folder ------------------------------------------------------------------------------------


def read_json(path: str | Path) -> Any:
    """A JSON file's content, or None when it is missing or not whole JSON (a run killed while writing it)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def file_date(path: str | Path) -> str:
    """When `path` was last written: its modification time, UTC, ISO 8601 to the second."""
    return datetime.fromtimestamp(Path(path).stat().st_mtime, timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class RunFolder:
    """What one notebook's run left in `<runs>/<notebook>/`: what the runner saw (`status.json`: status passed /
    failed / skipped, seconds, reason, output) and what the notebook recorded (`results.json`); None where a file
    is missing or unreadable."""

    path: Path
    status: dict | None
    results: dict | None

    @property
    def date(self) -> str | None:
        """When the run ended: the results' `date`, else (runs recorded before it was) results.json's mtime."""
        if self.results is None:
            return None
        return self.results.get("date") or file_date(self.path / "results.json")


def read_run(folder: str | Path) -> RunFolder:
    """The one reader of a run folder (the report, the site, the times table, the course runner use it)."""
    folder = Path(folder)
    return RunFolder(folder, read_json(folder / "status.json"), read_json(folder / "results.json"))


def _short(x: Any, n: int = 160) -> str:
    s = repr(jsonable(x))
    return s if len(s) <= n else s[: n - 3] + "..."
