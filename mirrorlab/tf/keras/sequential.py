"""Keras' ``Sequential``: layers applied in order. Once the input shape is known (a leading ``keras.Input`` or
``InputLayer``, a first layer's ``input_shape``, or the first data) it is built as Keras 3 builds it: an input
layer first, each layer called on the symbolic output of the one before, and the functional graph they make
(which takes Keras' automatic names: ``input_layer``, ``keras_tensor_<n>``, ``functional_<n>``)."""

from __future__ import annotations

from typing import Any


from .functional import Functional
from .layers import InputLayer, Layer
from .models import Model
from .saving.serialization import deserialize_keras_object, serialize_keras_object
from .symbolic import KerasTensor

__all__ = ["Sequential"]


class Sequential(Model):
    """Layers applied in order; built at once when the input shape is declared, else on the first input."""

    def __init__(self, layers: list[Layer] | None = None, trainable: bool = True, name: str | None = None) -> None:
        super().__init__(name=name, trainable=trainable)
        self.__dict__["_functional"] = None  # (not a sublayer: the graph over this model's own layers)
        for layer in layers or []:
            self.add(layer, rebuild=False)
        if self._layers:
            self._maybe_rebuild()

    @property
    def input_shape(self) -> Any:
        return self._built_graph("input shape").input_shape

    @property
    def output_shape(self) -> Any:
        return self._built_graph("output shape").output_shape

    @property
    def inputs(self) -> list:
        return self._built_graph("inputs").inputs

    @property
    def outputs(self) -> list:
        return self._built_graph("outputs").outputs

    def get_config(self) -> dict[str, Any]:
        """Keras' config: the name, trainable flag, dtype policy, each layer's config (the input layer first once
        built) and the input shape it was built for."""
        config = {**Layer.get_config(self), "layers": [serialize_keras_object(layer) for layer in self._layers]}
        if self._functional is not None:
            config["build_input_shape"] = list(self._layers[0].batch_shape)
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> "Sequential":
        """The model of a ``get_config`` dict: its layers made from their configs and added in order, then built
        for the saved input shape."""
        model = cls(name=config.get("name"), trainable=config.get("trainable", True))
        for layer_config in config["layers"]:
            model.add(deserialize_keras_object(layer_config, custom_objects))
        shape = config.get("build_input_shape")
        if shape and model._functional is None:
            model.build(tuple(shape))
        return model

    def get_build_config(self) -> dict[str, Any] | None:
        return None if self._functional is None else {"input_shape": list(self._layers[0].batch_shape)}

    def build_from_config(self, config: dict[str, Any]) -> None:
        if config.get("input_shape") and self._functional is None:
            self.build(tuple(config["input_shape"]))

    def _built_graph(self, what: str) -> Functional:
        """The functional graph of the built model, or Keras' error naming ``what`` is not defined yet."""
        if self._functional is None:
            raise AttributeError(f"Sequential model '{self.name}' has no defined {what} yet.")
        return self._functional

    def pop(self, rebuild: bool = True) -> Layer:
        """Remove and return the last layer (rebuilding the graph over the others when the input shape is known)."""
        layer = self._layers.pop()
        self.__dict__["_functional"] = None
        if rebuild and self._layers:
            self._maybe_rebuild()
        return layer

    def add(self, layer: Layer | KerasTensor, rebuild: bool = True) -> None:
        """Append ``layer`` (``keras.Input(shape)`` declares the input shape), rebuilding when the shape is known."""
        if not self._layers and isinstance(layer, Layer) and not isinstance(layer, InputLayer) and \
                layer._input_shape_arg is not None:
            self.add(InputLayer(shape=layer._input_shape_arg))
        if isinstance(layer, KerasTensor) and isinstance(layer._keras_history.operation, InputLayer):
            layer = layer._keras_history.operation
        if not isinstance(layer, Layer):
            raise ValueError(f"Only instances of `keras.Layer` can be added to a Sequential model. Received: {layer} "
                             f"(of type {type(layer)})")
        if any(known.name == layer.name for known in self._layers):
            raise ValueError(f"All layers added to a Sequential model should have unique names. Name '{layer.name}' "
                             "is already the name of a layer in this model. Update the `name` argument to pass a "
                             "unique name.")
        if isinstance(layer, InputLayer) and self._layers and isinstance(self._layers[0], InputLayer):
            raise ValueError(f"Sequential model '{self.name}' has already been configured to use input shape "
                             f"{self._layers[0].batch_shape}. You cannot add a different Input layer to it.")
        self._layers.append(layer)
        if rebuild:
            self._maybe_rebuild()
        else:
            self.__dict__["_functional"] = None

    def _maybe_rebuild(self) -> None:
        self.__dict__["_functional"] = None
        if isinstance(self._layers[0], InputLayer) and len(self._layers) > 1:
            self.build(self._layers[0].batch_shape)

    def build(self, input_shape: tuple) -> None:
        """Put an input layer of ``input_shape`` (batch dimension first) before the layers unless one is there, and
        call each layer on the symbolic output of the one before (in the model's strategy scope and, through the
        build wrapper, its name scope: TF names the weights ``sequential/dense/kernel:0``), which builds it."""
        shape = tuple(input_shape)
        if not self._layers:
            raise ValueError(f"Sequential model {self.name} cannot be built because it has no layers. Call "
                             "`model.add(layer)`.")
        if not isinstance(self._layers[0], InputLayer):
            self._layers.insert(0, InputLayer(batch_shape=shape, dtype=self._layers[0].dtype))
        elif self._layers[0].batch_shape != shape and self._functional is not None:
            raise ValueError(f"Sequential model '{self.name}' has already been configured to use input shape "
                             f"{self._layers[0].batch_shape}. You cannot build it with input_shape {shape}")
        inputs = x = self._layers[0].output
        with self._strategy.scope():
            for layer in self.layers:
                x = layer(x)
        self.__dict__["_functional"] = Functional(inputs, x)
