"""Layers with explicit forward and backward passes.

``_forward(x, training)`` returns the output and a cache; ``_backward(cache, dy)`` returns the input
gradient and the weight gradients. Caches travel with the call, never on the layer, so replicas that
run the same layer in turn cannot overwrite each other's state.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod

from typing import Any

import numpy as np

from ..distribute import context
from ..distribute.variables import Variable
from ..tensor import array_module, asarray, like
from ..autodiff import track, watching
from . import activations, initializers, regularizers
from .naming import auto_name

__all__ = ["Layer", "Dense", "Conv2D", "Flatten", "Reshape", "Activation", "Dropout", "Input", "InputLayer",
           "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D", "GlobalMaxPooling2D", "BatchNormalization"]


class Layer(ABC):
    """Base layer: weights are mirrorlab Variables created by ``build`` (in the active strategy scope)."""

    def __init__(self, name: str | None = None, input_shape: tuple | None = None, input_dim: int | None = None,
                 dtype: Any = "float32") -> None:
        self.name = name or auto_name(type(self).__name__)
        self.dtype = np.dtype(dtype)
        if input_dim is not None and input_shape is None:
            input_shape = (input_dim,)
        self.input_shape = None if input_shape is None else tuple(input_shape)
        self.built = False
        self._weights: dict[str, Variable] = {}
        self._regularizers: dict[str, Any] = {}

    def build(self, input_shape: tuple) -> None:
        self.built = True

    def add_weight(self, name: str, shape: tuple, initializer: Any, trainable: bool = True,
                   regularizer: Any = None) -> Variable:
        value = initializers.get(initializer)(tuple(shape), self.dtype)
        var = Variable(value, name=f"{self.name}/{name}", trainable=trainable)
        var._keras_weight = True  # restored after a read with Keras' own assign (see train.restoring)
        self._weights[name] = var
        if regularizer is not None:
            self._regularizers[name] = regularizers.get(regularizer)
        return var

    @property
    def losses(self) -> list[Any]:
        """Each regularized weight's penalty now (differentiable on a recording ``GradientTape``)."""
        penalties = []
        for name, regularizer in self._regularizers.items():
            var = self._weights[name]
            watching(var)  # a recording tape that watches reads remembers it
            w = var._read()
            penalties.append(track(regularizer(w), lambda g, var=var, w=w, r=regularizer: [(var, g * r.grad(w))]))
        return penalties

    @property
    def weights(self) -> list[Variable]:
        return list(self._weights.values())

    def get_weights(self) -> list[np.ndarray]:
        """The weights' values (copies), in creation order."""
        return [w.numpy() for w in self.weights]

    @property
    def trainable_weights(self) -> list[Variable]:
        return [w for w in self._weights.values() if w.trainable]

    def _checkpoint_children(self) -> dict[str, Any]:
        """Keras 3's names: the kernel is tracked as ``_kernel`` (checkpoint keys ``.../_kernel``)."""
        return {("_kernel" if name == "kernel" else name): var for name, var in self._weights.items()}

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return input_shape

    def check_input_shape(self, shape: tuple) -> None:
        """Keras' input spec of the built layer, checked on an input of ``shape`` (None: unknown); none here."""

    def _convert_input(self, x: Any) -> Any:
        """Keras' autocast: a floating input in the layer's dtype (float64 data gives float32 outputs)."""
        return x.astype(self.dtype) if x.dtype.kind == "f" and x.dtype != self.dtype else x

    @abstractmethod
    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        """Implemented by subclasses."""

    @abstractmethod
    def _backward(self, cache: Any, dy: Any) -> tuple[Any, list[Any]]:
        """Implemented by subclasses."""

    def _logits(self, cache: Any) -> Any:
        """The pre-activation values a sigmoid or softmax output remembers (Keras' ``_keras_logits``), else None."""
        return None

    def __call__(self, x: Any, training: bool = False) -> Any:
        x = self._convert_input(asarray(x))
        if not self.built:
            self.build(x.shape)
        self.check_input_shape(x.shape)
        out, cache = self._forward(x, training)
        logits = self._logits(cache)
        return out if logits is None else activations.with_logits(out, logits)


class InputLayer(Layer):
    """Declares the input shape (``shape``, or the legacy ``input_shape``); passes data through."""

    def __init__(self, shape: tuple | None = None, name: str | None = None, input_shape: tuple | None = None,
                 dtype: Any = "float32") -> None:
        super().__init__(name=name, input_shape=shape if shape is not None else input_shape, dtype=dtype)

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        return x, None

    def _backward(self, cache: Any, dy: Any) -> tuple[Any, list[Any]]:
        return dy, []


def Input(shape: tuple, name: str | None = None, dtype: Any = "float32") -> InputLayer:  # noqa: N802 (Keras' name)
    """The first entry of a ``Sequential`` model declaring its per-example input shape, as ``keras.Input``."""
    return InputLayer(shape=tuple(shape), name=name, dtype=dtype)


class _Activated(Layer):
    """A layer ending in an activation: its caches end with ``(z, a)``, the pre-activation and the output."""

    activation: activations.Activation

    def _logits(self, cache: Any) -> Any:
        return cache[-2] if self.activation.keeps_logits else None

    def _activation_grad(self, cache: Any, dy: Any) -> Any:
        """The gradient w.r.t. the pre-activation, from the gradient ``dy`` w.r.t. the output."""
        return self.activation.backward(cache[-2], cache[-1], dy)

    def _backward(self, cache: Any, dy: Any) -> tuple[Any, list[Any]]:
        return self._backward_from_logits(cache, self._activation_grad(cache, dy))

    @abstractmethod
    def _backward_from_logits(self, cache: Any, dz: Any) -> tuple[Any, list[Any]]:
        """``_backward`` from the gradient ``dz`` w.r.t. the pre-activation."""


class _KernelBias(_Activated):
    """A layer with a kernel and an optional bias: their initializers and regularizers, and an activation."""

    def __init__(self, activation: Any = None, use_bias: bool = True, kernel_initializer: Any = "glorot_uniform",
                 bias_initializer: Any = "zeros", kernel_regularizer: Any = None, bias_regularizer: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.activation = activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer, self.bias_initializer = kernel_initializer, bias_initializer
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)

    def _build_kernel_bias(self, kernel_shape: tuple, bias_shape: tuple) -> None:
        self.kernel = self.add_weight("kernel", kernel_shape, self.kernel_initializer,
                                      regularizer=self.kernel_regularizer)
        self.bias = self.add_weight("bias", bias_shape, self.bias_initializer, regularizer=self.bias_regularizer) \
            if self.use_bias else None
        self.built = True


class Dense(_KernelBias):
    """``activation(x @ kernel + bias)``."""

    def __init__(self, units: int, activation: Any = None, use_bias: bool = True, **kwargs: Any) -> None:
        super().__init__(activation, use_bias, **kwargs)
        if int(units) <= 0:
            raise ValueError(f"Received an invalid value for `units`, expected a positive integer. Received: "
                             f"units={units}")
        self.units = int(units)

    def build(self, input_shape: tuple) -> None:
        self._build_kernel_bias((int(input_shape[-1]), self.units), (self.units,))

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (*input_shape[:-1], self.units)

    def _convert_input(self, x: Any) -> Any:
        """Keras' Dense converts any input (integers too) to its dtype."""
        return x.astype(self.dtype) if x.dtype != self.dtype else x

    def check_input_shape(self, shape: tuple) -> None:
        """Keras' Dense input spec: at least 2 dimensions, the last one the kernel's rows."""
        if not self.built:
            return
        refused = f"Input 0 with name 'None' of layer '{self.name}' is incompatible with the layer: "
        if len(shape) < 2:
            raise ValueError(f"{refused}expected min_ndim=2, found ndim={len(shape)}. Full shape received: "
                             f"{tuple(shape)}")
        rows = self.kernel.shape[0]
        if shape[-1] is not None and shape[-1] != rows:
            raise ValueError(f"{refused}expected axis -1 of input shape to have value {rows}, but received input "
                             f"with shape {tuple(shape)}")

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        z = x @ self.kernel._read()
        if self.bias is not None:
            z = z + self.bias._read()
        a = self.activation.forward(z)
        return a, (x, z, a)

    def _backward_from_logits(self, cache: Any, dz: Any) -> tuple[Any, list[Any]]:
        x = cache[0]
        kernel = self.kernel._read()
        x2, dz2 = x.reshape(-1, x.shape[-1]), dz.reshape(-1, dz.shape[-1])
        grads = [(x2.T @ dz2).astype(self.dtype, copy=False)]
        if self.bias is not None:
            grads.append(dz2.sum(axis=0).astype(self.dtype, copy=False))
        return dz @ kernel.T, grads


class Flatten(Layer):
    """Collapse all but the batch dimension."""

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], int(np.prod(input_shape[1:])))

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        return x.reshape(x.shape[0], -1), x.shape

    def _backward(self, cache: Any, dy: Any) -> tuple[Any, list[Any]]:
        return dy.reshape(cache), []


class Reshape(Layer):
    """Reshape everything but the batch dimension to ``target_shape`` (one entry may be -1)."""

    def __init__(self, target_shape: tuple, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target_shape = tuple(int(d) for d in target_shape)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        known = int(np.prod([d for d in self.target_shape if d != -1]))
        size = int(np.prod(input_shape[1:]))
        return (input_shape[0], *(size // known if d == -1 else d for d in self.target_shape))

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        return x.reshape((x.shape[0], *self.target_shape)), x.shape

    def _backward(self, cache: Any, dy: Any) -> tuple[Any, list[Any]]:
        return dy.reshape(cache), []


class Activation(_Activated):
    """``activation(x)`` as a layer (a sigmoid or softmax output keeps its logits, as Keras')."""

    def __init__(self, activation: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.activation = activations.get(activation)

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        a = self.activation.forward(x)
        return a, (x, a)

    def _backward_from_logits(self, cache: Any, dz: Any) -> tuple[Any, list[Any]]:
        return dz, []


class Dropout(Layer):
    """Zero each input with probability ``rate`` while training and scale the rest by ``1 / (1 - rate)``; the
    identity at inference. ``noise_shape`` shares one draw along its dimensions of 1 (None: the input's size).

    Differs from Keras on purpose in one way: the masks come from NumPy generators, one per replica, seeded by
    ``seed`` (by default the number of Dropout layers this thread made before) and the replica's index, so masks do
    not depend on how simulated workers and replicas interleave; TF draws them with stateless Philox, so which inputs
    are dropped differs from TF's (shapes, dtypes, the scaling and inference match)."""

    _made = threading.local()

    def __init__(self, rate: float, noise_shape: Any = None, seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not 0 <= rate <= 1:
            raise ValueError("Invalid value received for argument `rate`. Expected a float value between 0 and 1. "
                             f"Received: rate={rate}")
        self.rate, self.seed = rate, seed
        self.noise_shape = _noise_shape(noise_shape)
        made = getattr(Dropout._made, "count", 0)
        Dropout._made.count = made + 1
        self._seed = seed if seed is not None else made
        self._generators: dict[int, np.random.Generator] = {}  # replica index -> its generator

    def _generator(self) -> np.random.Generator:
        """This replica's generator (replica 0's outside ``strategy.run``)."""
        replica = context.get_replica_context()
        index = 0 if replica is None else int(replica.replica_id_in_sync_group)
        if index not in self._generators:
            self._generators[index] = np.random.default_rng([self._seed, index])
        return self._generators[index]

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        if not training or self.rate == 0:
            return x, None
        if self.rate == 1:
            return array_module(x).zeros_like(x), np.zeros((), x.dtype)
        shape = x.shape if self.noise_shape is None else tuple(
            x.shape[i] if d is None else d for i, d in enumerate(self.noise_shape))
        keep = self._generator().random(shape) >= self.rate
        t = x.dtype.type
        scaled_mask = like(keep.astype(x.dtype) * (t(1) / (t(1) - t(self.rate))), x)  # TF's float32 scale
        return x * scaled_mask, scaled_mask

    def _backward(self, cache: Any, dy: Any) -> tuple[Any, list[Any]]:
        return (dy if cache is None else dy * cache), []


def _noise_shape(noise_shape: Any) -> tuple | None:
    """Keras' check of Dropout's ``noise_shape``: an iterable of positive integers or None."""
    if noise_shape is None:
        return None
    if isinstance(noise_shape, str):
        raise ValueError("Invalid value received for argument `noise_shape`. Expected a tuple or list of integers. "
                         f"Received: noise_shape={noise_shape}")
    try:
        noise_shape = tuple(noise_shape)
    except TypeError:
        raise ValueError("Invalid value received for argument `noise_shape`. Expected an iterable of integers "
                         f"(e.g., a tuple or list). Received: noise_shape={noise_shape}") from None
    for i, dim in enumerate(noise_shape):
        if dim is not None and not isinstance(dim, int):
            raise ValueError("Invalid value received for argument `noise_shape`. Expected all elements to be integers "
                             f"or None. Received element at index {i}: {dim} (type: {type(dim).__name__})")
        if dim is not None and dim <= 0:
            raise ValueError("Invalid value received for argument `noise_shape`. Expected all dimensions to be "
                             f"positive integers or None. Received negative or zero value at index {i}: {dim}")
    return noise_shape


def window_geometry(size: int, window: int, stride: int, padding: str) -> tuple[int, int, int]:
    """Along one dimension of ``size``: the number of windows and the padding before and after them, as TF
    places them ("valid": none, windows that fit; "same": ceil(size / stride) windows, the odd pad after)."""
    if padding == "valid":
        return max((size - window) // stride + 1, 0), 0, 0
    count = -(-size // stride)
    pad = max((count - 1) * stride + window - size, 0)
    return count, pad // 2, pad - pad // 2


def _pair(value: int | tuple) -> tuple[int, int]:
    return (int(value), int(value)) if np.isscalar(value) else (int(value[0]), int(value[1]))


class Conv2D(_KernelBias):
    """2-D convolution over NHWC inputs ("valid" or "same" padding, any strides), via im2col."""

    def __init__(self, filters: int, kernel_size: int | tuple, strides: int | tuple = (1, 1), padding: str = "valid",
                 activation: Any = None, use_bias: bool = True, **kwargs: Any) -> None:
        super().__init__(activation, use_bias, **kwargs)
        if padding not in ("valid", "same"):
            raise ValueError(f"Invalid value for argument `padding`. Expected 'valid' or 'same'. Received: {padding!r}")
        self.filters = int(filters)
        self.kernel_size = _pair(kernel_size)
        self.strides = _pair(strides)
        self.padding = padding

    def build(self, input_shape: tuple) -> None:
        if len(input_shape) != 4:
            raise ValueError(f"Input 0 of layer {self.name!r} is incompatible: expected ndim=4 (batch, height, width, "
                             f"channels), found ndim={len(input_shape)}. Full shape received: {input_shape}")
        kh, kw = self.kernel_size
        self._build_kernel_bias((kh, kw, int(input_shape[-1]), self.filters), (self.filters,))

    def _geometry(self, height: int, width: int) -> tuple[int, int, int, int, int, int]:
        """Output size and padding (top, bottom, left, right) like TF."""
        (oh, top, bottom), (ow, left, right) = (window_geometry(size, k, s, self.padding) for size, k, s in
                                                zip((height, width), self.kernel_size, self.strides))
        return oh, ow, top, bottom, left, right

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        oh, ow = self._geometry(input_shape[1], input_shape[2])[:2]
        return (input_shape[0], oh, ow, self.filters)

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        n, h, w, c = x.shape
        oh, ow, top, bottom, left, right = self._geometry(h, w)
        (kh, kw), (sh, sw) = self.kernel_size, self.strides
        padded = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0))) if top + bottom + left + right else x
        windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(1, 2))[:, ::sh, ::sw]
        cols = windows[:, :oh, :ow].transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, kh * kw * c)
        z = (cols @ self.kernel._read().reshape(kh * kw * c, self.filters)).reshape(n, oh, ow, self.filters)
        if self.bias is not None:
            z = z + self.bias._read()
        a = self.activation.forward(z)
        return a, (x.shape, padded.shape, cols, z, a)

    def _backward_from_logits(self, cache: Any, dz: Any) -> tuple[Any, list[Any]]:
        x_shape, padded_shape, cols, z, _ = cache
        n, oh, ow, _ = z.shape
        (kh, kw), (sh, sw) = self.kernel_size, self.strides
        c = x_shape[-1]
        dz = dz.reshape(n * oh * ow, self.filters)
        kernel = self.kernel._read().reshape(kh * kw * c, self.filters)
        grads = [(cols.T @ dz).reshape(self.kernel.shape).astype(self.dtype, copy=False)]
        if self.bias is not None:
            grads.append(dz.sum(axis=0).astype(self.dtype, copy=False))
        dcols = (dz @ kernel.T).reshape(n, oh, ow, kh, kw, c)
        dpadded = array_module(dz).zeros(padded_shape, dtype=dz.dtype)
        for i in range(kh):
            for j in range(kw):
                dpadded[:, i:i + sh * oh:sh, j:j + sw * ow:sw, :] += dcols[:, :, :, i, j, :]
        _, _, top, _, left, _ = self._geometry(x_shape[1], x_shape[2])
        return dpadded[:, top:top + x_shape[1], left:left + x_shape[2], :], grads


from .pooling import AveragePooling2D, GlobalAveragePooling2D, GlobalMaxPooling2D, MaxPooling2D  # noqa: E402 (they build on Layer)
from .normalization import BatchNormalization  # noqa: E402 (it builds on Layer)
