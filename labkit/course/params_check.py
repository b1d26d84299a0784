"""The course notebooks keep their papermill `parameters` cell: `python -m labkit.course.params_check NB.ipynb ...`.

The runner passes `-p SEED 3` (and PROFILE, FIX, sizes) through papermill, which injects the values right after
the cell tagged `parameters`.  Without that tag papermill puts them at the top instead, the notebook's own
assignments then overwrite them, and every headless run quietly uses the defaults.  pre-commit runs this on
every committed notebook (.pre-commit-config.yaml); tests/test_notebook_hygiene.py applies it to what git would
commit.  Exit 0 when every notebook is fine, 1 naming each one that is not, 2 when a file is not a notebook.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REQUIRED = ("PROFILE", "SEED", "DEVICE")  # what the runner and `labkit.notebook.setup` always pass


def _assigns(source: str, name: str) -> bool:
    return re.search(rf"^{name}\s*(?::[^=\n]*)?=(?!=)", source, re.M) is not None


def parameters_cell_problem(nb: dict) -> str | None:
    """What is wrong with a notebook's parameters cell, with the fix; None when it is right."""
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    if not code:
        return "no code cell; the first code cell must be the papermill parameters cell"
    first = code[0]
    if "parameters" not in first.get("metadata", {}).get("tags", []):
        tagged = next((i for i, c in enumerate(code) if "parameters" in c.get("metadata", {}).get("tags", [])), None)
        where = f"code cell {tagged + 1} is tagged instead" if tagged is not None else "no cell is tagged"
        return f"first code cell is not tagged 'parameters' ({where}); tag it in JupyterLab's property inspector"
    src = first.get("source", "")
    src = "".join(src) if isinstance(src, list) else src
    missing = [n for n in REQUIRED if not _assigns(src, n)]
    if missing:
        return f"parameters cell does not set {', '.join(missing)}; assign a default for each (e.g. SEED = 0)"
    return None


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    rc = 0
    for p in paths:
        try:
            nb = json.loads(Path(p).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"{p}: not a readable notebook ({exc.__class__.__name__}); restore it from git", file=sys.stderr)
            rc = 2
            continue
        problem = parameters_cell_problem(nb)
        if problem:
            print(f"{p}: {problem}", file=sys.stderr)
            rc = max(rc, 1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
