"""A collective group's transport whose collective-timeout and lost-peer errors carry the hang findings.

The communicator raises a timeout it made itself after handing it to ``abort`` (which tells the peers first, so
they get the plain text, and then explains it here), and a lost peer's or a peer's abort as ``recv`` or
``abort_error`` give it: each is explained once, by ``diagnose()``, and the coded findings are appended to the
message, as the start-up checks do for TF_CONFIG errors (``diagnostics.runtime_hook``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from mirrorlab import errors
from mirrorlab.collective.message import Message
from mirrorlab.collective.transport import Transport
from mirrorlab.diagnostics.findings import Finding
from mirrorlab.diagnostics.runtime_hook import explanation

__all__ = ["DiagnosedTransport", "HANG_ERRORS"]

HANG_ERRORS = (errors.DeadlineExceededError, errors.UnavailableError)
"""The errors a hang or a lost worker surfaces as; others (a mismatch, a peer's own exception) say their cause."""
_HOW = "run `mirrorlab trace analyze` on every worker's flight recorder for the whole run"
_MARK = "\nDiagnosis ("  # a message that has one (e.g. a peer's error passed on) is left as it is

log = logging.getLogger("mirrorlab.backend")


class DiagnosedTransport(Transport):
    """``inner``, with ``diagnose()``'s findings (for this group, at the moment of failure) in its hang errors;
    ``recorder_path()`` names the file this worker's flight recorder is written to."""

    def __init__(self, inner: Transport, diagnose: Callable[[], list[Finding]], recorder_path: Callable[[], str]):
        self.inner = inner
        self.rank = inner.rank
        self.size = inner.size
        self._diagnose = diagnose
        self._recorder_path = recorder_path
        self._lock = threading.Lock()
        self._texts: dict[tuple[type, str], str] = {}  # a message as explained, by class and plain message

    def now(self) -> float:
        return self.inner.now()

    def send(self, dst: int, message: Message) -> None:
        self.inner.send(dst, message)

    def recv(self, src: int, deadline: float | None) -> Message:
        try:
            return self.inner.recv(src, deadline)
        except HANG_ERRORS as exc:
            if isinstance(exc, errors.DeadlineExceededError) and not errors.is_copy_of(exc, self.inner.abort_error):
                raise  # this worker's own deadline: the communicator words it and explains it through abort()
            self.explain(exc)
            raise

    def abort(self, error: errors.OpError) -> None:
        self.inner.abort(error)  # the peers get the plain text; each explains its own error
        self.explain(error)

    @property
    def abort_error(self) -> errors.OpError | None:
        error = self.inner.abort_error
        if error is not None:
            error = errors.clone(error)
            self.explain(error)
        return error

    def explain(self, error: errors.OpError) -> None:
        """Append the findings to ``error``'s message (once per distinct error; never for other error classes)."""
        if not isinstance(error, HANG_ERRORS) or _MARK in error.message:
            return
        key = (type(error), error.message)
        with self._lock:
            if key not in self._texts:
                self._texts[key] = self._explained(error.message)
            text = self._texts[key]
        error.message = text
        error.args = (text,) + tuple(error.args[1:])

    def _explained(self, message: str) -> str:
        try:
            findings = self._diagnose()
        except Exception:  # a diagnosis that fails must never hide the error it was to explain
            log.warning("could not diagnose a collective failure", exc_info=True)
            return message
        if not findings:
            return message
        return (f"{message}\n{explanation(findings, _HOW)}\n  Worker {self.rank}'s flight recorder is written to "
                f"{self._recorder_path()} when it fails.")
