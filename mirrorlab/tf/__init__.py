"""The TensorFlow-compatible API: ``import mirrorlab.tf as tf`` and TF 2.21 code runs with that line changed.

``tf.distribute``, ``tf.data``, ``tf.keras``, ``tf.train``, ``tf.errors`` and the everyday ops, as in TensorFlow.
"""

import mirrorlab as _ml
from mirrorlab import *  # noqa: F401,F403  (the TF names)
from mirrorlab import (cluster, config, data, distribute, dtypes, errors, io, keras, linalg, math, nest, nn,  # noqa: F401
                       random, train)
from mirrorlab import print  # noqa: F401  (tf.print, kept out of __all__)

__all__ = [*_ml.__all__, "distribute"]
