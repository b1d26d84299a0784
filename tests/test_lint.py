"""`make lint` inside `make test`: the pre-commit hooks (.pre-commit-config.yaml) run here, one test per hook.

ruff's hooks run through pre-commit on every tracked file, exactly as `make lint` runs them.  The notebook hooks
run on what git would commit (the index), not the working copy: a learner's JupyterLab saves outputs there and
that must not fail `make test` (tests/test_notebook_hygiene.py draws the same line); they are also shown a
notebook with outputs and one without its parameters cell, which they must reject.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[1]
CONFIG = ROOT / ".pre-commit-config.yaml"
HOOKS = {h["id"]: h for repo in yaml.safe_load(CONFIG.read_text(encoding="utf-8"))["repos"] for h in repo["hooks"]}
VENV_BIN = str(Path(sys.executable).parent)
ENV = {**os.environ, "PATH": VENV_BIN + os.pathsep + os.environ.get("PATH", "")}  # what `make lint` sets
FIX = {
    "ruff-check": "fix what it names (`ruff check --fix` fixes the [*] ones)",
    "ruff-format": "run `make format` (ruff format), then review and commit the result",
}


def git_checkout() -> bool:
    return (
        subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--is-inside-work-tree"], capture_output=True, text=True
        ).stdout.strip()
        == "true"
    )


def test_every_hook_is_local_and_needs_no_download():
    repos = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))["repos"]
    assert [r["repo"] for r in repos] == ["local"]
    assert set(HOOKS) == {"nbstripout", "notebook-parameters", "ruff-check", "ruff-format"}
    assert {h["language"] for h in HOOKS.values()} == {"unsupported"}  # the venv's tools, no hook environments


def test_make_lint_runs_the_hooks():
    proc = subprocess.run(["make", "-n", "lint"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "pre-commit run --all-files" in proc.stdout


@pytest.mark.parametrize("hook", ["ruff-check", "ruff-format"])
def test_ruff_hook_passes_on_every_tracked_file(hook, tmp_path):
    if not git_checkout():
        pytest.skip("pre-commit lists files with git: not a git checkout")
    proc = subprocess.run(
        [str(Path(VENV_BIN) / "pre-commit"), "run", hook, "--all-files", "--color", "never"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**ENV, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit")},
    )
    if proc.returncode:
        files = sorted({ln.split(":")[0] for ln in proc.stdout.splitlines() if ": unformatted:" in ln})
        head = f"{len(files)} files need it: {' '.join(files)}" if files else proc.stdout[-6000:]
        pytest.fail(f"pre-commit hook {hook} failed: {FIX[hook]}\n{head}")


def _hook_argv(hook: str, *files: Path) -> list[str]:
    return [*shlex.split(HOOKS[hook]["entry"]), *map(str, files)]


def _committed_notebooks(tmp_path: Path) -> list[Path]:
    """The course notebooks as git would commit them (the index), written under tmp_path/notebooks."""
    out = tmp_path / "notebooks"
    out.mkdir()
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        proc = subprocess.run(["git", "-C", str(ROOT), "show", f":notebooks/{nb.name}"], capture_output=True)
        (out / nb.name).write_bytes(proc.stdout if proc.returncode == 0 else nb.read_bytes())
    return sorted(out.glob("*.ipynb"))


@pytest.mark.parametrize("hook", ["nbstripout", "notebook-parameters"])
def test_notebook_hooks_pass_on_the_committed_notebooks(hook, tmp_path):
    notebooks = _committed_notebooks(tmp_path)
    assert len(notebooks) >= 9
    proc = subprocess.run(_hook_argv(hook, *notebooks), capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode == 0, f"hook {hook}: {proc.stdout}{proc.stderr}"


def test_notebook_hooks_reject_outputs_and_a_lost_parameters_cell(tmp_path):
    src = json.loads((ROOT / "notebooks" / "03_memory_and_accumulation.ipynb").read_text(encoding="utf-8"))
    ran = json.loads(json.dumps(src))
    cell = next(c for c in ran["cells"] if c["cell_type"] == "code")
    cell.update(execution_count=1, outputs=[{"output_type": "stream", "name": "stdout", "text": ["smoke 0\n"]}])
    untagged = json.loads(json.dumps(src))
    next(c for c in untagged["cells"] if c["cell_type"] == "code")["metadata"]["tags"] = []
    for name, nb in (("03_ran.ipynb", ran), ("03_untagged.ipynb", untagged)):
        (tmp_path / name).write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")
    strip = subprocess.run(_hook_argv("nbstripout", tmp_path / "03_ran.ipynb"), capture_output=True, text=True, env=ENV)
    assert strip.returncode != 0
    assert json.loads((tmp_path / "03_ran.ipynb").read_text(encoding="utf-8")) == ran  # verified, never rewritten
    params = subprocess.run(
        _hook_argv("notebook-parameters", tmp_path / "03_untagged.ipynb"), capture_output=True, text=True, env=ENV
    )
    assert params.returncode == 1 and "not tagged 'parameters'" in params.stderr
