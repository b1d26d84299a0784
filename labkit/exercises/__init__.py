"""Checks for the notebooks' exercises: one module per notebook (`nb01` ... `nb08`).

A check cell is one line, e.g. `nb05.ex1(run_epochs)`. A check prints `✅ pass: ...` and returns True,
or prints `❌ fail: <hint>` and raises `AssertionError(<hint>)` -- the learner sees the hint, and an
autograder (nbgrader, the headless course run) sees a failure. An untouched placeholder (`...`, `None`,
`NotImplementedError`) always fails: no check can pass on an unsolved exercise.

Multiple-choice questions go through `quiz(...)`: every option carries its explanation, so a wrong
answer tells the learner *why* it is wrong (like the Hugging Face course quizzes).
"""
from __future__ import annotations

from typing import Callable

UNANSWERED = "not answered yet: replace the `...` placeholder in the cell above with your answer and run it again"


class ExerciseFailed(AssertionError):
    """A check failed; the message is the hint."""


def passed(msg: str = "") -> bool:
    print(f"✅ pass{': ' + msg if msg else ''}")
    return True


def fail(hint: str):
    print(f"❌ fail: {hint}")
    raise ExerciseFailed(hint)


def answered(value) -> None:
    """Fail with the 'not answered' hint on a placeholder (None, Ellipsis)."""
    if value is None or value is Ellipsis:
        fail(UNANSWERED)


def call(fn: Callable, *args, **kwargs):
    """Call the learner's function; a placeholder or an exception becomes a failed check with a hint."""
    if not callable(fn):
        fail(UNANSWERED if fn is None or fn is Ellipsis else f"expected a function, got {type(fn).__name__}")
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        fail(UNANSWERED)
    except ExerciseFailed:
        raise
    except Exception as exc:  # noqa: BLE001 -- the learner's bug becomes a hint, not a traceback
        fail(f"your function raised {type(exc).__name__}: {exc}")


def quiz(answer, correct: str, options: dict[str, str]) -> bool:
    """A multiple-choice check: `options` maps each letter to its explanation (the right one included)."""
    answered(answer)
    a = str(answer).strip().upper()[:1]
    if a not in options:
        fail(f"answer with one of {', '.join(sorted(options))}")
    if a != correct:
        fail(f"{a} is not it. {options[a]}")
    return passed(f"{a}. {options[a]}")
