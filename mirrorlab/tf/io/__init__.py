"""``mirrorlab.io``: the part of ``tf.io`` that training scripts use for checkpoint directories (``gfile``)."""

from . import gfile

__all__ = ["gfile"]
