"""Distributed training: who am I (`env`), launching from a notebook (`launch`), audits (`audit`).

`labkit.distributed.launch(...)` is the launcher function (the module of the
same name only imports the standard library, so this stays cheap); import
helpers with `from labkit.distributed.launch import LaunchError, ...`.
"""
from __future__ import annotations

from labkit.distributed.launch import LaunchError, LaunchFailed, LaunchResult, LaunchTimeout, launch

# The sampler choices live here, not in `samplers` (which imports torch), so the
# `labkit` CLI can build its parser without loading torch.
SAMPLERS = ("none", "distributed", "split")

__all__ = ["SAMPLERS", "launch", "LaunchError", "LaunchFailed", "LaunchTimeout", "LaunchResult"]
