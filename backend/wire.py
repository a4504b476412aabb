"""The byte format of what workers send each other: a JSON header plus one raw array, never pickle.

A frame is ``MAGIC`` (4 bytes), the header length (4 bytes, big-endian), the header as UTF-8 JSON, then
the payload's raw little-endian bytes. On a stream a frame travels as pieces (``split``): the first of
several says the frame's whole length, so the receiver fills one buffer instead of joining copies. The
header says the frame's kind (a collective ``Message``, an ``AbortNotice`` or a ``bye`` when a worker
ends), its collective group, and for a message the array's dtype and shape. ``decode`` checks every size, dtype and rank against ``WireLimits`` before it touches
the payload, so a hostile or corrupt frame costs nothing but a ``WireError``. On a data lane (``data_lane.py``)
a message's header also says its payload's length (``lane_parts``), and the payload follows it on the socket.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from mirrorlab.collective.message import AbortNotice, Header, Message

__all__ = ["WireError", "WireLimits", "Frame", "message_parts", "lane_parts", "with_lane_payload", "encode_message",
           "encode_abort", "encode_bye", "decode", "split", "Reassembler", "MAGIC", "ALLOWED_DTYPES", "CHUNK_BYTES",
           "PIECE_OVERHEAD", "PREFIX_BYTES", "header_length"]

MAGIC = b"MLW1"
_PREFIX = struct.Struct(">4sI")
PREFIX_BYTES = _PREFIX.size
ALLOWED_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                  "float16", "float32", "float64", "complex64", "complex128")
KINDS = ("message", "abort", "bye")
CHUNK_BYTES = 1 << 20  # a frame travels as pieces of at most this size, so large tensors stream (pipelined)
_MORE, _LAST, _FIRST = b"\x00", b"\x01", b"\x02"  # _FIRST: first of several pieces, the frame's length follows
_LENGTH = struct.Struct(">Q")
PIECE_OVERHEAD = 1 + _LENGTH.size  # most bytes a piece carries besides its share of the frame
Buffer = bytes | memoryview


class WireError(ValueError):
    """A frame that is truncated, oversized, of a refused dtype or rank, or otherwise malformed."""


@dataclass(frozen=True)
class WireLimits:
    """What a receiver accepts: whole-frame bytes, header bytes, array rank and dtypes."""

    max_bytes: int = 1 << 30
    max_header_bytes: int = 1 << 16
    max_rank: int = 32
    dtypes: tuple[str, ...] = ALLOWED_DTYPES


@dataclass(frozen=True)
class Frame:
    """A decoded frame: ``kind`` is "message" (``message`` set), "abort" (``notice`` set) or "bye". A data-lane
    message frame (its payload follows it on the lane) has ``layout`` (dtype, shape), the payload's byte count in
    ``lane_bytes`` and no payload yet (``with_lane_payload`` adds it)."""

    kind: str
    group: int
    message: Message | None = None
    notice: AbortNotice | None = None
    lane_bytes: int = 0
    layout: tuple[str, tuple[int, ...]] | None = None


def _frame_parts(head: dict, payload: Buffer = b"") -> list[Buffer]:
    text = json.dumps(head, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return [_PREFIX.pack(MAGIC, len(text)) + text, payload]


def _frame(head: dict) -> bytes:
    return b"".join(_frame_parts(head))


def encode_message(group: int, message: Message) -> bytes:
    """The frame of ``message`` in collective group ``group``; the payload must be a host (NumPy) array."""
    return b"".join(message_parts(group, message))


def message_parts(group: int, message: Message) -> list[Buffer]:
    """``encode_message``'s frame as its header bytes and a view of the payload, not yet joined: ``split``
    cuts pieces straight from them, copying the payload once. The view reads the array, so split it
    before the array can change."""
    head, little = _message_head(group, message)
    return _frame_parts(head, memoryview(little).cast("B") if little.size else b"")


def lane_parts(group: int, message: Message) -> tuple[bytes, np.ndarray]:
    """``message`` as the data lane sends it: a frame carrying its header, dtype, shape and payload length, then
    the payload as contiguous little-endian bytes (a view when the array already is)."""
    head, little = _message_head(group, message)
    head["lane"] = little.nbytes
    return _frame(head), little.reshape(-1).view(np.uint8)


def _message_head(group: int, message: Message) -> tuple[dict, np.ndarray]:
    array = np.asarray(message.payload)
    if array.dtype.name not in ALLOWED_DTYPES:
        raise WireError(f"cannot send dtype {array.dtype.name}: the wire carries only {', '.join(ALLOWED_DTYPES)}")
    little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    head = {"kind": "message", "group": group, "header": message.header.to_json(),
            "dtype": array.dtype.name, "shape": list(array.shape)}
    return head, little


def encode_abort(group: int, notice: AbortNotice) -> bytes:
    """The frame telling a peer that group ``group`` is aborted with ``notice``."""
    return _frame({"kind": "abort", "group": group, "notice": notice.to_json()})


def encode_bye() -> bytes:
    """The frame a worker sends last when its program has ended normally."""
    return _frame({"kind": "bye", "group": -1})


def decode(frame: bytes, limits: WireLimits = WireLimits()) -> Frame:
    """Parse ``frame``; raises ``WireError`` naming what is wrong, before allocating anything for the payload."""
    if len(frame) > limits.max_bytes:
        raise WireError(f"frame of {len(frame)} bytes exceeds the limit of {limits.max_bytes} bytes")
    if len(frame) < _PREFIX.size:
        raise WireError(f"truncated frame: {len(frame)} bytes, shorter than the {_PREFIX.size}-byte prefix")
    head_len = header_length(frame, limits)
    end = _PREFIX.size + head_len
    if len(frame) < end:
        raise WireError(f"truncated frame: header says {head_len} bytes, only {len(frame) - _PREFIX.size} present")
    try:
        head = json.loads(bytes(frame[_PREFIX.size:end]).decode("utf-8"))
        return _parse(head, memoryview(frame)[end:], limits)
    except WireError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as exc:
        raise WireError(f"malformed frame header: {type(exc).__name__}: {exc}") from None


def header_length(prefix: Buffer, limits: WireLimits = WireLimits(), *, layout: struct.Struct = _PREFIX,
                  magic: bytes = MAGIC, error: type[ValueError] = WireError) -> int:
    """The header length a frame's prefix (its first ``layout.size`` bytes) declares, after checking its magic
    and ``limits.max_header_bytes``, so a stream reader knows how much to read before reading it; raises ``error``.
    The shared-memory frames (``shm_frame.py``) pass their own layout, magic and error."""
    found, length = layout.unpack_from(prefix)
    if found != magic:
        raise error(f"corrupt stream: a frame starts with {bytes(found)!r}, expected {magic!r}")
    if length > limits.max_header_bytes:
        raise error(f"frame header of {length} bytes exceeds the limit of {limits.max_header_bytes} bytes")
    return length


def _parse(head: Any, payload: memoryview, limits: WireLimits) -> Frame:
    if not isinstance(head, dict) or head.get("kind") not in KINDS:
        raise WireError(f"malformed frame header: kind must be one of {KINDS}")
    kind, group = head["kind"], head["group"]
    if not isinstance(group, int) or isinstance(group, bool):
        raise WireError(f"malformed frame header: group must be an integer, got {group!r}")
    if kind != "message":
        if len(payload):
            raise WireError(f"{kind} frame carries {len(payload)} unexpected payload bytes")
        notice = AbortNotice.from_json(head["notice"]) if kind == "abort" else None
        return Frame(kind, group, notice=notice)
    dtype, shape = head["dtype"], head["shape"]
    if dtype not in limits.dtypes:
        raise WireError(f"dtype {dtype!r} is not accepted (allowed: {', '.join(limits.dtypes)})")
    if not isinstance(shape, list) or len(shape) > limits.max_rank:
        raise WireError(f"shape must be a list of at most {limits.max_rank} dimensions, got {str(shape)[:80]}")
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise WireError(f"shape dimensions must be non-negative integers, got {str(shape)[:80]}")
    expected = math.prod(shape) * np.dtype(dtype).itemsize
    header = Header.from_json(head["header"])
    if "lane" in head:
        return _lane_frame(group, header, dtype, shape, head["lane"], expected, len(payload), limits)
    if expected != len(payload):
        raise WireError(f"payload of {len(payload)} bytes does not match {dtype}{shape} ({expected} bytes): "
                        "truncated or corrupt frame")
    return Frame(kind, group, message=Message(header, _array(dtype, shape, payload)))


def _lane_frame(group: int, header: Header, dtype: str, shape: list, lane: Any, expected: int, inline: int,
                limits: WireLimits) -> Frame:
    """A message frame whose payload follows on the data lane, checked before any byte of it is read."""
    if not isinstance(lane, int) or isinstance(lane, bool) or lane != expected or inline:
        raise WireError(f"data-lane frame declares {str(lane)[:40]} payload bytes and carries {inline} inline; "
                        f"{dtype}{shape} needs {expected} on the lane and none inline")
    if expected > limits.max_bytes:
        raise WireError(f"data-lane payload of {expected} bytes exceeds the limit of {limits.max_bytes} bytes")
    return Frame("message", group, message=Message(header, None), lane_bytes=expected,
                 layout=(dtype, tuple(shape)))


def with_lane_payload(frame: Frame, payload: Buffer) -> Frame:
    """``frame`` (a data-lane message frame) with the ``frame.lane_bytes`` bytes read from the lane."""
    dtype, shape = frame.layout
    return Frame("message", frame.group, message=Message(frame.message.header, _array(dtype, shape, payload)))


def _array(dtype: str, shape: Any, payload: Buffer) -> np.ndarray:
    """The read-only native-order array of ``payload``'s little-endian bytes (their length already checked)."""
    array = np.frombuffer(payload, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)
    array = array.astype(np.dtype(dtype), copy=False)  # native byte order (a no-op on little-endian hosts)
    array.flags.writeable = False
    return array


def split(frame: Buffer | list[Buffer], chunk: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The stream items of ``frame`` (bytes, or its parts from ``message_parts``), cut as they are taken, so
    the first can travel while the rest are cut: pieces of at most ``chunk`` frame bytes, each after a flag
    byte (first of several with the frame's length, more, or last)."""
    parts = [memoryview(p).cast("B") for p in ([frame] if isinstance(frame, (bytes, memoryview)) else frame)]
    total = sum(len(p) for p in parts)
    for start in range(0, max(total, 1), chunk):
        flag = _LAST if start + chunk >= total else (_FIRST + _LENGTH.pack(total) if start == 0 else _MORE)
        yield b"".join([flag, *_window(parts, start, start + chunk)])


def _window(parts: list[memoryview], start: int, end: int) -> list[memoryview]:
    """The views of ``parts``' bytes ``start:end``, as if the parts were one buffer."""
    views, offset = [], 0
    for part in parts:
        if offset < end and start < offset + len(part):
            views.append(part[max(0, start - offset):end - offset])
        offset += len(part)
    return views


class Reassembler:
    """Joins one stream's items back into frames: a frame of several pieces is copied once into a buffer of
    the length its first piece declares, refused before allocation past ``limits.max_bytes``."""

    def __init__(self, limits: WireLimits = WireLimits()) -> None:
        self.limits = limits
        self._buffer: memoryview | None = None
        self._filled = 0

    def feed(self, item: bytes) -> memoryview | None:
        """The whole frame when ``item`` is its last piece, else None."""
        flag, body = item[:1], memoryview(item)[1:]
        if flag == _FIRST:
            flag, body = _MORE, self._start(body)
        elif flag not in (_MORE, _LAST):
            raise WireError(f"stream item starts with {flag!r}, not a piece flag (0, 1 or 2)")
        elif self._buffer is None:
            if flag == _MORE:
                raise WireError("a middle piece arrived with no frame started (its first piece is missing)")
            if len(body) > self.limits.max_bytes:
                raise WireError(f"frame of more than {self.limits.max_bytes} bytes exceeds the limit")
            return body
        end = self._filled + len(body)
        if end > len(self._buffer):
            raise WireError(f"pieces carry more than the {len(self._buffer)} bytes their frame declared")
        self._buffer[self._filled:end] = body
        self._filled = end
        if flag == _MORE:
            return None
        frame, self._buffer = self._buffer, None
        if end != len(frame):
            raise WireError(f"truncated frame: its pieces carried {end} of the {len(frame)} bytes it declared")
        return frame

    def _start(self, body: memoryview) -> memoryview:
        """Allocate the frame the first piece declares; the rest of the piece is the frame's first bytes."""
        if self._buffer is not None:
            raise WireError("a new frame started before the previous one's last piece")
        if len(body) < _LENGTH.size:
            raise WireError(f"first piece of {len(body)} bytes is too short to hold the frame's length")
        (total,) = _LENGTH.unpack_from(body)
        if total > self.limits.max_bytes:
            raise WireError(f"frame of more than {self.limits.max_bytes} bytes exceeds the limit ({total} declared)")
        self._buffer, self._filled = memoryview(np.empty(total, np.uint8)), 0  # NumPy: huge pages for big frames
        return body[_LENGTH.size:]
