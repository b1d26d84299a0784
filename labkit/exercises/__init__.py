"""Checks for the notebooks' exercises: one module per notebook (`nb01` ... `nb08`).

A check cell is one line, e.g. `nb05.ex1(run_epochs)`. A check prints `✅ pass: ...` and returns True,
or prints `❌ fail: <hint>` and raises `AssertionError(<hint>)` -- the learner sees the hint, and an
autograder (nbgrader, the headless course run) sees a failure. An untouched placeholder (`...`, `None`,
`NotImplementedError`) always fails: no check can pass on an unsolved exercise.

Multiple-choice questions are `Quiz` objects (`EX3 = Quiz("B", {...})`, called by `ex3`): every option carries
the label the notebook shows and its explanation, so a wrong answer tells the learner *why* it is wrong (like the
Hugging Face course quizzes). `correct` with several letters (`"AC"`) makes a multiple-select question: the learner
answers `"A, C"`, `"AC"` or `{"A", "C"}`; each wrong pick gets its explanation, each right option left out its own
`missed` hint (which names the idea, not the letter).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

from labkit.i18n import N_, _

UNANSWERED = N_("not answered yet: replace the `...` placeholder in the cell above with your answer and run it again")


class ExerciseFailed(AssertionError):
    """A check failed; the message is the hint.

    In IPython (a notebook) `_render_traceback_` replaces the traceback: the ❌ line `fail` printed holds the hint,
    and under it comes only the learner's own line that called the check -- not the frames inside labkit, which
    tell a learner nothing (nbgrader and the course runner still read the error's name and message)."""

    def _render_traceback_(self) -> list[str]:
        where = _learner_line(self.__traceback__)
        return [_("↳ the check that failed: {where}").format(where=where)] if where else []


def _learner_line(tb) -> str:
    """`Cell In[5], line 2: nb04.ex1(launch_cmd)`: the deepest frame of `tb` that is the learner's code -- not
    labkit's, not an installed library's or the standard library's (IPython's own frames included)."""
    import linecache
    import sys
    import sysconfig
    import traceback
    from pathlib import Path

    ours = str(Path(__file__).resolve().parents[1])
    installed = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    installed |= {sys.prefix, sys.base_prefix}
    frames = [
        fr
        for fr in traceback.extract_tb(tb)
        if not str(Path(fr.filename).resolve()).startswith(ours)
        and not any(fr.filename.startswith(p) for p in installed)
        and not fr.filename.startswith("<frozen")
    ]
    if not frames:
        return ""
    fr = frames[-1]
    name = fr.filename
    try:
        from IPython import get_ipython

        shell = get_ipython()
        label = shell.compile.format_code_name(name) if shell is not None else None
    except Exception:  # noqa: BLE001 -- no IPython, or an old one: the file name will do
        label = None
    place = f"{label[0]} {label[1]}" if label else name
    code = (fr.line or linecache.getline(name, fr.lineno)).strip()
    return f"{place}, line {fr.lineno}: {code}"


def passed(msg: str = "") -> bool:
    msg = _(msg) if msg else msg  # a constant message (N_) is translated here; a formatted one arrives translated
    print(f"✅ {_('pass')}{': ' + msg if msg else ''}")
    return True


def fail(hint: str):
    hint = _(hint)  # a constant hint (N_) is translated here; a formatted one arrives translated
    print(f"❌ {_('fail')}: {hint}")
    raise ExerciseFailed(hint)


def answered(value) -> None:
    """Fail with the 'not answered' hint on a placeholder (None, Ellipsis)."""
    if value is None or value is Ellipsis:
        fail(UNANSWERED)


def call(fn: Callable, *args, **kwargs):
    """Call the learner's function; a placeholder or an exception becomes a failed check with a hint."""
    if not callable(fn):
        fail(
            UNANSWERED
            if fn is None or fn is Ellipsis
            else _("expected a function, got {type}").format(type=type(fn).__name__)
        )
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        fail(UNANSWERED)
    except ExerciseFailed:
        raise
    except Exception as exc:  # noqa: BLE001 -- the learner's bug becomes a hint, not a traceback
        fail(_("your function raised {error}: {message}").format(error=type(exc).__name__, message=exc))


@dataclass(frozen=True)
class Choice:
    """One option: the `label` the notebook shows, `why` it is right or wrong (printed when picked), and for a
    right option of a multiple-select question the hint printed when the learner leaves it out."""

    label: str
    why: str
    missed: str = ""


def _choice(option: str | Choice) -> Choice:
    return option if isinstance(option, Choice) else Choice("", option)


def _letters(answer, options: Mapping) -> list[str]:
    """The letters an answer names: "c", " C ", "C.", "A, C", "A and C", "AC", {"A", "C"}, ["a", "c"]."""
    if isinstance(answer, (set, frozenset, list, tuple)):
        tokens = [str(a) for a in answer]
    else:
        tokens = re.findall(r"[A-Za-z]+", str(answer))
        tokens = [t for t in tokens if t.lower() not in ("and", "or")]
    letters: list[str] = []
    for t in tokens:
        t = t.strip().upper().rstrip(".)").lstrip("(")
        if t and all(ch in options for ch in t):
            letters += [ch for ch in t if ch not in letters]
        else:
            fail(
                _("{answer} is not an option: answer with letters among {letters}").format(
                    answer=repr(t or answer), letters=", ".join(sorted(options))
                )
            )
    if not letters:
        fail(_("answer with letters among {letters}").format(letters=", ".join(sorted(options))))
    return letters


def quiz(answer, correct: str, options: Mapping[str, str | Choice]) -> bool:
    """A multiple-choice check: `options` maps each letter to its explanation (a `str`) or a `Choice`; `correct`
    holds one letter (single choice) or several (multiple select: every right letter, no wrong one)."""
    answered(answer)
    opts = {k: _choice(v) for k, v in options.items()}
    right = list(dict.fromkeys(correct.upper()))
    got = _letters(answer, opts)
    if len(right) == 1:
        if len(got) > 1:
            fail(_("pick one letter: this question has one right answer (you gave {got})").format(got=", ".join(got)))
        a = got[0]
        if a != right[0]:
            fail(_("{letter} is not it. {why}").format(letter=a, why=_(opts[a].why)))
        return passed(f"{a}. {_(opts[a].why)}")
    wrong = [a for a in got if a not in right]
    if wrong:
        fail(
            " ".join(
                _("{letter} is not one of them: {why}").format(letter=a, why=_(opts[a].why)) for a in sorted(wrong)
            )
        )
    missing = [a for a in right if a not in got]
    if missing:
        hints = " ".join(_(opts[a].missed or N_("reread the options you left out")) for a in missing)
        if len(missing) > 1:
            fail(_("right so far, but {n} more statements are true: {hints}").format(n=len(missing), hints=hints))
        fail(_("right so far, but 1 more statement is true: {hints}").format(hints=hints))
    return passed(", ".join(right) + ". " + " ".join(_(opts[a].why) for a in right))


@dataclass(frozen=True)
class Quiz:
    """A multiple-choice exercise: call it with the learner's answer (`nb05.ex3("A, D")`)."""

    correct: str
    options: Mapping[str, Choice] = field(default_factory=dict)

    def __call__(self, answer) -> bool:
        return quiz(answer, self.correct, self.options)

    @property
    def multi(self) -> bool:
        return len(self.correct) > 1

    def markdown(self) -> str:
        """The option line the notebook shows: `**A.** label  **B.** label ...`."""
        return "  ".join(f"**{k}.** {_(_choice(v).label)}" for k, v in sorted(self.options.items()))
