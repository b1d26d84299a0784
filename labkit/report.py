"""Deprecated: `labkit.report` is `labkit.course.report` now (issue #28); this name works for one release."""

from labkit.deprecation import moved

moved(__name__)

from labkit.course.report import *  # noqa: E402,F401,F403
from labkit.course.report import _fmt, _name  # noqa: E402,F401 -- private names callers used
