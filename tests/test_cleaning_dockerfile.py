"""The cleaning Dockerfile is consistent (no Docker engine here, so check what `docker build` relies on)."""

from __future__ import annotations

import ast
import json
import re
import shlex
import sys
import tomllib

import pytest

from labkit.paths import project_root

ROOT = project_root()
# the modules `labkit clean` executes: the CLI dispatcher and the pipeline (not bench/score/viewer)
RUNTIME = [
    "labkit/__init__.py",
    "labkit/cli/__init__.py",
    "labkit/cli/commands.py",
    "labkit/cli/errors.py",
    *(
        f"labkit/cleaning/{m}.py"
        for m in ("__init__", "cli", "pipeline", "readers", "decode", "repair", "extract", "validate", "dedup")
    ),
]
DIST = {"charset_normalizer": "charset-normalizer"}  # import name -> distribution name


def _instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    return [
        (ln.split(None, 1)[0].upper(), ln.split(None, 1)[1] if " " in ln.strip() else "")
        for ln in text.splitlines()
        if ln.strip() and not ln.lstrip().startswith("#")
    ]


def _pip_specs() -> dict[str, str]:
    specs = {}
    for op, arg in _instructions():
        if op == "RUN" and "pip install" in arg:
            for cmd in arg.split("&&"):
                words = shlex.split(cmd)
                if words[:2] == ["pip", "install"]:
                    for w in words[2:]:
                        if not w.startswith("-") and w != ".":
                            name = re.split(r"[<>=!~\[]", w, maxsplit=1)[0]
                            specs[name.lower()] = w
    return specs


def _third_party_imports() -> set[str]:
    names = set()
    for rel in RUNTIME:
        for node in ast.walk(ast.parse((ROOT / rel).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("labkit", "__future__")}


def test_entrypoint_is_the_clean_cli():
    entry = [json.loads(arg) for op, arg in _instructions() if op == "ENTRYPOINT"]
    assert entry == [["labkit", "clean"]]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["scripts"]["labkit"] == "labkit.cli:main"
    from labkit.cli.commands import COMMANDS

    assert COMMANDS["clean"] == "labkit.cleaning.cli"


def test_copied_paths_exist_and_are_not_dockerignored():
    ignored = {
        ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln.strip() and not ln.startswith("#")
    }
    copies = [shlex.split(arg)[:-1] for op, arg in _instructions() if op == "COPY"]
    assert copies, "the Dockerfile copies nothing"
    for sources in copies:
        for src in sources:
            assert (ROOT / src).exists(), f"COPY {src}: no such path in the repository"
            assert src not in ignored, f"COPY {src} but .dockerignore drops it"


def test_image_installs_exactly_what_cleaning_imports_with_pyproject_ranges():
    specs = _pip_specs()
    needed = {DIST.get(n, n) for n in _third_party_imports()}
    assert needed <= set(specs), f"the image lacks {needed - set(specs)}"
    assert "torch" not in specs and "transformers" not in specs
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    by_name = {re.split(r"[<>=!~\[ ]", d, maxsplit=1)[0].lower(): d.replace(" ", "") for d in deps}
    for name, spec in specs.items():
        assert name in by_name, f"{name} is installed in the image but not a labkit dependency"
        assert spec.replace(" ", "") == by_name[name], f"{spec!r} != pyproject's {by_name[name]!r}"
    assert any(op == "RUN" and "pip install --no-deps ." in arg for op, arg in _instructions())


def test_runs_as_non_root():
    users = [arg for op, arg in _instructions() if op == "USER"]
    assert users and users[-1] not in ("root", "0")


@pytest.mark.parametrize("quiet", [["--quiet"], []], ids=["quiet", "progress lines"])
def test_clean_cli_runs_without_the_packages_the_image_leaves_out(tmp_path, quiet):
    """What the slim image lacks (torch, transformers, pandas, tqdm ...) is blocked; `labkit clean` must still work,
    its progress included (lines: the image's logs are not a terminal)."""
    import subprocess

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text(
        "北京智慧城市项目正式启动首批覆盖三区\n" + "北京市今日召开新闻发布会。" * 6, encoding="utf-8"
    )
    allowed = {DIST.get(n, n).replace("-", "_") for n in _pip_specs()}
    blocked = [
        m
        for m in (
            "torch",
            "transformers",
            "tokenizers",
            "accelerate",
            "pandas",
            "matplotlib",
            "bs4",
            "jieba",
            "tqdm",
            "tensorboard",
            "papermill",
            "ipywidgets",
            "psutil",
        )
        if m not in allowed
    ]
    code = (
        f"import sys\nfor m in {blocked!r}: sys.modules[m] = None\n"
        "from labkit.cli import main\n"
        f"sys.exit(main(['clean', {str(tmp_path / 'in')!r}, '--out', {str(tmp_path / 'out')!r}, *{quiet!r}]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ("clean 1/1 files | records 1" in proc.stdout) is not bool(quiet), proc.stdout
    assert json.loads((tmp_path / "out" / "clean.jsonl").read_text(encoding="utf-8"))["id"] == "a.txt"
