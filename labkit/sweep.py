"""Deprecated: `labkit.sweep` is `labkit.course.seeds` now (issue #28); this name works for one release."""

from labkit.deprecation import moved

moved(__name__)

from labkit.course.seeds import *  # noqa: E402,F401,F403
