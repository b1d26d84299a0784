"""Distributed training: who am I (`env`), launching from a notebook (`launcher`), samplers, audits (`audit`).

`from labkit.distributed import launch` is the launcher function; the module that holds it and its
helpers is `labkit.distributed.launcher` (`from labkit.distributed.launcher import check_devices, ...`).
Importing this package stays cheap: `launcher` imports no torch.
"""

from __future__ import annotations

from labkit.distributed.launcher import LaunchError, LaunchFailed, LaunchResult, LaunchTimeout, launch

# The sampler choices live here, not in `samplers` (which imports torch), so the
# `labkit` CLI can build its parser without loading torch.
SAMPLERS = ("none", "distributed", "split")

__all__ = ["SAMPLERS", "launch", "LaunchError", "LaunchFailed", "LaunchTimeout", "LaunchResult"]
