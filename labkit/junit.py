"""Deprecated: `labkit.junit` is `labkit.course.junit` now (issue #28); this name works for one release."""

from labkit.deprecation import moved

moved(__name__)

from labkit.course.junit import *  # noqa: E402,F401,F403
