"""Exception classes named after TensorFlow's ``tf.errors`` so TF users can catch what they know.

Configuration mistakes raise the builtin ``ValueError``/``TypeError``/``RuntimeError`` exactly where
TensorFlow 2.21 does; runtime failures of collectives and input pipelines raise these ``OpError``s.
mirrorlab adds refinements that stay catchable as their TF parents: ``CollectiveMismatchError``
(members of one collective disagree; its shape flavour is an ``InvalidArgumentError`` and its dtype/op
flavour an ``InternalError``, as TF reports them), ``DeadlockError`` (a ``DeadlineExceededError``:
waiting forever is waiting past any deadline) and ``MirroredCopiesDifferError`` (a ``FailedPreconditionError``: the
optional check that a mirrored variable's copies are equal, which TF never checks).
"""

from __future__ import annotations

__all__ = [
    "OpError", "CancelledError", "UnknownError", "InvalidArgumentError", "DeadlineExceededError",
    "NotFoundError", "AlreadyExistsError", "PermissionDeniedError", "ResourceExhaustedError",
    "FailedPreconditionError", "AbortedError", "OutOfRangeError", "UnimplementedError",
    "InternalError", "UnavailableError", "DataLossError", "UnauthenticatedError",
    "CollectiveMismatchError", "CollectiveShapeMismatchError", "CollectiveTypeMismatchError", "DeadlockError",
    "HangError", "MirroredCopiesDifferError", "SimulatedCrash", "clone",
]


class OpError(Exception):
    """Base of the runtime errors; ``message`` is the full text, ``worker`` the task it happened on.

    ``passed_on_from`` is the rank of the worker whose failure this error passes on (an aborted collective, a
    peer that stopped heartbeating), or None for an error that originated here: reports lead with the latter."""

    error_code = 2

    def __init__(self, message: str, worker: str | None = None, passed_on_from: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.worker = worker
        self.passed_on_from = passed_on_from


class CancelledError(OpError):
    error_code = 1


class UnknownError(OpError):
    error_code = 2


class InvalidArgumentError(OpError):
    error_code = 3


class DeadlineExceededError(OpError):
    error_code = 4


class NotFoundError(OpError):
    error_code = 5


class AlreadyExistsError(OpError):
    error_code = 6


class PermissionDeniedError(OpError):
    error_code = 7


class ResourceExhaustedError(OpError):
    error_code = 8


class FailedPreconditionError(OpError):
    error_code = 9


class AbortedError(OpError):
    error_code = 10


class OutOfRangeError(OpError):
    error_code = 11


class UnimplementedError(OpError):
    error_code = 12


class InternalError(OpError):
    error_code = 13


class UnavailableError(OpError):
    error_code = 14


class DataLossError(OpError):
    error_code = 15


class UnauthenticatedError(OpError):
    error_code = 16


class CollectiveMismatchError(OpError):
    """Members of one collective disagree on what it is (op, dtype, shape, count or order)."""


class CollectiveShapeMismatchError(CollectiveMismatchError, InvalidArgumentError):
    """Members passed different shapes (TF: InvalidArgumentError "Shape mismatch in the collective ...")."""


class CollectiveTypeMismatchError(CollectiveMismatchError, InternalError):
    """Members passed different dtypes or ran different collective ops (TF: InternalError)."""


class DeadlockError(DeadlineExceededError):
    """Every live thread of the cluster waits on another and nothing can ever wake them."""


class HangError(DeadlineExceededError):
    """A simulated worker blocked outside mirrorlab (in real time, e.g. ``threading.Event().wait()``) for longer
    than the simulator's watchdog allows; TF would wait forever."""


class MirroredCopiesDifferError(FailedPreconditionError):
    """The copies of a mirrored variable differ after a replica-context update with aggregation NONE (mirrorlab's
    optional check, ``strategy.extended.check_mirrored_copies``; TF accepts such programs silently)."""


class SimulatedCrash(BaseException):
    """Raised inside a simulated worker that a fault killed; a BaseException so user code's
    ``except Exception`` cannot swallow the crash."""


def is_copy_of(error: BaseException, original: OpError | None) -> bool:
    """Whether ``error`` is ``original`` or a ``clone`` of it (its class and arguments), e.g. a group's abort error
    raised by a receive, as opposed to an error of the receive's own that happened at the same moment."""
    return original is not None and type(error) is type(original) and error.args == original.args


def clone(error: OpError) -> OpError:
    """A fresh copy of ``error`` to raise again (one instance raised in many places piles up tracebacks)."""
    copy = type(error).__new__(type(error), *error.args)
    copy.__dict__.update((k, v) for k, v in vars(error).items() if k != "__notes__")
    return copy
