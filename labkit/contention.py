"""Deprecated: `labkit.contention` is `labkit.course.bench` now (issue #28); this name works for one release."""

from labkit.deprecation import moved

moved(__name__)

from labkit.course.bench import *  # noqa: E402,F401,F403
