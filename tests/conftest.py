"""Shared pytest setup: unit tests first, the slow notebook runs last."""

import os


# Tests start child processes; one thread each keeps 2 cores usable.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda it: it.get_closest_marker("notebook") is not None)
