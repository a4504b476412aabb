"""``mirrorlab.linalg``: the ``tf.linalg`` names of mirrorlab's tensor functions (see ``clip_ops``)."""

from .clip_ops import global_norm
from .manip_ops import eye, matrix_transpose, norm

__all__ = ["eye", "global_norm", "matrix_transpose", "norm"]
