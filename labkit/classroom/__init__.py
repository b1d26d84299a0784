"""The classroom: what a workshop hands learners and what it gets back.

`release` writes the learner's (or the solutions) release of the notebooks with its marker; `grading` runs a room's
submitted notebooks, one process each, and writes the gradebook.
"""
