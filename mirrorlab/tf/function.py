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

from .. import nest
from .constant import constant
from ..tensor import as_tensor

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
    """``args`` converted to the ``signature``'s specs (nests of TensorSpecs, PerReplicaSpecs; NumPy and Python
    values cast to their dtypes), or TF's TypeError naming the first that does not fit."""
    shown = ", ".join(f"{name}: {_trace_type(spec)}" for name, spec in zip(names, signature))
    try:
        if len(args) > len(signature):
            raise _Refused("too many positional arguments")
        return [_cast(value, spec) for value, spec in zip(args, signature)]
    except _Refused as exc:
        raise TypeError(f"Binding inputs to tf.function failed due to `{exc}`. Received args: {args!r} and "
                        f"kwargs: {kwargs!r} for signature: ({shown}).") from None


class _Refused(Exception):
    """Why a value does not fit its spec, in TF's words."""


def _trace_type(spec: Any) -> str:
    """How TF prints a signature entry: ``Tuple[...]``, ``List[...]``, ``Dict[['key', spec], ...]`` or the spec."""
    if isinstance(spec, tuple):
        return f"Tuple[{', '.join(_trace_type(s) for s in spec)}]"
    if isinstance(spec, list):
        return f"List[{', '.join(_trace_type(s) for s in spec)}]"
    if isinstance(spec, dict):
        return f"Dict[{', '.join(f'[{k!r}, {_trace_type(s)}]' for k, s in spec.items())}]"
    return repr(spec)


def _cast(value: Any, spec: Any) -> Any:
    """``value`` fitted to ``spec``, recursively."""
    if isinstance(spec, (tuple, list)):
        kind = "tuple" if isinstance(spec, tuple) else "list"
        if not isinstance(value, type(spec)):
            raise _Refused(f"Can not cast {value!r} to {kind} type.")
        if len(value) != len(spec):
            raise _Refused(f"Expected {value!r} to have length of {len(spec)}" if kind == "tuple"
                           else "object of type 'Tuple' has no len()")
        return type(spec)(_cast(v, s) for v, s in zip(value, spec))
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            raise _Refused(f"Can not cast {value!r} to a Dict type.")
        if set(value) != set(spec):
            raise _Refused(f"{value!r} has different keys with the TraceType {_trace_type(spec)}.")
        return {k: _cast(value[k], s) for k, s in spec.items()}
    if hasattr(spec, "_value_specs"):  # a PerReplicaSpec: one spec per local replica
        parts = getattr(value, "_values", None)
        if parts is None:
            raise _Refused(f"'{type(value).__module__}.{type(value).__name__}' object has no attribute '_values'")
        if len(parts) != len(spec._value_specs):
            raise _Refused(f"Expected {value!r} to have {len(spec._value_specs)} replicas")
        cast = [_cast(v, s) for v, s in zip(parts, spec._value_specs)]
        return value if all(c is v for c, v in zip(cast, parts)) else type(value)(cast)
    array = as_tensor(value) if isinstance(value, np.ndarray) or hasattr(value, "__array__") else \
        constant(value, spec.dtype)
    given = tuple(np.shape(array))
    if not (len(given) == len(spec.shape) and all(d is None or d == g for d, g in zip(spec.shape, given))):
        raise _Refused(f"Can not cast TensorSpec(shape={given}, dtype=tf.{np.dtype(spec.dtype).name}, name=None) "
                       f"to {spec!r}")
    return array.astype(spec.dtype, copy=False)
