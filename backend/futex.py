"""Cross-process sleep/wake on a 32-bit word of shared memory (Linux futex), so a waiting worker costs
no CPU and wakes within microseconds of its peer's write.

Only the shared (non-private) futex operations are used: they key on the physical page, so two
processes that map the same segment wait and wake on the same word. Where the syscall is unknown
(not Linux x86-64/arm64) ``wait`` degrades to a short sleep, which is correct but slower.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import time

__all__ = ["futex_wait", "futex_wake", "AVAILABLE"]

_SYSCALL = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}.get(platform.machine().lower())
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1
_FALLBACK_SLEEP = 0.0005

_libc = ctypes.CDLL(None, use_errno=True) if _SYSCALL is not None and os.name == "posix" else None
AVAILABLE = _libc is not None


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def futex_wait(address: int, expected: int, timeout: float) -> None:
    """Sleep while the uint32 at ``address`` equals ``expected``, at most ``timeout`` seconds.

    Returns on a wake, a changed word, the timeout or a signal; callers re-check their condition."""
    if _libc is None:
        time.sleep(min(timeout, _FALLBACK_SLEEP))
        return
    timeout = max(0.0, timeout)
    spec = _Timespec(int(timeout), int((timeout % 1.0) * 1e9))
    result = _libc.syscall(_SYSCALL, ctypes.c_void_p(address), _FUTEX_WAIT, ctypes.c_uint32(expected),
                           ctypes.byref(spec), None, 0)
    if result != 0 and ctypes.get_errno() not in (errno.EAGAIN, errno.ETIMEDOUT, errno.EINTR):
        raise OSError(ctypes.get_errno(), f"futex wait failed: {os.strerror(ctypes.get_errno())}")


def futex_wake(address: int) -> None:
    """Wake every process sleeping on the uint32 at ``address``."""
    if _libc is not None:
        _libc.syscall(_SYSCALL, ctypes.c_void_p(address), _FUTEX_WAKE, ctypes.c_int(2**31 - 1), None, None, 0)
