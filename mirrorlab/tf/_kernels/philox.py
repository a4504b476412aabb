"""Philox4x32-10, bit-identical to TensorFlow's ``random::PhiloxRandom``: the counter-based generator behind
tf.data's shuffle order (read one sample at a time, ``PhiloxStream``) and TF's random ops (read in blocks of 4,
``philox_blocks``)."""

from __future__ import annotations

import numpy as np

__all__ = ["PhiloxStream", "philox_blocks", "philox_start"]

_M32 = np.uint64(0xFFFFFFFF)
_KEY_STEP = (0x9E3779B9, 0xBB67AE85)
_MUL_A, _MUL_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_BLOCKS = 64  # counter blocks computed per refill of a stream (4 samples each)


def philox_blocks(counter: int, key: tuple[int, int], count: int | np.ndarray) -> np.ndarray:
    """The blocks for the 128-bit counters ``counter``, ``counter + 1``, ... (``count`` of them, or ``counter`` plus
    each of the offsets ``count`` holds) under the 64-bit ``key``, as uint32 samples in output order (4 per block)."""
    low, high = counter & ((1 << 64) - 1), (counter >> 64) & ((1 << 64) - 1)
    offsets = np.arange(count, dtype=np.uint64) if np.ndim(count) == 0 else np.asarray(count, np.uint64)
    with np.errstate(over="ignore"):
        words_low = np.uint64(low) + offsets
        words_high = np.uint64(high) + (words_low < np.uint64(low)).astype(np.uint64)  # the carry
    shift = np.uint64(32)
    c = [words_low & _M32, words_low >> shift, words_high & _M32, words_high >> shift]
    k0, k1 = key
    for round_ in range(10):
        p0, p1 = _MUL_A * c[0], _MUL_B * c[2]
        c = [(p1 >> shift) ^ c[1] ^ np.uint64(k0), p1 & _M32, (p0 >> shift) ^ c[3] ^ np.uint64(k1), p0 & _M32]
        if round_ < 9:
            k0, k1 = (k0 + _KEY_STEP[0]) & 0xFFFFFFFF, (k1 + _KEY_STEP[1]) & 0xFFFFFFFF
    return np.stack(c, axis=1).reshape(-1).astype(np.uint32)


def philox_start(seed_lo: int, seed_hi: int) -> tuple[tuple[int, int], int]:
    """The key and 128-bit counter of ``PhiloxRandom(seed_lo, seed_hi)``: ``seed_lo`` is the key, ``seed_hi`` the
    counter's upper half."""
    seed_lo &= (1 << 64) - 1
    return (seed_lo & 0xFFFFFFFF, seed_lo >> 32), (seed_hi & ((1 << 64) - 1)) << 64


class PhiloxStream:
    """uint32 samples of ``PhiloxRandom(seed_lo, seed_hi)``, one at a time, in TF's order."""

    def __init__(self, seed_lo: int, seed_hi: int) -> None:
        self._key, self._counter = philox_start(seed_lo, seed_hi)
        self._samples: list[int] = []

    def next(self) -> int:
        if not self._samples:
            block = philox_blocks(self._counter, self._key, _BLOCKS)
            self._counter = (self._counter + _BLOCKS) % (1 << 128)
            self._samples = block.tolist()[::-1]
        return self._samples.pop()
