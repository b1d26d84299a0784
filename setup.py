"""The course travels inside the wheel: `build_py` copies the notebooks and what they read into the package.

Everything else about the build is in pyproject.toml. The course's files live at the checkout's root
(`notebooks/`, `data_samples/`, the instructor's guide and answers and the measured times under `docs/`), where
the course is run and edited; a wheel built from the checkout carries a copy of them as `labkit/course_files/`
(laid out as the checkout is), so `labkit course workshop --out DIR` writes the release, and `labkit workshop plan`
reads the measured figures, from any install (`labkit.paths.course_source`). A source tree without them (the cleaning image copies only `labkit/`) builds the
package alone; an editable install reads the checkout itself and copies nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# what `labkit.classroom.release.write_release` and `labkit workshop plan` read from a checkout, relative to its root
COURSE_FILES = (
    "notebooks",
    "data_samples",
    "docs/workshop.md",
    "docs/instructor/answers.md",
    "docs/zh_CN/workshop.md",
    "docs/zh_CN/instructor/answers.md",
    "docs/times.json",  # the measured figures `labkit workshop plan` reads
)
PACKAGED = "labkit/course_files"  # labkit.paths.PACKAGED_COURSE names the same folder
SKIP = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.pyc")


class BuildPyWithCourse(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the checkout's own files
        dest = Path(self.build_lib) / PACKAGED
        for rel in COURSE_FILES:
            src = HERE / rel
            if src.is_dir():
                shutil.copytree(src, dest / rel, ignore=SKIP, dirs_exist_ok=True)
            elif src.is_file():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / rel)


setup(cmdclass={"build_py": BuildPyWithCourse})
