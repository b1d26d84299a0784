"""The cleaning pipeline: crawled files in, clean records + rejects with reasons out.

`clean_paths(inputs, out_dir, workers=1, min_title=10, max_title=60, min_body=50)`
is the library entry point; `labkit clean` is the CLI (see `cli.py`).
"""

from __future__ import annotations


def clean_paths(*args, **kwargs) -> dict:
    """See `labkit.cleaning.pipeline.clean_paths` (imported lazily to keep `labkit --help` fast)."""
    from labkit.cleaning.pipeline import clean_paths as _clean_paths

    return _clean_paths(*args, **kwargs)


__all__ = ["clean_paths"]
