"""Deprecated: `labkit.grading` is `labkit.classroom.grading` now (issue #28); this name works for one release."""

from labkit.deprecation import moved

moved(__name__)

from labkit.classroom.grading import *  # noqa: E402,F401,F403
from labkit.classroom.grading import _verdict  # noqa: E402,F401 -- private names callers used
