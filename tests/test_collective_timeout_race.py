"""A worker's collective deadline passing as a peer's abort arrives: the error raised is the peer's abort in its own
words (with the diagnosis on real workers), whether the receive raised the abort or its own bare deadline error,
which never reaches the user; with no abort, the worker's own timeout as the communicator words it."""

from __future__ import annotations

import pytest

from mirrorlab import errors
from mirrorlab.backend.diagnosed_transport import DiagnosedTransport
from mirrorlab.collective.communicator import Communicator
from mirrorlab.collective.message import AbortNotice, Fingerprint, Message
from mirrorlab.collective.transport import Transport
from mirrorlab.diagnostics.findings import Finding
from mirrorlab.diagnostics.trace_hang import NEVER_ENTERED

PEER_TIMEOUT = "Collective has timed out during execution.\nworker 1 waited 4.0 s in all_reduce for worker 2."


class _RaceTransport(Transport):
    """Rank 0 of 3. ``recv`` waits past its deadline; ``arrives`` "before": a peer's abort lands before it looks
    (it raises the abort), "while": as it raises its own deadline error, "never": no abort."""

    rank, size = 0, 3

    def __init__(self, arrives: str) -> None:
        self.arrives = arrives
        self._abort: errors.OpError | None = None

    def send(self, dst: int, message: Message) -> None:
        pass

    def recv(self, src: int, deadline: float | None) -> Message:
        if self.arrives != "never":
            self._abort = AbortNotice.of(1, errors.DeadlineExceededError(PEER_TIMEOUT)).to_error()
        if self.arrives == "before":
            raise errors.clone(self._abort)
        raise errors.DeadlineExceededError(f"no message from worker {src} by its deadline")

    def abort(self, error: errors.OpError) -> None:
        self._abort = self._abort or error

    @property
    def abort_error(self) -> errors.OpError | None:
        return self._abort

    def now(self) -> float:
        return 0.0


def _finding() -> list[Finding]:
    return [Finding(NEVER_ENTERED, "error", ("worker:2",), "worker 2 never entered #1.", fix="Fix it.")]


@pytest.mark.parametrize("diagnosed", [False, True])
@pytest.mark.parametrize("arrives", ["before", "while", "never"])
def test_a_deadline_passing_as_a_peers_abort_arrives_raises_the_abort(arrives: str, diagnosed: bool) -> None:
    transport: Transport = _RaceTransport(arrives)
    if diagnosed:
        transport = DiagnosedTransport(transport, _finding, lambda: "/tmp/recorder.jsonl")
    comm = Communicator(0, 3, ["/job:worker/task:0", "/job:worker/task:1", "/job:worker/task:2"], transport)
    instance = comm.start(Fingerprint("all_reduce", "float32", (4,)), "train.py:7", 4.0)
    with pytest.raises(errors.DeadlineExceededError) as caught:
        instance.recv(2, step=0)
    text = caught.value.message
    assert "no message from worker" not in text
    if arrives == "never":  # this worker's own timeout, naming what it waited for
        assert text.startswith("Collective has timed out during execution.\nworker 0 (/job:worker/task:0) waited "
                               "4.0 s in all_reduce float32[4] #1 at train.py:7 for worker 2 (/job:worker/task:2)")
        assert caught.value.passed_on_from is None
    else:  # the peer's abort, in its words
        assert text.startswith("Collective ops is aborted by: " + PEER_TIMEOUT) and caught.value.passed_on_from == 1
    assert ("ML-TRC-010" in text) == diagnosed and text.count("Diagnosis (") == diagnosed


@pytest.mark.parametrize("diagnosed", [False, True])
def test_a_timeout_worded_after_a_peers_abort_arrived_is_that_abort(diagnosed: bool) -> None:
    """The abort landing after the receive gave up but before the communicator failed the group with its timeout:
    the group's error is the abort (first error wins), and that is what the worker raises."""
    transport: Transport = _RaceTransport("never")
    if diagnosed:
        transport = DiagnosedTransport(transport, _finding, lambda: "/tmp/recorder.jsonl")
    comm = Communicator(0, 3, ["/job:worker/task:0", "/job:worker/task:1", "/job:worker/task:2"], transport)
    instance = comm.start(Fingerprint("all_reduce", "float32", (4,)), "train.py:7", 4.0)
    (transport.inner if diagnosed else transport).abort(
        AbortNotice.of(1, errors.DeadlineExceededError(PEER_TIMEOUT)).to_error())
    error = instance.timed_out("worker 2 (/job:worker/task:2)")
    assert error.message.startswith("Collective ops is aborted by: " + PEER_TIMEOUT) and error.passed_on_from == 1
    assert ("ML-TRC-010" in error.message) == diagnosed
    assert errors.is_copy_of(error, comm.error) and error is not comm.error  # (a fresh copy to raise)


def test_is_copy_of_tells_a_clone_from_another_error_of_the_same_class() -> None:
    original = errors.DeadlineExceededError("Collective ops is aborted by: x", passed_on_from=1)
    assert errors.is_copy_of(original, original) and errors.is_copy_of(errors.clone(original), original)
    assert not errors.is_copy_of(errors.DeadlineExceededError("no message from worker 1 by its deadline"), original)
    assert not errors.is_copy_of(errors.UnavailableError("Collective ops is aborted by: x"), original)
    assert not errors.is_copy_of(original, None)
