"""How a collective ``Message`` is laid out in a shared-memory ring: never pickle.

A frame is ``MAGIC`` (4 bytes), the JSON header's length (4 bytes, little-endian), the header (the
message header, dtype and shape), then the array's raw little-endian bytes. The receiver checks magic,
sizes, dtype, rank and sender against ``WireLimits`` before it allocates anything for the payload.
"""

from __future__ import annotations

import json
import math
import struct

import numpy as np

from mirrorlab.collective.message import Header, Message

from . import wire
from .wire import WireLimits

__all__ = ["FrameError", "encode", "header_length", "parse_header", "PREFIX_BYTES"]

MAGIC = b"MLS1"
_PREFIX = struct.Struct("<4sI")
PREFIX_BYTES = _PREFIX.size
class FrameError(ValueError):
    """A frame that is corrupt, oversized, of a refused dtype or rank, or claims another sender."""


def encode(message: Message, limits: WireLimits) -> tuple[np.ndarray, np.ndarray]:
    """The frame of ``message`` as (prefix + header bytes, payload bytes), both uint8 arrays.

    The payload array views the message's own memory when it is already contiguous little-endian."""
    array = np.asarray(message.payload)
    if array.dtype.name not in limits.dtypes:
        raise FrameError(f"cannot send dtype {array.dtype.name}: shared memory carries only {', '.join(limits.dtypes)}")
    if array.nbytes > limits.max_bytes:
        raise FrameError(f"message of {array.nbytes} bytes exceeds the limit of {limits.max_bytes} bytes; "
                         "Fix: split the tensor or raise the transport's WireLimits(max_bytes=...)")
    little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    head = {"header": message.header.to_json(), "dtype": array.dtype.name, "shape": list(array.shape)}
    text = json.dumps(head, separators=(",", ":")).encode("utf-8")
    prefix = np.frombuffer(_PREFIX.pack(MAGIC, len(text)) + text, np.uint8)
    return prefix, little.reshape(-1).view(np.uint8)


def header_length(prefix: bytes, limits: WireLimits) -> int:
    """The header length announced by an 8-byte prefix, after checking magic and limit."""
    return wire.header_length(prefix, limits, layout=_PREFIX, magic=MAGIC, error=FrameError)


def parse_header(text: bytes, sender: int, limits: WireLimits) -> tuple[Header, np.dtype, tuple[int, ...]]:
    """The message header, dtype and shape of a frame from worker ``sender``, checked against ``limits``."""
    try:
        head = json.loads(text.decode("utf-8"))
        header = Header.from_json(head["header"])
        dtype, shape = head["dtype"], head["shape"]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise FrameError(f"malformed frame header: {type(exc).__name__}: {exc}") from None
    if header.sender != sender:
        raise FrameError(f"a message claims sender {header.sender} in worker {sender}'s ring")
    if dtype not in limits.dtypes:
        raise FrameError(f"dtype {dtype!r} is not accepted (allowed: {', '.join(limits.dtypes)})")
    if not isinstance(shape, list) or len(shape) > limits.max_rank or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise FrameError(f"shape must be a list of at most {limits.max_rank} non-negative integers, "
                         f"got {str(shape)[:80]}")
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    if nbytes > limits.max_bytes:
        raise FrameError(f"payload of {nbytes} bytes exceeds the limit of {limits.max_bytes} bytes")
    return header, np.dtype(dtype), tuple(shape)
