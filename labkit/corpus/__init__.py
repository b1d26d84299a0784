"""Seeded Chinese news corpus and a labelled dirty crawl dump built from it.

`generate(n, seed)` gives clean `Article`s; `labkit.corpus.dump.write_dump`
turns them into a crawl dump with labelled defects; `labkit.corpus.naive`
is the story's naive loading recipe; `labkit.corpus.inspection` the diagnostics.
"""

from labkit.corpus.generator import Article, generate

__all__ = ["Article", "generate"]
