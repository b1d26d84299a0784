"""Deprecated: `labkit.course_times` is `labkit.course.times` now (issue #28); this name works for one release."""

from labkit.deprecation import moved

moved(__name__)

from labkit.course.times import *  # noqa: E402,F401,F403
from labkit.course.times import _bench_row, _measured  # noqa: E402,F401 -- private names callers used
