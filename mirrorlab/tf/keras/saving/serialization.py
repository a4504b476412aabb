"""Keras 3's object configs: ``serialize_keras_object`` turns a layer, model, initializer, regularizer, optimizer,
schedule, loss or metric into the JSON-ready dict Keras writes (``module``, ``class_name``, ``config``,
``registered_name``, and a layer's ``build_config``, a model's ``compile_config``); ``deserialize_keras_object`` makes
the object again.

Deserializing only ever instantiates classes mirrorlab knows (its own public Keras classes, ones registered with
``register_keras_serializable``, and ``custom_objects``): it imports no module a config names and runs no code a
config holds, so a ``.keras`` file from anywhere can only describe objects, never execute anything.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

__all__ = ["serialize_keras_object", "deserialize_keras_object", "register_keras_serializable",
           "get_registered_object", "get_registered_name", "custom_object_scope", "CustomObjectScope",
           "dtype_policy", "builtin_function"]

# mirrorlab's module of a public class -> the Keras module Keras names in its configs
_PUBLIC_MODULE = {
    "layers": "keras.layers", "pooling": "keras.layers", "normalization": "keras.layers",
    "embedding": "keras.layers", "preprocessing": "keras.layers", "lambda_layer": "keras.layers",
    "merging": "keras.layers", "initializers": "keras.initializers", "regularizers": "keras.regularizers",
    "optimizers": "keras.optimizers", "schedules": "keras.optimizers.schedules", "losses": "keras.losses",
    "metrics": "keras.metrics", "confusion_metrics": "keras.metrics", "sequential": "keras", "models": "keras",
}
# a Keras module named in a config -> mirrorlab's modules whose public classes it may name
_NAMESPACES = {
    "keras.layers": ("layers",), "keras.initializers": ("initializers",), "keras.regularizers": ("regularizers",),
    "keras.optimizers": ("optimizers",), "keras.optimizers.schedules": ("schedules",), "keras.losses": ("losses",),
    "keras.metrics": ("metrics", "confusion_metrics"), "keras": ("sequential", "models", "functional"),
    "keras.src.models.functional": ("functional",), "keras.src.models.sequential": ("sequential",),
    "keras.src.models.model": ("models",),
}
# where Keras looks for a function saved by name alone (``"module": "builtins"``)
_FUNCTION_MODULES = ("activations", "losses", "metrics", "initializers", "regularizers", "optimizers")
# public functions that are no saved object's function (lookups, not computations)
_NOT_SAVED_FUNCTIONS = frozenset({"get", "serialize", "deserialize"})
# classes outside Keras' public API that Keras still names by their source module
_PRIVATE = {"Functional": "keras.src.models.functional"}

_registered: dict[str, Any] = {}  # "package>name" -> class or function
_names: dict[Any, str] = {}  # class or function -> "package>name"
_scopes = threading.local()


def _keras(module: str) -> types.ModuleType:
    return importlib.import_module(f"mirrorlab.tf.keras.{module}")


def register_keras_serializable(package: str = "Custom", name: str | None = None) -> Callable[[Any], Any]:
    """Decorator registering a class or function as ``"<package>>name"``, so configs naming it deserialize."""
    if ">" in package:
        raise ValueError(f"Invalid package name: '{package}'. It cannot contain the character `>`.")

    def register(obj: Any) -> Any:
        key = f"{package}>{name or obj.__name__}"
        if isinstance(obj, type) and not hasattr(obj, "get_config"):
            raise ValueError("Cannot register a class that does not have a get_config() method.\nFix: define "
                             "get_config(self) returning the arguments of __init__.")
        _registered[key], _names[obj] = obj, key
        return obj
    return register


def get_registered_name(obj: Any) -> str:
    """The name ``obj`` is registered under, else its own ``__name__``."""
    return _names.get(obj, obj.__name__)


def get_registered_object(name: str, custom_objects: dict[str, Any] | None = None,
                          module_objects: dict[str, Any] | None = None) -> Any:
    """The class or function ``name`` stands for among custom objects (the scopes', then ``custom_objects``),
    registered ones and ``module_objects``; None if none."""
    for table in (*getattr(_scopes, "stack", []), custom_objects or {}, _registered, module_objects or {}):
        if name in table:
            return table[name]
    return None


@contextlib.contextmanager
def custom_object_scope(custom_objects: dict[str, Any]) -> Iterator[None]:
    """Within the ``with`` block, configs may name the classes and functions of ``custom_objects``."""
    stack = _scopes.__dict__.setdefault("stack", [])
    stack.append(dict(custom_objects))
    try:
        yield
    finally:
        stack.pop()


CustomObjectScope = custom_object_scope


def dtype_policy(dtype: np.dtype) -> dict[str, Any]:
    """Keras' serialized ``DTypePolicy`` of a layer computing and storing in ``dtype``."""
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": np.dtype(dtype).name},
            "registered_name": None}


def builtin_function(fn: Any) -> bool:
    """Whether ``fn`` is one of mirrorlab's public Keras functions (a loss, metric...) Keras saves by name."""
    name = getattr(fn, "__name__", "")
    return name not in _NOT_SAVED_FUNCTIONS and any(
        name in getattr(_keras(module), "__all__", ()) and getattr(_keras(module), name) is fn
        for module in _FUNCTION_MODULES)


def _function_config(fn: Any) -> dict[str, Any]:
    """A function saved by name, as Keras saves functions."""
    if getattr(fn, "__name__", "<lambda>") == "<lambda>":
        raise ValueError("A Python lambda cannot be saved in a config mirrorlab can load back: mirrorlab never saves "
                         "or runs code from a file.\nFix: use a named function decorated with "
                         "@keras.saving.register_keras_serializable() (or pass it in custom_objects when loading).")
    if fn in _names:
        return {"module": fn.__module__, "class_name": "function", "config": _names[fn], "registered_name": "function"}
    return {"module": "builtins" if builtin_function(fn) else fn.__module__, "class_name": "function",
            "config": fn.__name__, "registered_name": "function"}


def _public_module(cls: type) -> tuple[str, str | None]:
    """``(module, registered_name)`` Keras writes for an object of ``cls``."""
    if cls in _names:
        return cls.__module__, _names[cls]
    if cls.__name__ in _PRIVATE and cls.__module__.startswith("mirrorlab.tf.keras."):
        return _PRIVATE[cls.__name__], cls.__name__
    own = cls.__module__.removeprefix("mirrorlab.tf.keras.")
    if own in _PUBLIC_MODULE and cls.__name__ in getattr(_keras(own), "__all__", ()):
        return _PUBLIC_MODULE[own], None
    return cls.__module__, cls.__name__


def serialize_keras_object(obj: Any) -> Any:
    """The JSON-ready config of ``obj``: plain values as they are (tuples as lists), functions by name, objects as
    ``{"module", "class_name", "config", "registered_name"}`` with their build and compile configs when they have
    them."""
    if obj is None or isinstance(obj, (str, bool, int, float)):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (list, tuple)):
        return [serialize_keras_object(item) for item in obj]
    if isinstance(obj, dict):
        return {key: serialize_keras_object(value) for key, value in obj.items()}
    if isinstance(obj, np.dtype):
        return obj.name
    if not hasattr(obj, "get_config") and callable(obj):
        return _function_config(obj)
    if not hasattr(obj, "get_config"):
        raise TypeError(f"Cannot serialize {obj!r} of type {type(obj).__name__}: it has no get_config().\nFix: "
                        "give its class get_config(self) returning the arguments of __init__.")
    module, registered = _public_module(type(obj))
    config = {"module": module, "class_name": type(obj).__name__,
              "config": serialize_keras_object(obj.get_config()), "registered_name": registered}
    build = getattr(obj, "get_build_config", lambda: None)()
    if build is not None:
        config["build_config"] = serialize_keras_object(build)
    compiled = getattr(obj, "get_compile_config", lambda: None)()
    if compiled is not None:
        config["compile_config"] = serialize_keras_object(compiled)
    return config


def _known_class(module: str, class_name: str) -> Any:
    """The public mirrorlab class ``class_name`` of Keras module ``module`` (None if there is none)."""
    for own in _NAMESPACES.get(module, ()):
        namespace = _keras(own)
        if class_name in getattr(namespace, "__all__", ()) and isinstance(getattr(namespace, class_name), type):
            return getattr(namespace, class_name)
    return None


def _builtin_function(name: str) -> Any:
    for module in _FUNCTION_MODULES:
        fn = getattr(_keras(module), name, None)
        if callable(fn) and not isinstance(fn, type) and builtin_function(fn):
            return fn
    return None


def deserialize_keras_object(config: Any, custom_objects: dict[str, Any] | None = None, safe_mode: bool = True,
                             module_objects: dict[str, Any] | None = None) -> Any:
    """The object a ``serialize_keras_object`` config describes (plain values as they are); its class is looked up
    among the custom objects, registered classes and mirrorlab's public Keras classes, never imported."""
    if config is None or isinstance(config, (str, bool, int, float)):
        return config
    if isinstance(config, list):
        return [deserialize_keras_object(item, custom_objects, safe_mode) for item in config]
    if not isinstance(config, dict):
        raise TypeError(f"Could not parse config: {config!r}")
    if "class_name" not in config or "config" not in config:
        return {key: deserialize_keras_object(value, custom_objects, safe_mode) for key, value in config.items()}
    class_name, inner, module = config["class_name"], config["config"], config.get("module")
    registered = config.get("registered_name")
    if class_name == "__lambda__":
        raise ValueError("Requested the deserialization of a Python `lambda`. mirrorlab never runs code read from a "
                         "file (in any safe_mode).\nFix: pass the function in custom_objects under its name, or "
                         "use a named function registered with @keras.saving.register_keras_serializable().")
    if class_name == "function":
        fn = get_registered_object(inner, custom_objects, module_objects) or _builtin_function(inner)
        if fn is None:
            raise TypeError(f"Could not locate function '{inner}'. Make sure custom classes and functions are "
                            "decorated with `@keras.saving.register_keras_serializable()`. Full object config: "
                            f"{config}")
        return fn
    cls = (get_registered_object(registered, custom_objects, module_objects) if registered else None) \
        or get_registered_object(class_name, custom_objects, module_objects) or _known_class(module, class_name)
    if cls is None:
        raise TypeError(f"Could not locate class '{class_name}'. Make sure custom classes are decorated with "
                        f"`@keras.saving.register_keras_serializable()`. Full object config: {config}")
    from_config = getattr(cls, "from_config", None)
    if from_config is None:
        raise TypeError(f"Class '{class_name}' has no from_config(); mirrorlab cannot make it from a config.")
    with custom_object_scope(custom_objects or {}):
        obj = from_config(inner)
        if "build_config" in config and hasattr(obj, "build_from_config"):
            obj.build_from_config(config["build_config"])
        if config.get("compile_config") and hasattr(obj, "compile_from_config"):
            obj.compile_from_config(config["compile_config"])
    return obj
