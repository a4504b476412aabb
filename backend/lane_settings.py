"""Whether the gRPC path moves large payloads over TCP data lanes, and from which size, read from environment
variables as every other backend setting (``settings.py``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["LaneSettings", "DATA_LANE_VAR", "DATA_LANE_MIN_BYTES_VAR", "DATA_LANE_MIN_BYTES_DEFAULT"]

DATA_LANE_VAR = "MIRRORLAB_DATA_LANE"  # auto (default): lanes on the gRPC path; off: every byte over gRPC
DATA_LANE_MIN_BYTES_VAR = "MIRRORLAB_DATA_LANE_MIN_BYTES"  # smaller payloads stay inline in the gRPC frame
DATA_LANE_MIN_BYTES_DEFAULT = 64 << 10
_MODES = ("auto", "off")


@dataclass(frozen=True)
class LaneSettings:
    """``enabled``: payloads of at least ``min_bytes`` travel on a data lane per ordered pair of workers."""

    enabled: bool = True
    min_bytes: int = DATA_LANE_MIN_BYTES_DEFAULT

    @staticmethod
    def from_environ(environ: Mapping[str, str] = os.environ) -> "LaneSettings":
        """The lane settings ``environ`` sets; ValueError naming the variable and the fix."""
        mode = environ.get(DATA_LANE_VAR, "") or "auto"
        if mode not in _MODES:
            raise ValueError(f"{DATA_LANE_VAR}={mode!r} is not one of {', '.join(_MODES)}. Fix: e.g. "
                             f"{DATA_LANE_VAR}=off to send every byte over gRPC.")
        raw = environ.get(DATA_LANE_MIN_BYTES_VAR, "") or str(DATA_LANE_MIN_BYTES_DEFAULT)
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"{DATA_LANE_MIN_BYTES_VAR}={raw!r} is not a positive number of bytes. Fix: e.g. "
                             f"{DATA_LANE_MIN_BYTES_VAR}={DATA_LANE_MIN_BYTES_DEFAULT}.")
        return LaneSettings(mode == "auto", int(raw))
