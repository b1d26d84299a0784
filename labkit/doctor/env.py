"""`labkit doctor env`: is this machine ready for the course?

Prints one line per check — OK, WARN or FAIL — and for each problem a one-line
fix.  Exit code 1 when any check FAILs.  Notebook 00 shows the same checks as
a table (`run_checks()` -> list of `Check`).
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

# package -> (import name, required for the core course?)
PACKAGES = {
    "torch": ("torch", True),
    "transformers": ("transformers", True),
    "tokenizers": ("tokenizers", True),
    "accelerate": ("accelerate", True),
    "numpy": ("numpy", True),
    "papermill": ("papermill", True),
    "ipykernel": ("ipykernel", True),
    "ipywidgets": ("ipywidgets", True),
    "matplotlib": ("matplotlib", True),
    "pandas": ("pandas", True),
    "tensorboard": ("tensorboard", True),
    "chardet": ("chardet", True),
    "ftfy": ("ftfy", True),
    "onnxruntime": ("onnxruntime", False),
    "nvidia-pytriton": ("pytriton", False),
    "fastapi": ("fastapi", False),
}
SETUP_FIX = "run `make setup` (or: .venv/bin/pip install -e '.[serve,lab,dev,triton]')"


@dataclass
class Check:
    name: str
    status: str  # OK | WARN | FAIL
    detail: str
    fix: str = ""


def check_python() -> Check:
    v = sys.version_info
    ok = v >= (3, 11)  # pyproject's requires-python
    return Check(
        "python",
        "OK" if ok else "FAIL",
        platform.python_version(),
        "" if ok else "install Python >= 3.11 and recreate .venv",
    )


def check_packages() -> list[Check]:
    out = []
    for dist, (mod, required) in PACKAGES.items():
        try:
            version = metadata.version(dist)
            importlib.import_module(mod)
            out.append(Check(dist, "OK", version))
        except Exception as exc:  # missing, or installed but broken on import
            status = "FAIL" if required else "WARN"
            why = "not installed" if isinstance(exc, metadata.PackageNotFoundError) else f"import failed: {exc}"
            fix = SETUP_FIX if required else f"{SETUP_FIX} (needed by the deployment notebook only)"
            if dist == "nvidia-pytriton" and not pytriton_wheel_exists():
                # nothing to fix: notebook 08 serves through the API's in-process ONNX Runtime batcher here
                status, why, fix = "OK", "no wheel for this platform: 08 serves with ONNX Runtime in the API", ""
            out.append(Check(dist, status, why[:200], fix))
    return out


def pytriton_wheel_exists() -> bool:
    """PyTriton ships wheels for Linux x86_64/aarch64 with glibc >= 2.35 only (see scripts/install.py)."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"):
        return False
    name, version = platform.libc_ver()
    try:
        return name == "glibc" and tuple(int(x) for x in version.split(".")[:2]) >= (2, 35)
    except ValueError:
        return False


def nvidia_present() -> bool:
    return Path("/proc/driver/nvidia").exists() or shutil.which("nvidia-smi") is not None


def check_torch_build() -> list[Check]:
    try:
        import torch
    except ImportError:
        return []
    checks = []
    cuda_build = torch.version.cuda is not None
    if cuda_build and not nvidia_present():
        checks.append(
            Check(
                "torch build",
                "FAIL",
                f"{torch.__version__}: a CUDA build on a machine without an NVIDIA GPU",
                "pip uninstall -y torch && pip install torch==2.13.0 from the CPU wheel index (see README)",
            )
        )
    else:
        checks.append(
            Check("torch build", "OK", f"{torch.__version__} ({'CUDA ' + torch.version.cuda if cuda_build else 'CPU'})")
        )
    n = torch.cuda.device_count()
    if n:
        from labkit.config import bf16_supported

        checks.append(
            Check("device", "OK", f"cuda x{n} ({torch.cuda.get_device_name(0)}), bf16={bf16_supported('cuda')}")
        )
    else:
        checks.append(Check("device", "OK", "cpu (no GPU: the smoke profile is sized for this)"))
    if torch.cuda.is_initialized():
        checks.append(
            Check(
                "cuda state",
                "FAIL",
                "CUDA is already initialised in this process",
                "restart the kernel and launch multi-process runs before touching CUDA",
            )
        )
    return checks


def check_resources() -> list[Check]:
    import psutil

    from labkit.threads import cores as usable_cores

    cores = usable_cores()  # the cores this process may use (taskset, a cgroup's cpuset), not the machine's count
    mem = psutil.virtual_memory().total / 2**30
    return [
        Check(
            "cores",
            "OK" if cores >= 2 else "WARN",
            str(cores),
            "" if cores >= 2 else "2-process runs will be slow on 1 core",
        ),
        Check(
            "memory",
            "OK" if mem >= 4 else "WARN",
            f"{mem:.1f} GiB",
            "" if mem >= 4 else "the smoke profile wants >= 4 GiB",
        ),
        check_threads(),
    ]


def check_threads() -> Check:
    """The thread policy in force (labkit.threads), and whether other work is already using the cores."""
    from labkit import threads

    busy = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    policy = threads.describe()
    if busy >= threads.cores() - 0.5:
        return Check(
            "threads",
            "WARN",
            f"{policy}; load average {busy:.1f} on {threads.cores()} core(s)",
            "other processes keep the cores busy: the course runs, slower; keep LABKIT_THREADS unset "
            "(1 thread per process does not spin-wait for a busy core)",
        )
    return Check("threads", "OK", f"{policy}; load average {busy:.1f}")


def check_font() -> Check:
    from labkit.viz.fonts import find_cjk_font

    fam = find_cjk_font()
    if fam:
        return Check("CJK font", "OK", fam)
    return Check(
        "CJK font",
        "WARN",
        "none: Chinese plot labels render as boxes",
        "apt-get install fonts-wqy-microhei (make setup does it when run as root)",
    )


def check_kernel() -> Check:
    """The `python3` Jupyter kernel must run this interpreter, or notebooks import another labkit."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        spec = KernelSpecManager().get_kernel_spec("python3")
    except Exception as exc:
        return Check("jupyter kernel", "FAIL", f"no python3 kernel: {exc}", SETUP_FIX)
    exe = spec.argv[0]
    same = exe in ("python", "python3", sys.executable) or Path(exe).resolve() == Path(sys.executable).resolve()
    if same:
        return Check("jupyter kernel", "OK", f"python3 -> {sys.executable}")
    return Check(
        "jupyter kernel",
        "FAIL",
        f"python3 kernel runs {exe}, not {sys.executable}",
        f"{sys.executable} -m ipykernel install --sys-prefix --name python3",
    )


def check_torchrun(timeout: int = 90) -> Check:
    """A real 2-process gloo all_reduce under torchrun, judged by each rank's own record."""
    with tempfile.TemporaryDirectory(prefix="labkit-probe-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "labkit.doctor",
            "--probe-rank",
            tmp,
        ]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        env.pop("TORCH_DISTRIBUTED_DEBUG", None)  # DETAIL segfaults on CPU
        for attempt in (1, 2):
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
            except subprocess.TimeoutExpired:
                return Check(
                    "torchrun x2",
                    "FAIL",
                    f"no result within {timeout}s",
                    "check that 127.0.0.1 ports are free and no firewall blocks loopback",
                )
            ranks = [json.loads(p.read_text()) for p in sorted(Path(tmp).glob("rank*.json"))]
            done = len(ranks) == 2 and all(r["world_size"] == 2 and r["sum"] == 3 for r in ranks)
            if done:
                note = (
                    ""
                    if proc.returncode == 0
                    else f" (torchrun exit {proc.returncode} after both ranks finished: the known gloo exit abort)"
                )
                return Check(
                    "torchrun x2", "OK", f"gloo all_reduce on 2 ranks{note}" + (" on retry" if attempt == 2 else "")
                )
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return Check(
            "torchrun x2",
            "FAIL",
            f"exit {proc.returncode}: {' | '.join(tail)}"[:300],
            "run `labkit doctor env` again; if it persists, see docs/distributed.md",
        )


def run_checks(torchrun: bool = True) -> list[Check]:
    checks = [check_python(), *check_packages(), *check_torch_build(), *check_resources(), check_font(), check_kernel()]
    if torchrun:
        checks.append(check_torchrun())
    return checks


def as_table(checks: list[Check]):
    import pandas as pd

    return pd.DataFrame([asdict(c) for c in checks])


def _probe_rank(out_dir: str) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.tensor([rank + 1.0])
    dist.all_reduce(t)
    Path(out_dir, f"rank{rank}.json").write_text(
        json.dumps({"rank": rank, "world_size": dist.get_world_size(), "sum": int(t.item())})
    )
    dist.destroy_process_group()


def _cmd_env(args) -> int:
    checks = run_checks(torchrun=not args.no_torchrun)
    for c in checks:
        print(f"[{c.status:<4}] {c.name:<16} {c.detail}")
        if c.fix:
            print(f"       fix: {c.fix}")
    bad = [c for c in checks if c.status == "FAIL"]
    print(f"\n{len(checks) - len(bad)} of {len(checks)} checks without failure")
    return 1 if bad else 0


def register(dsub) -> None:
    e = dsub.add_parser("env", help="Python, packages, torch build, device, cores, memory, fonts, torchrun")
    e.add_argument("--no-torchrun", action="store_true", help="skip the 2-process torchrun probe")
    e.set_defaults(func=_cmd_env)
