"""Keep a server the API started running: restart it with backoff when it dies, give up after K failures.

`labkit serve api --start-triton` owns the Triton it started.  `Supervisor` watches that
`ServerProcess` from a thread: when the process exits (Triton's `tritonserver` dying makes
PyTriton's leader exit too), what is left of its process group is stopped (so the ports
are free), and a new one is started on the same ports after a delay from `RestartPolicy`.
Meanwhile `up` is False, so the API answers 503 at once instead of forwarding to a dead
server.  A failure is a death or a restart that did not get ready; when more than
`max_failures` fall within `window_s` seconds the supervisor gives up and calls
`on_give_up(reason)` (the API then exits 1 with that one line).

`RestartPolicy` is shared with the API's batching worker (`labkit.serving.backends`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

from labkit.serving.process import ServerProcess

LOG = logging.getLogger("labkit.serving.supervisor")

MAX_FAILURES = 5  # more failures than this within the window: give up (docs/decisions.md §19)
WINDOW_S = 300.0
MAX_DELAY_S = 30.0


@dataclass
class RestartPolicy:
    """When to restart and when to stop trying.

    The first failure in the window restarts at once (a lone crash costs only the start-up
    time), the next ones wait 1, 2, 4 ... s (capped at `max_delay_s`), so a server that
    cannot start does not spin; failures older than the window are forgotten, which also
    resets the delay."""

    max_failures: int = MAX_FAILURES
    window_s: float = WINDOW_S
    max_delay_s: float = MAX_DELAY_S

    def __post_init__(self):
        self._failures: deque[float] = deque()

    def failed(self, now: float) -> int:
        """Record a failure at `now`; returns the failures within the window, this one included."""
        self._failures.append(now)
        while self._failures and now - self._failures[0] > self.window_s:
            self._failures.popleft()
        return len(self._failures)

    def exhausted(self, recent: int) -> bool:
        return recent > self.max_failures

    def delay(self, recent: int) -> float:
        return 0.0 if recent <= 1 else min(self.max_delay_s, 2.0 ** (recent - 2))


class Supervisor:
    """Start `make()`'s server, keep it running, stop it on exit (a context manager).

    `make` returns a fresh, not yet started `ServerProcess` (same ports each time).
    `state`: starting | up | restarting | gave_up | stopped; `restarts`: restarts begun;
    `failures`: deaths and failed restarts; `last_failure`: the latest one, in words."""

    def __init__(
        self,
        make: Callable[[], ServerProcess],
        name: str,
        policy: RestartPolicy | None = None,
        on_give_up: Callable[[str], None] | None = None,
        poll_s: float = 0.2,
    ):
        self.make, self.name = make, name
        self.policy = policy or RestartPolicy()
        self.on_give_up = on_give_up
        self.poll_s = poll_s
        self.state = "starting"
        self.restarts = 0
        self.failures = 0
        self.last_failure = ""
        self.gave_up_reason = ""
        self.srv: ServerProcess | None = None
        self._down_since: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def up(self) -> bool:
        return self.state == "up"

    def status(self) -> dict:
        return {
            "state": self.state,
            "restarts": self.restarts,
            "failures": self.failures,
            "last_failure": self.last_failure or None,
        }

    def describe(self) -> str:
        """Why the server is not up, for a 503 body."""
        if self.state == "restarting":
            return (
                f"{self.name} is restarting (restart {self.restarts}; it {self.last_failure}); retry in a few seconds"
            )
        if self.state == "gave_up":
            return f"{self.name} is down for good: {self.gave_up_reason}"
        return f"{self.name} is {self.state}"

    # ---- lifecycle ------------------------------------------------------------------
    def start(self) -> "Supervisor":
        """Start the first server (raises if it does not get ready) and the watcher thread."""
        self.srv = self.make()
        self.srv.start()
        self.state = "up"
        self._thread = threading.Thread(target=self._watch, name=f"supervise-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self.state != "gave_up":
            self.state = "stopped"
        deadline = time.monotonic() + 30
        while True:
            if self.srv is not None:
                self.srv.stop()  # also ends a start in progress: its readiness wait sees the exit
            if self._thread is None or self._thread is threading.current_thread() or time.monotonic() > deadline:
                return
            self._thread.join(timeout=0.2)
            if not self._thread.is_alive():
                if self.srv is not None:
                    self.srv.stop()
                return

    def __enter__(self) -> "Supervisor":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- the watcher ----------------------------------------------------------------
    def _watch(self) -> None:
        # restarts start their server from this thread, which lives as long as they do: the kernel's
        # parent-death signal (`process._die_with_parent`) follows the thread that forked, not the process
        while not self._stop.wait(self.poll_s):
            if self.srv.alive():
                continue
            code = self.srv.proc.returncode if self.srv.proc is not None else None
            dead_log = self.srv.log_path
            # the rest of its group (tritonserver, stubs) at once: requests it still holds would otherwise
            # wait for a model process that is gone (504s) through Triton's graceful exit; frees the ports
            self.srv.stop(grace=0)
            if self._stop.is_set():
                return
            self._down_since = time.monotonic()
            self.state = "restarting"
            self._recover(f"exited with code {code} (log: {dead_log})")
            if self.state != "up":
                return

    def _recover(self, why: str) -> None:
        """Restart until the server is up, or give up; `why` is the failure that started it."""
        while not self._stop.is_set():
            recent = self._failed(why)
            if self.policy.exhausted(recent):
                return self._give_up(recent)
            delay = self.policy.delay(recent)
            LOG.warning(
                "%s %s; restart %d in %.0f s (%d failure(s) in the last %.0f s, at most %d)",
                self.name,
                why,
                self.restarts + 1,
                delay,
                recent,
                self.policy.window_s,
                self.policy.max_failures,
            )
            if self._stop.wait(delay):
                return
            self.restarts += 1
            self.srv = self.make()
            try:
                self.srv.start()
            except Exception as exc:  # noqa: BLE001 -- any failed start is a failure of the policy's kind
                if self._stop.is_set():
                    return
                lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [type(exc).__name__]
                said = f": {lines[-1]}" if len(lines) > 1 else ""  # the server's own last word, from its log
                why = f"did not restart: {lines[0].rstrip(':')}{said} (log: {self.srv.log_path})"
                continue
            self.state = "up"
            LOG.warning(
                "%s is back after %.1f s (restart %d; log: %s)",
                self.name,
                time.monotonic() - self._down_since,
                self.restarts,
                self.srv.log_path,
            )
            return

    def _failed(self, why: str) -> int:
        self.failures += 1
        self.last_failure = why
        return self.policy.failed(time.monotonic())

    def _give_up(self, recent: int) -> None:
        self.state = "gave_up"
        self.gave_up_reason = (
            f"{self.name} failed {recent} times within {self.policy.window_s:.0f} s "
            f"(more than --max-restarts {self.policy.max_failures}); last: it {self.last_failure}"
        )
        LOG.error("giving up: %s", self.gave_up_reason)
        if self.on_give_up is not None:
            self.on_give_up(self.gave_up_reason)
