"""Resolving Keras-style string identifiers (``"adam"``, ``"mse"``) to instances."""

from __future__ import annotations

from typing import Any


def lookup(identifier: Any, base: type, table: dict[str, type], what: str) -> Any:
    """``identifier`` itself if it is a ``base``; else a new instance of ``table[identifier]``."""
    if isinstance(identifier, base):
        return identifier
    by_class = {cls.__name__: cls for cls in table.values()}
    if isinstance(identifier, str) and identifier not in table and identifier in by_class:
        return by_class[identifier]()  # Keras also accepts class names ("MeanSquaredError")
    if identifier not in table:
        raise ValueError(f"Could not interpret {what} identifier: {identifier!r}. Known: {sorted(table)}.")
    return table[identifier]()
