"""The classroom: what a workshop hands learners and what it gets back.

`release` writes the learner's (or the solutions) release of the notebooks with its marker; `grader` grades a room's
submitted notebooks per exercise, each run by `kernel` in a child process of its own, into the `gradebook`.
"""
