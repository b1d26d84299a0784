#!/usr/bin/env python3
"""How `make setup` installs PyTorch, and which extras, on this machine.  Standard library only:
it runs before the package (and anything it depends on) is installed.

    install.py extras                 the default EXTRAS: serve,lab,dev,scale,site (+ triton where its wheel exists)
    install.py plan                   the decision, as JSON (what `torch` would try, and the build it expects)
    install.py torch                  install torch==VERSION into the running interpreter's environment
    install.py verify                 the installed torch is VERSION *and* the intended build (CPU or CUDA)
    install.py package ARGS...        pip install ARGS (the package and its extras), through uv as `torch` does
    install.py uv-args                pip's own configuration (indexes, find-links, constraints) as `uv pip` flags:
                                      `make setup` installs the package through uv, which reads no pip.conf

The decision (`plan`):

    TORCH_PIP_ARGS given                -> torch==V + those args; the build expected is TORCH_BUILD, else read
                                           from the args (/whl/cpu -> cpu, /whl/cuXYZ -> cuda), else any
    NVIDIA GPU, Linux x86_64            -> torch==V from the configured index (PyPI's Linux x86_64 wheel is CUDA); cuda
    NVIDIA GPU, elsewhere               -> torch==V from the configured index; any (a hint says how to get CUDA)
    no GPU, macOS                       -> torch==V from the configured index (PyPI's macOS wheel is CPU); cpu
    no GPU, Linux / Windows             -> cpu, the first that works of:
        1. torch==V+cpu from the configured indexes, when they already offer it (a local wheel, a mirror);
        2. torch==V from PyTorch's CPU index (probed first: 5 s);
        3. torch==V from the configured index -- `verify` then fails if that turned out to be a CUDA build,
           saying how to set TORCH_PIP_ARGS.

A GPU is present when `nvidia-smi -L` succeeds or /proc/driver/nvidia exists.  `--gpu` and `--platform`
simulate another machine (tests), `--local-cpu` / `--cpu-index` the probes' answers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
BASE_EXTRAS = ("serve", "lab", "dev", "scale", "site")
# nvidia-pytriton ships only manylinux_2_35 wheels, for x86_64 and aarch64 (checked on PyPI for 0.5.0-0.7.0)
TRITON_MACHINES = ("x86_64", "aarch64")
TRITON_GLIBC = (2, 35)
BUILDS = ("cpu", "cuda", "any")


@dataclass(frozen=True)
class Platform:
    system: str  # sys.platform: linux, darwin, win32
    machine: str  # x86_64, aarch64, arm64, amd64 (lower case)
    glibc: tuple[int, int] | None  # None: not glibc, or unknown

    @classmethod
    def current(cls) -> "Platform":
        system = "linux" if sys.platform.startswith("linux") else sys.platform
        return cls(system, platform.machine().lower(), _glibc_version() if system == "linux" else None)

    @classmethod
    def parse(cls, text: str) -> "Platform":
        """`linux-x86_64-glibc2.36`, `linux-aarch64` (glibc unknown), `darwin-arm64`, `win32-amd64`."""
        m = re.fullmatch(r"([a-z0-9]+)-([a-z0-9_]+)(?:-glibc(\d+)\.(\d+))?", text.strip().lower())
        if not m:
            raise ValueError(f"platform {text!r}: expected SYSTEM-MACHINE[-glibcX.Y], e.g. linux-x86_64-glibc2.36")
        glibc = (int(m.group(3)), int(m.group(4))) if m.group(3) else None
        return cls(m.group(1), m.group(2), glibc)

    def __str__(self) -> str:
        return f"{self.system}-{self.machine}" + (f"-glibc{self.glibc[0]}.{self.glibc[1]}" if self.glibc else "")


def _glibc_version() -> tuple[int, int] | None:
    text = ""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""  # "glibc 2.36"
    except (AttributeError, ValueError, OSError):
        pass
    if not text.startswith("glibc"):
        lib, ver = platform.libc_ver()
        text = f"glibc {ver}" if lib == "glibc" else ""
    m = re.match(r"glibc (\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def gpu_present() -> bool:
    """An NVIDIA GPU (driver loaded): /proc/driver/nvidia exists, or `nvidia-smi -L` succeeds."""
    if Path("/proc/driver/nvidia").exists():
        return True
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        return subprocess.run([smi, "-L"], capture_output=True, timeout=15).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def triton_wheel(plat: Platform) -> bool:
    """Does nvidia-pytriton publish a wheel this platform can install?"""
    return (
        plat.system == "linux"
        and plat.machine in TRITON_MACHINES
        and plat.glibc is not None
        and plat.glibc >= TRITON_GLIBC
    )


def default_extras(plat: Platform) -> str:
    return ",".join(BASE_EXTRAS + (("triton",) if triton_wheel(plat) else ()))


# ---------------------------------------------------------------------------------------------- the plan
@dataclass
class Attempt:
    source: str  # configured-cpu | cpu-index | configured | TORCH_PIP_ARGS
    args: list[str]  # what follows `pip install`
    probe: str | None = None  # local-cpu | cpu-index: try only when the probe says yes


@dataclass
class Plan:
    build: str  # cpu | cuda | any: what `verify` demands
    why: str
    attempts: list[Attempt] = field(default_factory=list)
    hint: str = ""


def build_from_args(args: list[str]) -> str:
    text = " ".join(args)
    if re.search(r"/whl/cpu\b", text) or re.search(r"==[\w.]+\+cpu\b", text):
        return "cpu"
    if re.search(r"/whl/cu\d+", text) or re.search(r"==[\w.]+\+cu\d+", text):
        return "cuda"
    return "any"


def make_plan(version: str, gpu: bool, plat: Platform, override: str = "", build: str = "auto") -> Plan:
    pin = f"torch=={version}"
    if override.strip():
        args = shlex.split(override)
        expect = build if build != "auto" else build_from_args(args)
        return Plan(expect, "TORCH_PIP_ARGS given", [Attempt("TORCH_PIP_ARGS", [pin, *args])])
    if gpu:
        if plat.system == "linux" and plat.machine == "x86_64":
            plan = Plan(
                "cuda", "NVIDIA GPU; PyPI's Linux x86_64 torch is the CUDA build", [Attempt("configured", [pin])]
            )
        else:
            plan = Plan(
                "any",
                f"NVIDIA GPU on {plat}: the configured index decides the build",
                [Attempt("configured", [pin])],
                hint="for a CUDA build set TORCH_PIP_ARGS to PyTorch's CUDA index, e.g. "
                "TORCH_PIP_ARGS='--index-url https://download.pytorch.org/whl/cu128'",
            )
    elif plat.system == "darwin":
        plan = Plan("cpu", "no NVIDIA GPU; macOS wheels are the CPU (+MPS) build", [Attempt("configured", [pin])])
    else:
        plan = Plan(
            "cpu",
            "no NVIDIA GPU: the CPU build",
            [
                Attempt("configured-cpu", [f"{pin}+cpu"], probe="local-cpu"),
                Attempt("cpu-index", [pin, "--index-url", CPU_INDEX], probe="cpu-index"),
                Attempt("configured", [pin]),
            ],
        )
    if build != "auto":
        plan.build, plan.why = build, plan.why + f" (TORCH_BUILD={build})"
    return plan


# ---------------------------------------------------------------------------------------------- probes
def configured_offers_cpu(version: str, python: str = sys.executable) -> bool:
    """Do the configured indexes / find-links already offer torch==VERSION+cpu (a local wheel, a mirror)?"""
    try:
        out = subprocess.run(
            [python, "-m", "pip", "index", "versions", "torch", "--timeout", "10", "--retries", "0"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    m = re.search(r"Available versions:(.*)", out)
    return bool(m) and f"{version}+cpu" in {v.strip() for v in m.group(1).split(",")}


def cpu_index_reachable(version: str, timeout: float = 5.0) -> bool:
    """Does PyTorch's CPU index answer within `timeout` seconds?  (Proxies from the environment apply.)"""
    cafile = os.environ.get("PIP_CERT") or None
    try:
        import ssl

        ctx = ssl.create_default_context(cafile=cafile) if cafile and Path(cafile).exists() else None
        with urllib.request.urlopen(f"{CPU_INDEX}/torch/", timeout=timeout, context=ctx) as r:
            return r.status == 200
    except Exception:
        return False


PROBES = {"local-cpu": configured_offers_cpu, "cpu-index": cpu_index_reachable}


# ---------------------------------------------------------------------------------------------- installed torch
def installed_torch(python: str = sys.executable) -> tuple[str, str | None] | None:
    """(torch.__version__, torch.version.cuda) of `python`'s environment, or None when torch does not import."""
    code = "import json, torch; print(json.dumps([torch.__version__, torch.version.cuda]))"
    r = subprocess.run([python, "-c", code], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    version, cuda = json.loads(r.stdout.strip().splitlines()[-1])
    return version, cuda


def check_build(installed: tuple[str, str | None] | None, version: str, build: str, gpu: bool) -> str | None:
    """Why the installed torch is not what was intended, or None when it is."""
    if installed is None:
        return "torch does not import: the install failed (see pip's output above)"
    have, cuda = installed
    if have.split("+")[0] != version:
        return (
            f"torch {have} is installed, not {version}: something replaced the pinned build "
            f"(check pyproject.toml's ranges against TORCH_VERSION)"
        )
    actual = "cuda" if cuda else "cpu"
    if build in ("any", actual):
        return None
    if build == "cpu":
        return (
            f"torch {have} is a CUDA build (CUDA {cuda}), but this machine has "
            f"{'an NVIDIA GPU' if gpu else 'no NVIDIA GPU'} and the CPU build was intended "
            f"(PyTorch's CPU index {CPU_INDEX} was not reachable and the configured index gave CUDA). "
            f"Point pip at a CPU build and run setup again, e.g.\n"
            f'    make setup TORCH_PIP_ARGS="--index-url {CPU_INDEX}"   (or a mirror of it)\n'
            f'    make setup TORCH_PIP_ARGS="--find-links DIR"          (DIR holds torch-{version}+cpu-*.whl)\n'
            f"or keep this CUDA build: make setup TORCH_BUILD=any"
        )
    return (
        f"torch {have} is the CPU build, but this machine has an NVIDIA GPU and the CUDA build was intended. "
        f"Install a CUDA build, e.g.\n"
        f'    make setup TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cu128"  '
        f"(a CUDA version your driver supports: nvidia-smi)\n"
        f"or keep the CPU build: make setup TORCH_BUILD=any"
    )


# ---------------------------------------------------------------------------------------------- commands
def _context(a) -> tuple[bool, Platform]:
    gpu = gpu_present() if a.gpu == "auto" else a.gpu == "yes"
    plat = Platform.current() if a.platform == "auto" else Platform.parse(a.platform)
    return gpu, plat


def _plan(a) -> tuple[Plan, bool, Platform]:
    gpu, plat = _context(a)
    return make_plan(a.version, gpu, plat, a.pip_args, a.build), gpu, plat


def _probe(a, name: str) -> bool:
    forced = {"local-cpu": a.local_cpu, "cpu-index": a.cpu_index}[name]
    if forced != "auto":
        return forced in ("yes", "up")
    return PROBES[name](a.version)


PYPI = "https://pypi.org/simple"
# pip settings that change what gets installed, and the `uv pip install` flag for each (uv reads no pip.conf)
UV_FLAGS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
    "no-index": "--no-index",
}


def uv_args(config_lines: list[str]) -> list[str]:
    """`uv pip install` flags for the settings in `pip config list`'s lines (`global.find-links='/opt/wheels'`,
    `:env:.constraint='...'`): every configured index, link folder and constraint file, the environment's
    winning over the files' as in pip.  A `file://` index or a folder that does not exist is left out (pip only
    warns about one; uv would fail)."""
    found: dict[str, tuple[int, str]] = {}
    for line in config_lines:
        m = re.match(r"^([^.]*)\.([a-z-]+)='(.*)'$", line.strip())
        if not m or m.group(2) not in UV_FLAGS:
            continue
        where, key, value = m.groups()
        rank = 2 if where == ":env:" else 1 if where == "global" else 0
        if key not in found or rank >= found[key][0]:
            found[key] = (rank, value)
    args: list[str] = []
    for key, (_, value) in found.items():
        flag = UV_FLAGS[key]
        if key == "no-index":
            if value.lower() in ("1", "true", "yes", "on"):
                args.append(flag)
            continue
        for item in value.split():
            path = item[len("file://") :] if item.startswith("file://") else item if "://" not in item else None
            if path is not None and not Path(path).exists():
                continue
            args += [flag, item]
    if "--extra-index-url" in args:
        # pip weighs every file of every index; uv, for a version several indexes hold, reads only the first index
        # that has it, and searches the extra indexes before the main one. A partial mirror listed as an extra index
        # then decides alone: this machine's /opt/pypi has multiprocess 0.70.19 only as the py310 wheel, which breaks
        # on Python 3.11 (PyPI also has the py311 one, which pip picks). So the main index is searched first, then
        # the extras, and every index is weighed for the best version.
        main = found.get("index-url", (0, PYPI))[1]
        args = ["--extra-index-url", main, *args, "--index-strategy", "unsafe-best-match"]
    return args


def pip_config_as_uv_args() -> list[str]:
    r = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    return uv_args(r.stdout.splitlines())


def install(args: list[str]) -> int:
    """`pip install --quiet ARGS` into this interpreter's environment: through uv when the environment has it
    (`make setup` installs it first: the package's extras took 23 s instead of ~70 s on a 2-core machine, the
    same versions), with pip's configuration handed over; through pip when uv is absent or fails."""
    uv = Path(sys.executable).parent / "uv"
    if uv.is_file() and os.environ.get("LABKIT_INSTALLER", "uv") == "uv":
        config = pip_config_as_uv_args()
        if "--index-url" in args and "--index-url" in config:  # the attempt's own index wins, as with pip
            i = config.index("--index-url")
            del config[i : i + 2]
        # --compile-bytecode: pip writes every module's .pyc at install, uv does not by default -- and where
        # PYTHONDONTWRITEBYTECODE is set (this machine's CI) no process writes them later either, so each one compiled
        # torch and transformers from source: the whole test suite took twice the CPU
        r = subprocess.run(
            [str(uv), "pip", "install", "--quiet", "--compile-bytecode", "--python", sys.executable, *config, *args]
        )
        if r.returncode == 0:
            return 0
        print(f"  uv failed (exit {r.returncode}): pip instead", flush=True)
    return subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *args]).returncode


def cmd_uv_args(a) -> int:
    print(shlex.join(pip_config_as_uv_args()))
    return 0


def cmd_extras(a) -> int:
    print(default_extras(_context(a)[1]))
    return 0


def cmd_plan(a) -> int:
    plan, gpu, plat = _plan(a)
    chosen = next((t for t in plan.attempts if t.probe is None or _probe(a, t.probe)), None) if a.probe else None
    print(
        json.dumps(
            {
                "gpu": gpu,
                "platform": str(plat),
                "extras": default_extras(plat),
                **asdict(plan),
                "chosen": asdict(chosen) if chosen else None,
            },
            indent=1,
        )
    )
    return 0


def cmd_torch(a) -> int:
    plan, gpu, plat = _plan(a)
    print(
        f"torch {a.version}: {plan.why}; expecting the {plan.build} build "
        f"({'NVIDIA GPU' if gpu else 'no NVIDIA GPU'}, {plat})",
        flush=True,
    )
    current = installed_torch()
    if (
        current
        and check_build(current, a.version, plan.build, gpu) is None
        and plan.attempts[0].source != "TORCH_PIP_ARGS"
    ):
        print(f"torch {current[0]} already installed: nothing to do")
        return 0
    if current and plan.build != "any" and check_build(current, a.version, plan.build, gpu):
        # pip would call `torch==V` satisfied by the wrong build of V: remove it first
        print(f"removing torch {current[0]} (not the {plan.build} build of {a.version})", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "--quiet", "--yes", "torch"], check=True)
    for attempt in plan.attempts:
        if attempt.probe and not _probe(a, attempt.probe):
            print(f"  skip {attempt.source}: {attempt.probe} probe says no", flush=True)
            continue
        print(f"  pip install {shlex.join(attempt.args)}", flush=True)
        code = install(attempt.args)
        if code == 0:
            break
        print(f"  {attempt.source} failed (pip exit {code})", flush=True)
    else:
        print("ERROR: no way to install torch worked; set TORCH_PIP_ARGS (see above)", file=sys.stderr)
        return 1
    if plan.hint:
        print(f"note: {plan.hint}")
    return cmd_verify(a)


def cmd_verify(a) -> int:
    plan, gpu, _ = _plan(a)
    have = installed_torch()
    why = check_build(have, a.version, plan.build, gpu)
    if why:
        print(f"ERROR: {why}", file=sys.stderr)
        return 1
    print(f"torch {have[0]} ({'CUDA ' + have[1] if have[1] else 'CPU'} build): as intended ({plan.build})")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["package"]:  # the rest is pip install's, untouched
        return install(argv[1:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("command", choices=("extras", "plan", "torch", "verify", "uv-args", "package"))
    p.add_argument("--version", default=os.environ.get("TORCH_VERSION", "2.13.0"), help="TORCH_VERSION")
    p.add_argument("--pip-args", default=os.environ.get("TORCH_PIP_ARGS", ""), help="TORCH_PIP_ARGS: overrides")
    p.add_argument(
        "--build",
        default=os.environ.get("TORCH_BUILD") or "auto",
        choices=("auto",) + BUILDS,
        help="TORCH_BUILD: the build verify demands (auto: decided here)",
    )
    p.add_argument("--gpu", default="auto", choices=("auto", "yes", "no"), help="simulate: NVIDIA GPU present?")
    p.add_argument("--platform", default="auto", help="simulate: e.g. linux-x86_64-glibc2.36, darwin-arm64")
    p.add_argument(
        "--local-cpu",
        default="auto",
        choices=("auto", "yes", "no"),
        help="simulate: the configured indexes offer torch==V+cpu",
    )
    p.add_argument(
        "--cpu-index", default="auto", choices=("auto", "up", "down"), help="simulate: PyTorch's CPU index is reachable"
    )
    p.add_argument("--probe", action="store_true", help="plan: also run the probes and say which attempt wins")
    a = p.parse_args(argv)
    commands = {"extras": cmd_extras, "plan": cmd_plan, "torch": cmd_torch, "verify": cmd_verify}
    return {**commands, "uv-args": cmd_uv_args}[a.command](a)


if __name__ == "__main__":
    sys.exit(main())
