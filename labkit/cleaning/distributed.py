"""Deprecated: `labkit.cleaning.distributed` is `labkit.cleaning.datatrove_engine` now (issue #28: the old name
read like the `labkit.distributed` package); this name works for one release."""

from labkit.deprecation import moved

moved(__name__)

from labkit.cleaning.datatrove_engine import *  # noqa: E402,F401,F403
