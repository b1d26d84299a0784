"""JSON Lines in and out, and the atomic write every report and pointer file uses.

`read_jsonl` skips blank lines and names `file:line` when a line is not JSON;
`write_jsonl` writes one object per line (UTF-8, `ensure_ascii=False`);
`atomic_write_text` (from `labkit.atomic`, the home of atomic outputs) writes a temporary
file next to the target and renames it over the target (`os.replace`), so a reader sees
the old file or the new one, never half.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from labkit.atomic import atomic_write_text  # noqa: F401  (its long-standing import path)


def read_jsonl(path: str | Path, hint: str = "") -> list[dict]:
    """Every non-blank line of `path` parsed as JSON; a bad line raises ValueError naming `path:line` (+ `hint`)."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: not JSON ({exc}){'; ' + hint if hint else ''}") from exc
    return rows


def write_jsonl(path: str | Path, rows: Iterable) -> Path:
    """Write `rows` (JSON-serialisable objects) one per line; returns the path."""
    path = Path(path)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return path
