"""``mirrorlab.function``: TF's ``tf.function`` decorator, accepted so TF programs run with only the import
changed. mirrorlab always executes eagerly (as ``tf.config.run_functions_eagerly(True)`` does in TF); what a traced
function would still do is kept: inputs are bound to an ``input_signature`` (converted to its dtypes, shapes
checked, with TF's error), and Python numbers and strings it returns come back as tensors."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from . import nest
from .constant import constant
from .tensor import as_tensor

__all__ = ["function"]


def function(func: Callable[..., Any] | None = None, input_signature: Any = None, autograph: bool = True,
             jit_compile: Any = None, reduce_retracing: bool = False, **experimental: Any) -> Any:
    """``@function`` and ``@function(...)``: the function, run eagerly (see the module docs)."""
    if func is None:
        return lambda f: function(f, input_signature, autograph, jit_compile, reduce_retracing, **experimental)
    if not callable(func):
        raise TypeError(f"function expects a callable to decorate, got {type(func).__name__}")
    try:
        parameters = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):  # a callable without a signature (a builtin): nothing to bind by name
        parameters = []
    bound_method = bool(parameters) and parameters[0] == "self"

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        if input_signature is not None:
            head, rest = (args[:1], args[1:]) if bound_method else ((), args)
            args = (*head, *_bind(parameters[len(head):], list(input_signature), rest, kwargs))
        return nest.map_structure(_as_output, func(*args, **kwargs))
    return run


def _as_output(value: Any) -> Any:
    """A returned Python number or string as a tensor (other values as they are)."""
    return as_tensor(value) if isinstance(value, (bool, int, float, str, bytes)) else value


def _bind(names: list[str], signature: list[Any], args: tuple, kwargs: dict) -> list[Any]:
    """``args`` converted to the ``signature``'s specs (NumPy and Python values cast to their dtypes), or TF's
    TypeError naming the first that does not fit."""
    shown = ", ".join(f"{name}: {spec!r}" for name, spec in zip(names, signature))

    def refused(reason: str) -> TypeError:
        return TypeError(f"Binding inputs to tf.function failed due to `{reason}`. Received args: {args!r} and "
                         f"kwargs: {kwargs!r} for signature: ({shown}).")
    if len(args) > len(signature):
        raise refused("too many positional arguments")
    bound = []
    for value, spec in zip(args, signature):
        array = as_tensor(value) if isinstance(value, np.ndarray) or hasattr(value, "__array__") else \
            constant(value, spec.dtype)
        given = tuple(np.shape(array))
        fits = len(given) == len(spec.shape) and all(d is None or d == g for d, g in zip(spec.shape, given))
        if not fits:
            raise refused(f"Can not cast TensorSpec(shape={given}, dtype=tf.{np.dtype(spec.dtype).name}, name=None) "
                          f"to {spec!r}")
        bound.append(array.astype(spec.dtype, copy=False))
    return bound
