"""Resolving Keras-style identifiers (``"adam"``, ``"mse"``, a config dict) to instances."""

from __future__ import annotations

from typing import Any


def lookup(identifier: Any, base: type, table: dict[str, type], what: str) -> Any:
    """``identifier`` itself if it is a ``base``; else a new instance of the class it names: a key of ``table``
    (``"adam"``) or a class name (``"Adam"``), as Keras accepts both."""
    if identifier is None:
        raise ValueError(f"Could not interpret {what} identifier: None\nKnown: {sorted(table)}.")
    return resolve(identifier, base, {}, {**{cls.__name__: cls for cls in table.values()}, **table}, what)


def resolve(identifier: Any, base: type, functions: dict[str, Any], classes: dict[str, type], what: str) -> Any:
    """Keras' ``get``: None, a ``base`` instance or a function passes through; a function name or alias gives
    the function; a class (or its name) a new instance."""
    if identifier is None or isinstance(identifier, base) or (callable(identifier) and not isinstance(identifier, type)):
        return identifier
    if isinstance(identifier, dict) and "class_name" in identifier:
        return _from_config(identifier, functions, classes, what)
    if isinstance(identifier, str) and identifier in functions:
        return functions[identifier]
    if isinstance(identifier, str) and identifier in classes:
        return classes[identifier]()
    if isinstance(identifier, type) and issubclass(identifier, base):
        return identifier()
    raise ValueError(f"Could not interpret {what} identifier: {identifier}\nKnown: "
                     f"{sorted(functions) + sorted(classes)}, or a {base.__module__}.{base.__name__} instance.")


def _from_config(config: dict[str, Any], functions: dict[str, Any], classes: dict[str, type], what: str) -> Any:
    """The object of a config dict (``{"class_name": ..., "config": ...}``): a registered or custom class, or one of
    ``classes``; a function saved by name, one of ``functions``."""
    from .saving.serialization import get_registered_object  # (saving builds on the kinds resolved here)
    name, inner = config["class_name"], config.get("config", {})
    if name == "function":
        found = get_registered_object(inner) or functions.get(inner)
        if found is None:
            raise ValueError(f"Could not interpret {what} function: {inner}\nKnown: {sorted(functions)}.")
        return found
    cls = get_registered_object(config.get("registered_name") or name) or get_registered_object(name) or \
        classes.get(name)
    if cls is None:
        raise ValueError(f"Could not interpret serialized {what}: {config}\nKnown: {sorted(classes)}, or a class "
                         "registered with @keras.saving.register_keras_serializable().")
    return cls.from_config(inner)


def take_fixed_arguments(owner: str, kwargs: dict[str, Any], fixed: dict[str, tuple]) -> None:
    """Remove from ``kwargs`` the Keras arguments ``owner`` takes only at their defaults (``fixed``: name -> the
    values accepted, the default first; a list matches the tuple), refusing any other value with the fix."""
    for key in [key for key in kwargs if key in fixed]:
        value = kwargs.pop(key)
        if value not in fixed[key] and not (isinstance(value, (list, tuple)) and tuple(value) in fixed[key]):
            raise ValueError(f"{owner}({key}={value!r}) is not supported by mirrorlab (only {key}={fixed[key][0]!r})."
                             f"\nFix: leave {key} at its default.")
