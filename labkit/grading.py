"""Deprecated: `labkit.grading` is `labkit.classroom.grader` (with `.gradebook` and `.kernel`) now (issue #28); this
name works for one release."""

from labkit.deprecation import moved

moved(__name__)

from labkit.classroom.gradebook import *  # noqa: E402,F401,F403
from labkit.classroom.grader import *  # noqa: E402,F401,F403
from labkit.classroom.grader import _verdict  # noqa: E402,F401 -- private names callers used
from labkit.classroom.kernel import *  # noqa: E402,F401,F403
