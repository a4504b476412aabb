"""``mirrorlab.math``: the ``tf.math`` names of mirrorlab's tensor functions (see ``array_ops``, ``math_ops``)."""

from .array_ops import (abs, add, add_n, argmax, argmin, divide, equal, exp, greater, greater_equal, less, less_equal, log,
                        maximum, minimum, multiply, negative, not_equal, reduce_all, reduce_any, reduce_max,
                        reduce_mean, reduce_min, reduce_prod, reduce_sum, sigmoid, sqrt, square, subtract, tanh,
                        truediv)
from .composed_activations import log_sigmoid
from .manip_ops import cumsum, top_k
from .nn_ops import softplus
from .math_ops import (ceil, divide_no_nan, erf, erfc, expm1, floor, floordiv, floormod, log1p, logical_and, logical_not, logical_or, mod,
                       multiply_no_nan, pow, reciprocal, reduce_euclidean_norm, reduce_logsumexp, reduce_std,
                       reduce_variance, round, rsqrt, sign, squared_difference)

__all__ = ["abs", "add", "add_n", "argmax", "ceil", "cumsum", "divide_no_nan", "erf", "erfc", "expm1", "floor", "floordiv", "floormod", "log1p",
           "log_sigmoid", "logical_and", "logical_not", "logical_or", "mod", "multiply_no_nan", "pow", "reciprocal",
           "reduce_euclidean_norm", "reduce_logsumexp", "reduce_std", "reduce_variance", "round", "rsqrt", "sign",
           "softplus", "squared_difference", "top_k", "argmin", "divide", "equal", "exp", "greater", "greater_equal",
           "less", "less_equal", "log", "maximum", "minimum", "multiply", "negative", "not_equal", "reduce_all", "reduce_any", "reduce_max",
           "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum", "sigmoid", "sqrt", "square", "subtract", "tanh",
           "truediv"]
