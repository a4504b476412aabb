"""What travels between workers: a header that fingerprints the collective, plus one raw array.

Headers let every receiver check that sender and receiver are in the *same* collective (sequence
number, op, dtype, shape, and its identity: what it is for and the user's call site) before using
the bytes: this is how desyncs become errors instead of hangs or garbage. Nothing here is ever pickled; the gRPC backend encodes headers as JSON and arrays as
dtype/shape plus raw bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import errors

__all__ = ["Fingerprint", "Header", "Message", "AbortNotice"]


@dataclass(frozen=True)
class Fingerprint:
    """What every member must agree on for one collective instance."""

    op: str
    dtype: str = ""
    shape: tuple = ()
    detail: str = ""

    def describe(self) -> str:
        """Human form, e.g. ``all_reduce(SUM) float32[4,2]``."""
        detail = f"({self.detail})" if self.detail else ""
        if not self.dtype:
            return f"{self.op}{detail}"
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.op}{detail} {self.dtype}[{dims}]"

    def to_json(self) -> dict:
        return {"op": self.op, "dtype": self.dtype, "shape": list(self.shape), "detail": self.detail}

    @staticmethod
    def from_json(data: dict) -> "Fingerprint":
        return Fingerprint(str(data["op"]), str(data["dtype"]), _shape_from_json(data["shape"]), str(data["detail"]))


def _shape_from_json(shape: list) -> tuple:
    """A shape, or a tuple of shapes (a packed all-reduce's), back from JSON lists."""
    return tuple(_shape_from_json(d) if isinstance(d, list) else (None if d is None else int(d)) for d in shape)


@dataclass(frozen=True)
class Header:
    """Per-message metadata: which collective instance and algorithm step, and who sent it from where."""

    seq: int
    fingerprint: Fingerprint
    step: int
    sender: int
    site: str
    kind: str = ""  # what the collective is for (see ``request_kind``)

    def to_json(self) -> dict:
        return {"seq": self.seq, "fingerprint": self.fingerprint.to_json(), "step": self.step,
                "sender": self.sender, "site": self.site, "kind": self.kind}

    @staticmethod
    def from_json(data: dict) -> "Header":
        return Header(int(data["seq"]), Fingerprint.from_json(data["fingerprint"]), int(data["step"]),
                      int(data["sender"]), str(data["site"]), str(data.get("kind", "")))


@dataclass(frozen=True)
class Message:
    """One header plus one array payload (NumPy or CuPy)."""

    header: Header
    payload: Any


RESTART_HINT = "The error could be from a previous operation. Restart your program to reset."
ABORT_PREFIX = "Collective ops is aborted by: "


@dataclass(frozen=True)
class AbortNotice:
    """Sent to every peer when a member fails, so their collectives fail fast instead of hanging."""

    sender: int
    error_type: str
    text: str

    @staticmethod
    def of(sender: int, error: errors.OpError) -> "AbortNotice":
        """The notice for ``error``, worded as TF words an aborted collective (once: an abort passed on keeps
        its words)."""
        text = error.message if error.message.startswith(ABORT_PREFIX) else (
            f"{ABORT_PREFIX}{error.message}\n{RESTART_HINT}")
        return AbortNotice(sender, type(error).__name__, text)

    def to_error(self) -> errors.OpError:
        """The error a peer raises; only mirrorlab's OpError classes are ever instantiated."""
        cls = getattr(errors, self.error_type, None)
        if not (isinstance(cls, type) and issubclass(cls, errors.OpError)):
            cls = errors.UnknownError
        return cls(self.text, passed_on_from=self.sender)

    def to_json(self) -> dict:
        return {"sender": self.sender, "error_type": self.error_type, "text": self.text}

    @staticmethod
    def from_json(data: dict) -> "AbortNotice":
        return AbortNotice(int(data["sender"]), str(data["error_type"]), str(data["text"]))
