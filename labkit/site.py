"""Deprecated: `labkit.site` is `labkit.course.site` now (issue #28); this name works for one release."""

from labkit.deprecation import moved

moved(__name__)

from labkit.course.site import *  # noqa: E402,F401,F403
