"""TensorBoard event files: scalar summaries written as TF's ``tf.summary.scalar`` writes them (``Event`` protocol
buffers holding a float32 scalar tensor of the ``scalars`` plugin, framed as TFRecords with masked CRC-32C
checksums), so TensorBoard and ``tf.compat.v1.train.summary_iterator`` read them; and a reader of such files.

Only the few protocol-buffer fields involved are encoded, by hand: nothing is unpickled or evaluated on reading."""

from __future__ import annotations

import itertools
import os
import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import BinaryIO

from mirrorlab.runtime import clock

__all__ = ["Event", "EventFileWriter", "read_events"]

_FILE_VERSION = b"brain.Event:2"
_DT_FLOAT = 1  # TensorProto's dtype enum value for float32
_files = itertools.count()  # distinguishes files that one process opens in the same second


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def _masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C (Castagnoli), rotated right by 15 bits plus a constant."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1  # negative int64 values as two's complement, as protocol buffers encode them
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (a string, bytes or a message)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _scalar_value(tag: str, value: float) -> bytes:
    """``Summary.Value``: the tag, the ``scalars`` plugin's metadata and a float32 scalar tensor."""
    metadata = _field(1, _field(1, b"scalars"))  # SummaryMetadata.plugin_data.plugin_name
    tensor = _varint(1 << 3) + _varint(_DT_FLOAT) + _field(2, b"") + _field(5, struct.pack("<f", value))
    return _field(1, tag.encode()) + _field(9, metadata) + _field(8, tensor)


def _event(wall_time: float, step: int, file_version: bytes | None = None, values: bytes = b"") -> bytes:
    out = _varint(1 << 3 | 1) + struct.pack("<d", wall_time) + _varint(2 << 3) + _varint(step)
    if file_version is not None:
        out += _field(3, file_version)
    if values:
        out += _field(5, values)  # Event.summary
    return out


class EventFileWriter:
    """Writes one event file in ``logdir`` (created if missing), named as TF names them
    (``events.out.tfevents.<time>.<host>.<pid>.<n>.v2``); ``scalar`` adds one value, flushed at once."""

    def __init__(self, logdir: str) -> None:
        os.makedirs(logdir, exist_ok=True)
        name = f"events.out.tfevents.{int(clock.now())}.{socket.gethostname()}.{os.getpid()}.{next(_files)}.v2"
        self.path = os.path.join(logdir, name)
        self._lock = threading.Lock()
        self._file: BinaryIO | None = open(self.path, "wb")  # noqa: SIM115 (closed by close())
        self._write(_event(clock.now(), 0, file_version=_FILE_VERSION))

    def _write(self, record: bytes) -> None:
        length = struct.pack("<Q", len(record))
        with self._lock:
            if self._file is None:
                raise ValueError(f"The event file {self.path} is closed.\nFix: write before closing the writer.")
            self._file.write(length + struct.pack("<I", _masked_crc32c(length)) + record +
                             struct.pack("<I", _masked_crc32c(record)))
            self._file.flush()

    def scalar(self, tag: str, value: float, step: int) -> None:
        """Record ``value`` (as float32) under ``tag`` at ``step``."""
        self._write(_event(clock.now(), int(step), values=_field(1, _scalar_value(tag, float(value)))))

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


@dataclass
class Event:
    """One event read back: its wall time, step, file version (the first event) and scalar values by tag."""

    wall_time: float = 0.0
    step: int = 0
    file_version: str | None = None
    scalars: dict[str, float] = field(default_factory=dict)


def _fields(data: bytes) -> list[tuple[int, int, object]]:
    """``(number, wire type, value)`` of each field of an encoded message (values: ints or raw bytes)."""
    out, i = [], 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        elif wire == 2:
            size, i = _read_varint(data, i)
            value, i = data[i:i + size], i + size
        else:
            raise ValueError(f"Unsupported protocol buffer wire type {wire} in an event file.")
        out.append((number, wire, value))
    return out


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not byte & 0x80:
            return value, i


def _scalar(value: bytes) -> tuple[str, float | None]:
    """The tag and float of an encoded ``Summary.Value`` (a ``simple_value`` or a float32 scalar tensor)."""
    tag, number = "", None
    for field_number, _, payload in _fields(value):
        if field_number == 1:
            tag = payload.decode()
        elif field_number == 2:
            number = struct.unpack("<f", payload)[0]
        elif field_number == 8:
            for tensor_field, _, content in _fields(payload):
                if tensor_field == 5:  # float_val, packed
                    number = struct.unpack("<f", content[:4])[0]
                elif tensor_field == 4 and len(content) == 4:  # tensor_content
                    number = struct.unpack("<f", content)[0]
    return tag, number


def read_events(path: str) -> list[Event]:
    """The events of an event file, each record's checksums verified."""
    events = []
    with open(path, "rb") as handle:
        data = handle.read()
    i = 0
    while i < len(data):
        length_bytes = data[i:i + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", data[i + 8:i + 12])
        record = data[i + 12:i + 12 + length]
        (record_crc,) = struct.unpack("<I", data[i + 12 + length:i + 16 + length])
        if length_crc != _masked_crc32c(length_bytes) or record_crc != _masked_crc32c(record):
            raise ValueError(f"Corrupt record at byte {i} of {path}: checksum mismatch.")
        i += 16 + length
        event = Event()
        for number, _, value in _fields(record):
            if number == 1:
                event.wall_time = struct.unpack("<d", value)[0]
            elif number == 2:
                event.step = value if value < 1 << 63 else value - (1 << 64)
            elif number == 3:
                event.file_version = value.decode()
            elif number == 5:
                for _, _, summary_value in _fields(value):
                    tag, number_value = _scalar(summary_value)
                    if number_value is not None:
                        event.scalars[tag] = number_value
        events.append(event)
    return events
