"""Keras' merge layers: a list of inputs combined element-wise (``Add``, ``Subtract``, ``Multiply``, ``Average``,
``Maximum``, ``Minimum``, broadcasting as Keras does) or joined along an axis (``Concatenate``); and the lowercase
functions that build and call one (``keras.layers.add([a, b])``). They compute with mirrorlab's differentiable
tensor functions, so a recording tape differentiates through them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .. import array_ops
from .layers import Layer

__all__ = ["Add", "Average", "Concatenate", "Maximum", "Minimum", "Multiply", "Subtract", "add", "average",
           "concatenate", "maximum", "minimum", "multiply", "subtract"]


def _shape_list(input_shape: Any, what: str) -> list[tuple]:
    """``input_shape`` as a list of shapes, or Keras' error for a layer not called on a list of inputs."""
    if not isinstance(input_shape, (list, tuple)) or not input_shape or not isinstance(input_shape[0], (list, tuple)):
        raise ValueError(f"{what} should be called on a list of inputs. Received: input_shape={input_shape} (not a "
                         "list of shapes)\nFix: call the layer on a list of tensors, e.g. layer([x, y]).")
    return [tuple(shape) for shape in input_shape]


def _broadcast_shapes(first: tuple, second: tuple) -> tuple:
    """The element-wise result shape of two per-example shapes (None: unknown), or Keras' incompatibility error."""
    if len(first) < len(second):
        first, second = second, first
    if not second:
        return first
    out = list(first[:len(first) - len(second)])
    for i, j in zip(first[len(first) - len(second):], second):
        if i is None or j is None:
            out.append(None)
        elif 1 in (i, j) or i == j:
            out.append(j if i == 1 else i)
        else:
            raise ValueError(f"Inputs have incompatible shapes. Received shapes {first} and {second}")
    return tuple(out)


class _Merge(Layer):
    """An element-wise merge of a list of inputs: ``_combine`` folds them pairwise, after lower-rank inputs get
    dimensions of 1 inserted after the batch dimension, as Keras aligns them."""

    _names_sublayers = False
    _combine: Callable[[Any, Any], Any]

    def build(self, input_shape: Any) -> None:
        shapes = _shape_list(input_shape, "A merge layer")
        functools.reduce(_broadcast_shapes, [shape[1:] for shape in shapes])

    def call(self, inputs: Any) -> Any:
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(f"A merge layer should be called on a list of inputs. Received: inputs={inputs} (not a "
                             "list of tensors)")
        rank = max(len(x.shape) for x in inputs)
        aligned = []
        for x in inputs:
            for _ in range(rank - len(x.shape)):
                x = array_ops.expand_dims(x, 1)
            aligned.append(x)
        return self._merge(aligned)

    def _merge(self, inputs: list[Any]) -> Any:
        return functools.reduce(type(self)._combine, inputs)


class Add(_Merge):
    """The inputs' sum."""

    _combine = staticmethod(array_ops.add)


class Multiply(_Merge):
    """The inputs' product."""

    _combine = staticmethod(array_ops.multiply)


class Maximum(_Merge):
    """The inputs' element-wise maximum."""

    _combine = staticmethod(array_ops.maximum)


class Minimum(_Merge):
    """The inputs' element-wise minimum."""

    _combine = staticmethod(array_ops.minimum)


class Average(_Merge):
    """The inputs' mean: their sum divided by their number."""

    _combine = staticmethod(array_ops.add)

    def _merge(self, inputs: list[Any]) -> Any:
        return array_ops.divide(super()._merge(inputs), len(inputs))


class Subtract(_Merge):
    """The first input minus the second (exactly two inputs)."""

    _combine = staticmethod(array_ops.subtract)

    def build(self, input_shape: Any) -> None:
        if len(_shape_list(input_shape, "A `Subtract` layer")) != 2:
            raise ValueError(f"A `Subtract` layer should be called on exactly 2 inputs. Received: "
                             f"input_shape={[tuple(shape) for shape in input_shape]}")
        super().build(input_shape)


class Concatenate(Layer):
    """The inputs joined along ``axis`` (the last by default); their other dimensions must match."""

    _names_sublayers = False

    def __init__(self, axis: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.axis = int(axis)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "axis": self.axis}

    def build(self, input_shape: Any) -> None:
        """Keras' check: the shapes without the concatenation axis (batch dimension included) have one rank and
        agree wherever both dimensions are known."""
        shapes = [list(shape) for shape in _shape_list(input_shape, "A `Concatenate` layer")]
        for shape in shapes:
            if len(shape) > self.axis:
                del shape[self.axis]
        if len({len(shape) for shape in shapes}) != 1 or any(
                len({dim for dim in dims if dim is not None}) > 1 for dims in zip(*shapes)):
            raise ValueError("A `Concatenate` layer requires inputs with matching shapes except for the concatenation "
                             f"axis. Received: input_shape={input_shape}")

    def call(self, inputs: Any) -> Any:
        return array_ops.concat(list(inputs), axis=self.axis)


def _calling(cls: type[Layer]) -> Callable[..., Any]:
    def build_and_call(inputs: list[Any], **kwargs: Any) -> Any:
        return cls(**kwargs)(inputs)
    build_and_call.__name__ = cls.__name__.lower()
    build_and_call.__doc__ = f"``{cls.__name__}(**kwargs)(inputs)``, as Keras' functional interface to the layer."
    return build_and_call


add, subtract, multiply, average, maximum, minimum, concatenate = map(
    _calling, (Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate))
