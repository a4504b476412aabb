"""``mirrorlab.linalg``: the ``tf.linalg`` names of mirrorlab's tensor functions (see ``clip_ops``)."""

from .clip_ops import global_norm

__all__ = ["global_norm"]
