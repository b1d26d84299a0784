"""Distributed training: who am I (`env`), launching from a notebook (`launch`), audits (`audit`).

`labkit.distributed.launch(...)` is the launcher function (the module of the
same name only imports the standard library, so this stays cheap); import
helpers with `from labkit.distributed.launch import LaunchError, ...`.
"""
from __future__ import annotations

from labkit.distributed.launch import LaunchError, LaunchFailed, LaunchResult, LaunchTimeout, launch

__all__ = ["launch", "LaunchError", "LaunchFailed", "LaunchTimeout", "LaunchResult"]
