"""labkit: the package behind the course notebooks (see README.md)."""

__version__ = "0.1.0"
