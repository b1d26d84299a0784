"""JSON in and out: JSON Lines, and plain JSON values from numpy/torch ones.

`read_jsonl` skips blank lines and names `file:line` when a line is not JSON;
`write_jsonl` writes one object per line (UTF-8, `ensure_ascii=False`);
`jsonable` turns numpy/torch scalars and arrays (and anything else) into values `json.dumps` takes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def jsonable(x: Any, finite: bool = True) -> Any:
    """Plain JSON types for numpy/torch scalars and arrays (and dict keys as str); non-finite floats as strings
    ("nan", "inf": JSON has no such numbers) -- or, with `finite=False`, kept as floats, for files only Python's
    json reads back (the rank reports, whose readers compute with a loss that went NaN); anything else as its str.

    >>> import numpy as np
    >>> jsonable({1: np.float32(0.5), "a": np.arange(2), "b": (float("nan"),)})
    {'1': 0.5, 'a': [0, 1], 'b': ['nan']}
    """
    if hasattr(x, "tolist") and not isinstance(x, (str, bytes)):
        x = x.tolist()
    if isinstance(x, float):
        return x if math.isfinite(x) or not finite else str(x)
    if isinstance(x, dict):
        return {str(k): jsonable(v, finite) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v, finite) for v in x]
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    if hasattr(x, "item"):
        return jsonable(x.item(), finite)
    return str(x)


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
