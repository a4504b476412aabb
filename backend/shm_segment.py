"""One worker's shared-memory segment on this host: a control block plus one inbound ring per peer.

Worker P's segment holds, for every peer s, the slot ``s -> P``: the ring's head (written only by s),
its tail (written only by P), two futex words (``data`` rung by s when bytes arrive, ``space`` rung by P
when it frees room), s's attach and goodbye flags, and s's abort notice. Every word has one writer
(an aborting peer also rings the data words, best effort), so no atomic read-modify-write is needed;
x86-64's store order makes a published head imply its bytes.

Segments are files under ``/dev/shm`` (POSIX shared memory); each is unlinked as soon as every peer has
mapped it, so a crash after start-up leaks nothing: the memory goes when the last mapping does.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

import numpy as np

from mirrorlab import errors

__all__ = ["Segment", "segment_path", "SHM_DIR", "SLOT_META"]

SHM_DIR = Path("/dev/shm")
_MAGIC = 0x314D48534C524D  # "MRLSHM1"
_CONTROL = 4096
SLOT_META = 8192
ABORT_TEXT_BYTES = 4096
# word offsets (bytes) inside a slot's metadata; head and tail on their own cache lines
HEAD, TAIL, DATA_BELL, SPACE_BELL = 0, 64, 128, 192
ATTACHED, DEPARTED, ABORT_LEN, ABORT_TEXT = 256, 264, 272, 1024
# control block words
_C_MAGIC, _C_PID, _C_SIZE, _C_CAPACITY = 0, 8, 16, 24


def segment_path(session: str, rank: int) -> Path:
    """``/dev/shm/mirrorlab-<session>-<rank>``."""
    return SHM_DIR / f"mirrorlab-{session}-{rank}"


class Segment:
    """A mapped segment of a ``size``-worker group whose rings hold ``capacity`` bytes each."""

    def __init__(self, path: Path, mm: mmap.mmap, size: int, capacity: int) -> None:
        self.path = path
        self.size = size
        self.capacity = capacity
        self._mm = mm
        self.u64 = np.ndarray(len(mm) // 8, np.uint64, buffer=mm)
        self.u32 = np.ndarray(len(mm) // 4, np.uint32, buffer=mm)
        self.u8 = np.ndarray(len(mm), np.uint8, buffer=mm)
        anchor = ctypes.c_char.from_buffer(mm)
        self.base_address = ctypes.addressof(anchor)
        del anchor

    @staticmethod
    def nbytes(size: int, capacity: int) -> int:
        return _CONTROL + size * (SLOT_META + capacity)

    @classmethod
    def create(cls, path: Path, size: int, capacity: int) -> "Segment":
        """Create ``path`` exclusively (FileExistsError if it exists) and publish this process's pid."""
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            try:  # reserve the memory now: a full /dev/shm fails here, not later with SIGBUS on a write
                os.posix_fallocate(fd, 0, cls.nbytes(size, capacity))
            except OSError as exc:
                os.close(fd)
                fd = -1
                os.unlink(path)
                raise errors.ResourceExhaustedError(
                    f"cannot reserve {cls.nbytes(size, capacity)} bytes of shared memory in {SHM_DIR} "
                    f"({exc.strerror}). Fix: pass a smaller ring_bytes, or give the host (container) a larger "
                    "/dev/shm, e.g. `docker run --shm-size=1g`.") from None
            segment = cls(path, mmap.mmap(fd, cls.nbytes(size, capacity)), size, capacity)
        finally:
            if fd >= 0:
                os.close(fd)
        segment.u64[[_C_PID // 8, _C_SIZE // 8, _C_CAPACITY // 8]] = [os.getpid(), size, capacity]
        segment.u64[_C_MAGIC // 8] = _MAGIC  # last: a peer that sees the magic sees the rest
        return segment

    @classmethod
    def attach(cls, path: Path) -> "Segment | None":
        """Map a peer's segment once its creator has published it; None while it is not there yet."""
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return None
        try:
            length = os.fstat(fd).st_size
            if length < _CONTROL:
                return None
            mm = mmap.mmap(fd, length)
        finally:
            os.close(fd)
        head = np.ndarray(4, np.uint64, buffer=mm)
        magic, size, capacity = int(head[0]), int(head[2]), int(head[3])
        del head
        if magic != _MAGIC:
            mm.close()
            return None
        return cls(path, mm, size, capacity)

    @property
    def pid(self) -> int:
        return int(self.u64[_C_PID // 8])

    def slot(self, src: int) -> int:
        """Byte offset of the metadata of slot ``src -> owner``; its ring data follows at ``+ SLOT_META``."""
        return _CONTROL + src * (SLOT_META + self.capacity)

    def word(self, offset: int) -> int:
        return int(self.u64[offset // 8])

    def set_word(self, offset: int, value: int) -> None:
        self.u64[offset // 8] = value

    def ring_bell(self, offset: int) -> None:
        """Change the futex word at ``offset`` (its only writer calls this) so sleepers see news."""
        self.u32[offset // 4] = (int(self.u32[offset // 4]) + 1) & 0xFFFFFFFF

    def bell(self, offset: int) -> int:
        return int(self.u32[offset // 4])

    def unlink(self) -> None:
        """Remove the name; mappings stay valid until closed."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        """Unmap (the memory is freed once every process has unmapped an unlinked segment)."""
        del self.u64, self.u32, self.u8
        try:
            self._mm.close()
        except BufferError:  # a view is still alive somewhere: the mapping goes with it, at collection
            pass
