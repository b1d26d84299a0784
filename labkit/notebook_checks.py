"""Deprecated: `labkit.notebook_checks` is `labkit.course.params_check` now (issue #28); this name works for one release."""

from labkit.deprecation import moved

moved(__name__)

from labkit.course.params_check import *  # noqa: E402,F401,F403
