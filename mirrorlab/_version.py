"""The mirrorlab version (also written into checkpoints and traces)."""

__version__ = "0.1.0"
