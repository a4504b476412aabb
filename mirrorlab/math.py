"""``mirrorlab.math``: the ``tf.math`` names of mirrorlab's tensor functions (see ``array_ops``)."""

from .array_ops import (abs, add, argmax, argmin, divide, equal, exp, greater, greater_equal, less, less_equal, log,
                        maximum, minimum, multiply, negative, not_equal, reduce_all, reduce_any, reduce_max,
                        reduce_mean, reduce_min, reduce_prod, reduce_sum, sigmoid, sqrt, square, subtract, tanh,
                        truediv)

__all__ = ["abs", "add", "argmax", "argmin", "divide", "equal", "exp", "greater", "greater_equal", "less", "less_equal",
           "log", "maximum", "minimum", "multiply", "negative", "not_equal", "reduce_all", "reduce_any", "reduce_max",
           "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum", "sigmoid", "sqrt", "square", "subtract", "tanh",
           "truediv"]
