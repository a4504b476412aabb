"""``keras.models.clone_model``: the same architecture with new layers (new weights), as Keras 3 clones a Sequential
or functional model (each layer through ``clone_function``, by default a layer made from its config; a functional
model's calls through ``call_function``), compiled as the original was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .functional import Functional
from .layers import InputLayer, Layer
from .models import Model
from .saving.functional_config import functional_from_config
from .sequential import Sequential

__all__ = ["clone_model"]


def _clone_layer(layer: Layer) -> Layer:
    """A new layer of the same config (fresh weights once built)."""
    return type(layer).from_config(layer.get_config())


def clone_model(model: Model, input_tensors: Any = None, clone_function: Callable[[Layer], Layer] | None = None,
                call_function: Callable[..., Any] | None = None, recursive: bool = False, **kwargs: Any) -> Model:
    """A copy of ``model`` with new layers (see the module docstring); a subclassed model is remade from its config."""
    if kwargs:
        raise ValueError(f"Arguments not recognized: {kwargs}")
    if input_tensors is not None:
        raise NotImplementedError("clone_model(input_tensors=...) is not supported by mirrorlab.\nFix: clone the "
                                  "model, then call the clone on your tensors: keras.Model(inputs, clone(inputs)).")
    clone = clone_function or _clone_layer
    if recursive:
        clone = _recursive(clone, call_function)
    if isinstance(model, Sequential):
        if call_function is not None:
            raise ValueError("`call_function` argument is not supported with Sequential models.  In a Sequential "
                             "model, layers aren't called at model-construction time (they're merely listed). Use "
                             "`call_function` with Functional models only. Received model of type "
                             f"'{type(model).__name__}', with call_function={call_function}")
        inputs = [InputLayer.from_config(model._layers[0].get_config())] \
            if model._layers and isinstance(model._layers[0], InputLayer) else []
        copy: Model = Sequential(inputs + [clone(layer) for layer in model.layers], name=model.name,
                                 trainable=model.trainable)
    elif isinstance(model, Functional):
        layers = {layer.name: layer for layer in model._operations if isinstance(layer, Layer)}
        copy = functional_from_config(type(model), model.get_config(), make=lambda entry: clone(layers[entry["name"]]),
                                      call=call_function)
    else:
        if clone_function is not None or call_function is not None:
            raise ValueError("Arguments `clone_function` and `call_function` are only supported for Sequential or "
                             f"Functional models. Received model of type '{type(model).__name__}', with "
                             f"clone_function={clone_function} and call_function={call_function}")
        copy = type(model).from_config(model.get_config())
    compiled = model.get_compile_config()
    if compiled:
        copy.compile_from_config(compiled)
    return copy


def _recursive(clone: Callable[[Layer], Layer], call_function: Callable[..., Any] | None) -> Callable[[Layer], Layer]:
    """A clone function that clones inner Sequential and functional models with ``clone_model``."""
    def inner(layer: Layer) -> Layer:
        if isinstance(layer, (Sequential, Functional)):
            return clone_model(layer, clone_function=clone, call_function=None if isinstance(layer, Sequential)
                               else call_function, recursive=True)
        return clone(layer)
    return inner
