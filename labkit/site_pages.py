"""Deprecated: `labkit.site_pages` is `labkit.course.site_pages` now (issue #28); this name works for one release."""

from labkit.deprecation import moved

moved(__name__)

from labkit.course.site_pages import *  # noqa: E402,F401,F403
