"""binder/ must agree with pyproject.toml and the Makefile, or Binder builds a different course."""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _deps():
    return {Requirement(d).name: Requirement(d) for d in PYPROJECT["project"]["dependencies"]}


def test_binder_torch_is_the_cpu_build_the_makefile_pins_and_pyproject_admits():
    req = (ROOT / "binder" / "requirements.txt").read_text()
    m = re.search(r"^torch==([\d.]+)\+cpu$", req, re.M)
    assert m, "binder must pin the CPU build of torch explicitly"
    make_pin = re.search(r"^TORCH_VERSION\s*\?=\s*([\d.]+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert m.group(1) == make_pin
    assert Version(m.group(1)) in _deps()["torch"].specifier


def test_binder_python_satisfies_requires_python():
    v = (ROOT / "binder" / "runtime.txt").read_text().strip().removeprefix("python-")
    assert Version(v) in __import__("packaging.specifiers").specifiers.SpecifierSet(
        PYPROJECT["project"]["requires-python"]
    )


def test_binder_installs_the_package_with_lab_widgets_and_serving_extras():
    post = (ROOT / "binder" / "postBuild").read_text()
    m = re.search(r'pip install[^\n]*-e "\.\[([\w,]+)\]"', post)
    assert m and {"lab", "serve"} <= set(m.group(1).split(","))
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert any(Requirement(r).name == "jupyterlab" for r in extras["lab"])
    assert "ipywidgets" in _deps()


def test_binder_font_is_one_labkit_uses():
    from labkit.viz.fonts import CJK_FAMILIES

    apt = (ROOT / "binder" / "apt.txt").read_text().split()
    assert apt == ["fonts-wqy-microhei"] and CJK_FAMILIES[0] == "WenQuanYi Micro Hei"
