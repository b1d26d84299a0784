"""`labkit course seeds`: the course over a list of seeds, as a notebook x seed table.

A claim tuned on seeds 0-4 can fail on seed 13.  The sweep runs the selected notebooks once per seed
(each seed in its own `<out>/seed<N>/`, through the same runner as `labkit course run`) and writes

* `table.md` / `table.json`: PASS / FAIL / SKIP per notebook and seed, with the claims that failed;
* `claims.md`: per claim, the observed value on every seed (min / max for numbers) -- the distribution
  a threshold is justified by (docs/decisions.md §18).

`make test-seeds SEEDS="0 1 2"` runs it; it is not part of `make test` (20 seeds take hours on 2 cores).
"""

from __future__ import annotations

import json
from pathlib import Path

from labkit.cli.errors import UsageError


def parse_seeds(spec: list[str]) -> list[int]:
    """`["0-3", "7"]` -> [0, 1, 2, 3, 7]; one clear error for anything else."""
    seeds: list[int] = []
    for part in (p for s in spec for p in s.replace(",", " ").split()):
        lo, sep, hi = part.partition("-")
        try:
            seeds += list(range(int(lo), int(hi) + 1)) if sep else [int(part)]
        except ValueError:
            raise UsageError(f"--seeds {part}: write seeds as numbers or ranges, e.g. --seeds 0-19 or --seeds 0 3 7")
    if not seeds:
        raise UsageError("--seeds: name at least one seed, e.g. --seeds 0-19")
    return list(dict.fromkeys(seeds))


def _cell(run) -> dict:
    failed = [e["name"] for e in (run.results or {}).get("expectations", []) if not e.get("passed")]
    return {
        "status": run.status,
        "seconds": run.seconds,
        "failed_claims": failed,
        "reason": run.reason.splitlines()[0][:200] if run.reason and not failed else "",
    }


def sweep(seeds: list[int], run_seed, out: str | Path = "runs/seeds", profile: str = "smoke", echo=print) -> dict:
    """`run_seed(seed, out_dir)` -> the runner's `NotebookRun`s for each seed (`labkit course seeds` passes the
    course runner); returns {"seeds", "profile", "table": {notebook: {seed: cell}}, "claims": {...}}."""
    out = Path(out)
    table: dict[str, dict[str, dict]] = {}
    claims: dict[str, dict[str, dict[str, object]]] = {}
    result = {"seeds": seeds, "profile": profile, "table": table, "claims": claims}
    for seed in seeds:
        echo(f"== seed {seed} ==")
        for run in run_seed(seed, out / f"seed{seed}"):
            table.setdefault(run.stem, {})[str(seed)] = _cell(run)
            for e in (run.results or {}).get("expectations", []):
                claims.setdefault(run.stem, {}).setdefault(e["name"], {})[str(seed)] = {
                    "observed": e.get("observed"),
                    "passed": e.get("passed"),
                    "expected": e.get("expected"),
                }
        write(result, out)  # after every seed: an interrupted sweep keeps what it measured
    return result


def _mark(cell: dict | None) -> str:
    if cell is None:
        return ""
    return {"passed": "PASS", "skipped": "SKIP"}.get(cell["status"], "FAIL")


def _span(values: list) -> str:
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(nums) == len(values) and nums:
        return f"{min(nums):.4g} .. {max(nums):.4g}"
    return ", ".join(sorted({json.dumps(v, ensure_ascii=False)[:40] for v in values}))


def markdown(result: dict) -> tuple[str, str]:
    """(table.md, claims.md) for a sweep result."""
    seeds = [str(s) for s in result["seeds"]]
    lines = ["| notebook | " + " | ".join(seeds) + " |", "|---|" + "---|" * len(seeds)]
    fails = []
    for stem, row in result["table"].items():
        lines.append(f"| {stem} | " + " | ".join(_mark(row.get(s)) for s in seeds) + " |")
        for s in seeds:
            cell = row.get(s)
            if cell and cell["status"] == "failed":
                fails.append(f"- {stem}, seed {s}: " + ("; ".join(cell["failed_claims"]) or cell["reason"]))
    done = sum(len(r) for r in result["table"].values())
    green = sum(c["status"] != "failed" for r in result["table"].values() for c in r.values())
    table_md = (
        "\n".join(
            [
                f"# Seed sweep ({result['profile']}): {green} of {done} runs without a failed claim",
                "",
                *lines,
                "",
                *(["Failures:", *fails] if fails else ["No failures."]),
            ]
        )
        + "\n"
    )
    claim_lines = ["# Claims over the seeds", ""]
    for stem, named in result["claims"].items():
        claim_lines += [
            f"## {stem}",
            "",
            "| claim | expected | observed over the seeds | failed on |",
            "|---|---|---|---|",
        ]
        for name, per_seed in named.items():
            expected = next(iter(per_seed.values()))["expected"]
            failed = [s for s, v in per_seed.items() if not v["passed"]]
            claim_lines.append(
                f"| {name} | {expected} | {_span([v['observed'] for v in per_seed.values()])} | "
                f"{', '.join(failed) or '-'} |"
            )
        claim_lines.append("")
    return table_md, "\n".join(claim_lines)


def write(result: dict, out: str | Path) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.json").write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    table_md, claims_md = markdown(result)
    (out / "table.md").write_text(table_md, encoding="utf-8")
    (out / "claims.md").write_text(claims_md, encoding="utf-8")
    return out / "table.md"
