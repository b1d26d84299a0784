"""Deprecated: `labkit.workshop` is `labkit.classroom.release` now (issue #28); this name works for one release."""

from labkit.deprecation import moved

moved(__name__)

from labkit.classroom.release import *  # noqa: E402,F401,F403
