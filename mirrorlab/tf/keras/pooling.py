"""Keras 3's 2-D pooling layers (max and average over windows, and their global forms) with explicit backward
passes, NHWC or NCHW, "valid" or "same" padding as TF pads: a max gradient goes to the first largest element of
each window (row-major), an average counts only the window's elements inside the input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import errors
from .._kernels.summation import tf_mean
from ...tensor import array_module
from .layers import BuiltinLayer, window_geometry, window_pair

__all__ = ["AveragePooling2D", "GlobalAveragePooling2D", "GlobalMaxPooling2D", "MaxPooling2D"]


def _data_format(data_format: str | None) -> str:
    data_format = "channels_last" if data_format is None else str(data_format).lower()
    if data_format not in ("channels_first", "channels_last"):
        raise ValueError("The `data_format` argument must be one of {'channels_first', 'channels_last'}. "
                         f"Received: data_format={data_format}")
    return data_format


class _Spatial(BuiltinLayer):
    """A layer over 4-D images: Keras' ndim check, and NCHW inputs seen as NHWC."""

    _built_at_init = True

    def __init__(self, data_format: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.data_format = _data_format(data_format)

    def check_input_shape(self, shape: tuple) -> None:
        if len(shape) != 4:
            raise ValueError(f"Input 0 with name 'None' of layer '{self.name}' is incompatible with the layer: "
                             f"expected ndim=4, found ndim={len(shape)}. Full shape received: {tuple(shape)}")

    def _nhwc(self, x: Any) -> Any:
        return x.transpose(0, 2, 3, 1) if self.data_format == "channels_first" else x

    def _back(self, x: Any) -> Any:
        """An NHWC array in this layer's data format."""
        return x.transpose(0, 3, 1, 2) if self.data_format == "channels_first" else x


class _Pooling2D(_Spatial):
    """Pooling over ``pool_size`` windows moved by ``strides`` (the pool size by default)."""

    def __init__(self, pool_size: Any, strides: Any = None, padding: str = "valid", data_format: str | None = None,
                 name: str | None = None, **kwargs: Any) -> None:
        super().__init__(data_format=data_format, name=name, **kwargs)
        self.pool_size = window_pair(pool_size, "pool_size")
        self.strides = self.pool_size if strides is None else window_pair(strides, "strides", positive=False)
        self._padding_argument = padding
        self.padding = str(padding).lower()  # a direct call takes "SAME" (TF's op does)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "pool_size": list(self.pool_size), "padding": self._padding_argument,
                "strides": list(self.strides), "data_format": self.data_format}

    def _call_error(self, message: str, error: type[Exception] = ValueError) -> Exception:
        """The error Keras raises from this layer's call, ``message`` its detail."""
        return error(f"Exception encountered when calling {type(self).__name__}.call().\n\n\x1b[1m{message}\x1b[0m\n\n"
                     "Fix: choose pool_size, strides and padding ('valid' or 'same') that fit the input.")

    def _geometry(self, height: int, width: int) -> list[tuple[int, int, int]]:
        if self.padding not in ("valid", "same"):
            raise self._call_error(f'Value for attr \'padding\' of "{self.padding.upper()}" is not in the list of '
                                   'allowed values: "SAME", "VALID", "EXPLICIT"', errors.InvalidArgumentError)
        return [window_geometry(size, k, s, self.padding)
                for size, k, s in zip((height, width), self.pool_size, self.strides)]

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        """The output shape, checked as Keras checks a model's layers (which, unlike a direct call, refuse an
        upper-case padding and windows that do not fit)."""
        if self._padding_argument not in ("valid", "same"):
            raise self._call_error("Argument `padding` must be either 'valid' or 'same'. Received: "
                                   f"padding={self._padding_argument}")
        n, h, w, c = self._nhwc_shape(input_shape)
        (oh, _, _), (ow, _, _) = self._geometry(h, w)
        if oh <= 0 or ow <= 0:
            dims = " ".join(str(d) for d in input_shape)
            raise self._call_error(
                f"Computed output size would be zero or negative. Received: `inputs.shape=[{dims}]`, "
                f"`pool_size=[{self.pool_size[0]} {self.pool_size[1]}]`, `strides={self.strides}`, "
                f"`padding={self.padding}`.")
        return (n, c, oh, ow) if self.data_format == "channels_first" else (n, oh, ow, c)

    def _nhwc_shape(self, shape: tuple) -> tuple:
        return (shape[0], shape[2], shape[3], shape[1]) if self.data_format == "channels_first" else tuple(shape)

    def _windows(self, x: Any, fill: Any) -> tuple[Any, tuple]:
        """Every window of NHWC ``x`` padded with ``fill``, as ``(n, out_h, out_w, c, pool_h, pool_w)``; and the
        geometry ``(out_h, out_w, top, left, padded shape)``."""
        (oh, top, bottom), (ow, left, right) = self._geometry(x.shape[1], x.shape[2])
        xp = array_module(x)
        padded = xp.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=fill)
        (ph, pw), (sh, sw) = self.pool_size, self.strides
        if not oh or not ow:  # windows larger than the image: an empty output, as a direct call of Keras' gives
            return xp.zeros((x.shape[0], oh, ow, x.shape[3], ph, pw), x.dtype), (oh, ow, top, left, padded.shape)
        windows = xp.lib.stride_tricks.sliding_window_view(padded, (ph, pw), axis=(1, 2))[:, ::sh, ::sw][:, :oh, :ow]
        return windows, (oh, ow, top, left, padded.shape)

    def _spread(self, share: Callable[[int, int], Any], geometry: tuple, x_shape: tuple, dtype: Any) -> Any:
        """The input gradient: ``share(i, j)``, the gradient of window element ``(i, j)`` for every window, added
        where that element lies, with the padding cut off."""
        oh, ow, top, left, padded_shape = geometry
        (ph, pw), (sh, sw) = self.pool_size, self.strides
        grad = array_module(share(0, 0)).zeros(padded_shape, dtype)
        for i in range(ph):
            for j in range(pw):
                grad[:, i:i + sh * oh:sh, j:j + sw * ow:sw, :][:, :oh, :ow] += share(i, j)
        return grad[:, top:top + x_shape[1], left:left + x_shape[2], :]


class MaxPooling2D(_Pooling2D):
    """The largest value of each window (the padding never wins)."""

    def __init__(self, pool_size: Any = (2, 2), strides: Any = None, padding: str = "valid",
                 data_format: str | None = None, name: str | None = None, **kwargs: Any) -> None:
        super().__init__(pool_size, strides, padding, data_format, name, **kwargs)

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        x = self._nhwc(x)
        lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        windows, geometry = self._windows(x, lowest)
        flat = windows.reshape(*windows.shape[:4], windows.shape[4] * windows.shape[5])
        first = flat.argmax(axis=-1)  # the first largest element, row-major in the window
        out = np.take_along_axis(flat, first[..., None], axis=-1)[..., 0]
        return self._back(out), (x.shape, geometry, first)

    def _backward(self, cache: Any, dy: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        x_shape, geometry, first = cache
        dy = self._nhwc(dy)
        pw = self.pool_size[1]
        return self._back(self._spread(lambda i, j: np.where(first == i * pw + j, dy, 0), geometry, x_shape,
                                       dy.dtype)), []


class AveragePooling2D(_Pooling2D):
    """The mean of each window over its elements inside the input."""

    def __init__(self, pool_size: Any, strides: Any = None, padding: str = "valid", data_format: str | None = None,
                 name: str | None = None, **kwargs: Any) -> None:
        super().__init__(pool_size, strides, padding, data_format, name, **kwargs)

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        x = self._nhwc(x)
        windows, geometry = self._windows(x, 0)
        inside, _ = self._windows(array_module(x).ones((1, *x.shape[1:3], 1), x.dtype), 0)
        counts = inside.sum(axis=(-2, -1))
        return self._back(windows.sum(axis=(-2, -1)) / counts), (x.shape, geometry, counts)

    def _backward(self, cache: Any, dy: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        x_shape, geometry, counts = cache
        share = self._nhwc(dy) / counts
        return self._back(self._spread(lambda i, j: share, geometry, x_shape, share.dtype)), []


class _GlobalPooling2D(_Spatial):
    """A reduction over the whole image, per channel (``keepdims`` keeps 1x1 spatial dimensions)."""

    def __init__(self, data_format: str | None = None, keepdims: bool = False, **kwargs: Any) -> None:
        super().__init__(data_format=data_format, **kwargs)
        self.keepdims = keepdims
        self._axes = (2, 3) if self.data_format == "channels_first" else (1, 2)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "data_format": self.data_format, "keepdims": self.keepdims}

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        if self.keepdims:
            return tuple(1 if i in self._axes else d for i, d in enumerate(input_shape))
        return tuple(d for i, d in enumerate(input_shape) if i not in self._axes)

    def _kept(self, dy: Any) -> Any:
        """The output gradient with the image dimensions kept (size 1)."""
        return dy if self.keepdims else np.expand_dims(dy, self._axes)


class GlobalAveragePooling2D(_GlobalPooling2D):
    """The mean of each channel over the image."""

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        return tf_mean(x, axis=self._axes, keepdims=self.keepdims), x.shape

    def _backward(self, cache: Any, dy: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        h, w = (cache[a] for a in self._axes)
        return np.broadcast_to(self._kept(dy) / dy.dtype.type(h * w), cache).copy(), []


class GlobalMaxPooling2D(_GlobalPooling2D):
    """The largest value of each channel over the image (ties share the gradient, as TF's reduce_max)."""

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        peak = x.max(axis=self._axes, keepdims=True)
        return (peak if self.keepdims else peak.squeeze(self._axes)), (x, peak)

    def _backward(self, cache: Any, dy: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        x, peak = cache
        hits = (x == peak).astype(dy.dtype)
        return hits / hits.sum(axis=self._axes, keepdims=True) * self._kept(dy), []
