"""Deprecated: `labkit.cli_errors` is `labkit.cli.errors` now (issue #28); this name works for one release."""

from labkit.deprecation import moved

moved(__name__)

from labkit.cli.errors import *  # noqa: E402,F401,F403
