"""``CommunicationOptions``: how collectives run (implementation, packing, timeout), as in TF 2.21."""

from __future__ import annotations

import enum

__all__ = ["CommunicationImplementation", "CollectiveCommunication", "CollectiveHints", "CommunicationOptions",
           "Options"]


class CommunicationImplementation(enum.Enum):
    """RING: ring all-reduce at every cluster size. AUTO: the ring's summation order up to 8 workers, recursive
    halving/doubling's beyond (fewer rounds); small messages run in one round and large ring-order ones pipelined,
    with the same bits (``collective/algorithm_choice.py``). NCCL: NCCL for GPU all-reduce where available, else
    AUTO."""

    AUTO = "AUTO"
    RING = "RING"
    NCCL = "NCCL"


CollectiveCommunication = CommunicationImplementation


class Options:
    """The options object TF returns from ``CommunicationOptions(...)`` (its class is named ``Options``)."""

    def __init__(self, bytes_per_pack: int = 0, timeout_seconds: float | None = None,
                 implementation: CommunicationImplementation | str = CommunicationImplementation.AUTO) -> None:
        if bytes_per_pack < 0:
            raise ValueError(f"Argument `bytes_per_pack` must be >=0, Received {bytes_per_pack}.")
        if isinstance(implementation, str):
            implementation = CommunicationImplementation(implementation.upper())
        if not isinstance(implementation, CommunicationImplementation):
            raise ValueError("Argument `implementation` must be instance of "
                             "`tf.distribute.experimental.CommunicationImplementation`.")
        self.bytes_per_pack = bytes_per_pack
        self.timeout_seconds = timeout_seconds
        self.implementation = implementation

    def merge(self, options: "Options | None") -> "Options":
        """These options overridden by every non-default field of ``options`` (per-call over strategy-wide);
        these options themselves when ``options`` is None (a merge is read, never changed)."""
        if options is None:
            return self
        merged = Options(self.bytes_per_pack, self.timeout_seconds, self.implementation)
        if not isinstance(options, Options):
            raise AttributeError(f"'{type(options).__name__}' object has no attribute 'bytes_per_pack'\nFix: options "
                                 "must be a CommunicationOptions, e.g. CommunicationOptions(timeout_seconds=30).")
        if options.bytes_per_pack != 0:
            merged.bytes_per_pack = options.bytes_per_pack
        if options.timeout_seconds is not None:
            merged.timeout_seconds = options.timeout_seconds
        if options.implementation != CommunicationImplementation.AUTO:
            merged.implementation = options.implementation
        return merged

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Options) and (self.bytes_per_pack, self.timeout_seconds, self.implementation) == (
            other.bytes_per_pack, other.timeout_seconds, other.implementation)

    def __str__(self) -> str:
        return (f"Options(bytes_per_pack={self.bytes_per_pack},timeout_seconds={self.timeout_seconds}, "
                f"implementation={self.implementation})")

    __repr__ = __str__


class CommunicationOptions:
    """``CommunicationOptions(bytes_per_pack=0, timeout_seconds=None, implementation=AUTO)`` -> ``Options``."""

    def __new__(cls, bytes_per_pack: int = 0, timeout_seconds: float | None = None,
                implementation: CommunicationImplementation | str = CommunicationImplementation.AUTO) -> Options:
        return Options(bytes_per_pack, timeout_seconds, implementation)


class CollectiveHints:
    """TF's deprecated ``CollectiveHints(bytes_per_pack=0, timeout_seconds=None)``: the same ``Options``."""

    def __new__(cls, bytes_per_pack: int = 0, timeout_seconds: float | None = None) -> Options:
        return Options(bytes_per_pack, timeout_seconds)
